"""Prometheus metrics of ``pumice run``: Volcano's scheduler metrics, and pumice's own.

Names, label names and histogram buckets are Volcano's (its scheduler's
``pkg/scheduler/metrics`` and the queue podgroup counts of its controller manager), so
that dashboards and alerts written for Volcano read pumice unchanged. Where pumice
counts a thing differently, the metric's help text says how.

The metrics live in a registry of their own (:attr:`SchedulerMetrics.registry`), not
in ``prometheus_client``'s global one: tests can make as many as they like, and
``/metrics`` shows only what pumice reports (plus the process collectors, on request).

How the runner uses it, once per cycle::

    record = metrics.observer()
    decisions = scheduler.cycle(snapshot, record)
    metrics.observe_cycle(decisions, record, snapshot_seconds=..., loop_seconds=...)

and, from the bind workers, ``metrics.bound(pod, node, seconds=...)`` or
``metrics.bind_failed(pod, node, reason, seconds=...)``.

``CycleRecord`` is the cycle's observer (:class:`pumice.framework.session.CycleObserver`):
it keeps the durations the cycle reports and, when the session closes, reads what only
the session knows (proportion's or capacity's deserved shares, which queues are
overused). A cycle run without it times nothing and reads nothing.

Metrics that are a picture of the last cycle (queue figures, unschedulable counts,
podgroup counts) are rebuilt from it on every scrape, so a queue or job that is gone
disappears from ``/metrics`` instead of keeping its last value.

Volcano's counters whose names do not end in ``_total`` (``volcano_job_retry_counts``,
``volcano_total_preemption_attempts``) are exported as counters under their exact
names: ``prometheus_client`` would append ``_total``, so :func:`render` writes them
itself (serve ``/metrics`` with it, not with ``generate_latest``).

Not exported: Volcano's ``volcano_namespace_share``, ``volcano_namespace_weight`` and
``volcano_namespace_weighted_share`` (Volcano declares them, but no part of its
scheduler has set them since namespace fair-share left its drf plugin, so its
``/metrics`` shows none either), and the Predicate/Scoring/PreBind stage durations
(pumice places tasks in bulk, not node by node).
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from pumice.api.job import COMPLETED, INQUEUE, PENDING, RUNNING, UNKNOWN
from pumice.api.quantity import CPU, MEMORY
from pumice.api.resources import ResourceSpace, Vector
from pumice.api.task import TaskStatus
from pumice.framework.decisions import Decisions, PodGroupUpdate
from pumice.framework.session import Session

ON_SESSION_OPEN = "OnSessionOpen"
ON_SESSION_CLOSE = "OnSessionClose"

#: Task stages of ``volcano_task_scheduling_latency_milliseconds``.
STAGE_WATCHED = "Watched"
STAGE_ASSUMED = "Assumed"
STAGE_BOUND = "Bound"
#: The one scheduling stage of ``volcano_scheduling_stage_duration_milliseconds`` pumice
#: times (the API call that binds a pod).
STAGE_BIND = "Bind"

#: ``volcano_schedule_attempts_total`` results (kube-scheduler's words).
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"

#: Podgroup phases counted per queue, and the metric each goes to.
_PHASE_METRICS = (
    (INQUEUE, "volcano_queue_pod_group_inqueue_count", "Inqueue"),
    (PENDING, "volcano_queue_pod_group_pending_count", "Pending"),
    (RUNNING, "volcano_queue_pod_group_running_count", "Running"),
    (UNKNOWN, "volcano_queue_pod_group_unknown_count", "Unknown"),
    (COMPLETED, "volcano_queue_pod_group_completed_count", "Completed"),
)


def exponential_buckets_range(low: float, high: float, count: int) -> tuple[float, ...]:
    """``count`` bucket bounds from ``low`` to ``high``, each a constant factor above the
    last: the client_golang ``ExponentialBucketsRange`` Volcano declares its histograms
    with (the same floats, so the ``le`` labels read the same)."""
    if count < 2 or low <= 0 or high <= low:
        raise ValueError("need count >= 2 and 0 < low < high")
    factor = math.pow(high / low, 1.0 / (count - 1))
    return tuple(low * math.pow(factor, i) for i in range(count))


# -- what a cycle tells ---------------------------------------------------------------


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


# -- the picture of the last cycle, rebuilt on each scrape ----------------------------


@dataclass(slots=True)
class _JobSeries:
    name: str
    queue: str
    namespace: str
    duration_ms: float
    start: float
    last: float


class _LastCycle:
    """A collector of the gauges that describe the last cycle: queue figures, podgroup
    counts, unschedulable jobs, per-job scheduling durations. The runner's thread
    replaces the state; scrapes (other threads) read it under the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: SessionFacts | None = None
        self._victims = 0.0
        self._preemption_attempts = 0.0
        self.jobs: dict[str, _JobSeries] = {}
        #: job uid -> cycles that left it unschedulable, for the jobs still there.
        self.retries: dict[str, float] = {}

    def update(
        self,
        facts: SessionFacts | None,
        victims: int | None,
        attempts: int,
        jobs: Mapping[str, _JobSeries] | None,
        retries: Mapping[str, float] | None = None,
    ) -> None:
        with self._lock:
            if facts is not None:
                self._facts = facts
            if victims is not None:
                self._victims = float(victims)
            self._preemption_attempts += attempts
            if jobs is not None:
                self.jobs = dict(jobs)
            if retries is not None:
                self.retries = dict(retries)

    def describe(self) -> Iterator[Metric]:
        return iter(self._families(None, 0.0, 0.0, {}, {}))

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            return iter(
                self._families(
                    self._facts, self._victims, self._preemption_attempts, self.jobs, self.retries
                )
            )

    @staticmethod
    def _families(
        facts: SessionFacts | None,
        victims: float,
        attempts: float,
        jobs: Mapping[str, _JobSeries],
        retries: Mapping[str, float],
    ) -> list[Metric]:
        q = ["queue_name"]
        qr = ["queue_name", "resource"]
        fams: dict[str, GaugeMetricFamily] = {}

        def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            fam = fams[name] = GaugeMetricFamily(name, doc, labels=labels)
            return fam

        resource_gauges = []
        for kind, what in (
            ("allocated", "Allocated"),
            ("request", "Requested"),
            ("deserved", "Deserved"),
            ("capacity", "Capability (spec)"),
            ("real_capacity", "Real capacity (capability and guarantees applied)"),
            ("inqueue", "Inqueue (held for admitted, not yet running jobs)"),
        ):
            resource_gauges.append(
                (
                    kind,
                    gauge(f"volcano_queue_{kind}_milli_cpu", f"{what} CPU for one queue", q),
                    gauge(f"volcano_queue_{kind}_memory_bytes", f"{what} memory for one queue", q),
                    gauge(
                        f"volcano_queue_{kind}_scalar_resources",
                        f"{what} scalar resources for one queue (milli units, as Volcano)",
                        qr,
                    ),
                )
            )
        share = gauge("volcano_queue_share", "Share for one queue", q)
        weight = gauge("volcano_queue_weight", "Weight for one queue", q)
        overused = gauge("volcano_queue_overused", "If one queue is overused", q)
        phase_gauges = [
            (phase, gauge(name, f"The number of {word} PodGroup in this queue", q))
            for phase, name, word in _PHASE_METRICS
        ]
        unsched_tasks = gauge(
            "volcano_unschedule_task_count",
            "Number of tasks could not be scheduled (tasks short of the gang, per job "
            "unschedulable in the last cycle; job_id is namespace/name)",
            ["job_id"],
        )
        unsched_jobs = gauge(
            "volcano_unschedule_job_count", "Number of jobs could not be scheduled", []
        )
        gauge(
            "volcano_pod_preemption_victims",
            "Number of selected preemption victims (evicted by preempt in the last cycle)",
            [],
        ).add_metric([], victims)
        duration = gauge(
            "volcano_e2e_job_scheduling_duration",
            "Per-job duration from job creation to last task assumed in scheduler cache, "
            "in milliseconds",
            ["job_name", "queue", "job_namespace"],
        )
        start = gauge(
            "volcano_e2e_job_scheduling_start_time",
            "E2E job scheduling start time (the job's creation, unix seconds)",
            ["job_name", "queue", "job_namespace"],
        )
        last = gauge(
            "volcano_e2e_job_scheduling_last_time",
            "E2E job scheduling last time (unix seconds)",
            ["job_name", "queue", "job_namespace"],
        )
        for s in jobs.values():
            labels = [s.name, s.queue, s.namespace]
            duration.add_metric(labels, s.duration_ms)
            start.add_metric(labels, s.start)
            last.add_metric(labels, s.last)

        # Volcano's counter names without the _total suffix (see render()).
        total_attempts = exact_counter(
            "volcano_total_preemption_attempts",
            "Total preemption attempts in the cluster till now (preemptors the preempt "
            "action tried for)",
        )
        total_attempts.add_sample(total_attempts.name, {}, attempts)
        retry_counts = exact_counter(
            "volcano_job_retry_counts",
            "Number of retry counts for one job (cycles that left it unschedulable; "
            "job_id is namespace/name)",
        )
        for uid, n in sorted(retries.items()):
            retry_counts.add_sample(retry_counts.name, {"job_id": uid}, n)
        job_share = gauge(
            "volcano_job_share",
            "Share for one job (drf's dominant share of what it holds, as the last cycle left it)",
            ["job_ns", "job_id"],
        )

        if facts is not None:
            for f in facts.queues:
                figures = {
                    "allocated": f.allocated,
                    "request": f.request,
                    "deserved": f.deserved,
                    "capacity": f.capability,
                    "real_capacity": f.real_capability,
                    "inqueue": f.inqueue,
                }
                for kind, cpu, mem, scalar in resource_gauges:
                    amounts = figures[kind]
                    if amounts is None:
                        continue
                    if kind in ("allocated", "request", "inqueue") or CPU in amounts:
                        cpu.add_metric([f.name], amounts.get(CPU, 0.0))
                    if kind in ("allocated", "request", "inqueue") or MEMORY in amounts:
                        mem.add_metric([f.name], amounts.get(MEMORY, 0.0))
                    for res, amount in sorted(amounts.items()):
                        if res not in (CPU, MEMORY):
                            scalar.add_metric([f.name, res], amount * 1000.0)
                if f.share is not None:
                    share.add_metric([f.name], f.share)
                weight.add_metric([f.name], f.weight)
                if f.overused is not None:
                    overused.add_metric([f.name], 1.0 if f.overused else 0.0)
            for queue, counts in sorted(facts.phases.items()):
                for phase, fam in phase_gauges:
                    fam.add_metric([queue], float(counts.get(phase, 0)))
            for uid, n in sorted(facts.unschedulable.items()):
                unsched_tasks.add_metric([uid], float(n))
            unsched_jobs.add_metric([], float(len(facts.unschedulable)))
            for namespace, name, value in sorted((facts.job_shares or {}).values()):
                job_share.add_metric([namespace, name], value)
        return [*fams.values(), total_attempts, retry_counts]


