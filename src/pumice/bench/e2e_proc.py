"""CPU time and memory of another process, read from ``/proc`` (Linux only).

The end-to-end benchmark compares processes it did not write (kube-apiserver, etcd,
kube-scheduler, vc-scheduler) with pumice's, so it measures them all the same way,
from outside: CPU seconds are ``utime + stime`` of ``/proc/<pid>/stat`` (user and
system time of every thread, children not included), peak memory is ``VmHWM`` of
``/proc/<pid>/status`` (the peak resident set since the process started). psutil would
do the same, but it is not a dependency.

Contract: every reader returns ``None`` for a process that is gone or a file that
cannot be read, never raises.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds used so far by ``pid`` (all its threads)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)
    except (IndexError, ValueError):
        return None


def _status_kib(pid: int, key: bytes) -> int | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_mb(pid: int) -> float | None:
    """Peak resident set of ``pid`` in MB (10^6 bytes), from ``VmHWM``."""
    kib = _status_kib(pid, b"VmHWM:")
    return None if kib is None else kib * 1024 / 1e6


def rss_mb(pid: int) -> float | None:
    """Current resident set of ``pid`` in MB, from ``VmRSS``."""
    kib = _status_kib(pid, b"VmRSS:")
    return None if kib is None else kib * 1024 / 1e6


@dataclass(slots=True)
class CpuMark:
    """CPU seconds of a few processes at one moment, to subtract from a later mark."""

    seconds: dict[str, float | None]

    @classmethod
    def take(cls, pids: dict[str, int]) -> CpuMark:
        return cls({name: cpu_seconds(pid) for name, pid in pids.items()})

    def since(self, earlier: CpuMark) -> dict[str, float | None]:
        """CPU seconds each process used between ``earlier`` and this mark."""
        out: dict[str, float | None] = {}
        for name, now in self.seconds.items():
            then = earlier.seconds.get(name)
            out[name] = None if now is None or then is None else now - then
        return out


__all__ = ["CpuMark", "cpu_seconds", "peak_rss_mb", "rss_mb"]
