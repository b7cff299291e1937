"""How far a start forecast is from what then happens (``pumice simulate --forecast-error``).

When a sampled job is first seen waiting, before the cycle that might place it, the
probe forecasts its start (:func:`pumice.forecast.forecast_starts`, on a copy of the
simulated cluster at that instant, with no new arrivals assumed); when the run is over,
each forecast is set against the job's real start. One forecast covers every sampled
job that is new at that instant, so the cost follows the number of instants, bounded
by the sample.

Two ways to know run times (``durations``):

- ``learned``: what a cluster knows: nothing of the pods' own; each queue's run time is
  learned from the jobs of that queue that have ended so far in the run
  (:class:`~pumice.forecast.durations.QueueDurations`);
- ``annotation``: the workload's own ``pumice.sim/duration`` annotation, exact: the error
  left is what the arrivals after the forecast changed.

The figures (:meth:`ForecastProbe.figures`) go into the summary and ``metrics.json``
under ``forecast``: how many jobs were forecast, the share that got an estimate
(coverage), the mean, p50, p90 and max of the absolute error over those that got one
and started, and for scale their mean wait from the forecast to the start; the same
error over the jobs that waited more than a minute (``abs_error_waited``). The wall
time the forecasts took is not among them (it differs from run to run); the command
prints it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pumice.api.parse import DURATION_ANNOTATION
from pumice.forecast.durations import QueueDurations, quantile
from pumice.forecast.replay import ForecastStats, cluster_objects, forecast_starts

if TYPE_CHECKING:
    from pumice.sim.engine import Simulation

DURATION_SOURCES = ("learned", "annotation")
#: A job waited (for ``abs_error_waited``) when it started more than this many seconds
#: after its forecast: most jobs start at once, and their exact forecasts would hide
#: how well the waits themselves are forecast.
WAITED = 60.0


@dataclass(slots=True)
class ForecastProbe:
    """Forecasts for a sample of the workload's jobs (see the module docstring).
    ``sample``: how many jobs at most, spread evenly over the arrivals."""

    sample: int
    durations: str = "learned"
    #: Per sampled job (the workload's uid): (forecast time, estimated start or None).
    estimates: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    #: Wall seconds the forecasts took, their count and virtual seconds replayed.
    seconds: float = 0.0
    runs: int = 0
    cycles: int = 0
    learner: QueueDurations = field(default_factory=QueueDurations)
    _chosen: set[str] = field(default_factory=set)
    _learned: set[str] = field(default_factory=set)

    def start(self, sim: Simulation) -> None:
        jobs = sim.workload.jobs
        if self.durations not in DURATION_SOURCES:
            raise ValueError(f"unknown durations {self.durations!r}")
        step = max(1, math.ceil(len(jobs) / max(self.sample, 1)))
        self._chosen = {j.uid for j in jobs[::step]}

    def _learn(self, sim: Simulation) -> None:
        for uid, rec in sim.metrics.jobs.items():
            if uid in self._learned or rec.end is None or rec.start is None:
                continue
            self._learned.add(uid)
            if rec.outcome == "succeed":
                self.learner.finished(rec.queue, rec.end - rec.start)

    def before_cycle(self, sim: Simulation, now: float) -> None:
        """Forecast the sampled jobs waiting now that none has forecast yet."""
        sim.cache.sync()
        groups = sim.kubelet.groups
        new: dict[str, str] = {}  # cache uid -> workload uid
        for uid in sim.cache.jobs:
            wl = groups.get(uid, uid)
            if wl in self._chosen and wl not in self.estimates:
                rec = sim.metrics.jobs.get(wl)
                if rec is not None and rec.start is None:
                    new[uid] = wl
        if not new:
            return
        learned = self.durations == "learned"
        if learned:
            self._learn(sim)
        t0 = time.perf_counter()
        stats = ForecastStats()
        got = forecast_starts(
            cluster_objects(sim.store),
            sim.scheduler,
            now,
            durations=self.learner if learned else None,
            annotation=None if learned else DURATION_ANNOTATION,
            period=sim.options.period,
            startup=sim.options.startup_delay,
            scheduler_name=sim.options.scheduler_name,
            stats=stats,
        )
        self.seconds += time.perf_counter() - t0
        self.runs += 1
        self.cycles += stats.cycles
        for uid, wl in new.items():
            est = got.get(uid)
            self.estimates[wl] = (now, est.start if est is not None else None)

    def figures(self, sim: Simulation) -> dict[str, Any]:
        """The forecast figures of the run (see the module docstring)."""
        errors = []
        waited = []  # the errors of the jobs that waited more than a minute
        waits = []  # from the forecast to the real start, of the jobs that started
        never = 0
        for wl, (at, start) in self.estimates.items():
            real = sim.metrics.jobs[wl].start
            if real is not None:
                waits.append(real - at)
            if start is None:
                continue
            if real is None:
                never += 1
                continue
            errors.append(abs(start - real))
            if real - at > WAITED:
                waited.append(abs(start - real))
        n = len(self.estimates)
        estimated = sum(1 for _at, s in self.estimates.values() if s is not None)
        return {
            "durations": self.durations,
            "jobs": n,
            "forecasts": self.runs,
            "replayed_cycles": self.cycles,
            "with_estimate": estimated,
            "coverage": round(estimated / n, 6) if n else None,
            "estimated_never_started": never,
            "abs_error": _spread(errors),
            "mean_wait": round(sum(waits) / len(waits), 3) if waits else None,
            "waited": len(waited),
            "abs_error_waited": _spread(waited),
        }


def _spread(errors: list[float]) -> dict[str, float | None]:
    if not errors:
        return {"mean": None, "p50": None, "p90": None, "max": None}
    return {
        "mean": round(sum(errors) / len(errors), 3),
        "p50": round(quantile(errors, 0.5), 3),
        "p90": round(quantile(errors, 0.9), 3),
        "max": round(max(errors), 3),
    }


__all__ = ["DURATION_SOURCES", "ForecastProbe"]
