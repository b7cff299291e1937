"""Time the scheduling cycles of a window of a simulation (``pumice bench sim-peak``).

Why: ``pumice bench``'s other scenarios time one cycle on a cluster state built from
dicts. What a large simulation spends its time on is different: thousands of cycles on
an incrementally kept cache, at the daily peak with a backlog of admitted gangs that
cannot place. This module runs the generated workload of ``pumice simulate`` (the same
cluster, workload and :class:`~pumice.sim.engine.Simulation` a user runs) up to the start
of a window, then times every :meth:`Scheduler.cycle` in the window and the window as a
whole (wall and CPU).

The contract:

- the *build* (generating the workload and simulating up to the window) is timed apart
  and not counted in the window's figures;
- the window opens with the first cycle at or after ``scenario.start`` and closes before
  the first cycle at or after ``scenario.end`` (the simulation stops there); its figures
  cover everything the simulator did in between, cycles and kubelet alike;
- the counts (cycles, jobs finished, pods bound, the digest of the placements) are a
  function of the scenario and the configuration only: the simulator is deterministic,
  so two runs give the same counts and only the timings differ;
- validity: no gang atomicity violation in the window (the simulator's own check after
  every cycle's binds, :meth:`Metrics.check_gang`), and no node over capacity at the
  window's start and end, read independently of the scheduler from the objects in the
  simulated cluster's store (:func:`pumice.bench.validity.check_decisions`).

The wrapper around the scheduler (:class:`_WindowScheduler`) adds a comparison of the
simulated time to every cycle, and to the cycles of the window two clock reads, a hash
of the decisions and an observer that adds up how long each plugin's open and close and
each action took (:class:`StepTimes`: where a cycle's time goes); nothing else in the
simulation is changed.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pumice.bench.measure import peak_rss_mib, percentile
from pumice.bench.scenarios import HOUR, SimScenario
from pumice.bench.validity import check_decisions
from pumice.framework.decisions import Decisions

if TYPE_CHECKING:
    from pumice.api.snapshot import Snapshot
    from pumice.scheduler import Scheduler
    from pumice.sim.engine import Simulation


@dataclass(slots=True)
class PeakResult:
    """The figures of one simulator scenario (see the module docstring for the window).

    Deterministic (the same on every run): ``opened_h``, ``closed_h``, ``build_cycles``,
    the backlog, ``cycles``, ``jobs_finished``, ``pods_bound``, ``evictions``, the gang
    counts and ``placements``. Timings: everything ending in ``_s`` and ``jobs_per_s``.
    """

    name: str
    nodes: int
    jobs: int
    start_h: float  # the window asked for, simulated hours
    end_h: float
    opened_h: float  # simulated time of the window's first cycle
    closed_h: float  # simulated time where it closed (first cycle after it, or the end)
    build_s: float  # wall seconds from nothing to the window: workload, cluster, simulation
    build_cycles: int  # cycles before the window
    backlog_pending: int  # at the window's start: jobs submitted and not running
    backlog_admitted: int  # ... of which admitted (podgroup past Pending), holding no node
    cycles: int
    cycle_p50_s: float
    cycle_p99_s: float
    cycle_max_s: float
    cycle_total_s: float  # wall seconds in Scheduler.cycle (the rest is the simulator)
    wall_s: float
    cpu_s: float
    jobs_finished: int
    jobs_per_s: float  # jobs finished in the window per wall second of it
    pods_bound: int
    evictions: int
    gang_checks: int
    gang_violations: int
    placements: str  # digest of every window cycle's time, binds, pipelined pods, evictions
    peak_rss_mib: float
    problems: list[str] = field(default_factory=list)
    #: Seconds spent in each step of the window's cycles, summed over them (see
    #: :class:`StepTimes`); they add up to the cycles' time as the scheduler timed it.
    steps: dict[str, float] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not self.problems


class StepTimes:
    """A cycle observer (:class:`~pumice.framework.session.CycleObserver`) that adds up,
    over many cycles, the seconds of each plugin's open (``open drf``) and close
    (``close gang``) and of each action (``allocate``). What the session's open took
    beyond its plugins (the snapshot handed over, the gangs checked for validity) is
    ``open, besides the plugins``; what the cycle took beyond its open, its
    actions and the plugins' closes (the podgroup status, the explanations, keeping the
    cycle for a repeat, and cycles that repeated the last one) is ``status and
    explanations``. The steps add up to the cycles' own time."""

    __slots__ = ("cycles", "opened", "plugins", "seconds")

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cycles = 0.0  # the cycles' own time
        self.opened = 0.0  # the sessions' opens
        self.plugins = 0.0  # the plugins' opens within them

    def _add(self, step: str, seconds: float) -> None:
        self.seconds[step] = self.seconds.get(step, 0.0) + seconds

    def plugin_opened(self, plugin: str, seconds: float) -> None:
        self._add(f"open {plugin}", seconds)
        self.plugins += seconds

    def session_opened(self, seconds: float) -> None:
        self.opened += seconds

    def action_done(self, action: str, seconds: float) -> None:
        self._add(action, seconds)

    def plugin_closed(self, plugin: str, seconds: float) -> None:
        self._add(f"close {plugin}", seconds)

    def session_closing(self, ssn: object) -> None:
        pass

    def cycle_done(self, seconds: float) -> None:
        self.cycles += seconds

    def cycle_repeated(self, last: object) -> None:
        pass  # (its time is in cycle_done: status and explanations)

    def steps(self) -> dict[str, float]:
        """Every step's seconds, the largest first."""
        got = dict(self.seconds)
        got["open, besides the plugins"] = max(self.opened - self.plugins, 0.0)
        got["status and explanations"] = max(
            self.cycles - self.opened - sum(self.seconds.values()) + self.plugins, 0.0
        )
        return dict(sorted(got.items(), key=lambda kv: -kv[1]))


