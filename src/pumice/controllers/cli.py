"""``pumice job`` and ``pumice queue``: Volcano Jobs and Queues for people, as vcctl.

The commands, flags and objects are vcctl's (Volcano's ``pkg/cli/job`` and
``pkg/cli/queue``), so a Volcano user's habits carry over:

- ``job list|view|suspend|resume|delete`` with ``-n/--namespace``, ``-N/--name`` (or the
  name as an argument), ``-A/--all-namespaces``, ``-q/--queue``, ``-S/--scheduler`` and
  ``--selector`` (a part of the name) for ``list``;
- ``queue list|open|close`` (vcctl's ``queue operate -a open|close``).

Suspend and resume, open and close, do not change the object: they create a
``bus.volcano.sh/v1alpha1`` Command (action ``AbortJob``, ``ResumeJob``, ``OpenQueue``,
``CloseQueue``) owned by and targeting the Job or Queue, named ``<target>-<action>-``
plus a random suffix, which the Job or Queue controller carries out and deletes. A Job's
Commands live in its namespace; a Queue's in ``default``, where vcctl puts them.

Unlike vcctl, a command that Volcano's job state machine would ignore is refused: suspend
of a Job already suspended or finished, resume of a Job that is not suspended.

Contract: every command prints one clear line on stderr and exits 2 when the user can
fix the command line (no such Job or Queue, a command the Job's state ignores, bad
credentials file), 1 when the cluster cannot answer (unreachable, refused, the CRDs not
installed). ``--format json`` prints what the table shows as JSON, for scripts.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pumice.api.quantity import format_amount, to_canonical
from pumice.cluster.kube_client import (
    RESOURCES,
    ApiUnavailable,
    KubeClient,
    Resource,
    status_message,
)
from pumice.errors import InputError

EXIT_UNAVAILABLE = 1

JOB = RESOURCES["Job"]
COMMAND = RESOURCES["Command"]
QUEUE = RESOURCES["Queue"]
PODGROUP = RESOURCES["PodGroup"]
EVENT = RESOURCES["Event"]

JOB_API = "batch.volcano.sh/v1alpha1"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
COMMAND_API = "bus.volcano.sh/v1alpha1"
#: Where vcctl creates a Queue's Commands (a Queue has no namespace, a Command has one).
QUEUE_COMMAND_NAMESPACE = "default"
#: The label naming a Job's type (vcctl's ``JobType`` column; ``Batch`` when absent).
JOB_TYPE_LABEL = "volcano.sh/job-type"

#: Phases in which Volcano's job state machine acts on ``AbortJob`` (suspend).
SUSPENDABLE = frozenset({"", "Pending", "Running", "Restarting"})
#: Phases in which it acts on ``ResumeJob``.
RESUMABLE = frozenset({"Aborting", "Aborted"})
#: Events shown by ``job view`` (the most recent ones).
RECENT_EVENTS = 10
#: Phases of a Job that failed or was stopped: ``job view`` says why.
STOPPED = frozenset({"Failed", "Aborting", "Aborted", "Terminating", "Terminated"})
#: How the job controller's Events that start an action begin (then the action's name).
_ACTION_EVENTS = {
    "ExecuteAction": "Start to execute action ",
    "CommandIssued": "Start to execute command ",
}

_PHASE_STYLE = {
    "Running": "green",
    "Completed": "green",
    "Open": "green",
    "Pending": "yellow",
    "Inqueue": "yellow",
    "Restarting": "yellow",
    "Completing": "yellow",
    "Closing": "yellow",
    "Aborting": "magenta",
    "Aborted": "magenta",
    "Closed": "magenta",
    "Terminating": "red",
    "Terminated": "red",
    "Failed": "red",
}


class ClusterUnavailable(Exception):
    """The cluster could not answer the request (exit status 1)."""


# -- talking to the API server ---------------------------------------------------------


def _kind_name(res: Resource) -> str:
    group = res.prefix.rsplit("/", 2)[-2] if res.prefix.startswith("/apis/") else ""
    return f"{res.plural}.{group}" if group else res.plural


class Api:
    """The few requests the commands make, with the API's answers turned into the two
    kinds of failure the commands report: :class:`InputError` for an object that does
    not exist, :class:`ClusterUnavailable` for everything the user's command line cannot
    fix."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def _call(self, method: str, path: str, res: Resource, **kw: Any) -> tuple[int, Any]:
        try:
            status, body = self.client.request(method, path, **kw)
        except ApiUnavailable as err:
            raise ClusterUnavailable(
                f"cannot reach the API server at {self.client.host}: {err}"
            ) from None
        if status == 404 and not _names_an_object(body):
            raise ClusterUnavailable(
                f"the API server does not serve {_kind_name(res)} "
                f"({res.prefix.removeprefix('/apis/')}): install the CRDs (deploy/)"
            )
        if status in (401, 403):
            raise ClusterUnavailable(
                f"the API server refused {method} {path}: {status_message(body) or status}"
            )
        return status, body

    def _fail(self, method: str, path: str, status: int, body: Any) -> ClusterUnavailable:
        return ClusterUnavailable(
            f"{method} {path}: HTTP {status}: {status_message(body) or 'no message'}"
        )

    def get(self, res: Resource, namespace: str, name: str) -> dict[str, Any]:
        """The object; :class:`InputError` naming it when it does not exist."""
        path = res.path(namespace, name)
        status, body = self._call("GET", path, res)
        if status == 404:
            where = f" in namespace {namespace!r}" if res.namespaced else ""
            raise InputError(f"no {res.kind} {name!r}{where}")
        if status != 200:
            raise self._fail("GET", path, status, body)
        return body

    def list(self, res: Resource, namespace: str = "", **query: Any) -> list[dict[str, Any]]:
        """Every object of ``res`` (in ``namespace``; all namespaces when empty)."""
        path = res.path(namespace)
        status, body = self._call("GET", path, res, query=query or None)
        if status != 200:
            raise self._fail("GET", path, status, body)
        return list(body.get("items") or ())

    def create(self, res: Resource, namespace: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        path = res.path(namespace)
        status, body = self._call("POST", path, res, body=obj)
        if status not in (200, 201):
            raise self._fail("POST", path, status, body)
        return body

    def delete(self, res: Resource, namespace: str, name: str) -> None:
        path = res.path(namespace, name)
        status, body = self._call("DELETE", path, res)
        if status == 404:
            raise InputError(f"no {res.kind} {name!r} in namespace {namespace!r}")
        if status not in (200, 202):
            raise self._fail("DELETE", path, status, body)


def _names_an_object(body: Any) -> bool:
    """A 404 about a missing object (a Status naming it), not about a missing resource
    type (the server's plain "404 page not found")."""
    return isinstance(body, Mapping) and bool((body.get("details") or {}).get("name"))


def connect(args: argparse.Namespace) -> Api:
    try:
        client = KubeClient.from_config(args.kubeconfig, args.context, pool_size=4)
    except Exception as err:  # the client's loaders raise their own types
        raise InputError(f"cannot load cluster credentials: {err}", field="--kubeconfig") from None
    return Api(client)


def default_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig's context, as kubectl takes it; else the service
    account's in a pod; else ``default``."""
    try:
        from kubernetes import config as k8s_config

        contexts, active = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = active
        if context:
            chosen = next((c for c in contexts if c.get("name") == context), None)
        namespace = ((chosen or {}).get("context") or {}).get("namespace")
        if namespace:
            return str(namespace)
    except Exception:  # no kubeconfig: in a pod, or the loader will say what is wrong
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                return f.read().strip() or "default"
        except OSError:
            pass
    return "default"


# -- what the tables show (pure: dicts in, dicts out) ------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _epoch(stamp: Any) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def human_age(seconds: float) -> str:
    """How long ago, as kubectl writes it: ``45s``, ``3m20s``, ``2h5m``, ``3d4h``, ``2y``."""
    s = int(seconds)
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m, h, d = s // 60, s // 3600, s // 86400
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 730:
        return f"{d}d"
    return f"{d // 365}y"


def _age(stamp: Any, now: float) -> str:
    at = _epoch(stamp)
    return "-" if at is None else human_age(now - at)


def _task_min(task: Mapping[str, Any]) -> int:
    """A task's minAvailable as Volcano's admission defaults it (its replicas)."""
    value = task.get("minAvailable")
    return _int(task.get("replicas")) if value is None else _int(value)


def _job_min(spec: Mapping[str, Any]) -> int:
    """A job's minAvailable as Volcano's admission defaults it (when 0 or absent: the
    sum of its tasks' minimums)."""
    return _int(spec.get("minAvailable")) or sum(_task_min(t) for t in spec.get("tasks") or ())


def job_row(job: Mapping[str, Any]) -> dict[str, Any]:
    """One Job as ``job list`` shows it (vcctl's columns, and the queue)."""
    meta, spec, status = _meta(job), job.get("spec") or {}, job.get("status") or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "queue": spec.get("queue") or "default",
        "phase": (status.get("state") or {}).get("phase") or "",
        "type": (meta.get("labels") or {}).get(JOB_TYPE_LABEL) or "Batch",
        "replicas": sum(_int(t.get("replicas")) for t in spec.get("tasks") or ()),
        "minAvailable": _int(status.get("minAvailable")) or _job_min(spec),
        **{k: _int(status.get(k)) for k in _POD_COUNTS},
        "retryCount": _int(status.get("retryCount")),
        "created": meta.get("creationTimestamp"),
    }


