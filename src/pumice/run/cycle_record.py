"""What ``pumice run``'s metrics observe of one cycle: its durations and its result.

:class:`CycleRecord` is the cycle's observer (:class:`pumice.framework.session.CycleObserver`):
it keeps the durations the cycle reports and, when the session closes, reads what only
the session knows (proportion's or capacity's deserved shares, which queues are
overused) into :class:`SessionFacts`. A cycle run without it times nothing and reads
nothing.

Contract: the record is filled by the cycle's thread and handed, once complete, to
:meth:`pumice.run.metrics.SchedulerMetrics.observe_cycle`; nothing here touches a
metric. Use a new record per cycle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.api.job import COMPLETED
from pumice.api.resources import ResourceSpace, Vector
from pumice.api.task import TaskStatus
from pumice.framework.decisions import PodGroupUpdate
from pumice.framework.session import Session


@dataclass(slots=True)
class QueueFigures:
    """One queue as the last session saw it. Amounts are in pumice's canonical units
    (cpu millicores, memory bytes, other resources their count), by resource name, the
    shared dimensions only (not ``pods`` or ``ephemeral-storage``); an unlimited
    dimension is left out. None: no plugin computed it this cycle."""

    name: str
    weight: float
    allocated: dict[str, float]
    request: dict[str, float]
    inqueue: dict[str, float]
    deserved: dict[str, float] | None = None
    capability: dict[str, float] | None = None
    real_capability: dict[str, float] | None = None
    share: float | None = None
    overused: bool | None = None


@dataclass(slots=True)
class SessionFacts:
    """What :meth:`CycleRecord.session_closing` reads from the session, for the metrics
    of the cycle's result. Computed only for an observed cycle."""

    #: Where the queue figures came from: "proportion", "capacity", or "snapshot" (the
    #: sums the cycle began with, when neither plugin is configured).
    source: str
    queues: list[QueueFigures]
    #: queue -> podgroup phase (after this cycle) -> number of podgroups.
    phases: dict[str, dict[str, int]]
    #: job uid -> tasks short of its gang, for jobs unschedulable this cycle.
    unschedulable: dict[str, int]
    #: Tasks of admitted, valid jobs still waiting for a node at the end of the cycle.
    unplaced_tasks: int
    #: pod key -> pod creation time, for the binds and pipelinings of this cycle.
    placed_pods: dict[str, float]
    #: job uid -> (name, namespace, queue, creation), for jobs that got a task placed.
    placed_jobs: dict[str, tuple[str, str, str, float]]
    #: The session's jobs and blocked jobs (the snapshot's dicts, not copies): which
    #: jobs still exist, to drop the per-job series of the others.
    jobs: Mapping[str, Any]
    blocked: Mapping[str, Any]
    #: job uid -> (namespace, name, dominant share) as drf left it when the session
    #: closed, for every job not completed; None when drf is not configured.
    job_shares: dict[str, tuple[str, str, float]] | None = None


@dataclass(slots=True)
class CycleRecord:
    """The observer of one cycle (:class:`pumice.framework.session.CycleObserver`):
    pass it to ``Scheduler.cycle(snapshot, observer=record)``, then to
    :meth:`SchedulerMetrics.observe_cycle`. Use a new one per cycle.

    Durations are seconds. ``facts`` is None until the session closes (and stays None
    if the cycle failed before)."""

    plugins_open: list[tuple[str, float]] = field(default_factory=list)
    plugins_close: list[tuple[str, float]] = field(default_factory=list)
    actions: list[tuple[str, float]] = field(default_factory=list)
    open_seconds: float | None = None
    cycle_seconds: float | None = None
    session_uid: str = ""
    facts: SessionFacts | None = None

    def plugin_opened(self, plugin: str, seconds: float) -> None:
        self.plugins_open.append((plugin, seconds))

    def session_opened(self, seconds: float) -> None:
        self.open_seconds = seconds

    def action_done(self, action: str, seconds: float) -> None:
        self.actions.append((action, seconds))

    def plugin_closed(self, plugin: str, seconds: float) -> None:
        self.plugins_close.append((plugin, seconds))

    def session_closing(self, ssn: Session) -> None:
        self.session_uid = ssn.uid
        self.facts = read_session(ssn)

    def cycle_done(self, seconds: float) -> None:
        self.cycle_seconds = seconds

    def cycle_repeated(self, last: CycleRecord) -> None:
        """The cycle repeated the one ``last`` observed: the same session facts (a
        session run on the same state would have read the same); no plugin or action
        ran, so none is timed."""
        self.session_uid = last.session_uid
        self.facts = last.facts


def _amounts(space: ResourceSpace, v: Vector | None) -> dict[str, float]:
    if v is None:
        return {}
    out: dict[str, float] = {}
    for name, x, shared in zip(space.names, v.tolist(), space.share.tolist(), strict=True):
        if shared and math.isfinite(x):
            out[name] = x
    return out


def _plugin(ssn: Session, name: str) -> Any:
    for p in ssn.plugins:
        if getattr(p, "name", None) == name and isinstance(getattr(p, "attrs", None), dict):
            return p
    return None


def _job_shares(ssn: Session) -> dict[str, tuple[str, str, float]] | None:
    """drf's dominant share of every job not completed (Volcano sets ``job_share`` for
    the jobs its session does not hold terminated), or None without drf."""
    drf = next((p for p in ssn.plugins if getattr(p, "name", None) == "drf"), None)
    job_share = getattr(drf, "job_share", None)
    if job_share is None:
        return None
    return {
        uid: (job.namespace, job.name, job_share(uid))
        for uid, job in ssn.jobs.items()
        if job.phase != COMPLETED
    }


