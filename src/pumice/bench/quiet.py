"""Time the cycles in which nothing changed (``pumice bench quiet``).

Why: on a real cluster a cycle runs every period whether or not anything happened, and
a large backlog that waits for resources is the usual state of a busy batch cluster.
Such a cycle can only decide what the last one decided. This scenario builds that
state through the scheduler cache, as ``pumice run`` keeps it (an in-memory store
stands for the API server): every node full, a backlog of pending pods, cycles run
until one decides nothing new. Then it times, cycle by cycle: taking the snapshot, the
cycle (repeated, see :meth:`pumice.scheduler.Scheduler.cycle`), applying its decisions;
and the same cycle run afresh (``Scheduler.repeat`` off), for comparison.

Valid when the repeated cycle's decisions equal the fresh one's and it binds nothing.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pumice.bench.measure import peak_rss_mib, percentile
from pumice.bench.objects import node, pod, queue

if TYPE_CHECKING:
    from pumice.scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class QuietScenario:
    """``nodes`` nodes of 8 CPU, each full with one running pod, and ``pending`` pending
    single pods of 1 CPU: nothing can be placed, nothing changes. With ``groups``, the
    backlog is instead ``pending`` Volcano Jobs' PodGroups waiting for admission, without
    pods (their controller creates them on admission), each asking more than the
    cluster: enqueue refuses every one in every cycle."""

    name: str
    description: str
    nodes: int
    pending: int
    cycles: int = 20
    groups: bool = False


@dataclass(slots=True)
class QuietResult:
    """Milliseconds at the median (p50) and the 99th percentile of ``cycles`` cycles."""

    name: str
    nodes: int
    pending: int
    cycles: int
    build_s: float
    snapshot_p50_ms: float
    repeated_p50_ms: float
    repeated_p99_ms: float
    apply_p50_ms: float
    fresh_p50_ms: float
    fresh_p99_ms: float
    peak_rss_mib: float
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


def _objects(s: QuietScenario) -> list[dict]:
    objs = [queue()]
    for i in range(s.nodes):
        name = f"node-{i:05d}"
        objs.append(node(name, "8", "32Gi", 110))
        objs.append(pod(f"run-{i:05d}", "8", "1Gi", node_name=name))
    if s.groups:
        objs += [_waiting_group(f"job-{i:06d}", i) for i in range(s.pending)]
    else:
        objs += [pod(f"pend-{i:06d}", "1", "1Gi", created=i) for i in range(s.pending)]
    return objs


def _waiting_group(name: str, created: int) -> dict:
    """A Volcano Job's PodGroup before admission: Pending, four pods' minimum, no pods."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created)),
        },
        "spec": {"minMember": 4, "queue": "default", "minResources": {"cpu": "100000"}},
        "status": {"phase": "Pending"},
    }


def run_quiet(s: QuietScenario, scheduler: Scheduler, check: bool = True) -> QuietResult:
    from pumice.cache.cache import SchedulerCache
    from pumice.cluster.memory import MemoryCluster

    problems: list[str] = []
    start = time.perf_counter()
    store = MemoryCluster()
    store.create_all(_objects(s))
    cache = SchedulerCache(store)
    repeating = dataclasses.replace(scheduler, repeat=True)
    fresh = dataclasses.replace(scheduler, repeat=False)
    last = None
    for _ in range(6):  # until a cycle decides nothing the cluster does not say
        decisions = repeating.cycle(cache.snapshot())
        if decisions.binds or decisions.evictions:
            problems.append("a cycle placed or evicted a pod on a full cluster")
        cache.apply(decisions)
        last = decisions.to_json(sessions=False)
    build_s = time.perf_counter() - start
    gc.collect()
    snaps, repeats, applies, fresh_ms = [], [], [], []
    for _ in range(s.cycles):
        t0 = time.perf_counter()
        snap = cache.snapshot()
        t1 = time.perf_counter()
        decisions = repeating.cycle(snap)
        t2 = time.perf_counter()
        cache.apply(decisions)
        t3 = time.perf_counter()
        snaps.append((t1 - t0) * 1e3)
        repeats.append((t2 - t1) * 1e3)
        applies.append((t3 - t2) * 1e3)
    for _ in range(s.cycles):
        snap = cache.snapshot()
        t0 = time.perf_counter()
        again = fresh.cycle(snap)
        fresh_ms.append((time.perf_counter() - t0) * 1e3)
        cache.apply(again)
    if check:
        got = decisions.to_json(sessions=False)
        if got != again.to_json(sessions=False) or got != last:
            problems.append("the repeated cycle decided otherwise than a fresh one")
        if len(decisions.pending) < s.pending:
            problems.append(f"only {len(decisions.pending)} of {s.pending} pods explained")
    return QuietResult(
        name=s.name,
        nodes=s.nodes,
        pending=s.pending,
        cycles=s.cycles,
        build_s=build_s,
        snapshot_p50_ms=percentile(snaps, 50),
        repeated_p50_ms=percentile(repeats, 50),
        repeated_p99_ms=percentile(repeats, 99),
        apply_p50_ms=percentile(applies, 50),
        fresh_p50_ms=percentile(fresh_ms, 50),
        fresh_p99_ms=percentile(fresh_ms, 99),
        peak_rss_mib=peak_rss_mib(),
        problems=problems,
    )


QUIET_SCENARIOS: dict[str, QuietScenario] = {
    s.name: s
    for s in (
        QuietScenario(
            "quiet",
            "a cycle in which nothing changed, through the scheduler cache: 5,000 full "
            "nodes, 10,000 pending pods waiting for resources",
            nodes=5000,
            pending=10_000,
        ),
        QuietScenario(
            "quiet-admission",
            "the same with the backlog waiting for admission: 1,000 full nodes, 10,000 "
            "Volcano Jobs' PodGroups without pods that enqueue refuses",
            nodes=1000,
            pending=10_000,
            groups=True,
        ),
    )
}

QUIET_COLUMNS = [
    ("scenario", "{:<10}"),
    ("nodes", "{:>6}"),
    ("pending", "{:>7}"),
    ("snapshot p50", "{:>12}"),
    ("repeated p50", "{:>12}"),
    ("repeated p99", "{:>12}"),
    ("apply p50", "{:>9}"),
    ("fresh p50", "{:>9}"),
    ("fresh p99", "{:>9}"),
    ("mem MiB", "{:>7}"),
]


def quiet_rows(results: list[QuietResult]) -> list[list[str]]:
    """One row per result for :data:`QUIET_COLUMNS` (milliseconds)."""
    return [
        [
            r.name,
            str(r.nodes),
            str(r.pending),
            f"{r.snapshot_p50_ms:.2f} ms",
            f"{r.repeated_p50_ms:.3f} ms",
            f"{r.repeated_p99_ms:.3f} ms",
            f"{r.apply_p50_ms:.2f} ms",
            f"{r.fresh_p50_ms:.1f} ms",
            f"{r.fresh_p99_ms:.1f} ms",
            f"{r.peak_rss_mib:.0f}",
        ]
        for r in results
    ]
