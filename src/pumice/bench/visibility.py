"""What the pending-jobs list costs (``pumice bench visibility``).

Why: ``pumice queue pending`` and dashboards ask ``pumice run``'s visibility endpoint
every few seconds, on clusters whose backlog runs to thousands of jobs. The list is
made in two steps: every cycle that runs lines its waiting jobs up (a closer,
:func:`pumice.framework.waiting.line_up`), and the endpoint turns the last line into
records once per cycle and serves pages of it. This scenario builds a full cluster and
a backlog through the scheduler cache, as ``pumice run`` keeps it, then times: the
closer (the cost added to a cycle that runs), the endpoint's first answer after a
cycle (which builds the records), the same answer again, answers not given before (all
jobs, one queue, a page of 100), and requests over HTTP on this machine.

Valid when every pending job is in the line, once, and a repeated cycle (nothing
changed) does not make the endpoint build the list again.
"""

from __future__ import annotations

import dataclasses
import gc
import time
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pumice.bench.measure import peak_rss_mib, percentile
from pumice.bench.objects import node, pod, queue

if TYPE_CHECKING:
    from pumice.scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class VisibilityScenario:
    """``nodes`` full nodes of 8 CPU; ``pending`` one-pod jobs of 1 CPU spread over
    ``queues`` queues, one in ten of high priority."""

    name: str
    description: str
    nodes: int
    pending: int
    queues: int = 4
    requests: int = 30


@dataclass(slots=True)
class VisibilityResult:
    """Milliseconds (medians of ``requests`` requests); ``build``: the first answer
    after a cycle, which builds the records; ``again``: the same request again (kept);
    the others: requests not answered before (all jobs, one queue, a page of 100);
    ``all_kib``: one answer listing every job."""

    name: str
    nodes: int
    pending: int
    queues: int
    fresh_cycle_p50_ms: float
    line_up_p50_ms: float
    build_ms: float
    again_p50_ms: float
    all_p50_ms: float
    queue_p50_ms: float
    page_p50_ms: float
    http_all_p50_ms: float
    http_page_p50_ms: float
    all_kib: float
    peak_rss_mib: float
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


def _objects(s: VisibilityScenario) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "high"}, "value": 1000},
    ]  # fmt: skip
    objs.append(queue())  # (the running pods' queue)
    for q in range(s.queues):
        objs.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": f"q{q}"}, "spec": {"weight": 1, "reclaimable": True},
        })  # fmt: skip
    for i in range(s.nodes):
        name = f"node-{i:05d}"
        objs.append(node(name, "8", "32Gi", 110))
        objs.append(pod(f"run-{i:05d}", "8", "1Gi", node_name=name))
    for i in range(s.pending):
        name = f"job-{i:06d}"
        spec: dict[str, Any] = {"minMember": 1, "queue": f"q{i % s.queues}"}
        if i % 10 == 0:
            spec["priorityClassName"] = "high"
        objs.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench", "creationTimestamp": i},
            "spec": spec, "status": {"phase": "Inqueue"},
        })  # fmt: skip
        objs.append(pod(f"{name}-0", "1", "1Gi", group=name, created=i))
    return objs


def _ms(fn: Any, n: int) -> float:
    """The median of ``fn(i)`` for i in 0..n-1 (requests of distinct offsets, which the
    endpoint has not answered yet)."""
    times = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1e3)
    return percentile(times, 50)


def _line_up_ms(scheduler: Scheduler, cache: Any, n: int) -> float:
    """The closer alone, on sessions that ran the configured actions."""
    from pumice.framework.session import close_session
    from pumice.framework.status import explain_pending, update_podgroups
    from pumice.framework.waiting import line_up

    times = []
    for _ in range(n):
        ssn = scheduler.open(cache.snapshot())
        for name in scheduler.config.actions:
            scheduler.actions.create(name, scheduler.config.action_arguments(name)).execute(ssn)
        update_podgroups(ssn)
        explain_pending(ssn)
        t = time.perf_counter()
        line_up(ssn)
        times.append((time.perf_counter() - t) * 1e3)
        close_session(ssn)
    return percentile(times, 50)