def _queue_figures(ssn: Session) -> tuple[str, list[QueueFigures]]:
    """Queue figures from proportion's state, else capacity's, else the snapshot's
    ledger (the sums as the cycle began) and the queues' spec.

    Overused is the session's ``overused`` question as the cycle ends (proportion:
    allocated has reached deserved in every dimension); with capacity, Volcano's rule
    at session close, a share above 1; unknown (left out) when nothing decides it."""
    space = ssn.space
    overused: dict[str, bool | None] = dict.fromkeys(ssn.queues)
    if ssn.hooks.flat("overused"):
        overused = {name: bool(ssn.overused(q)) for name, q in ssn.queues.items()}
    source, plugin = "proportion", _plugin(ssn, "proportion")
    if plugin is None:
        source, plugin = "capacity", _plugin(ssn, "capacity")
    out: list[QueueFigures] = []
    if plugin is not None:
        attrs = plugin.attrs
        for name in sorted(set(ssn.queues) | set(attrs)):
            q = ssn.queues.get(name)
            attr = attrs.get(name)
            weight = float(q.weight) if q is not None else 0.0
            if attr is None:
                out.append(QueueFigures(name, weight, {}, {}, {}, overused=overused.get(name)))
                continue
            over = overused.get(name)
            if source == "capacity" and over is None:
                over = float(attr.share) > 1.0
            out.append(
                QueueFigures(
                    name=name,
                    weight=weight,
                    allocated=_amounts(space, attr.allocated),
                    request=_amounts(space, attr.request),
                    inqueue=_amounts(space, attr.inqueue),
                    deserved=_amounts(space, attr.deserved),
                    capability=_amounts(space, attr.capability),
                    real_capability=_amounts(space, attr.real_capability),
                    share=float(attr.share),
                    overused=over,
                )
            )
        return source, out
    names, sums = ssn.snapshot.job_ledger().matrices(ssn.queues)
    row = {n: k for k, n in enumerate(names)}
    for name in sorted(ssn.queues):
        q = ssn.queues[name]
        k = row.get(name)
        out.append(
            QueueFigures(
                name=name,
                weight=float(q.weight),
                allocated=_amounts(space, sums.allocated[k]) if k is not None else {},
                request=(
                    _amounts(space, sums.allocated[k] + sums.pending[k]) if k is not None else {}
                ),
                inqueue=_amounts(space, sums.inqueue[k]) if k is not None else {},
                deserved=_amounts(space, q.deserved) if q.deserved is not None else None,
                capability=_amounts(space, q.capability) if q.has_capability else None,
                overused=overused[name],
            )
        )
    return "snapshot", out


def _unschedulable(upd: PodGroupUpdate | None, session_uid: str) -> bool:
    if upd is None or not upd.conditions:
        return False
    for c in upd.conditions:
        if c.get("type") == "Unschedulable" and c.get("transitionID") == session_uid:
            return True
    return False


def read_session(ssn: Session) -> SessionFacts:
    """What the metrics need from a session whose decisions are complete and whose
    plugins are still in place (see :meth:`CycleRecord.session_closing`).

    Costs a walk over the queues, the active jobs, and the job phases of every job (for
    the per-queue podgroup counts): paid only by an observed cycle."""
    source, queues = _queue_figures(ssn)
    d = ssn.decisions
    podgroups = d.podgroups
    phases: dict[str, dict[str, int]] = {q: {} for q in ssn.queues}
    for uid, job in ssn.jobs.items():
        upd = podgroups.get(uid)
        phase = upd.phase if upd is not None and upd.phase else job.phase
        counts = phases.get(job.queue)
        if counts is None:
            counts = phases[job.queue] = {}
        counts[phase] = counts.get(phase, 0) + 1

    unschedulable: dict[str, int] = {}
    unplaced = 0
    placed_pods: dict[str, float] = {}
    placed_jobs: dict[str, tuple[str, str, str, float]] = {}
    binds, pipelined, invalid, sid = d.binds, d.pipelined, ssn.invalid, ssn.uid
    placing = ((TaskStatus.BINDING, binds), (TaskStatus.PIPELINED, pipelined))
    for uid, job in ssn.active.items():
        by_status = job.by_status
        if uid not in invalid and not job.is_pending():
            waiting = by_status.get(TaskStatus.PENDING)
            if waiting:
                unplaced += len(waiting)
        if _unschedulable(podgroups.get(uid), sid):
            unschedulable[uid] = max(job.min_available - job.ready_num(), 0)
        for status, placed in placing:
            tasks = by_status.get(status) if placed else None
            if not tasks:
                continue
            for t in tasks.values():
                key = t.key
                if key in placed:
                    placed_pods[key] = t.creation
                    placed_jobs[uid] = (job.name, job.namespace, job.queue, job.creation)
    for uid, (job, _reason) in invalid.items():
        if uid not in unschedulable and _unschedulable(podgroups.get(uid), sid):
            unschedulable[uid] = max(job.min_available - job.ready_num(), 0)
    return SessionFacts(
        source=source,
        queues=queues,
        phases=phases,
        unschedulable=unschedulable,
        unplaced_tasks=unplaced,
        placed_pods=placed_pods,
        placed_jobs=placed_jobs,
        jobs=ssn.jobs,
        blocked=ssn.snapshot.blocked,
        job_shares=_job_shares(ssn),
    )


__all__ = ["CycleRecord", "QueueFigures", "SessionFacts", "read_session"]