_POD_COUNTS = ("pending", "running", "succeeded", "failed", "terminating", "unknown")
_TASK_PHASES = ("Pending", "Running", "Succeeded", "Failed")


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
    first = e.get("firstTimestamp") or e.get("eventTime") or _meta(e).get("creationTimestamp")
    series = e.get("series") or {}
    return {
        "type": e.get("type") or "",
        "reason": e.get("reason") or "",
        "count": _int(e.get("count")) or _int(series.get("count")) or 1,
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
    retries = _int(status.get("retryCount"))
    max_retry = spec.get("maxRetry") if spec.get("maxRetry") is not None else 3
    executed = [(e, a) for e in events if (a := _action_of(e))]
    if phase == "Failed":
        if retries >= _int(max_retry):
            out.append(f"restarted {retries} times, the most its maxRetry ({max_retry}) allows")
        else:
            succeeded, failed = _int(status.get("succeeded")), _int(status.get("failed"))
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
    meta, spec, status = _meta(job), job.get("spec") or {}, job.get("status") or {}
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
                "replicas": _int(t.get("replicas")),
                "minAvailable": _task_min(t),
                "images": [c.get("image") or "" for c in containers],
                "requests": _requests(template),
                "policies": [_policy(p) for p in t.get("policies") or ()],
                "pods": {p: _int(n) for p, n in phases.items()},
            }
        )
    shown = sorted((_event(e) for e in events), key=lambda e: _epoch(e["last"]) or 0.0)
    pg = None
    if podgroup is not None:
        pg_status = podgroup.get("status") or {}
        pg = {
            "name": _meta(podgroup).get("name", ""),
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
        "retryCount": _int(status.get("retryCount")),
        "version": _int(status.get("version")),
        "pods": {k: _int(status.get(k)) for k in _POD_COUNTS},
        "tasks": tasks,
        "podGroup": pg,
        "conditions": [_condition(c) for c in status.get("conditions") or ()],
        "why": why_stopped(job, shown),
        "events": shown[-RECENT_EVENTS:],
        "olderEvents": max(0, len(shown) - RECENT_EVENTS),
    }


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
    for q in sorted(queues, key=lambda q: _meta(q).get("name", "")):
        name = _meta(q).get("name", "")
        spec = q.get("spec") or {}
        per = counts.get(name) or dict.fromkeys(phases, 0)
        rows.append(
            {
                "name": name,
                "weight": _int(spec.get("weight")),
                "state": (q.get("status") or {}).get("state") or "",
                "parent": spec.get("parent") or "",
                **{p[0].lower() + p[1:]: n for p, n in per.items()},
            }
        )
    return rows


