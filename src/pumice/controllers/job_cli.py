"""``pumice job``: Volcano Jobs for people, as vcctl's ``job`` commands.

``job list|view|suspend|resume|delete`` with ``-n/--namespace``, ``-N/--name`` (or the
name as an argument), ``-A/--all-namespaces``, ``-q/--queue``, ``-S/--scheduler`` and
``--selector`` (a part of the name) for ``list``, as Volcano's ``pkg/cli/job``, so a
Volcano user's habits carry over.

Suspend and resume do not change the Job: they create a ``bus.volcano.sh/v1alpha1``
Command (action ``AbortJob``, ``ResumeJob``) owned by and targeting the Job, in its
namespace, named ``<job>-<action>-`` plus a random suffix, which the job controller
carries out and deletes. Unlike vcctl, a command that Volcano's job state machine would
ignore is refused: suspend of a Job already suspended or finished, resume of a Job that
is not suspended.

Contract: every command prints one clear line on stderr and exits 2 when the user can
fix the command line (no such Job, a command the Job's state ignores, bad credentials
file), 1 when the cluster cannot answer (unreachable, refused, the CRDs not installed).
``--format json`` prints what the table shows as JSON, for scripts.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from rich.table import Table
from rich.text import Text

from pumice.cluster.kube_client import RESOURCES
from pumice.controllers.cli_api import PODGROUP, Api, command_for, connect
from pumice.controllers.cli_render import age_since, console, meta_of, phase_text, print_json, table
from pumice.controllers.job_view import TASK_PHASES, job_row, job_view
from pumice.controllers.vcctl_args import (
    add_common_arguments,
    add_name_arguments,
    add_namespace_argument,
    guarded,
    issue,
    name_of,
    namespace_of,
)
from pumice.errors import InputError

JOB = RESOURCES["Job"]
EVENT = RESOURCES["Event"]

JOB_API = "batch.volcano.sh/v1alpha1"

#: Phases in which Volcano's job state machine acts on ``AbortJob`` (suspend).
SUSPENDABLE = frozenset({"", "Pending", "Running", "Restarting"})
#: Phases in which it acts on ``ResumeJob``.
RESUMABLE = frozenset({"Aborting", "Aborted"})


def print_jobs(rows: list[dict[str, Any]], all_namespaces: bool, now: float) -> None:
    counts = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "UNKNOWN")
    cols = ["NAME", "QUEUE", "PHASE", "TYPE", "REPLICAS", "MIN", *counts, "RETRIES", "AGE"]
    if all_namespaces:
        cols.insert(0, "NAMESPACE")
    t = table(*cols, numeric=("REPLICAS", "MIN", *counts, "RETRIES"))
    for r in rows:
        cells: list[Any] = [r["name"], r["queue"], phase_text(r["phase"]), r["type"]]
        cells += [str(r[k]) for k in ("replicas", "minAvailable", *(c.lower() for c in counts))]
        cells += [str(r["retryCount"]), age_since(r["created"], now)]
        if all_namespaces:
            cells.insert(0, r["namespace"])
        t.add_row(*cells)
    console().print(t)


def print_job(view: dict[str, Any], now: float) -> None:
    out = console()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    state = view["state"]
    since = state["lastTransitionTime"]
    phase = phase_text(state["phase"])
    if since:
        phase.append(f"  since {since} ({age_since(since, now)} ago)", style="")
    detail = ": ".join(x for x in (state["reason"], state["message"]) if x)
    total = sum(t["replicas"] for t in view["tasks"])
    rows: list[tuple[str, Any]] = [
        ("Job", f"{view['namespace']}/{view['name']}"),
        ("Queue", view["queue"]),
        ("Scheduler", view["schedulerName"] or "-"),
        ("Priority class", view["priorityClassName"] or "-"),
        ("Min available", f"{view['minAvailable']} of {total} pods"),
        ("Min success", "-" if view["minSuccess"] is None else str(view["minSuccess"])),
        ("TTL after finished", _seconds(view["ttlSecondsAfterFinished"])),
        ("Plugins", _plugins(view["plugins"])),
        ("Policies", "; ".join(view["policies"]) or "-"),
        ("Phase", phase),
    ]
    if detail:
        rows.append(("Reason", detail))
    for k, why in enumerate(view["why"]):
        rows.append(("Why" if k == 0 else "", why))
    rows.append(("Retries", f"{view['retryCount']} of at most {view['maxRetry']}"))
    pods = view["pods"]
    rows.append(("Pods", ", ".join(f"{n} {k}" for k, n in pods.items() if n) or "none"))
    pg = view["podGroup"]
    if pg is not None:
        rows.append(("PodGroup", Text(pg["name"] + "  ").append_text(phase_text(pg["phase"]))))
        for c in pg["conditions"]:
            if c["message"]:
                rows.append(("", f"{c['type']}: {c['message']}"))
    rows.append(("Created", f"{view['created']} ({age_since(view['created'], now)} ago)"))
    for label, value in rows:
        head.add_row(label, value)
    out.print(head)
    out.print()

    t = table(
        "TASK", "REPLICAS", "MIN", *(p.upper() for p in TASK_PHASES), "OTHER", "IMAGE",
        "REQUESTS", "POLICIES", title="Tasks", numeric=("REPLICAS", "MIN",
        *(p.upper() for p in TASK_PHASES), "OTHER"),
    )  # fmt: skip
    for task in view["tasks"]:
        pods = task["pods"]
        other = sum(n for p, n in pods.items() if p not in TASK_PHASES)
        t.add_row(
            task["name"],
            str(task["replicas"]),
            str(task["minAvailable"]),
            *(str(pods.get(p, 0)) for p in TASK_PHASES),
            str(other),
            ", ".join(task["images"]),
            ", ".join(f"{k}={v}" for k, v in task["requests"].items()) or "-",
            "; ".join(task["policies"]) or "-",
        )
    out.print(t)

    if view["conditions"]:
        # (Volcano's conditions hold a status and a time; pumice's may say more.)
        said = [k for k in ("type", "reason", "message") if any(c[k] for c in view["conditions"])]
        t = table("STATUS", "AGE", *(k.upper() for k in said), title="Conditions")
        for c in view["conditions"]:
            t.add_row(
                phase_text(c["status"]),
                age_since(c["lastTransitionTime"], now),
                *(c[k] or "-" for k in said),
            )
        out.print()
        out.print(t)

    out.print()
    if not view["events"]:
        out.print("Events: none")
        return
    older = view["olderEvents"]
    title = "Events" + (f" (the last {len(view['events'])}; {older} older)" if older else "")
    t = table("TYPE", "REASON", "AGE", "FROM", "MESSAGE", title=title)
    for e in view["events"]:
        age = age_since(e["last"], now)
        if e["count"] > 1:
            age = f"{age} (x{e['count']} over {age_since(e['first'], now)})"
        t.add_row(e["type"], e["reason"], age, e["from"] or "-", e["message"])
    out.print(t)


def _seconds(value: Any) -> str:
    return "-" if value is None else f"{value}s"


def _plugins(plugins: Mapping[str, list[str]]) -> str:
    if not plugins:
        return "-"
    return ", ".join(f"{k} ({' '.join(v)})" if v else k for k, v in plugins.items())


def _job_list(args: argparse.Namespace) -> int:
    api = connect(args)
    namespace = "" if args.all_namespaces else namespace_of(args)
    jobs = api.list(JOB, namespace)
    rows = [
        job_row(j)
        for j in jobs
        if (not args.queue or (j.get("spec") or {}).get("queue", "default") == args.queue)
        and (not args.scheduler or (j.get("spec") or {}).get("schedulerName") == args.scheduler)
        and (not args.selector or args.selector in meta_of(j).get("name", ""))
    ]
    rows.sort(key=lambda r: (r["namespace"], r["name"]))
    if args.format == "json":
        print_json(rows)
    elif not rows:
        where = "in any namespace" if args.all_namespaces else f"in namespace {namespace}"
        print(f"No jobs found {where}.", file=sys.stderr)
    else:
        print_jobs(rows, args.all_namespaces, time.time())
    return 0


def _podgroup_of(api: Api, job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PodGroup the job controller made for ``job`` (the one it controls)."""
    meta = meta_of(job)
    for pg in api.list(PODGROUP, meta.get("namespace", "")):
        for ref in meta_of(pg).get("ownerReferences") or ():
            if ref.get("uid") == meta.get("uid") and ref.get("controller"):
                return pg
    return None


