"""What ``pumice job list`` and ``pumice job view`` show of a Volcano Job (pure: dicts
in, dicts out).

The columns are vcctl's, with the defaults Volcano's admission gives a Job (a task's
minAvailable its replicas, a Job's the sum of its tasks'); ``job view`` adds the
PodGroup's phase, the conditions, the recent Events and, for a Job that failed or was
stopped, why (:func:`why_stopped`).

Contract: the functions read the objects as the API server returns them and never
fail on a field left out; what they return is what ``--format json`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pumice.api.quantity import format_amount, to_canonical
from pumice.controllers.cli_render import as_int, epoch, meta_of
from pumice.errors import InputError

#: The label naming a Job's type (vcctl's ``JobType`` column; ``Batch`` when absent).
JOB_TYPE_LABEL = "volcano.sh/job-type"

#: Events shown by ``job view`` (the most recent ones).
RECENT_EVENTS = 10
#: Phases of a Job that failed or was stopped: ``job view`` says why.
STOPPED = frozenset({"Failed", "Aborting", "Aborted", "Terminating", "Terminated"})
#: How the job controller's Events that start an action begin (then the action's name).
_ACTION_EVENTS = {
    "ExecuteAction": "Start to execute action ",
    "CommandIssued": "Start to execute command ",
}


def _task_min(task: Mapping[str, Any]) -> int:
    """A task's minAvailable as Volcano's admission defaults it (its replicas)."""
    value = task.get("minAvailable")
    return as_int(task.get("replicas")) if value is None else as_int(value)


def _job_min(spec: Mapping[str, Any]) -> int:
    """A job's minAvailable as Volcano's admission defaults it (when 0 or absent: the
    sum of its tasks' minimums)."""
    return as_int(spec.get("minAvailable")) or sum(_task_min(t) for t in spec.get("tasks") or ())


def job_row(job: Mapping[str, Any]) -> dict[str, Any]:
    """One Job as ``job list`` shows it (vcctl's columns, and the queue)."""
    meta, spec, status = meta_of(job), job.get("spec") or {}, job.get("status") or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "queue": spec.get("queue") or "default",
        "phase": (status.get("state") or {}).get("phase") or "",
        "type": (meta.get("labels") or {}).get(JOB_TYPE_LABEL) or "Batch",
        "replicas": sum(as_int(t.get("replicas")) for t in spec.get("tasks") or ()),
        "minAvailable": as_int(status.get("minAvailable")) or _job_min(spec),
        **{k: as_int(status.get(k)) for k in _POD_COUNTS},
        "retryCount": as_int(status.get("retryCount")),
        "created": meta.get("creationTimestamp"),
    }


_POD_COUNTS = ("pending", "running", "succeeded", "failed", "terminating", "unknown")
TASK_PHASES = ("Pending", "Running", "Succeeded", "Failed")


def _requests(template: Mapping[str, Any]) -> dict[str, str]:
    """A pod's requests (its containers' summed), as quantities for people."""
    total: dict[str, float] = {}
    containers = (template.get("spec") or {}).get("containers") or ()
    try:
        for c in containers:
            for name, value in ((c.get("resources") or {}).get("requests") or {}).items():
                total[name] = total.get(name, 0.0) + to_canonical(name, value)
    except InputError:  # (the API server accepted it; show it as written)
        return {
            n: str(v)
            for c in containers
            for n, v in ((c.get("resources") or {}).get("requests") or {}).items()
        }
    return {name: format_amount(name, amount) for name, amount in sorted(total.items())}


def _policy(p: Mapping[str, Any]) -> str:
    """``PodFailed -> RestartJob``, ``exit 3 -> AbortJob``, ``... after 10m``."""
    events = list(p.get("events") or ())
    if p.get("event"):
        events.insert(0, p["event"])
    when = ", ".join(events) if events else ""
    if p.get("exitCode") is not None:
        when = f"exit code {p['exitCode']}" + (f", {when}" if when else "")
    text = f"{when or '?'} -> {p.get('action') or '?'}"
    return f"{text} after {p['timeout']}" if p.get("timeout") else text


def _condition(c: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "status": c.get("status") or "",
        "type": c.get("type") or "",
        "reason": c.get("reason") or "",
        "message": c.get("message") or "",
        "lastTransitionTime": c.get("lastTransitionTime"),
    }


def _event(e: Mapping[str, Any]) -> dict[str, Any]:
    source = e.get("source") or {}
    origin = source.get("component") or e.get("reportingComponent") or ""
    if source.get("host"):
        origin = f"{origin}, {source['host']}"
    first = e.get("firstTimestamp") or e.get("eventTime") or meta_of(e).get("creationTimestamp")
    series = e.get("series") or {}
    return {
        "type": e.get("type") or "",
        "reason": e.get("reason") or "",
        "count": as_int(e.get("count")) or as_int(series.get("count")) or 1,
        "first": first,
        "last": e.get("lastTimestamp") or series.get("lastObservedTime") or first,
        "from": origin,
        "message": (e.get("message") or "").strip(),
    }


def _action_of(e: Mapping[str, Any]) -> str:
    """The action an ``ExecuteAction`` or ``CommandIssued`` Event starts, else ""."""
    prefix = _ACTION_EVENTS.get(e["reason"])
    if prefix is None or not e["message"].startswith(prefix):
        return ""
    words = e["message"][len(prefix) :].split(",")[0].split()
    return words[0] if words else ""