def exact_counter(name: str, documentation: str) -> Metric:
    """A counter family exported under ``name`` exactly, with samples named ``name``
    (add them with ``family.add_sample(family.name, labels, value)``), for Volcano's
    counters that have no ``_total`` suffix. :func:`render` writes it as such."""
    return Metric(name, documentation, "counter")


class _Families:
    """Metric families already collected, in the shape ``generate_latest`` reads."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def _is_exact_counter(family: Metric) -> bool:
    return family.type == "counter" and all(s.name == family.name for s in family.samples)


def render(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus' text format, as ``generate_latest`` writes it, except
    that a counter family whose samples carry its own name (:func:`exact_counter`)
    keeps that name on its ``# HELP`` and ``# TYPE`` lines: ``generate_latest`` would
    name it ``<name>_total``, which its samples do not match."""
    out: list[bytes] = []
    plain: list[Metric] = []
    for family in registry.collect():
        if not _is_exact_counter(family):
            plain.append(family)
            continue
        if plain:
            out.append(generate_latest(_Families(plain)))
            plain = []
        untyped = Metric(family.name, family.documentation, "unknown")
        untyped.samples = family.samples
        help_line, _type_line, rest = generate_latest(_Families([untyped])).split(b"\n", 2)
        out.append(b"%s\n# TYPE %s counter\n%s" % (help_line, family.name.encode(), rest))
    if plain:
        out.append(generate_latest(_Families(plain)))
    return b"".join(out)