class _WindowEnd(Exception):
    """Raised out of the simulation at the first cycle at or after the window's end."""


@dataclass(slots=True)
class _Mark:
    """Counters of the simulation at one instant (the window's start or end)."""

    wall: float
    cpu: float
    now: float
    cycles: int
    finished: int
    binds: int
    evictions: int
    gang_checks: int
    gang_violations: int

    @classmethod
    def take(cls, sim: Simulation) -> _Mark:
        m = sim.metrics
        return cls(
            wall=time.perf_counter(),
            cpu=time.process_time(),
            now=sim.clock.now,
            cycles=m.cycles,
            # jobs arrived minus jobs still live (the kubelet forgets a job once it ends)
            finished=len(m.jobs) - len(sim.kubelet.jobs),
            binds=m.binds,
            evictions=m.evictions,
            gang_checks=m.gang_checks,
            gang_violations=m.gang_violations,
        )


class _WindowScheduler:
    """Stands in for ``sim.scheduler``: opens the window at the first cycle at or after
    ``start`` and closes it (raising :class:`_WindowEnd`) at the first one at or after
    ``end``; in between, times each cycle and hashes its decisions."""

    __slots__ = (
        "backlog",
        "build_s",
        "check",
        "closed",
        "digest",
        "end",
        "inner",
        "latencies",
        "opened",
        "problems",
        "sim",
        "start",
        "started_at",
        "steps",
    )

    def __init__(
        self,
        inner: Scheduler,
        sim: Simulation,
        start: float,
        end: float,
        *,
        check: bool,
        started_at: float,
    ) -> None:
        self.inner = inner
        self.sim = sim
        self.start = start
        self.end = end
        self.check = check
        self.started_at = started_at  # perf_counter() when the build began
        self.opened: _Mark | None = None
        self.closed: _Mark | None = None
        self.latencies: list[float] = []
        self.steps = StepTimes()
        self.digest = hashlib.sha256()
        self.problems: list[str] = []
        self.backlog = (0, 0)  # taken when the window opens
        self.build_s = 0.0

    def open(self) -> None:
        sim = self.sim
        self.build_s = time.perf_counter() - self.started_at
        self.backlog = backlog(sim)
        if self.check:
            self.problems += [f"at the window's start: {p}" for p in capacity_problems(sim)]
        gc.collect()  # the build's garbage is not the window's cost
        self.opened = _Mark.take(sim)

    def close(self) -> None:
        self.closed = _Mark.take(self.sim)
        if self.check:
            self.problems += [f"at the window's end: {p}" for p in capacity_problems(self.sim)]

    def cycle(self, snapshot: Snapshot, line: Callable[[int], bool] | None = None) -> Decisions:
        now = self.sim.clock.now
        if self.opened is None and now >= self.start:
            self.open()
        if now >= self.end:
            self.close()
            raise _WindowEnd
        if self.opened is None:
            return self.inner.cycle(snapshot, line=line)
        t0 = time.perf_counter()
        decisions = self.inner.cycle(snapshot, self.steps, line)
        self.latencies.append(time.perf_counter() - t0)
        h = self.digest
        h.update(f"@{now!r}\n".encode())
        for pod, node in decisions.binds.items():
            h.update(f"{pod} {node}\n".encode())
        for pod, node in decisions.pipelined.items():
            h.update(f"~{pod} {node}\n".encode())
        for pod in decisions.evictions:
            h.update(f"-{pod}\n".encode())
        return decisions


