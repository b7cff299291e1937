"""The picture of the last cycle in ``/metrics``: a collector rebuilt on each scrape.

Metrics that are a picture of the last cycle (queue figures, unschedulable counts,
podgroup counts, per-job scheduling durations and shares, retry counts) are rebuilt
from it on every scrape, so a queue or job that is gone disappears from ``/metrics``
instead of keeping its last value.

Contract: :class:`LastCycle` is registered in a registry as a collector; the runner's
thread replaces its state with :meth:`LastCycle.update`, scrapes (other threads) read
it under its lock. It decides nothing about what a cycle did:
:class:`~pumice.run.metrics.SchedulerMetrics` works that out and hands it over.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric

from pumice.api.job import COMPLETED, INQUEUE, PENDING, RUNNING, UNKNOWN
from pumice.api.quantity import CPU, MEMORY
from pumice.run.cycle_record import SessionFacts
from pumice.run.exposition import exact_counter

#: Podgroup phases counted per queue, and the metric each goes to.
PHASE_METRICS = (
    (INQUEUE, "volcano_queue_pod_group_inqueue_count", "Inqueue"),
    (PENDING, "volcano_queue_pod_group_pending_count", "Pending"),
    (RUNNING, "volcano_queue_pod_group_running_count", "Running"),
    (UNKNOWN, "volcano_queue_pod_group_unknown_count", "Unknown"),
    (COMPLETED, "volcano_queue_pod_group_completed_count", "Completed"),
)


@dataclass(slots=True)
class JobSeries:
    """The ``volcano_e2e_job_scheduling_*`` gauges of one job: milliseconds from its
    creation to the last cycle that placed a task of it, and the two times."""

    name: str
    queue: str
    namespace: str
    duration_ms: float
    start: float
    last: float


class LastCycle:
    """A collector of the gauges that describe the last cycle: queue figures, podgroup
    counts, unschedulable jobs, per-job scheduling durations. The runner's thread
    replaces the state; scrapes (other threads) read it under the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: SessionFacts | None = None
        self._victims = 0.0
        self._preemption_attempts = 0.0
        self.jobs: dict[str, JobSeries] = {}
        #: job uid -> cycles that left it unschedulable, for the jobs still there.
        self.retries: dict[str, float] = {}

    def update(
        self,
        facts: SessionFacts | None,
        victims: int | None,
        attempts: int,
        jobs: Mapping[str, JobSeries] | None,
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
        jobs: Mapping[str, JobSeries],
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
            for phase, name, word in PHASE_METRICS
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


__all__ = ["PHASE_METRICS", "JobSeries", "LastCycle"]