# -- the metrics ----------------------------------------------------------------------


class SchedulerMetrics:
    """Every metric ``pumice run`` exports, and the calls that feed them.

    All methods are cheap and may be called from any thread. ``clock`` gives "now" in
    unix seconds (the epoch the pods' and podgroups' creation timestamps are in); tests
    inject one. ``process_metrics`` adds the ``process_*``, ``python_gc_*`` and
    ``python_info`` collectors to the registry, as Volcano exports Go's.

    ``job_series_limit``: how many jobs keep their ``volcano_e2e_job_scheduling_*``
    gauges (the most recently placed; None: every job until it is deleted, as Volcano
    does). Each job is three series; ten thousand jobs make ``/metrics`` megabytes
    long, and rendering it holds the interpreter for a second, in the middle of
    cycles. The latency histogram counts every job either way."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        process_metrics: bool = True,
        job_series_limit: int | None = 1000,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._clock = clock
        self._job_series_limit = job_series_limit
        r = self.registry
        self.e2e = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "Duration of a single scheduling session execution in milliseconds: session "
            "open (with taking the snapshot), actions, session close",
            buckets=exponential_buckets_range(1, 5000, 20),
            registry=r,
        )
        self.open_session = Histogram(
            "volcano_open_session_duration_milliseconds",
            "Duration of opening a scheduling session in milliseconds, including taking "
            "the snapshot and the plugins' OnSessionOpen",
            buckets=exponential_buckets_range(1, 5000, 20),
            registry=r,
        )
        self.job_latency = Histogram(
            "volcano_e2e_job_scheduling_latency_milliseconds",
            "End-to-end job scheduling latency in milliseconds (per job, from creation "
            "to the cycle that placed a task of it; once per job and cycle)",
            buckets=exponential_buckets_range(100, 120000, 30),
            registry=r,
        )
        self.plugin_latency = Histogram(
            "volcano_plugin_scheduling_latency_milliseconds",
            "Plugin scheduling latency in milliseconds",
            ["plugin", "OnSession"],
            buckets=exponential_buckets_range(0.1, 100, 15),
            registry=r,
        )
        self.action_latency = Histogram(
            "volcano_action_scheduling_latency_milliseconds",
            "Action scheduling latency in milliseconds",
            ["action"],
            buckets=exponential_buckets_range(1, 2000, 20),
            registry=r,
        )
        self.task_latency = Histogram(
            "volcano_task_scheduling_latency_milliseconds",
            "Task scheduling latency from creation to various stages in milliseconds",
            ["stage"],
            buckets=exponential_buckets_range(50, 60000, 30),
            registry=r,
        )
        self.stage_duration = Histogram(
            "volcano_scheduling_stage_duration_milliseconds",
            "Duration of per-task scheduling stages in milliseconds (pumice: Bind, the API call)",
            ["stage"],
            buckets=exponential_buckets_range(0.1, 500, 20),
            registry=r,
        )
        self.attempts = Counter(
            "volcano_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a "
            "pod could not be scheduled, while 'error' means an internal scheduler "
            "problem (pumice: a bind the API refused).",
            ["result"],
            registry=r,
        )
        self.eviction_transactions = Counter(
            "volcano_eviction_transactions_total",
            "Total number of committed eviction transactions, by action (pumice: "
            "preemptors with at least one victim evicted)",
            ["action"],
            registry=r,
        )
        self._last = _LastCycle()
        r.register(self._last)

        # pumice's own
        self.binds_in_flight = Gauge(
            "pumice_binds_in_flight", "Binds sent to the API server and not yet answered",
            registry=r,
        )  # fmt: skip
        self.loop_duration = Histogram(
            "pumice_loop_duration_seconds",
            "One loop turn that ran a cycle: snapshot, cycle, applying the decisions to the "
            "cache and queueing the writes",
            buckets=exponential_buckets_range(0.001, 60, 20),
            registry=r,
        )
        self.bind_failures = Counter(
            "pumice_bind_failures_total", "Binds the API server refused, by reason", ["reason"],
            registry=r,
        )  # fmt: skip
        self.api_writes = Counter(
            "pumice_api_writes_total",
            "Writes to the API server (bind, evict, podgroup status, ...), by kind and result",
            ["kind", "result"],
            registry=r,
        )
        self.relists = Counter(
            "pumice_informer_relists_total",
            "Full lists an informer made (at start, and when a watch could not resume)",
            ["kind"],
            registry=r,
        )
        self.watch_events = Counter(
            "pumice_watch_events_total", "Watch events received, by object kind and event type",
            ["kind", "type"], registry=r,
        )  # fmt: skip
        self.config_reloads = Counter(
            "pumice_config_reloads_total",
            "Scheduler configuration reloads, by result (success, or error: the previous "
            "configuration stays)",
            ["result"],
            registry=r,
        )
        self.leader = Gauge(
            "pumice_leader", "1 while this process holds the leader lease, else 0", registry=r
        )
        self.pending_jobs = Gauge(
            "pumice_pending_jobs", "Jobs left waiting by the last cycle, with a reason",
            registry=r,
        )  # fmt: skip
        self.evictions = Counter(
            "pumice_evictions_total", "Pods the cycles decided to evict, by action", ["action"],
            registry=r,
        )  # fmt: skip
        if process_metrics:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
        #: pod key -> creation, for the binds of the last two cycles (Bound latency).
        self._placed: tuple[dict[str, float], dict[str, float]] = ({}, {})

    # -- the cycle ----------------------------------------------------------------------

    def observer(self) -> CycleRecord:
        """A new observer for one cycle: ``scheduler.cycle(snapshot, metrics.observer())``."""
        return CycleRecord()

    def observe_cycle(
        self,
        decisions: Decisions,
        record: CycleRecord,
        *,
        snapshot_seconds: float = 0.0,
        loop_seconds: float | None = None,
        now: float | None = None,
    ) -> None:
        """Record one cycle: its durations (``record``, the observer passed to
        ``Scheduler.cycle``), its result (``decisions``), and the picture of the
        queues and jobs ``record`` read from the session. Call it from the loop's
        thread, once per cycle, after the cycle (before or after applying ``decisions``).

        ``snapshot_seconds``: how long taking the snapshot from the cache took; Volcano
        counts it in the session's open and in the end-to-end latency, so pumice adds
        it to both. ``loop_seconds``: the whole loop turn (snapshot, cycle, applying),
        for ``pumice_loop_duration_seconds``. ``now``: unix seconds (default: the
        clock), against which pod and job creation times give the task and job
        latencies."""
        now = self._clock() if now is None else now
        if loop_seconds is not None:
            self.loop_duration.observe(loop_seconds)
        if record.cycle_seconds is not None:
            self.e2e.observe((record.cycle_seconds + snapshot_seconds) * 1000.0)
        if record.open_seconds is not None:
            self.open_session.observe((record.open_seconds + snapshot_seconds) * 1000.0)
        for name, seconds in record.plugins_open:
            self.plugin_latency.labels(name, ON_SESSION_OPEN).observe(seconds * 1000.0)
        for name, seconds in record.plugins_close:
            self.plugin_latency.labels(name, ON_SESSION_CLOSE).observe(seconds * 1000.0)
        for name, seconds in record.actions:
            self.action_latency.labels(name).observe(seconds * 1000.0)

        victims, attempts = self._preemption(decisions)
        self.pending_jobs.set(len(decisions.pending))
        facts = record.facts
        jobs = retries = None
        if facts is not None:
            if facts.unplaced_tasks:
                self.attempts.labels(UNSCHEDULABLE).inc(facts.unplaced_tasks)
            assumed = self.task_latency.labels(STAGE_ASSUMED)
            for created in facts.placed_pods.values():
                assumed.observe(_ms_since(created, now))
            self._placed = (facts.placed_pods, self._placed[0])
            jobs = self._job_series(facts, now)
            retries = self._retry_counts(facts)
        self._last.update(facts, victims, attempts, jobs, retries)

    def _retry_counts(self, facts: SessionFacts) -> dict[str, float]:
        """``volcano_job_retry_counts`` after this cycle: one more for every job it left
        unschedulable (as Volcano's gang plugin counts at session close), the jobs gone
        dropped; at most ``job_series_limit`` jobs, the most recently retried."""
        retries = {
            uid: n
            for uid, n in self._last.retries.items()
            if uid in facts.jobs or uid in facts.blocked
        }
        for uid in sorted(facts.unschedulable):
            retries[uid] = retries.pop(uid, 0.0) + 1.0
        limit = self._job_series_limit
        if limit is not None and len(retries) > limit:
            for uid in list(itertools.islice(retries, len(retries) - limit)):
                del retries[uid]
        return retries

    def _job_series(self, facts: SessionFacts, now: float) -> dict[str, _JobSeries]:
        """The per-job gauges after this cycle: the jobs still there, in the order they
        were last placed (the least recent first), at most ``job_series_limit``."""
        jobs = {
            uid: s
            for uid, s in self._last.jobs.items()
            if uid in facts.jobs or uid in facts.blocked
        }
        for uid, (name, namespace, queue, creation) in facts.placed_jobs.items():
            ms = _ms_since(creation, now)
            self.job_latency.observe(ms)
            jobs.pop(uid, None)
            jobs[uid] = _JobSeries(name, queue, namespace, ms, creation, now)
        limit = self._job_series_limit
        if limit is not None and len(jobs) > limit:
            for uid in list(itertools.islice(jobs, len(jobs) - limit)):
                del jobs[uid]
        return jobs

    def _preemption(self, decisions: Decisions) -> tuple[int, int]:
        """From the audit: victims evicted by preempt (the gauge), preemptors preempt
        tried for (attempts), and the committed transactions and evictions by action."""
        victims = 0
        tried: set[str] = set()
        transactions: set[tuple[str, str]] = set()
        evicted = set(decisions.evictions)
        by_action: dict[str, int] = {}
        for rec in decisions.audit:
            action = str(rec.get("action", ""))
            kind = rec.get("kind")
            task = str(rec.get("task", ""))
            if action == "preempt":
                tried.add(task)
            if kind == "evict" and rec.get("victim") in evicted:
                evicted.discard(rec["victim"])
                by_action[action] = by_action.get(action, 0) + 1
                transactions.add((action, task))
                if action == "preempt":
                    victims += 1
        if evicted:
            by_action["unknown"] = by_action.get("unknown", 0) + len(evicted)
        for action, n in by_action.items():
            self.evictions.labels(action).inc(n)
        for action, _task in transactions:
            self.eviction_transactions.labels(action).inc()
        return victims, len(tried)

    # -- binds --------------------------------------------------------------------------

    def cycle_done(
        self,
        decisions: Decisions,
        record: CycleRecord,
        snapshot: object = None,
        seconds: float | None = None,
    ) -> None:
        """:meth:`observe_cycle` with the loop turn's ``seconds``, in the shape the
        runner's loop calls it (``snapshot`` is not needed: ``record`` read the
        session)."""
        del snapshot
        self.observe_cycle(decisions, record, loop_seconds=seconds)

    def follow_binds_in_flight(self, count: Callable[[], int]) -> None:
        """``pumice_binds_in_flight`` reads ``count()`` at each scrape (the bind
        workers' own count, e.g. ``KubeCluster.binds_in_flight``)."""
        self.binds_in_flight.set_function(lambda: float(count()))

    def bound(
        self, pod: str, node: str = "", *, seconds: float | None = None, now: float | None = None
    ) -> None:
        """The API server bound ``pod`` (``namespace/name``) to ``node``; ``seconds``:
        how long the call took. Counts a ``scheduled`` attempt and a ``bind`` write
        (do not count it again with :meth:`observe_api_write`), and, for a pod one of
        the last two observed cycles placed, the latency from its creation to Bound.
        Safe from any thread."""
        del node
        self.api_writes.labels("bind", "success").inc()
        self.attempts.labels(SCHEDULED).inc()
        if seconds is not None:
            self.stage_duration.labels(STAGE_BIND).observe(seconds * 1000.0)
        created = self._placed[0].get(pod)
        if created is None:
            created = self._placed[1].get(pod)
        if created is not None:
            now = self._clock() if now is None else now
            self.task_latency.labels(STAGE_BOUND).observe(_ms_since(created, now))

    def bind_failed(
        self, pod: str, node: str = "", reason: str = ERROR, *, seconds: float | None = None
    ) -> None:
        """The API server refused to bind ``pod``: ``reason`` is a short fixed word
        (``conflict``, ``not_found``, ``forbidden``, ``timeout``, ``error``): it becomes
        a label value, so never a message. Counts an ``error`` attempt, a bind failure
        and a ``bind`` write with ``reason`` as its result. Safe from any thread."""
        del pod, node
        reason = reason or ERROR
        self.api_writes.labels("bind", reason).inc()
        self.attempts.labels(ERROR).inc()
        self.bind_failures.labels(reason).inc()
        if seconds is not None:
            self.stage_duration.labels(STAGE_BIND).observe(seconds * 1000.0)

    def observe_pod_watched(self, created: float, *, now: float | None = None) -> None:
        """A pod of ours, waiting to be scheduled, was first seen (created at unix
        seconds ``created``): the ``Watched`` stage of the task latency."""
        now = self._clock() if now is None else now
        self.task_latency.labels(STAGE_WATCHED).observe(_ms_since(created, now))

    # -- the rest of the process ---------------------------------------------------------

    def observe_api_write(self, kind: str, result: str = "success", count: int = 1) -> None:
        """``count`` writes to the API server other than binds: ``kind`` such as
        ``evict``, ``podgroup_status``, ``pod_condition``, ``event``, ``lease``;
        ``result`` ``success`` or a short fixed failure word (as for
        :meth:`bind_failed`). A count below 1 is ignored."""
        if count > 0:
            self.api_writes.labels(kind, result).inc(count)

    def observe_relist(self, kind: str, count: int = 1) -> None:
        """An informer of ``kind`` (``Pod``, ``Node``, ``PodGroup``, ``Queue``, ...)
        listed everything anew (``count`` times). A count below 1 is ignored."""
        if count > 0:
            self.relists.labels(kind).inc(count)

    def observe_watch_event(self, kind: str, event_type: str) -> None:
        """A watch event (``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK``) of ``kind``."""
        self.watch_events.labels(kind, event_type).inc()

    def observe_watch_events(self, kind: str, counts: Mapping[str, int]) -> None:
        """Several watch events at once: event type -> how many (for a batch; counts
        below 1 are ignored, so deltas of a restarted informer do no harm)."""
        for event_type, n in counts.items():
            if n > 0:
                self.watch_events.labels(kind, event_type).inc(n)

    def config_reload(self, ok: bool) -> None:
        """The scheduler configuration was reloaded (``ok``) or the new one refused."""
        self.config_reloads.labels("success" if ok else ERROR).inc()

    def set_leader(self, leader: bool) -> None:
        """This process holds (True) or lost (False) the leader lease."""
        self.leader.set(1.0 if leader else 0.0)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (what ``/metrics`` serves)."""
        return render(self.registry)


def _ms_since(t: float, now: float) -> float:
    """Milliseconds from ``t`` to ``now``, never negative (clocks of different machines)."""
    return max(now - t, 0.0) * 1000.0


__all__ = [
    "CycleRecord",
    "QueueFigures",
    "SchedulerMetrics",
    "SessionFacts",
    "exact_counter",
    "exponential_buckets_range",
    "read_session",
    "render",
]
