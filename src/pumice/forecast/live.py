"""A forecast for a running scheduler: at most one at a time, in a child process watched
by a background thread, its result kept with its age.

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

**In a child process.** A forecast is pure Python: run in a thread it would hold the
interpreter's lock for most of its seconds, and the scheduler's own cycles (and the
requests the server answers) would wait their turn, on a large cluster about doubling a
cycle's time. So the thread forks a child that computes the forecast on the copy (the
child sees the parent's memory as it was at the fork, copy-on-write, so nothing is
serialized on the way in) and sends the result back pickled through a pipe, while the
thread waits on the pipe without the lock. The child only computes and exits with
``os._exit``: it never runs the parent's threads, handlers or exit hooks. Where
``os.fork`` does not exist, or with ``isolate=False``, the forecast runs in the thread.

The clock and the thread factory are parameters so that tests can drive them.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
import traceback
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
        isolate: bool = True,
    ) -> None:
        self.max_age = max_age
        self.clock = clock
        self._spawn = spawn or _daemon
        self._execute: Callable[[Callable[[], Forecast]], Forecast] = (
            in_child if isolate and hasattr(os, "fork") else _here
        )
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
            got = self._execute(work)
        except ChildFailed as err:  # a bug in a forecast must not stop the next one
            log.error("forecast failed: %s\n%s", err.error, err.trace)
            got = Forecast({}, self.clock(), 0.0, "", 0.0, error=err.error)
        except Exception as err:
            log.exception("forecast failed")
            got = Forecast({}, self.clock(), 0.0, "", 0.0, error=f"{type(err).__name__}: {err}")
        with self._lock:
            self._last = got
            self._running = False


class ChildFailed(Exception):
    """The forecast failed in its child process: ``error`` as ``Type: message``, and the
    child's traceback."""

    def __init__(self, error: str, trace: str = "") -> None:
        super().__init__(error)
        self.error = error
        self.trace = trace


def in_child(work: Callable[[], Forecast]) -> Forecast:
    """``work()`` computed in a forked child and handed back through a pipe (see the
    module docstring). Raises :class:`ChildFailed` when ``work`` raises there, or when
    the child ends without a result (killed, out of memory)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without running anything else
        code = 0
        try:
            os.close(read_end)
            try:
                result: tuple[str, Any] = ("ok", work())
            except BaseException as err:  # (everything is reported to the parent)
                result = ("failed", (f"{type(err).__name__}: {err}", traceback.format_exc()))
            with os.fdopen(write_end, "wb") as out:
                out.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as got:
        data = got.read()  # (blocks without the interpreter's lock)
    _, status = os.waitpid(pid, 0)
    if not data:
        raise ChildFailed(f"the forecast's process ended without a result ({_ended(status)})")
    kind, value = pickle.loads(data)
    if kind != "ok":
        raise ChildFailed(*value)
    return value


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _here(work: Callable[[], Forecast]) -> Forecast:
    return work()


def _daemon(target: Callable[[], None]) -> threading.Thread:
    t = threading.Thread(target=target, name="forecast", daemon=True)
    t.start()
    return t


__all__ = ["DEFAULT_MAX_AGE", "BackgroundForecast", "ChildFailed", "Forecast", "Take", "in_child"]
