"""A forecast for a running scheduler: at most one at a time, in a background thread,
its result kept with its age.

A forecast costs seconds of CPU on a large cluster (see :mod:`pumice.forecast.bench`),
so a server never computes one in the thread that answers a request.
:class:`BackgroundForecast` splits the work three ways:

- a request calls :meth:`~BackgroundForecast.latest`: it gets the last forecast (or
  None) and whether a new one is under way, and marks a new one as wanted when the
  last is older than ``max_age`` (or there is none);
- the scheduler's loop calls :meth:`~BackgroundForecast.between_cycles` with a function
  that copies what a forecast needs (the cluster's objects as the cache left them after
  a cycle): it is called only when a forecast is wanted and none is running, so the
  copy costs nothing on the turns nobody asks;
- a daemon thread runs the forecast on that copy and keeps the result.

The clock and the thread factory are parameters so that tests can drive them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pumice.forecast.replay import ForecastStats, StartEstimate

log = logging.getLogger(__name__)

#: How old (seconds) the last forecast may be before a request asks for a new one.
DEFAULT_MAX_AGE = 60.0  # (as pumice.visibility.eta_flags says)


@dataclass(slots=True)
class Forecast:
    """One finished forecast: the estimates by job key, taken at ``computed_at`` (wall
    seconds, the forecast's ``now``), and what it cost."""

    estimates: dict[str, StartEstimate]
    computed_at: float
    step: float
    #: Why this step (e.g. "auto: 12 nodes" or "--eta-step").
    step_reason: str
    horizon: float
    #: Wall seconds the forecast took in its thread.
    seconds: float = 0.0
    stats: ForecastStats = field(default_factory=ForecastStats)
    #: The error, when the forecast failed (then ``estimates`` is empty).
    error: str | None = None


#: Takes the copy (in the scheduler's loop) and returns the work to run on it.
Take = Callable[[], Callable[[], Forecast]]


class BackgroundForecast:
    """The last forecast, and at most one being computed (see the module docstring).
    Every method is safe from any thread."""

    def __init__(
        self,
        *,
        max_age: float = DEFAULT_MAX_AGE,
        clock: Callable[[], float] = time.time,
        spawn: Callable[[Callable[[], None]], Any] | None = None,
    ) -> None:
        self.max_age = max_age
        self.clock = clock
        self._spawn = spawn or _daemon
        self._lock = threading.Lock()
        self._last: Forecast | None = None
        self._wanted = False
        self._running = False
        #: How many forecasts were started (tests and the report).
        self.started = 0

    def latest(self) -> tuple[Forecast | None, bool]:
        """The last forecast (None before the first) and whether one is being computed
        or waits for the loop to start it; asks for a new one when the last is older
        than ``max_age``."""
        with self._lock:
            last = self._last
            if not self._running and (last is None or self.age(last) > self.max_age):
                self._wanted = True
            return last, self._running or self._wanted

    def age(self, forecast: Forecast) -> float:
        return max(0.0, self.clock() - forecast.computed_at)

    def between_cycles(self, take: Take) -> bool:
        """From the scheduler's loop: when a forecast is wanted and none runs, call
        ``take`` here (it copies what the forecast reads) and run the work it returns
        in the background. True when one was started."""
        with self._lock:
            if not self._wanted or self._running:
                return False
            self._wanted = False
            self._running = True
            self.started += 1
        try:
            work = take()
        except Exception:
            with self._lock:
                self._running = False
            log.exception("forecast: could not copy the cluster's objects")
            return False
        self._spawn(lambda: self._run(work))
        return True

    def _run(self, work: Callable[[], Forecast]) -> None:
        try:
            got = work()
        except Exception as err:  # a bug in a forecast must not stop the next one
            log.exception("forecast failed")
            got = Forecast({}, self.clock(), 0.0, "", 0.0, error=f"{type(err).__name__}: {err}")
        with self._lock:
            self._last = got
            self._running = False


def _daemon(target: Callable[[], None]) -> threading.Thread:
    t = threading.Thread(target=target, name="forecast", daemon=True)
    t.start()
    return t


__all__ = ["DEFAULT_MAX_AGE", "BackgroundForecast", "Forecast", "Take"]
