"""Run several simulations in worker processes and relay their progress.

Why: a simulation is single-threaded, CPU-bound Python, so the runs of a what-if (one
per scheduler configuration) only overlap in separate processes. This module knows
nothing about simulations: it calls ``task(shared, index, progress)`` for each index in a
pool of worker processes and returns the values in index order, whatever order they
finish in, so the caller's output does not depend on scheduling of the processes.

Contract:

- ``task`` must be a module-level function (it is looked up by name in the workers when
  the start method is not ``fork``), and its return value must be picklable. ``shared``
  is handed to each worker once, when the worker starts: with ``fork`` (used on Linux) it
  is inherited, not pickled, so a large input (the workload) costs nothing to share.
- ``progress`` is a callable ``(done, total, now)``, as :meth:`Simulation.run
  <pumice.sim.engine.Simulation.run>` takes, or ``None`` when no display is given.
  Progress is best-effort (throttled, relayed through a queue, possibly dropped at exit);
  the last value each task reported is always delivered, when its result arrives.
- The first task that raises (or a worker that dies) ends the whole run: the other
  workers are terminated at once and the error propagates to the caller, so a failure
  never leaves the parent waiting on the rest.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_mod
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import AbstractContextManager
from typing import Any, TypeVar

R = TypeVar("R")
S = TypeVar("S")

Progress = Callable[[int, int, float], None]  # (done, total, simulated time)
#: A display's update function: (task index, done, total, simulated time).
Relay = Callable[[int, int, int, float], None]
Task = Callable[[S, int, Progress | None], R]

#: Seconds between two progress messages of one worker (and the parent's polling period).
INTERVAL = 0.1


def _context() -> Any:
    """``fork`` on Linux (inputs are inherited, nothing to pickle); elsewhere the
    platform's default (``spawn`` on macOS and Windows, where ``fork`` is unsafe)."""
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


# -- the worker side ---------------------------------------------------------------------

# Set once per worker process by _init (from the pool's initargs).
_task: Callable[[Any, int, Progress | None], Any] | None = None
_shared: Any = None
_queue: Any = None


def _init(task: Callable[[Any, int, Progress | None], Any], shared: Any, q: Any) -> None:
    global _task, _shared, _queue
    _task, _shared, _queue = task, shared, q
    # Ctrl-C is the parent's to handle: it terminates the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if q is not None:
        q.cancel_join_thread()  # never block a worker's exit on an unread message


class _Sender:
    """The ``progress`` callable a task gets in a worker: throttled puts on the queue,
    remembering the last value for the result."""

    def __init__(self, q: Any, index: int) -> None:
        self.q = q
        self.index = index
        self.last: tuple[int, int, float] | None = None
        self.sent = float("-inf")

    def __call__(self, done: int, total: int, now: float) -> None:
        self.last = (done, total, now)
        t = time.monotonic()
        if t - self.sent >= INTERVAL:
            self.sent = t
            self.q.put((self.index, done, total, now))


def _work(index: int) -> tuple[Any, tuple[int, int, float] | None]:
    assert _task is not None, "worker not initialized"
    sender = _Sender(_queue, index) if _queue is not None else None
    value = _task(_shared, index, sender)
    return value, sender.last if sender is not None else None


# -- the parent side ---------------------------------------------------------------------


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop every worker now (running tasks included)."""
    stop = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if stop is not None:
        stop()
        return
    # Before 3.14 there is no public way: do what terminate_workers does.
    processes = dict(getattr(pool, "_processes", None) or {})
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes.values():
        try:
            if proc.is_alive():
                proc.terminate()
        except (ValueError, ProcessLookupError):
            continue
    for proc in processes.values():
        proc.join()


def _drain(q: Any, finished: set[int], relay: Relay) -> None:
    while True:
        try:
            index, done, total, now = q.get_nowait()
        except queue_mod.Empty:
            return
        if index not in finished:  # a late message would move a finished bar back
            relay(index, done, total, now)


def run_parallel(
    task: Task[S, R],
    shared: S,
    count: int,
    workers: int,
    display: AbstractContextManager[Relay] | None = None,
) -> list[R]:
    """Return ``[task(shared, i, progress_i) for i in range(count)]``, computed in
    ``min(workers, count)`` worker processes.

    ``display``, if given, is entered once the workers exist (so no display thread is
    running when they are forked) and its ``__enter__`` value receives every task's
    progress as ``(index, done, total, now)``; without it, tasks get ``progress=None``.
    The first exception of a task is raised here after the other workers are stopped.
    """
    if workers < 1:
        raise ValueError("workers must be >= 1")
    if count == 0:
        return []
    ctx = _context()
    q = ctx.Queue() if display is not None else None
    pool = ProcessPoolExecutor(
        max_workers=min(workers, count),
        mp_context=ctx,
        initializer=_init,
        initargs=(task, shared, q),
    )
    results: list[Any] = [None] * count
    finished: set[int] = set()
    try:
        futures: dict[Future[Any], int] = {pool.submit(_work, i): i for i in range(count)}
        with display if display is not None else _NoDisplay() as relay:
            pending: set[Future[Any]] = set(futures)
            while pending:
                done, pending = wait(
                    pending,
                    timeout=INTERVAL if q is not None else None,
                    return_when=FIRST_COMPLETED,
                )
                if q is not None:
                    _drain(q, finished, relay)
                for f in sorted(done, key=futures.__getitem__):
                    i = futures[f]
                    value, last = f.result()  # raises the task's exception
                    results[i] = value
                    finished.add(i)
                    if last is not None:
                        relay(i, *last)
    except BaseException:
        _terminate(pool)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        if q is not None:
            q.close()
    return results


class _NoDisplay(AbstractContextManager[Relay]):
    def __enter__(self) -> Relay:
        return lambda index, done, total, now: None

    def __exit__(self, *exc: object) -> None:
        return None


__all__ = ["Progress", "Relay", "run_parallel"]