def command_for(
    target: Mapping[str, Any], api_version: str, kind: str, action: str, namespace: str
) -> dict[str, Any]:
    """The Command vcctl creates for ``action`` on ``target`` (a Job or Queue)."""
    meta = _meta(target)
    ref = {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": COMMAND_API,
        "kind": "Command",
        "metadata": {
            "generateName": f"{meta['name']}-{action.lower()}-",
            "namespace": namespace,
            "ownerReferences": [ref],
        },
        "action": action,
        "target": dict(ref),
    }


# -- rendering -----------------------------------------------------------------------


def _console() -> Console:
    # Piped output gets a wide page rather than rich's 80 columns (as pumice cycle's).
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


def _json(data: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def _phase(phase: str) -> Text:
    return Text(phase or "-", style=_PHASE_STYLE.get(phase, ""))


def _table(*columns: str, title: str | None = None, numeric: Iterable[str] = ()) -> Table:
    t = Table(
        box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False
    )
    numbers = set(numeric)
    for c in columns:
        wide = c in ("MESSAGE", "POLICIES", "REQUESTS")
        t.add_column(
            c, justify="right" if c in numbers else "left", no_wrap=not wide, overflow="fold"
        )
    return t


def print_jobs(rows: list[dict[str, Any]], all_namespaces: bool, now: float) -> None:
    counts = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "UNKNOWN")
    cols = ["NAME", "QUEUE", "PHASE", "TYPE", "REPLICAS", "MIN", *counts, "RETRIES", "AGE"]
    if all_namespaces:
        cols.insert(0, "NAMESPACE")
    t = _table(*cols, numeric=("REPLICAS", "MIN", *counts, "RETRIES"))
    for r in rows:
        cells: list[Any] = [r["name"], r["queue"], _phase(r["phase"]), r["type"]]
        cells += [str(r[k]) for k in ("replicas", "minAvailable", *(c.lower() for c in counts))]
        cells += [str(r["retryCount"]), _age(r["created"], now)]
        if all_namespaces:
            cells.insert(0, r["namespace"])
        t.add_row(*cells)
    _console().print(t)


