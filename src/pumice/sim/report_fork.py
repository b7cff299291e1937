"""Part of a report drawn in a forked child process while the parent draws the rest.

Why: a report's plots take seconds of single-threaded matplotlib (``queue_share.png``
alone about half of them), and once a run is over the machine's other cores are idle.
:class:`ForkedWork` runs one function in a child made with ``os.fork``: the child sees
the parent's memory as it was at the fork (copy-on-write), so the run's result is not
serialized on the way in, and only the function's small return value (or its exception)
comes back, pickled through a pipe.

Contract:

- :func:`fork_pays` says whether a child can run beside this process: ``os.fork`` and
  ``os.sched_getaffinity`` exist (Linux), this process may use at least two CPUs, it is
  not itself a worker of a process pool (:func:`multiprocessing.parent_process`: the
  runs of a what-if or a sweep, or a Dask worker, already keep the cores busy) and it
  is running its main thread (a Dask or server thread shares the process with others).
- The child ignores Ctrl-C (the parent's to handle), writes through its own stdout and
  stderr objects on the same descriptors (the parent's may be locked by a thread that
  does not exist in the child, e.g. a progress bar's), and ends with ``os._exit``: it
  never runs the parent's exit hooks or buffered writes.
- :meth:`ForkedWork.result` waits for the child and returns the function's value, or
  raises the exception it raised there (the same type, with the child's traceback as a
  note; a :class:`RuntimeError` when it would not pickle), or a :class:`RuntimeError`
  when the child ended without an answer (killed).
- Leaving the ``with`` block always reaps the child: on an exception (a Ctrl-C in the
  parent included) the child is killed first, so nothing is left running or unreaped.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def fork_pays() -> bool:
    """Whether work can run in a forked child beside this process (see the module
    docstring): fork exists, two CPUs or more are ours, and this is not a pool's worker
    or a side thread."""
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return False
    if len(os.sched_getaffinity(0)) < 2:
        return False
    if multiprocessing.parent_process() is not None:
        return False
    return threading.current_thread() is threading.main_thread()


class ForkedWork(Generic[T]):
    """``work()`` computing in a forked child from the moment this is made; a context
    manager whose exit reaps the child (killing it first when the block raised)."""

    def __init__(self, work: Callable[[], T]) -> None:
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # (out of processes or memory: nothing was started)
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
            os.close(read_end)
            _child(work, write_end)
        os.close(write_end)
        self.pid: int | None = pid  # (None once reaped)
        self._read_end: int | None = read_end  # (None once handed to a file object)

    def result(self) -> T:
        """Wait for the child; its function's value, or its exception raised here."""
        assert self._read_end is not None, "result() is called once"
        read_end, self._read_end = self._read_end, None
        with os.fdopen(read_end, "rb") as got:
            data = got.read()  # (until the child exits; blocks without the interpreter's lock)
        status = self._reap()
        if not data:
            raise RuntimeError(f"the drawing process ended without an answer ({_ended(status)})")
        kind, value, trace = pickle.loads(data)
        if kind == "ok":
            return value
        value.add_note(f"raised in the drawing process:\n{trace}")
        raise value

    def __enter__(self) -> ForkedWork[T]:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.pid is None:
            return
        if kind is not None:  # (not reaped yet, so the pid is still our child's)
            os.kill(self.pid, signal.SIGKILL)
        if self._read_end is not None:  # (a child still writing gets a broken pipe)
            os.close(self._read_end)
            self._read_end = None
        self._reap()

    def _reap(self) -> int:
        """Wait for the child to end; its wait status. ``pid`` is cleared only once the
        child is reaped, so a Ctrl-C during the wait leaves it for ``__exit__``."""
        assert self.pid is not None
        status = os.waitpid(self.pid, 0)[1]
        self.pid = None
        return status


def _child(work: Callable[[], Any], write_end: int) -> None:  # pragma: no cover - in the child
    """Run ``work`` and send ``(kind, value, traceback)`` to the parent; never return."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        gc.disable()  # (short-lived: a collection would copy every page it touches)
        sys.stdout, sys.stderr = _own_stream(1), _own_stream(2)
        try:
            outcome: tuple[str, Any, str] = ("ok", work(), "")
        except BaseException as err:  # (everything goes to the parent)
            outcome = ("raised", err, traceback.format_exc())
        data = _dumps(outcome)
        with os.fdopen(write_end, "wb") as out:
            out.write(data)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _own_stream(fd: int) -> Any:  # pragma: no cover - in the child
    """A new text stream on descriptor ``fd`` (the null device when it is closed)."""
    try:
        return os.fdopen(os.dup(fd), "w", buffering=1)
    except OSError:
        return open(os.devnull, "w")


def _dumps(outcome: tuple[str, Any, str]) -> bytes:  # pragma: no cover - in the child
    """``outcome`` pickled; an exception that does not survive pickling is sent as a
    :class:`RuntimeError` naming its type and message."""
    try:
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(data)
        return data
    except Exception:
        kind, value, trace = outcome
        if kind == "ok":
            raise
        plain = RuntimeError(f"{type(value).__name__}: {value}")
        return pickle.dumps((kind, plain, trace), protocol=pickle.HIGHEST_PROTOCOL)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


__all__ = ["ForkedWork", "fork_pays"]
