"""What the machine and the API server did during a run, beyond the processes timed.

Two things make a figure of the end-to-end benchmark hard to read without them:

- the machine may be shared: :class:`MachineMark` reads ``/proc/stat`` (CPU seconds the
  whole machine spent busy) and ``/proc/loadavg``, so a run can say how much CPU went to
  processes that are not part of it, and :func:`wait_quiet` can hold a run back until
  the others are (nearly) idle;
- schedulers differ in how many requests they make per pod (binds, status patches,
  events): :func:`request_counts` reads the API server's own
  ``apiserver_request_total`` counter from its ``/metrics``, by verb, resource and
  subresource, so the difference of two reads is what was asked of it during the run.

Contract: readers return empty or zero values when a file or the endpoint cannot be
read; they never raise.
"""

from __future__ import annotations

import os
import re
import ssl
import time
import urllib.request
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True, slots=True)
class MachineMark:
    """Busy CPU seconds of the whole machine (all cores) and the 1-minute load."""

    busy_s: float
    load1: float

    @classmethod
    def take(cls) -> MachineMark:
        busy = 0.0
        try:
            with open("/proc/stat") as f:
                fields = f.readline().split()[1:]
            # user nice system idle iowait irq softirq steal: all but idle and iowait.
            values = [int(v) for v in fields[:8]]
            busy = (sum(values) - values[3] - values[4]) / _TICKS
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open("/proc/loadavg") as f:
                load1 = float(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            load1 = 0.0
        return cls(busy, load1)


def wait_quiet(max_cores: float, *, window: float = 5.0, timeout: float = 600.0) -> float:
    """Wait until the machine's busy CPU over ``window`` seconds is below ``max_cores``
    (this process idle meanwhile, so that is everyone else's), at most ``timeout``
    seconds; returns the last measured cores busy."""
    deadline = time.monotonic() + timeout
    while True:
        start = MachineMark.take()
        time.sleep(window)
        cores = (MachineMark.take().busy_s - start.busy_s) / window
        if cores < max_cores or time.monotonic() > deadline:
            return cores


def request_counts(server: str, ca_file: str, token: str) -> dict[str, float]:
    """``apiserver_request_total`` of the API server at ``server`` (trusting
    ``ca_file``, as the bearer of ``token``), summed by ``VERB resource[/subresource]``."""
    request = urllib.request.Request(
        f"{server}/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        context = ssl.create_default_context(cafile=ca_file)
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            text = resp.read().decode(errors="replace")
    except (OSError, ValueError):
        return {}
    counts: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        labels = dict(_LABEL.findall(m.group("labels")))
        key = f"{labels.get('verb', '?')} {labels.get('resource', '?')}"
        if labels.get("subresource"):
            key += "/" + labels["subresource"]
        counts[key] = counts.get(key, 0.0) + float(m.group("value"))
    return counts


def difference(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    """Requests made between two reads, largest first, zeros left out."""
    out = {k: int(v - before.get(k, 0.0)) for k, v in after.items()}
    return dict(sorted(((k, v) for k, v in out.items() if v > 0), key=lambda kv: -kv[1]))


__all__ = ["MachineMark", "difference", "request_counts", "wait_quiet"]
