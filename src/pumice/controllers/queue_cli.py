"""``pumice queue``: Volcano Queues for people, as vcctl's ``queue`` commands.

``queue list|open|close`` (vcctl's ``queue list`` and ``queue operate -a open|close``).
Open and close do not change the Queue: they create a ``bus.volcano.sh/v1alpha1``
Command (action ``OpenQueue``, ``CloseQueue``) owned by and targeting the Queue, named
``<queue>-<action>-`` plus a random suffix, in ``default`` where vcctl puts them (a
Queue has no namespace, a Command has one), which the queue controller carries out
and deletes.

Contract: every command prints one clear line on stderr and exits 2 when the user can
fix the command line (no such Queue, bad credentials file), 1 when the cluster cannot
answer. ``--format json`` prints what the table shows as JSON, for scripts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pumice.cluster.kube_client import RESOURCES
from pumice.controllers.cli_api import PODGROUP, command_for, connect
from pumice.controllers.cli_render import as_int, console, meta_of, phase_text, print_json, table
from pumice.controllers.vcctl_args import add_common_arguments, guarded, issue, name_of

QUEUE = RESOURCES["Queue"]

QUEUE_API = "scheduling.volcano.sh/v1beta1"
#: Where vcctl creates a Queue's Commands (a Queue has no namespace, a Command has one).
QUEUE_COMMAND_NAMESPACE = "default"


def queue_rows(
    queues: Iterable[Mapping[str, Any]], podgroups: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Queues as ``queue list`` shows them: vcctl's columns, PodGroups counted by phase
    from the PodGroups themselves (a PodGroup naming no queue is in ``default``)."""
    phases = ("Inqueue", "Pending", "Running", "Unknown", "Completed")
    counts: dict[str, dict[str, int]] = {}
    for pg in podgroups:
        queue = (pg.get("spec") or {}).get("queue") or "default"
        phase = (pg.get("status") or {}).get("phase") or ""
        if phase in phases:
            per = counts.setdefault(queue, dict.fromkeys(phases, 0))
            per[phase] += 1
    rows = []
    for q in sorted(queues, key=lambda q: meta_of(q).get("name", "")):
        name = meta_of(q).get("name", "")
        spec = q.get("spec") or {}
        per = counts.get(name) or dict.fromkeys(phases, 0)
        rows.append(
            {
                "name": name,
                "weight": as_int(spec.get("weight")),
                "state": (q.get("status") or {}).get("state") or "",
                "parent": spec.get("parent") or "",
                **{p[0].lower() + p[1:]: n for p, n in per.items()},
            }
        )
    return rows


def print_queues(rows: list[dict[str, Any]]) -> None:
    counts = ("INQUEUE", "PENDING", "RUNNING", "UNKNOWN", "COMPLETED")
    t = table("NAME", "WEIGHT", "STATE", "PARENT", *counts, numeric=("WEIGHT", *counts))
    for r in rows:
        t.add_row(
            r["name"],
            str(r["weight"]),
            phase_text(r["state"]),
            r["parent"] or "-",
            *(str(r[c.lower()]) for c in counts),
        )
    console().print(t)


def _queue_list(args: argparse.Namespace) -> int:
    api = connect(args)
    rows = queue_rows(api.list(QUEUE), api.list(PODGROUP))
    if args.format == "json":
        print_json(rows)
    elif not rows:
        print("No queues found.", file=sys.stderr)
    else:
        print_queues(rows)
    return 0


def _queue_command(action: str) -> Callable[..., int]:
    def run(args: argparse.Namespace) -> int:
        api = connect(args)
        name = name_of(args, "queue")
        queue = api.get(QUEUE, "", name)
        body = command_for(queue, QUEUE_API, "Queue", action, QUEUE_COMMAND_NAMESPACE)
        return issue(api, args, body, f"queue {name}")

    return run


def add_queue_parser(sub: Any) -> Any:
    """``pumice queue list|open|close``; returns the subcommands, for commands that
    need the scheduling core (``pending``, added by the top-level CLI)."""
    q = sub.add_parser(
        "queue",
        help="list, open and close Volcano Queues on a cluster; their pending jobs",
        description="Volcano Queues on a cluster, as vcctl shows and steers them: open "
        "and close create Commands the queue controller carries out (a closed queue "
        "admits no new PodGroups; one closing stays Closing while its PodGroups run). "
        "Exit status 2 for a queue that does not exist, 1 when the cluster cannot answer.",
    )
    qsub = q.add_subparsers(dest="queue_command", required=True, metavar="COMMAND")

    p = qsub.add_parser("list", help="list queues: weight, state, PodGroups by phase")
    add_common_arguments(p)
    p.set_defaults(func=guarded(_queue_list))

    for verb, action in (("open", "OpenQueue"), ("close", "CloseQueue")):
        p = qsub.add_parser(verb, help=f"{verb} a queue (an {action} Command)")
        add_common_arguments(p)
        p.add_argument("name", nargs="?", help="the queue's name")
        p.add_argument(
            "-N", "-n", "--name", dest="name_flag", metavar="NAME", help="the queue's name"
        )
        p.set_defaults(func=guarded(_queue_command(action)))
    return qsub


__all__ = ["add_queue_parser", "print_queues", "queue_rows"]