def print_job(view: dict[str, Any], now: float) -> None:
    out = _console()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    state = view["state"]
    since = state["lastTransitionTime"]
    phase = _phase(state["phase"])
    if since:
        phase.append(f"  since {since} ({_age(since, now)} ago)", style="")
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
        rows.append(("PodGroup", Text(pg["name"] + "  ").append_text(_phase(pg["phase"]))))
        for c in pg["conditions"]:
            if c["message"]:
                rows.append(("", f"{c['type']}: {c['message']}"))
    rows.append(("Created", f"{view['created']} ({_age(view['created'], now)} ago)"))
    for label, value in rows:
        head.add_row(label, value)
    out.print(head)
    out.print()

    t = _table(
        "TASK", "REPLICAS", "MIN", *(p.upper() for p in _TASK_PHASES), "OTHER", "IMAGE",
        "REQUESTS", "POLICIES", title="Tasks", numeric=("REPLICAS", "MIN",
        *(p.upper() for p in _TASK_PHASES), "OTHER"),
    )  # fmt: skip
    for task in view["tasks"]:
        pods = task["pods"]
        other = sum(n for p, n in pods.items() if p not in _TASK_PHASES)
        t.add_row(
            task["name"],
            str(task["replicas"]),
            str(task["minAvailable"]),
            *(str(pods.get(p, 0)) for p in _TASK_PHASES),
            str(other),
            ", ".join(task["images"]),
            ", ".join(f"{k}={v}" for k, v in task["requests"].items()) or "-",
            "; ".join(task["policies"]) or "-",
        )
    out.print(t)

    if view["conditions"]:
        # (Volcano's conditions hold a status and a time; pumice's may say more.)
        said = [k for k in ("type", "reason", "message") if any(c[k] for c in view["conditions"])]
        t = _table("STATUS", "AGE", *(k.upper() for k in said), title="Conditions")
        for c in view["conditions"]:
            t.add_row(
                _phase(c["status"]),
                _age(c["lastTransitionTime"], now),
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
    t = _table("TYPE", "REASON", "AGE", "FROM", "MESSAGE", title=title)
    for e in view["events"]:
        age = _age(e["last"], now)
        if e["count"] > 1:
            age = f"{age} (x{e['count']} over {_age(e['first'], now)})"
        t.add_row(e["type"], e["reason"], age, e["from"] or "-", e["message"])
    out.print(t)


def _seconds(value: Any) -> str:
    return "-" if value is None else f"{value}s"


def _plugins(plugins: Mapping[str, list[str]]) -> str:
    if not plugins:
        return "-"
    return ", ".join(f"{k} ({' '.join(v)})" if v else k for k, v in plugins.items())


def print_queues(rows: list[dict[str, Any]]) -> None:
    counts = ("INQUEUE", "PENDING", "RUNNING", "UNKNOWN", "COMPLETED")
    t = _table("NAME", "WEIGHT", "STATE", "PARENT", *counts, numeric=("WEIGHT", *counts))
    for r in rows:
        t.add_row(
            r["name"],
            str(r["weight"]),
            _phase(r["state"]),
            r["parent"] or "-",
            *(str(r[c.lower()]) for c in counts),
        )
    _console().print(t)


# -- the commands --------------------------------------------------------------------


def _namespace(args: argparse.Namespace) -> str:
    return args.namespace or default_namespace(args.kubeconfig, args.context)


def _name(args: argparse.Namespace, what: str) -> str:
    given = [n for n in (args.name, args.name_flag) if n]
    if not given:
        raise InputError(f"which {what}? give its name (as an argument or with -N/--name)")
    if len(given) == 2 and given[0] != given[1]:
        raise InputError(f"two {what} names given: {given[1]!r} and {given[0]!r}")
    return given[0]


def _job_list(args: argparse.Namespace) -> int:
    api = connect(args)
    namespace = "" if args.all_namespaces else _namespace(args)
    jobs = api.list(JOB, namespace)
    rows = [
        job_row(j)
        for j in jobs
        if (not args.queue or (j.get("spec") or {}).get("queue", "default") == args.queue)
        and (not args.scheduler or (j.get("spec") or {}).get("schedulerName") == args.scheduler)
        and (not args.selector or args.selector in _meta(j).get("name", ""))
    ]
    rows.sort(key=lambda r: (r["namespace"], r["name"]))
    if args.format == "json":
        _json(rows)
    elif not rows:
        where = "in any namespace" if args.all_namespaces else f"in namespace {namespace}"
        print(f"No jobs found {where}.", file=sys.stderr)
    else:
        print_jobs(rows, args.all_namespaces, time.time())
    return 0


def _podgroup_of(api: Api, job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PodGroup the job controller made for ``job`` (the one it controls)."""
    meta = _meta(job)
    for pg in api.list(PODGROUP, meta.get("namespace", "")):
        for ref in _meta(pg).get("ownerReferences") or ():
            if ref.get("uid") == meta.get("uid") and ref.get("controller"):
                return pg
    return None


def _events_of(api: Api, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Job's events: about an object named as the Job, of kind Job, and of this Job
    (its uid) when the event records one."""
    meta = _meta(job)
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
    name, namespace = _name(args, "job"), _namespace(args)
    job = api.get(JOB, namespace, name)
    view = job_view(job, _podgroup_of(api, job), _events_of(api, job))
    if args.format == "json":
        _json(view)
    else:
        print_job(view, time.time())
    return 0


def _issue(api: Api, args: argparse.Namespace, body: dict[str, Any], what: str) -> int:
    """Create the Command ``body`` and say so."""
    made = api.create(COMMAND, body["metadata"]["namespace"], body)
    meta = _meta(made)
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    if args.format == "json":
        _json({"command": name, "action": made.get("action"), "target": made.get("target")})
    else:
        print(f"{what}: {made.get('action')} requested (Command {name})")
    return 0


def _job_command(action: str, allowed: frozenset[str], refusal: str) -> Callable[..., int]:
    def run(args: argparse.Namespace) -> int:
        api = connect(args)
        name, namespace = _name(args, "job"), _namespace(args)
        job = api.get(JOB, namespace, name)
        phase = ((job.get("status") or {}).get("state") or {}).get("phase") or ""
        if phase not in allowed:
            raise InputError(f"job {namespace}/{name} is {phase}: {refusal}")
        body = command_for(job, JOB_API, "Job", action, namespace)
        return _issue(api, args, body, f"job {namespace}/{name}")

    return run


def _job_delete(args: argparse.Namespace) -> int:
    api = connect(args)
    name, namespace = _name(args, "job"), _namespace(args)
    api.delete(JOB, namespace, name)
    if args.format == "json":
        _json({"deleted": f"{namespace}/{name}"})
    else:
        print(f"job {namespace}/{name} deleted")
    return 0


def _queue_list(args: argparse.Namespace) -> int:
    api = connect(args)
    rows = queue_rows(api.list(QUEUE), api.list(PODGROUP))
    if args.format == "json":
        _json(rows)
    elif not rows:
        print("No queues found.", file=sys.stderr)
    else:
        print_queues(rows)
    return 0


def _queue_command(action: str) -> Callable[..., int]:
    def run(args: argparse.Namespace) -> int:
        api = connect(args)
        name = _name(args, "queue")
        queue = api.get(QUEUE, "", name)
        body = command_for(queue, QUEUE_API, "Queue", action, QUEUE_COMMAND_NAMESPACE)
        return _issue(api, args, body, f"queue {name}")

    return run


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """Report an unavailable cluster as one line and exit status 1 (an
    :class:`InputError` goes up to the CLI's own handler: exit status 2)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ClusterUnavailable as err:
            print(f"pumice: error: {err}", file=sys.stderr)
            return EXIT_UNAVAILABLE

    return run


# -- the parsers ---------------------------------------------------------------------


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-k", "--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument("--format", choices=("table", "json"), default="table")


def _named(p: argparse.ArgumentParser, what: str, namespaced: bool) -> None:
    p.add_argument("name", nargs="?", help=f"the {what}'s name")
    p.add_argument("-N", "--name", dest="name_flag", metavar="NAME", help=f"the {what}'s name")
    if namespaced:
        _namespaced(p)


def _namespaced(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-n",
        "--namespace",
        help="the job's namespace (default: the kubeconfig context's, else default)",
    )


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
    _common(p)
    _namespaced(p)
    p.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list jobs in all namespaces"
    )
    p.add_argument("-q", "--queue", help="only jobs of this queue")
    p.add_argument("-S", "--scheduler", help="only jobs with this schedulerName")
    p.add_argument("--selector", help="only jobs whose name contains this text")
    p.set_defaults(func=_guarded(_job_list))

    p = jsub.add_parser(
        "view", help="show a job: spec, state, retries, tasks, conditions, recent events"
    )
    _common(p)
    _named(p, "job", True)
    p.set_defaults(func=_guarded(_job_view))

    for verb, action, allowed, refusal, text in (
        ("suspend", "AbortJob", SUSPENDABLE, "nothing to suspend",
         "suspend a job (an AbortJob Command): its pods are deleted, it keeps its place"),
        ("resume", "ResumeJob", RESUMABLE, "only a suspended job can be resumed",
         "resume a suspended job (a ResumeJob Command): it restarts"),
    ):  # fmt: skip
        p = jsub.add_parser(verb, help=text)
        _common(p)
        _named(p, "job", True)
        p.set_defaults(func=_guarded(_job_command(action, allowed, refusal)))

    p = jsub.add_parser("delete", help="delete a job (its pods and PodGroup go with it)")
    _common(p)
    _named(p, "job", True)
    p.set_defaults(func=_guarded(_job_delete))


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
    _common(p)
    p.set_defaults(func=_guarded(_queue_list))

    for verb, action in (("open", "OpenQueue"), ("close", "CloseQueue")):
        p = qsub.add_parser(verb, help=f"{verb} a queue (an {action} Command)")
        _common(p)
        p.add_argument("name", nargs="?", help="the queue's name")
        p.add_argument(
            "-N", "-n", "--name", dest="name_flag", metavar="NAME", help="the queue's name"
        )
        p.set_defaults(func=_guarded(_queue_command(action)))
    return qsub


__all__ = [
    "Api",
    "ClusterUnavailable",
    "add_job_parser",
    "add_queue_parser",
    "command_for",
    "job_row",
    "job_view",
    "queue_rows",
]
