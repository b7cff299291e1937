"""``pumice queue pending [QUEUE]``: a queue's waiting jobs, in the order the scheduler
tries them, with the stage that stops each and why.

With ``--server URL`` (or ``$PUMICE_SERVER``) the command asks a running ``pumice run``
for its last cycle's list (``GET URL/apis/visibility/v1/...``, see
:mod:`pumice.visibility.endpoint`). Without one, or when that server cannot be reached,
it lists the cluster's objects and runs one scheduling cycle on them here, with the
configuration given (the code ``pumice cycle`` runs; nothing is written to the
cluster), and says so.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import orjson

from pumice.errors import InputError
from pumice.visibility.endpoint import ALL, PREFIX
from pumice.visibility.line import (
    FROM_LOCAL_CYCLE,
    FROM_SCHEDULER,
    PendingJob,
    PendingList,
    pending_jobs,
    select,
)
from pumice.visibility.render import print_pending

#: Exit status when neither the scheduler nor the cluster answers.
EXIT_UNAVAILABLE = 1
#: How long the local cycle waits for the cluster's objects to be listed.
SYNC_TIMEOUT = 60.0


class Unreachable(Exception):
    """The scheduler's server or the cluster did not answer (the message says which)."""


def add_pending_parser(qsub: Any) -> None:
    """``pumice queue pending``, under ``pumice queue``'s subcommands."""
    p = qsub.add_parser(
        "pending",
        help="waiting jobs in the order the scheduler tries them: position, stage, why",
        description="The jobs waiting in a queue (or in all), in the order the scheduler "
        "tries them: position in the queue and in the cluster, priority, the stage that "
        "stops each (not-schedulable, enqueue, queue, allocate) and why. Asks the running "
        "scheduler given by --server; without it (or when it does not answer) runs one "
        "cycle here on the cluster's objects. Exit status 1 when neither answers.",
    )
    p.add_argument("queue", nargs="?", help="the queue (default: all queues)")
    p.add_argument(
        "-k", "--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument(
        "--server",
        metavar="URL",
        default=os.environ.get("PUMICE_SERVER") or None,
        help="a running `pumice run`'s --metrics-address, e.g. http://pumice.volcano-system"
        ":8080 (default: $PUMICE_SERVER)",
    )
    p.add_argument(
        "--config", help="the scheduler configuration for a cycle run here (default: built-in)"
    )
    p.add_argument(
        "--scheduler-name",
        default="volcano",
        help="the schedulerName whose pods a cycle run here schedules (default: volcano)",
    )
    p.add_argument("--limit", type=int, default=None, help="show at most this many jobs")
    p.set_defaults(func=pending_command)


def pending_command(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        raise InputError("must be 0 or more", field="--limit")
    page: PendingList | None = None
    try:
        if args.server:
            try:
                page = ask_server(args.server, args.queue, args.limit)
            except Unreachable as err:
                print(f"pumice: note: {err}; running a cycle here instead", file=sys.stderr)
        if page is None:
            page = select(
                local_cycle(args.kubeconfig, args.context, args.config, args.scheduler_name,
                            args.queue),
                args.queue, limit=args.limit, source=FROM_LOCAL_CYCLE,
            )  # fmt: skip
    except Unreachable as err:
        print(f"pumice: error: {err}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(page.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_pending(page)
    return 0


def ask_server(url: str, queue: str | None, limit: int | None) -> PendingList:
    """The scheduler's last list, from its visibility endpoint (Unreachable when it
    does not answer as one)."""
    base = url if "://" in url else f"http://{url}"
    path = ALL if queue is None else f"queues/{urllib.parse.quote(queue, safe='')}/{ALL}"
    query = "" if limit is None else f"?limit={limit}"
    full = f"{base.rstrip('/')}{PREFIX}{path}{query}"
    try:
        with urllib.request.urlopen(full, timeout=10) as resp:
            body = orjson.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise Unreachable(f"{full} answered {err.code}: {err.read().decode().strip()}") from None
    except (OSError, ValueError) as err:
        raise Unreachable(f"cannot reach the scheduler at {base}: {err}") from None
    try:
        jobs = [_job(item) for item in body["items"]]
        return PendingList(
            jobs, body.get("queue"), FROM_SCHEDULER, int(body["total"]), int(body["offset"]),
            {str(k): int(v) for k, v in body["stages"].items()},
        )  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError):
        raise Unreachable(f"{full} did not answer with a list of pending jobs") from None


def _job(item: dict[str, Any]) -> PendingJob:
    return PendingJob(
        name=item["name"],
        namespace=item["namespace"],
        queue=item["queue"],
        priority=int(item["priority"]),
        position_in_queue=int(item["positionInQueue"]),
        position_in_cluster=int(item["positionInCluster"]),
        stage=item["stage"],
        reason=item["reason"],
        eta=item.get("eta"),
        assumption=item.get("assumption"),
    )


def local_cycle(
    kubeconfig: str | None,
    context: str | None,
    config: str | None,
    scheduler_name: str,
    queue: str | None = None,
) -> list[PendingJob]:
    """One cycle on the cluster's objects, run here: its pending jobs (InputError for a
    queue the cluster does not have; Unreachable when the cluster cannot be listed)."""
    from pumice.cache.build import SourcedObject, build_snapshot
    from pumice.cluster.kube import KubeCluster
    from pumice.cluster.kube_client import KubeClient
    from pumice.cluster.protocol import KINDS
    from pumice.scheduler import Scheduler

    scheduler = Scheduler.from_file(config)
    try:
        client = KubeClient.from_config(kubeconfig, context, pool_size=4)
    except Exception as err:  # the client's loaders raise their own types
        raise InputError(f"cannot load cluster credentials: {err}", field="--kubeconfig") from None
    cluster = KubeCluster(client, may_write=lambda: False)
    cluster.start()
    try:
        if not cluster.wait_synced(SYNC_TIMEOUT):
            raise Unreachable(
                f"the cluster's objects could not be listed in {SYNC_TIMEOUT:g}s ({client.host})"
            )
        objects = [SourcedObject(o, "cluster") for kind in KINDS for o in cluster.list(kind)]
    finally:
        cluster.close()
    snapshot = build_snapshot(objects, scheduler_name=scheduler_name, now=time.time())
    if queue is not None and queue not in snapshot.queues:
        raise InputError("no such queue", obj=f"Queue {queue}")
    return pending_jobs(scheduler.cycle(snapshot))


__all__ = ["add_pending_parser", "ask_server", "local_cycle", "pending_command"]
