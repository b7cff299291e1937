"""Start estimates beside the pending jobs: ``pumice queue pending --eta`` and the
endpoint's ``?eta=1``.

The estimates come from :func:`pumice.forecast.forecast_starts` (the scheduler replayed
forward on the cluster's objects). Here: the step a forecast takes when none is given
(:func:`choose_step`), how an estimate shows in a pending job's record
(:func:`estimate_fields`, :func:`fill`), the ``forecast`` object that says what the
estimates rest on (:func:`forecast_info`), and :class:`RunForecast`, which keeps one
forecast for ``pumice run``: computed in the background from a copy of the cluster's
objects taken between cycles, on run times learned from the pods that finish.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pumice.forecast.durations import QueueDurations
from pumice.forecast.learn import FinishedPods
from pumice.forecast.live import DEFAULT_MAX_AGE, BackgroundForecast, Forecast
from pumice.forecast.replay import (
    DEFAULT_HORIZON,
    ForecastStats,
    StartEstimate,
    cluster_objects,
    forecast_starts,
)
from pumice.visibility.eta_flags import check
from pumice.visibility.line import PendingJob

#: Cluster sizes (nodes) from which the automatic step grows, and the step there.
AUTO_STEPS = ((1000, 300.0), (100, 60.0))


def choose_step(given: float | None, nodes: int, period: float) -> tuple[float, str]:
    """The step of a forecast and why: ``given`` when set, else by the cluster's size
    (the schedule period below 100 nodes, 60 s from 100, 300 s from 1,000: a forecast of
    a 1,000-node cluster with 3,000 waiting jobs then costs about 20 CPU seconds)."""
    if given is not None:
        return given, "given"
    for least, step in AUTO_STEPS:
        if nodes >= least:
            return max(step, period), f"auto: {nodes} nodes"
    return period, f"auto: {nodes} nodes"


def iso(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


def estimate_fields(est: StartEstimate, now: float) -> tuple[float | None, str]:
    """A pending job's ``eta`` (seconds from ``now``, at least 0; None: no estimate)
    and ``assumption``."""
    if est.start is None:
        return None, est.assumption
    return round(max(0.0, est.start - now), 1), est.assumption


def fill(jobs: Iterable[PendingJob], estimates: Mapping[str, StartEstimate], now: float) -> None:
    """Set ``eta`` and ``assumption`` of the jobs the forecast covers."""
    for job in jobs:
        est = estimates.get(f"{job.namespace}/{job.name}")
        if est is not None:
            job.eta, job.assumption = estimate_fields(est, now)


def forecast_info(forecast: Forecast, now: float) -> dict[str, Any]:
    """The ``forecast`` object of an answer: when it was computed, on what step and
    horizon, and what it cost."""
    out: dict[str, Any] = {
        "computedAt": iso(forecast.computed_at),
        "ageSeconds": round(max(0.0, now - forecast.computed_at), 1),
        "step": forecast.step,
        "stepChosen": forecast.step_reason,
        "horizon": forecast.horizon,
        "cycles": forecast.stats.cycles,
        "seconds": round(forecast.seconds, 3),
    }
    if forecast.error is not None:
        out["error"] = forecast.error
    return out


def run_forecast(
    objects: Iterable[Mapping[str, Any]],
    config: Any,
    now: float,
    *,
    durations: QueueDurations | None,
    horizon: float,
    step: float,
    step_reason: str,
    period: float,
    scheduler_name: str,
) -> Forecast:
    """One forecast, timed, as a :class:`Forecast`."""
    stats = ForecastStats()
    began = time.perf_counter()
    estimates = forecast_starts(
        objects, config, now, durations=durations, horizon=horizon, step=step,
        period=period, scheduler_name=scheduler_name, stats=stats,
    )  # fmt: skip
    return Forecast(estimates, now, step, step_reason, horizon, time.perf_counter() - began, stats)


def copy_durations(durations: QueueDurations) -> QueueDurations:
    """A copy the forecast's thread may read while the loop adds to the original."""
    runs = {q: deque(r, maxlen=r.maxlen) for q, r in durations.runs.items()}
    return QueueDurations(durations.keep, durations.least, durations.q, runs)


def run_forecast_of(args: Any) -> RunForecast:
    """The forecast of ``pumice run``'s flags (InputError for a bad one)."""
    check(args)
    return RunForecast(max_age=args.eta_max_age, step=args.eta_step, horizon=args.eta_horizon)


class RunForecast:
    """The forecast of ``pumice run``: :meth:`turn` is called by the scheduler's loop
    after each turn (it counts the pods that finished, and takes the copy a wanted
    forecast reads); the endpoint reads :attr:`background`."""

    def __init__(
        self,
        *,
        max_age: float = DEFAULT_MAX_AGE,
        step: float | None = None,
        horizon: float = DEFAULT_HORIZON,
        clock: Callable[[], float] = time.time,
        spawn: Callable[[Callable[[], None]], Any] | None = None,
    ) -> None:
        self.background = BackgroundForecast(max_age=max_age, clock=clock, spawn=spawn)
        self.step = step
        self.horizon = horizon
        self.clock = clock
        self.finished: FinishedPods | None = None

    def turn(self, runner: Any) -> None:
        """Between cycles, in the scheduler's loop (the cache is not changing)."""
        cache = runner.cache
        if cache is None:
            return
        if self.finished is None:
            self.finished = FinishedPods(runner.cluster)
        jobs = cache.jobs

        def queue_of(uid: str) -> str | None:
            job = jobs.get(uid)
            return job.queue if job is not None else None

        self.finished.take(queue_of)
        self.background.between_cycles(lambda: self._take(runner, len(cache.nodes_r)))

    def _take(self, runner: Any, nodes: int) -> Callable[[], Forecast]:
        # The cluster replaces an object on each event and never changes one in place,
        # so the list of references is a consistent copy; the replay deep-copies them.
        objects = cluster_objects(runner.cluster)
        assert self.finished is not None
        durations = copy_durations(self.finished.durations)
        period = runner.options.period
        step, reason = choose_step(self.step, nodes, period)
        scheduler = runner.scheduler
        name = runner.options.scheduler_names[0]
        now = self.clock()
        return lambda: run_forecast(
            objects, scheduler, now, durations=durations, horizon=self.horizon, step=step,
            step_reason=reason, period=period, scheduler_name=name,
        )  # fmt: skip


__all__ = [
    "AUTO_STEPS",
    "RunForecast",
    "choose_step",
    "copy_durations",
    "estimate_fields",
    "fill",
    "forecast_info",
    "iso",
    "run_forecast",
    "run_forecast_of",
]
