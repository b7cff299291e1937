"""A child process with its output in a log file, stopped for sure.

The control plane's servers are long-lived children: their output goes to a file (so a
chatty server never blocks on a full pipe, and a failed start can quote the last lines),
they run in a session of their own (so stopping one reaches whatever it forked), and,
where util-linux's ``setpriv`` exists, they get SIGTERM when the thread that started them
dies, so a test runner killed outright does not leave API servers behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path


class Child:
    """One server process: ``start()``, ``alive``, ``stop()``, ``tail()`` of its log."""

    def __init__(self, name: str, argv: Sequence[str], log: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process (appending to its log, so a restart keeps the earlier run)."""
        if self.alive:
            raise RuntimeError(f"{self.name} is already running")
        argv = self.argv
        setpriv = shutil.which("setpriv")
        if setpriv and os.name == "posix":
            argv = [setpriv, "--pdeathsig", "TERM", "--", *argv]
        with self.log.open("ab") as out:
            self._popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen is not None else None

    def stop(self, timeout: float = 10.0, *, kill: bool = False) -> None:
        """SIGTERM the process group, SIGKILL it after ``timeout`` seconds; idempotent.

        ``kill=True`` sends SIGKILL at once: for servers whose state is thrown away, where
        a graceful shutdown only costs time.

        Signals go only while the leader is unreaped, so its group id cannot have been
        reused by an unrelated process.
        """
        popen, self._popen = self._popen, None
        if popen is None:
            return
        if popen.poll() is None:
            _signal_group(popen.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(popen.pid, signal.SIGKILL)
                popen.wait()

    def tail(self, lines: int = 25) -> str:
        """The last ``lines`` lines of the log ('' if there is none)."""
        try:
            data = self.log.read_bytes()[-64_000:]
        except OSError:
            return ""
        return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