def _events_of(api: Api, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Job's events: about an object named as the Job, of kind Job, and of this Job
    (its uid) when the event records one."""
    meta = meta_of(job)
    selector = f"involvedObject.name={meta.get('name')},involvedObject.kind=Job"
    events = api.list(EVENT, meta.get("namespace", ""), fieldSelector=selector)
    return [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("uid") in (None, "", meta.get("uid"))
        and not str((e.get("involvedObject") or {}).get("apiVersion", "")).startswith("batch/")
    ]


def _job_view(args: argparse.Namespace) -> int:
    api = connect(args)
    name, namespace = name_of(args, "job"), namespace_of(args)
    job = api.get(JOB, namespace, name)
    view = job_view(job, _podgroup_of(api, job), _events_of(api, job))
    if args.format == "json":
        print_json(view)
    else:
        print_job(view, time.time())
    return 0


def _job_command(action: str, allowed: frozenset[str], refusal: str) -> Callable[..., int]:
    def run(args: argparse.Namespace) -> int:
        api = connect(args)
        name, namespace = name_of(args, "job"), namespace_of(args)
        job = api.get(JOB, namespace, name)
        phase = ((job.get("status") or {}).get("state") or {}).get("phase") or ""
        if phase not in allowed:
            raise InputError(f"job {namespace}/{name} is {phase}: {refusal}")
        body = command_for(job, JOB_API, "Job", action, namespace)
        return issue(api, args, body, f"job {namespace}/{name}")

    return run


def _job_delete(args: argparse.Namespace) -> int:
    api = connect(args)
    name, namespace = name_of(args, "job"), namespace_of(args)
    api.delete(JOB, namespace, name)
    if args.format == "json":
        print_json({"deleted": f"{namespace}/{name}"})
    else:
        print(f"job {namespace}/{name} deleted")
    return 0


def add_job_parser(sub: Any) -> None:
    """``pumice job list|view|suspend|resume|delete``."""
    j = sub.add_parser(
        "job",
        help="list, view, suspend, resume and delete Volcano Jobs on a cluster",
        description="Volcano Jobs (batch.volcano.sh/v1alpha1) on a cluster, as Volcano's "
        "vcctl shows and steers them: suspend and resume create Commands the job "
        "controller carries out. Exit status 2 for a name that does not exist, 1 when "
        "the cluster cannot answer.",
    )
    jsub = j.add_subparsers(dest="job_command", required=True, metavar="COMMAND")

    p = jsub.add_parser("list", help="list jobs: phase, pod counts, retries")
    add_common_arguments(p)
    add_namespace_argument(p)
    p.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list jobs in all namespaces"
    )
    p.add_argument("-q", "--queue", help="only jobs of this queue")
    p.add_argument("-S", "--scheduler", help="only jobs with this schedulerName")
    p.add_argument("--selector", help="only jobs whose name contains this text")
    p.set_defaults(func=guarded(_job_list))

    p = jsub.add_parser(
        "view", help="show a job: spec, state, retries, tasks, conditions, recent events"
    )
    add_common_arguments(p)
    add_name_arguments(p, "job", True)
    p.set_defaults(func=guarded(_job_view))

    for verb, action, allowed, refusal, text in (
        ("suspend", "AbortJob", SUSPENDABLE, "nothing to suspend",
         "suspend a job (an AbortJob Command): its pods are deleted, it keeps its place"),
        ("resume", "ResumeJob", RESUMABLE, "only a suspended job can be resumed",
         "resume a suspended job (a ResumeJob Command): it restarts"),
    ):  # fmt: skip
        p = jsub.add_parser(verb, help=text)
        add_common_arguments(p)
        add_name_arguments(p, "job", True)
        p.set_defaults(func=guarded(_job_command(action, allowed, refusal)))

    p = jsub.add_parser("delete", help="delete a job (its pods and PodGroup go with it)")
    add_common_arguments(p)
    add_name_arguments(p, "job", True)
    p.set_defaults(func=guarded(_job_delete))


__all__ = ["add_job_parser", "print_job", "print_jobs"]