def backlog(sim: Simulation) -> tuple[int, int]:
    """Jobs submitted and not running, and those of them admitted (podgroup past
    ``Pending``, pods created) but holding no node: the gangs that wait for room."""
    admitted = sum(
        1
        for j in sim.kubelet.jobs.values()
        if not j.awaiting_admission and j.active == 0 and not j.ended
    )
    return sim.metrics.pending_jobs, admitted


def capacity_problems(sim: Simulation) -> list[str]:
    """Nodes of the simulated cluster whose pods (bound, running or terminating) ask for
    more than its allocatable, read from the store's objects."""
    objects = [*sim.store.list("Node"), *sim.store.list("Pod")]
    return check_decisions(objects, Decisions())


def build(scenario: SimScenario, scheduler: Scheduler) -> Simulation:
    """The simulation ``pumice simulate --jobs J --nodes N --load L --seed S`` runs."""
    from pumice.sim.engine import SimOptions, Simulation
    from pumice.sim.inputs import cluster_from_args, workload_from_args

    args = argparse.Namespace(
        cluster=None,
        nodes=scenario.nodes,
        jobs=scenario.jobs,
        load=scenario.load,
        seed=scenario.seed,
        workload=[],
        trace_format=None,
        limit=None,
        topology=None,
    )
    nodes = cluster_from_args(args).nodes
    return Simulation(nodes, workload_from_args(args, nodes), scheduler, SimOptions())


def run_peak(scenario: SimScenario, scheduler: Scheduler, check: bool = True) -> PeakResult:
    """Run ``scenario``'s simulation to the end of its window (in this process) and
    return the window's figures. ValueError if the simulation ends before the window."""
    if not 0 <= scenario.start < scenario.end:
        raise ValueError(f"{scenario.name}: the window must have 0 <= start < end")
    t0 = time.perf_counter()
    sim = build(scenario, scheduler)
    win = _WindowScheduler(scheduler, sim, scenario.start, scenario.end, check=check, started_at=t0)
    sim.scheduler = win  # type: ignore[assignment]  # duck-typed: cycle(snapshot) only
    try:
        sim.run()
    except _WindowEnd:
        pass
    else:  # the simulation ran out of events before the window's end
        if win.opened is None:
            raise ValueError(
                f"{scenario.name}: the simulation ended at {sim.clock.now / HOUR:.2f} h, "
                f"before the window ({scenario.start / HOUR:g} h to {scenario.end / HOUR:g} h)"
            )
        win.close()
    opened, closed = win.opened, win.closed
    assert opened is not None and closed is not None
    problems = list(win.problems)
    violations = closed.gang_violations - opened.gang_violations
    if violations:
        problems.append(f"{violations} gang atomicity violation(s) in the window")
    cycles = closed.cycles - opened.cycles
    if cycles != len(win.latencies):  # the simulator counted what the wrapper timed
        problems.append(f"{cycles} cycles counted, {len(win.latencies)} timed")
    if not win.latencies:
        problems.append("no scheduling cycle in the window")
    lat = win.latencies or [0.0]
    wall = closed.wall - opened.wall
    finished = closed.finished - opened.finished
    return PeakResult(
        name=scenario.name,
        nodes=scenario.nodes,
        jobs=scenario.jobs,
        start_h=scenario.start / HOUR,
        end_h=scenario.end / HOUR,
        opened_h=opened.now / HOUR,
        closed_h=closed.now / HOUR,
        build_s=win.build_s,
        build_cycles=opened.cycles,
        backlog_pending=win.backlog[0],
        backlog_admitted=win.backlog[1],
        cycles=cycles,
        cycle_p50_s=percentile(lat, 50),
        cycle_p99_s=percentile(lat, 99),
        cycle_max_s=max(lat),
        cycle_total_s=sum(win.latencies),
        wall_s=wall,
        cpu_s=closed.cpu - opened.cpu,
        jobs_finished=finished,
        jobs_per_s=finished / wall if wall > 0 else 0.0,
        pods_bound=closed.binds - opened.binds,
        evictions=closed.evictions - opened.evictions,
        gang_checks=closed.gang_checks - opened.gang_checks,
        gang_violations=violations,
        placements=win.digest.hexdigest()[:16],
        peak_rss_mib=peak_rss_mib(),
        problems=problems,
        steps=win.steps.steps(),
    )


__all__ = ["PeakResult", "StepTimes", "backlog", "capacity_problems", "run_peak"]
