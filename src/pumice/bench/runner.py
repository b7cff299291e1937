"""Time the scheduling core on a scenario and check that its decisions are valid.

For each repeat the scenario's objects go through :func:`build_snapshot` (timed apart)
and one :meth:`Scheduler.cycle` (the figure that counts: pods decided per second and
cycle latency). Peak memory is the process's peak resident set size, measured in a
fresh child process per scenario (``fork``) so that one scenario's peak does not hide
the next one's.

Each cycle's decisions are then checked (:mod:`pumice.bench.validity`), independently of
the scheduler's own accounting.

Simulator scenarios (:class:`~pumice.bench.scenarios.SimScenario`) are timed by
:mod:`pumice.bench.sim_peak`; :func:`run_one` and :func:`run_isolated` take either kind.
"""

from __future__ import annotations

import gc
import multiprocessing
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Union

from pumice.bench.measure import peak_rss_mib, percentile
from pumice.bench.scenarios import AnyScenario, Scenario, SimScenario
from pumice.bench.validity import check_decisions
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.framework.decisions import Decisions
from pumice.scheduler import Scheduler

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pumice.bench.quiet import QuietResult
    from pumice.bench.sim_peak import PeakResult
    from pumice.bench.visibility import VisibilityResult

#: What one scenario of any kind gives.
AnyResult = Union["Result", "PeakResult", "QuietResult", "VisibilityResult"]


@dataclass(slots=True)
class Result:
    """The figures of one scenario."""

    name: str
    nodes: int
    pending: int
    repeats: int
    build_s: float  # median time to build the snapshot from the objects
    cycle_p50_s: float
    cycle_p99_s: float
    cycle_cpu_s: float  # median CPU time of a cycle (less sensitive to a busy machine)
    pods_per_s: float  # pending pods decided per second of cycle (p50)
    bound: int
    pipelined: int
    waiting: int
    peak_rss_mib: float
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


def run_scenario(
    scenario: Scenario, scheduler: Scheduler, repeats: int = 3, check: bool = True
) -> Result:
    """Time ``repeats`` cycles of ``scenario`` (in this process)."""
    objects = scenario.build()
    builds: list[float] = []
    cycles: list[float] = []
    cpu: list[float] = []
    decisions: Decisions | None = None
    for _ in range(max(1, repeats)):
        gc.collect()
        t0 = time.perf_counter()
        snapshot = build_snapshot(SourcedObject(o) for o in objects)
        t1, c1 = time.perf_counter(), time.process_time()
        decisions = scheduler.cycle(snapshot)
        t2, c2 = time.perf_counter(), time.process_time()
        builds.append(t1 - t0)
        cycles.append(t2 - t1)
        cpu.append(c2 - c1)
        del snapshot
    assert decisions is not None
    p50 = percentile(cycles, 50)
    problems = check_decisions(objects, decisions) if check else []
    bound, pipelined = len(decisions.binds), len(decisions.pipelined)
    return Result(
        name=scenario.name,
        nodes=scenario.nodes,
        pending=scenario.pending,
        repeats=len(cycles),
        build_s=percentile(builds, 50),
        cycle_p50_s=p50,
        cycle_p99_s=percentile(cycles, 99),
        cycle_cpu_s=percentile(cpu, 50),
        pods_per_s=scenario.pending / p50 if p50 > 0 else float("inf"),
        bound=bound,
        pipelined=pipelined,
        waiting=scenario.pending - bound - pipelined,
        peak_rss_mib=peak_rss_mib(),
        problems=problems,
    )


def run_one(
    scenario: AnyScenario, scheduler: Scheduler, repeats: int = 3, check: bool = True
) -> AnyResult:
    """Run a scenario of either kind in this process: a snapshot scenario for
    ``repeats`` cycles (:func:`run_scenario`), a simulator scenario once (its window
    holds many cycles; :func:`pumice.bench.sim_peak.run_peak`)."""
    if isinstance(scenario, SimScenario):
        from pumice.bench.sim_peak import run_peak

        return run_peak(scenario, scheduler, check)
    from pumice.bench.quiet import QuietScenario, run_quiet

    if isinstance(scenario, QuietScenario):
        return run_quiet(scenario, scheduler, check)
    from pumice.bench.visibility import VisibilityScenario, run_visibility

    if isinstance(scenario, VisibilityScenario):
        return run_visibility(scenario, scheduler, check)
    return run_scenario(scenario, scheduler, repeats, check)


def _child(
    conn: Connection, scenario: AnyScenario, scheduler: Scheduler, repeats: int, check: bool
) -> None:
    try:
        result = run_one(scenario, scheduler, repeats, check)
        conn.send(("ok", type(result).__name__, asdict(result)))
    except BaseException as exc:  # report any failure to the parent
        conn.send(("error", "", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_isolated(
    scenario: AnyScenario, scheduler: Scheduler, repeats: int = 3, check: bool = True
) -> AnyResult:
    """:func:`run_one` in a forked child, so its peak memory is its own."""
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        return run_one(scenario, scheduler, repeats, check)
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, scenario, scheduler, repeats, check))
    proc.start()
    child.close()
    try:
        status, kind, payload = parent.recv()
    except EOFError:  # the child died without a word (killed, out of memory)
        proc.join()
        raise RuntimeError(
            f"scenario {scenario.name} failed: its process ended with code {proc.exitcode}"
        ) from None
    proc.join()
    if status != "ok":
        raise RuntimeError(f"scenario {scenario.name} failed: {payload}")
    if kind == "PeakResult":
        from pumice.bench.sim_peak import PeakResult

        return PeakResult(**payload)
    if kind == "QuietResult":
        from pumice.bench.quiet import QuietResult

        return QuietResult(**payload)
    if kind == "VisibilityResult":
        from pumice.bench.visibility import VisibilityResult

        return VisibilityResult(**payload)
    return Result(**payload)