def why_stopped(job: Mapping[str, Any], events: list[dict[str, Any]]) -> list[str]:
    """Why a Job in a :data:`STOPPED` phase is there, in sentences (empty for any other
    phase): the retries spent or the pods that ended, the action the job controller
    executed and who asked for it (a policy of the Job, naming it, or a command), and
    the last Warning Event. ``events``: the Job's events as :func:`job_view` shows
    them, oldest first. The controller's own words (``status.state`` reason and
    message) are shown beside it, not repeated here."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    phase = (status.get("state") or {}).get("phase") or ""
    if phase not in STOPPED:
        return []
    out: list[str] = []
    retries = as_int(status.get("retryCount"))
    max_retry = spec.get("maxRetry") if spec.get("maxRetry") is not None else 3
    executed = [(e, a) for e in events if (a := _action_of(e))]
    if phase == "Failed":
        if retries >= as_int(max_retry):
            out.append(f"restarted {retries} times, the most its maxRetry ({max_retry}) allows")
        else:
            succeeded, failed = as_int(status.get("succeeded")), as_int(status.get("failed"))
            if spec.get("minSuccess") is not None:
                needed = f"minSuccess is {spec['minSuccess']}"
            else:
                needed = f"minAvailable is {_job_min(spec)}"
            out.append(f"its pods ended with {succeeded} succeeded and {failed} failed; {needed}")
    if executed:
        last, action = executed[-1]
        before = executed[-2] if len(executed) > 1 else None
        # (a command's action: CommandIssued, then ExecuteAction of the same action)
        if last["reason"] == "CommandIssued" or (
            before is not None and before[1] == action and before[0]["reason"] == "CommandIssued"
        ):
            out.append(f"{action} was asked for by a command (pumice job / vcctl job)")
        else:
            policies = [
                f"the Job's policy {_policy(p)}"
                for p in spec.get("policies") or ()
                if p.get("action") == action
            ]
            for t in spec.get("tasks") or ():
                policies += [
                    f"task {t.get('name')}'s policy {_policy(p)}"
                    for p in t.get("policies") or ()
                    if p.get("action") == action
                ]
            by = f", as {' or '.join(policies)} calls for" if policies else ""
            out.append(f"the job controller executed {action}{by} ({_when(last)})")
    warnings = [e for e in events if e["type"] == "Warning"]
    if warnings:
        w = warnings[-1]
        out.append(f"last warning: {w['reason']}: {w['message']} ({_when(w)})")
    return out


def _when(e: Mapping[str, Any]) -> str:
    return str(e["last"] or "time unknown")


def job_view(
    job: Mapping[str, Any],
    podgroup: Mapping[str, Any] | None,
    events: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """What ``job view`` shows: the spec in brief, state, retries, pod counts per task,
    the PodGroup's phase, conditions, why a failed or stopped Job is so
    (:func:`why_stopped`), and the Job's events (oldest first)."""
    meta, spec, status = meta_of(job), job.get("spec") or {}, job.get("status") or {}
    state = status.get("state") or {}
    counts = status.get("taskStatusCount") or {}
    tasks = []
    for t in spec.get("tasks") or ():
        template = t.get("template") or {}
        containers = (template.get("spec") or {}).get("containers") or ()
        phases = dict(sorted(((counts.get(t.get("name")) or {}).get("phase") or {}).items()))
        tasks.append(
            {
                "name": t.get("name") or "",
                "replicas": as_int(t.get("replicas")),
                "minAvailable": _task_min(t),
                "images": [c.get("image") or "" for c in containers],
                "requests": _requests(template),
                "policies": [_policy(p) for p in t.get("policies") or ()],
                "pods": {p: as_int(n) for p, n in phases.items()},
            }
        )
    shown = sorted((_event(e) for e in events), key=lambda e: epoch(e["last"]) or 0.0)
    pg = None
    if podgroup is not None:
        pg_status = podgroup.get("status") or {}
        pg = {
            "name": meta_of(podgroup).get("name", ""),
            "phase": pg_status.get("phase") or "",
            "conditions": [_condition(c) for c in pg_status.get("conditions") or ()],
        }
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "created": meta.get("creationTimestamp"),
        "queue": spec.get("queue") or "default",
        "schedulerName": spec.get("schedulerName") or "",
        "priorityClassName": spec.get("priorityClassName") or "",
        "minAvailable": _job_min(spec),
        "minSuccess": spec.get("minSuccess"),
        "maxRetry": spec.get("maxRetry") if spec.get("maxRetry") is not None else 3,
        "ttlSecondsAfterFinished": spec.get("ttlSecondsAfterFinished"),
        "plugins": {k: list(v or ()) for k, v in sorted((spec.get("plugins") or {}).items())},
        "policies": [_policy(p) for p in spec.get("policies") or ()],
        "state": {
            "phase": state.get("phase") or "",
            "reason": state.get("reason") or "",
            "message": state.get("message") or "",
            "lastTransitionTime": state.get("lastTransitionTime"),
        },
        "retryCount": as_int(status.get("retryCount")),
        "version": as_int(status.get("version")),
        "pods": {k: as_int(status.get(k)) for k in _POD_COUNTS},
        "tasks": tasks,
        "podGroup": pg,
        "conditions": [_condition(c) for c in status.get("conditions") or ()],
        "why": why_stopped(job, shown),
        "events": shown[-RECENT_EVENTS:],
        "olderEvents": max(0, len(shown) - RECENT_EVENTS),
    }


__all__ = [
    "JOB_TYPE_LABEL",
    "RECENT_EVENTS",
    "STOPPED",
    "TASK_PHASES",
    "job_row",
    "job_view",
    "why_stopped",
]
