"""The figures every benchmark takes the same way: percentiles of its timings and the
peak memory of its process.

One definition of each, so that a p99 or a peak in one benchmark's table means what it
means in another's.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (``q`` from 0 to 100) of ``values``: the
    smallest value with at least ``q`` % of them at or below it, so with few repeats
    p99 is the slowest. ``values`` need not be sorted; IndexError when empty."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def peak_rss_mib() -> float:
    """The peak resident set size of this process so far, in MiB."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


__all__ = ["peak_rss_mib", "percentile"]
