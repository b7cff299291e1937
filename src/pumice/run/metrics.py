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

:class:`~pumice.run.cycle_record.CycleRecord` is the cycle's observer
(:class:`pumice.framework.session.CycleObserver`): it keeps the durations the cycle
reports and, when the session closes, reads what only the session knows (proportion's
or capacity's deserved shares, which queues are overused). A cycle run without it times
nothing and reads nothing.

Where the parts live: :mod:`pumice.run.cycle_record` (what a cycle is observed to
do), :mod:`pumice.run.last_cycle` (the gauges that picture the last cycle, rebuilt on
each scrape), :mod:`pumice.run.exposition` (the text format, with Volcano's counters
whose names do not end in ``_total``: serve ``/metrics`` with its ``render``, not with
``generate_latest``). This module holds the metric definitions and the calls that feed
them.

Not exported: Volcano's ``volcano_namespace_share``, ``volcano_namespace_weight`` and
``volcano_namespace_weighted_share`` (Volcano declares them, but no part of its
scheduler has set them since namespace fair-share left its drf plugin, so its
``/metrics`` shows none either), and the Predicate/Scoring/PreBind stage durations
(pumice places tasks in bulk, not node by node).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from pumice.framework.decisions import Decisions
from pumice.run.cycle_record import CycleRecord, SessionFacts
from pumice.run.exposition import render
from pumice.run.last_cycle import JobSeries, LastCycle

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


def exponential_buckets_range(low: float, high: float, count: int) -> tuple[float, ...]:
    """``count`` bucket bounds from ``low`` to ``high``, each a constant factor above the
    last: the client_golang ``ExponentialBucketsRange`` Volcano declares its histograms
    with (the same floats, so the ``le`` labels read the same)."""
    if count < 2 or low <= 0 or high <= low:
        raise ValueError("need count >= 2 and 0 < low < high")
    factor = math.pow(high / low, 1.0 / (count - 1))
    return tuple(low * math.pow(factor, i) for i in range(count))


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
        self._last = LastCycle()
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

    def _job_series(self, facts: SessionFacts, now: float) -> dict[str, JobSeries]:
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
            jobs[uid] = JobSeries(name, queue, namespace, ms, creation, now)
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


__all__ = ["SchedulerMetrics", "exponential_buckets_range"]