def run_visibility(
    s: VisibilityScenario, scheduler: Scheduler, check: bool = True
) -> VisibilityResult:
    from pumice.cache.cache import SchedulerCache
    from pumice.cluster.memory import MemoryCluster
    from pumice.run.http import VISIBILITY, HealthServer
    from pumice.visibility.endpoint import PendingEndpoint

    problems: list[str] = []
    store = MemoryCluster()
    store.create_all(_objects(s))
    cache = SchedulerCache(store)
    repeating = dataclasses.replace(scheduler, repeat=True)
    fresh = dataclasses.replace(scheduler, repeat=False, living=False)
    decisions = None
    for _ in range(4):  # until a cycle decides nothing the cluster does not say
        decisions = repeating.cycle(cache.snapshot())
        cache.apply(decisions)
    assert decisions is not None
    gc.collect()
    cycles = max(3, s.requests // 10)
    fresh_ms = []
    for _ in range(cycles):
        snap = cache.snapshot()
        t = time.perf_counter()
        cache.apply(fresh.cycle(snap))
        fresh_ms.append((time.perf_counter() - t) * 1e3)
    line_ms = _line_up_ms(fresh, cache, cycles)

    last = [decisions]
    endpoint = PendingEndpoint(lambda: last[0])
    base = "/apis/visibility/v1/"
    t = time.perf_counter()
    status, _ctype, body = endpoint.answer(base + "pendingjobs")
    build_ms = (time.perf_counter() - t) * 1e3
    again_ms = _ms(lambda _i: endpoint.answer(base + "pendingjobs"), s.requests)
    everyone = base + "pendingjobs"
    one = base + "queues/q1/pendingjobs"
    all_ms = _ms(lambda i: endpoint.answer(everyone, f"offset={i + 1}"), s.requests)
    queue_ms = _ms(lambda i: endpoint.answer(one, f"offset={i + 1}"), s.requests)
    page_ms = _ms(lambda i: endpoint.answer(one, f"offset={i + 1}&limit=100"), s.requests)
    server = HealthServer(("127.0.0.1", 0), paths=(VISIBILITY,), visibility=endpoint.answer)
    server.start()
    try:
        url = server.url + base

        def get(path: str) -> None:
            with urllib.request.urlopen(url + path, timeout=30) as resp:
                resp.read()

        http_all = _ms(lambda i: get(f"pendingjobs?offset={i + 100}"), s.requests)
        http_page = _ms(lambda i: get(f"queues/q1/pendingjobs?offset={i + 100}&limit=100"),
                        s.requests)  # fmt: skip
    finally:
        server.close()
    if check:
        if status != 200:
            problems.append(f"the endpoint answered {status}")
        uids = [w.uid for w in decisions.waiting]
        if len(set(uids)) != len(uids) or set(uids) != set(decisions.pending):
            problems.append("the line does not hold every pending job exactly once")
        if len(uids) < s.pending:
            problems.append(f"only {len(uids)} of {s.pending} jobs in the line")
        last[0] = repeating.cycle(cache.snapshot())
        if last[0].repeat_of is None:
            problems.append("the cycle on an unchanged cluster was not repeated")
        builds = endpoint.builds
        endpoint.answer(base + "pendingjobs")
        if endpoint.builds != builds:
            problems.append("a repeated cycle made the endpoint build the list again")
    return VisibilityResult(
        name=s.name,
        nodes=s.nodes,
        pending=s.pending,
        queues=s.queues,
        fresh_cycle_p50_ms=percentile(fresh_ms, 50),
        line_up_p50_ms=line_ms,
        build_ms=build_ms,
        again_p50_ms=again_ms,
        all_p50_ms=all_ms,
        queue_p50_ms=queue_ms,
        page_p50_ms=page_ms,
        http_all_p50_ms=http_all,
        http_page_p50_ms=http_page,
        all_kib=len(body) / 1024,
        peak_rss_mib=peak_rss_mib(),
        problems=problems,
    )


VISIBILITY_SCENARIOS: dict[str, VisibilityScenario] = {
    s.name: s
    for s in (
        VisibilityScenario(
            "visibility",
            "the pending-jobs endpoint on a 10,000-job backlog in 4 queues, 1,000 full "
            "nodes: the cycle's added cost, the endpoint's answers in-process and over HTTP",
            nodes=1000,
            pending=10_000,
        ),
    )
}

VISIBILITY_COLUMNS = [
    ("scenario", "{:<10}"),
    ("pending", "{:>7}"),
    ("fresh cycle", "{:>11}"),
    ("line-up", "{:>8}"),
    ("build", "{:>8}"),
    ("again", "{:>7}"),
    ("all", "{:>8}"),
    ("one queue", "{:>9}"),
    ("page 100", "{:>8}"),
    ("HTTP all", "{:>8}"),
    ("HTTP page", "{:>9}"),
    ("all KiB", "{:>7}"),
    ("mem MiB", "{:>7}"),
]


def visibility_rows(results: list[VisibilityResult]) -> list[list[str]]:
    """One row per result for :data:`VISIBILITY_COLUMNS` (milliseconds at the median)."""
    return [
        [
            r.name,
            str(r.pending),
            f"{r.fresh_cycle_p50_ms:.0f} ms",
            f"{r.line_up_p50_ms:.1f} ms",
            f"{r.build_ms:.1f} ms",
            f"{r.again_p50_ms:.2f} ms",
            f"{r.all_p50_ms:.1f} ms",
            f"{r.queue_p50_ms:.2f} ms",
            f"{r.page_p50_ms:.2f} ms",
            f"{r.http_all_p50_ms:.1f} ms",
            f"{r.http_page_p50_ms:.2f} ms",
            f"{r.all_kib:.0f}",
            f"{r.peak_rss_mib:.0f}",
        ]
        for r in results
    ]
