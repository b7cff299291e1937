"""The events of a Job, read off its current state.

Volcano's controller turns each pod update into an event (``PodFailed`` when a pod turns
Failed, ``TaskCompleted`` when the last pod of a task succeeds, ...) and acts on it
once. pumice's controller is level-based: on each reconcile it reads the events that
*hold* now, from the pods of the job's current version (``volcano.sh/job-version``; pods
of an older run are history, as Volcano treats their events as outdated):

- ``PodFailed``: a pod is Failed (with its first container's exit code);
- ``PodEvicted``: a pod was deleted by someone else than the controller (an eviction,
  ``kubectl delete``): the one event that cannot be read off the state, so the
  controller notes deletions as it watches them (see the controller);
- ``PodPending``: a pod is Pending (only a policy with a timeout acts on it);
- ``TaskCompleted``: every replica of a task has succeeded;
- ``TaskFailed``: the containers of a task's live pods restarted ``maxRetry`` times;
- ``Unknown``: the PodGroup's phase is Unknown.

An event that holds calls for its policy's action again on the next reconcile; the
state machine makes that harmless (an action already taken leaves the phase it led to,
where the same action means nothing new), and acting removes most events (the pods of a
restart are gone, or of an older version).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pumice.controllers.job.pods import JOB_VERSION, TASK_SPEC, pod_index
from pumice.controllers.job.spec import JobSpec


@dataclass(frozen=True, slots=True)
class Observed:
    """An event that holds: about ``task`` (and ``pod``), ``ident`` names this one
    occurrence (to time a policy's timeout from when it was first seen)."""

    event: str
    ident: str
    task: str = ""
    pod: str = ""
    exit_code: int | None = None


@dataclass(slots=True, eq=False)
class PodView:
    """What the controller reads of one pod, read off each of its watch events.
    Read-only: not frozen only because one is made for most pod events, and a frozen
    dataclass is several times slower to make."""

    obj: Mapping[str, Any]
    key: str
    name: str
    uid: str
    task: str
    index: int
    phase: str
    version: int
    terminating: bool
    #: The uid of the controlling owner.
    owner: str
    #: Everything the controller reads of the pod (its exit code and container
    #: restarts included): a pod event that leaves it as it was (a bind, a condition)
    #: changes nothing a reconcile would do.
    seen: tuple[Any, ...] = ()

    @classmethod
    def of(cls, pod: Mapping[str, Any], like: PodView | None = None) -> PodView:
        """The view of ``pod``; ``like`` itself when it is the view of the same object
        and nothing it reads moved (a bind, a condition: most pod events)."""
        # (what task_of, phase_of, version_of, terminating, exit_code and the restarts
        # read, each read once: this runs for every pod event)
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        annotations = meta.get("annotations") or {}
        name = str(meta.get("name", ""))
        uid = str(meta.get("uid", ""))
        task = str(annotations.get(TASK_SPEC) or "")
        phase = str(status.get("phase") or "Pending")
        try:
            version = int(annotations.get(JOB_VERSION, -1))
        except ValueError:
            version = -1
        ending = meta.get("deletionTimestamp") is not None
        owner = ""
        for r in meta.get("ownerReferences") or ():
            if r.get("controller"):
                owner = str(r.get("uid", ""))
                break
        if "containerStatuses" in status or "initContainerStatuses" in status:
            code, restarts = _exit_code(status), _status_restarts(status)
        else:
            code, restarts = None, 0
        seen = (uid, name, task, phase, version, ending, owner, code, restarts)
        if like is not None and like.obj is pod and like.seen == seen:
            return like
        if like is not None and like.uid == uid and like.name == name:
            key, index = like.key, like.index  # (the same pod: its key and index)
        else:
            key, index = f"{meta.get('namespace') or 'default'}/{name}", pod_index(name) or 0
        return cls(
            obj=pod,
            key=key,
            name=name,
            uid=uid,
            task=task,
            index=index,
            phase=phase,
            version=version,
            terminating=ending,
            owner=owner,
            seen=seen,
        )


@dataclass(frozen=True, slots=True)
class Eviction:
    """A job's pod deleted by someone else (noted from the watch)."""

    pod: str
    task: str
    version: int
    uid: str
    #: The uid of the Job that owned it.
    owner: str = ""


def version_of(pod: Mapping[str, Any]) -> int:
    try:
        return int(((pod.get("metadata") or {}).get("annotations") or {}).get(JOB_VERSION, -1))
    except ValueError:
        return -1


def task_of(pod: Mapping[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("annotations") or {}).get(TASK_SPEC) or "")


def phase_of(pod: Mapping[str, Any]) -> str:
    """The pod's phase; a pod without one is Pending (the API server sets it so)."""
    return str((pod.get("status") or {}).get("phase") or "Pending")


def terminating(pod: Mapping[str, Any]) -> bool:
    return (pod.get("metadata") or {}).get("deletionTimestamp") is not None


def exit_code(pod: Mapping[str, Any]) -> int | None:
    """The first container's exit code (Volcano reads only the first)."""
    return _exit_code(pod.get("status") or {})


def _exit_code(status: Mapping[str, Any]) -> int | None:
    statuses = status.get("containerStatuses") or ()
    if not statuses:
        return None
    term = ((statuses[0] or {}).get("state") or {}).get("terminated") or {}
    code = term.get("exitCode")
    return code if isinstance(code, int) else None


def _restarts(pod: Mapping[str, Any]) -> int:
    return _status_restarts(pod.get("status") or {})


def _status_restarts(status: Mapping[str, Any]) -> int:
    return sum(
        int((s or {}).get("restartCount") or 0)
        for s in (
            *(status.get("initContainerStatuses") or ()),
            *(status.get("containerStatuses") or ()),
        )
    )


def observe(
    spec: JobSpec,
    pods: Sequence[PodView],
    version: int,
    evictions: Sequence[Eviction],
    podgroup_phase: str,
    wanted: frozenset[str] | None = None,
) -> list[Observed]:
    """The events that hold, in a fixed order: per pod (by task, then index), then the
    evictions, then per task, then the PodGroup's. ``wanted`` (when given) limits the
    work to the events some policy names (``*`` for all; ``PodFailed`` stands for
    exit-code policies too)."""

    def want(event: str) -> bool:
        return wanted is None or "*" in wanted or event in wanted

    order = {t.name: i for i, t in enumerate(spec.tasks)}
    out: list[Observed] = []
    if want("PodFailed") or want("PodPending"):
        for p in sorted(pods, key=lambda p: (order.get(p.task, len(order)), p.index, p.name)):
            if p.version != version or p.terminating:
                continue
            if p.phase == "Failed" and want("PodFailed"):
                code = exit_code(p.obj)
                out.append(Observed("PodFailed", f"PodFailed/{p.uid}", p.task, p.name, code))
            elif p.phase == "Pending" and want("PodPending"):
                out.append(Observed("PodPending", f"PodPending/{p.uid}", p.task, p.name))
    for e in evictions:
        if e.version == version:
            out.append(Observed("PodEvicted", f"PodEvicted/{e.uid}", e.task, e.pod))
    if want("TaskCompleted") or want("TaskFailed"):
        by_task: dict[str, list[PodView]] = {}
        for p in pods:
            if not p.terminating:
                by_task.setdefault(p.task, []).append(p)
        for t in spec.tasks:
            mine = by_task.get(t.name, [])
            if not mine or t.replicas <= 0:
                continue
            current = any(p.version == version for p in mine)
            done = sum(p.phase == "Succeeded" for p in mine)
            if want("TaskCompleted") and current and done >= t.replicas:
                out.append(Observed("TaskCompleted", f"TaskCompleted/{t.name}/{version}", t.name))
            if want("TaskFailed") and t.max_retry != -1:
                live = [p for p in mine if p.phase in ("Pending", "Running")]
                if live and sum(_restarts(p.obj) for p in live) >= t.max_retry:
                    out.append(Observed("TaskFailed", f"TaskFailed/{t.name}/{version}", t.name))
    if podgroup_phase == "Unknown":
        out.append(Observed("Unknown", f"Unknown/{version}"))
    return out


def policy_events(spec: JobSpec) -> frozenset[str]:
    """The events the job's policies name (an exit-code policy counts as PodFailed)."""
    out: set[str] = set()
    for policies in (spec.policies, *(t.policies for t in spec.tasks)):
        for p in policies:
            out.update(p.events)
            if p.exit_code is not None:
                out.add("PodFailed")
    return frozenset(out)


__all__ = [
    "Eviction",
    "Observed",
    "PodView",
    "exit_code",
    "observe",
    "phase_of",
    "policy_events",
    "task_of",
    "terminating",
    "version_of",
]
