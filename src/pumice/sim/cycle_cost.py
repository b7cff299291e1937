"""The wall time of a scheduling cycle against the backlog it left: the figures behind
the report's ``cycle_cost.png`` and run.json's ``cycle_cost_by_backlog``.

The engine records, per cycle run, the jobs left waiting and the wall seconds of the
scheduling step (:attr:`~pumice.sim.engine.SimResult.cycle_wall`); here the cycles are
grouped into ranges of backlog, each with its median and 90th percentile in
milliseconds. Every cycle falls in exactly one range, and ranges are ordered and do not
overlap, so their ``cycles`` add up to the run's. Wall time: the figures describe the
machine the run was on as much as the scheduler, and differ between two runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pumice.sim.engine import SimResult

#: A bin of the plot holds at least this many cycles (a sparser one joins the next),
#: so its 90th percentile is not a single outlier.
MIN_CYCLES = 20
#: About how many bins the plot aims for across 0 to the largest backlog.
TARGET_BINS = 40


@dataclass(frozen=True, slots=True)
class CostBin:
    """The cycles that left between ``low`` and ``high`` jobs waiting (both included)."""

    low: int
    high: int
    cycles: int
    #: The median backlog of these cycles: where the bin sits on the plot's axis.
    backlog: float
    median_ms: float
    p90_ms: float


def _arrays(result: SimResult) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The run's cycles sorted by backlog: backlogs and milliseconds."""
    backlog = np.asarray(result.cycle_backlog, dtype=np.int64)
    ms = np.asarray(result.cycle_wall, dtype=np.float64) * 1000.0
    order = np.argsort(backlog, kind="stable")
    return backlog[order], ms[order]


def _bins(
    backlog: npt.NDArray[np.int64], ms: npt.NDArray[np.float64], edges: list[int]
) -> list[CostBin]:
    """One bin per consecutive pair of ``edges`` (``[edges[k], edges[k + 1])``) that
    holds cycles; ``backlog`` sorted, and the last edge above its largest value."""
    cuts = np.searchsorted(backlog, edges, side="left")
    out = []
    for k in range(len(edges) - 1):
        a, b = int(cuts[k]), int(cuts[k + 1])
        if a == b:
            continue
        part = ms[a:b]
        out.append(
            CostBin(
                low=edges[k],
                high=edges[k + 1] - 1,
                cycles=b - a,
                backlog=float(np.median(backlog[a:b])),
                median_ms=float(np.median(part)),
                p90_ms=float(np.percentile(part, 90)),
            )
        )
    return out


def _nice_width(span: int, bins: int) -> int:
    """The smallest of 1, 2, 5 times a power of ten that cuts ``span`` into at most
    ``bins`` pieces."""
    raw = max(span / bins, 1.0)
    power = 10 ** math.floor(math.log10(raw))
    for step in (1, 2, 5, 10):
        if step * power >= raw:
            return int(step * power)
    return int(10 * power)  # (not reached)


def plot_bins(result: SimResult) -> list[CostBin]:
    """The plot's bins: equal widths (1, 2 or 5 times a power of ten) from 0 to the
    largest backlog, about :data:`TARGET_BINS` of them, a bin with fewer than
    :data:`MIN_CYCLES` cycles merged into the next (the last into the one before)."""
    backlog, ms = _arrays(result)
    if not len(backlog):
        return []
    top = int(backlog[-1]) + 1
    width = _nice_width(top, TARGET_BINS)
    fixed = [*range(0, top, width), top]
    counts = np.diff(np.searchsorted(backlog, fixed, side="left"))
    edges, held = [0], 0
    for k, n in enumerate(counts):
        held += int(n)
        if held >= MIN_CYCLES:
            edges.append(fixed[k + 1])
            held = 0
    if edges[-1] != top:
        if held and len(edges) > 1:  # the sparse tail joins the last full bin
            edges[-1] = top
        else:
            edges.append(top)
    return _bins(backlog, ms, edges)


def summary_bins(result: SimResult) -> list[CostBin]:
    """run.json's ranges: no job waiting, 1-9, then 10-19, 20-49, 50-99, 100-199 and so
    on (1, 2, 5 times a power of ten) up to the largest backlog; ranges without a cycle
    are left out."""
    backlog, ms = _arrays(result)
    if not len(backlog):
        return []
    edges, top, power = [0, 1], int(backlog[-1]), 10
    while edges[-1] <= top:
        edges += [power, 2 * power, 5 * power]
        power *= 10
    while len(edges) > 2 and edges[-2] > top:  # (the ranges above the largest are empty)
        edges.pop()
    return _bins(backlog, ms, edges)


def cost_document(result: SimResult) -> list[dict[str, Any]]:
    """run.json's ``cycle_cost_by_backlog``: per range of backlog (jobs the cycle left
    waiting, ``backlog_from`` to ``backlog_to`` included), its cycles and their median
    and 90th-percentile wall milliseconds."""
    return [
        {
            "backlog_from": b.low,
            "backlog_to": b.high,
            "cycles": b.cycles,
            "median_ms": round(b.median_ms, 3),
            "p90_ms": round(b.p90_ms, 3),
        }
        for b in summary_bins(result)
    ]
