"""A report's plots: PNG files drawn with matplotlib's Agg backend (no display needed).

:func:`plot_report` draws the five plots of :data:`PLOTS` for one run, or for several (a
what-if: one line per run); :func:`plot_topology` draws ``topology.png`` for a cluster
with HyperNodes; :func:`plot_cycle_cost` draws ``cycle_cost.png``, one run's wall time
per scheduling cycle against the backlog. Every legend sits outside the axes, every
panel has its y label, and the time axis covers the hours in which something happens
(:func:`active_hours`). The files carry no software metadata, so a plot changes only
when what it shows does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from pumice.sim.cycle_cost import MIN_CYCLES, plot_bins
from pumice.sim.engine import SimResult
from pumice.sim.report_metrics import gang_view
from pumice.sim.summary_text import HOUR, tier_label

if TYPE_CHECKING:  # (matplotlib itself is imported on first plot: it is slow to load)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOTS = ("utilization", "queue_share", "wait_cdf", "completion_cdf", "pending")


def _pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=100, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)


def _cdf(ax: Axes, values: Sequence[float], label: str) -> None:
    if not values:
        return
    v = np.sort(np.asarray(values, dtype=np.float64)) / 60.0
    y = np.arange(1, len(v) + 1) / len(v)
    ax.step(v, y, where="post", label=label)


def _minutes_axis(ax: Axes, values: Sequence[float]) -> None:
    pos = [x for x in values if x > 0]
    if pos and max(pos) / max(min(pos), 1e-9) > 100:
        ax.set_xscale("symlog", linthresh=1.0)
    ax.set_ylim(0, 1.01)
    ax.grid(True, alpha=0.3)
    ax.set_ylabel("fraction of jobs")


#: Below this share of every resource held, with no job waiting, nothing happens.
QUIET = 0.01


def active_hours(results: Sequence[SimResult]) -> tuple[float, float] | None:
    """The stretch of simulated hours in which something happens in any of ``results``
    (a job waits, or at least ``QUIET`` of some resource is held), with a small margin:
    the time axis of the plots, so a trace that starts late, or a run whose last hours
    hold one small job, does not squeeze what matters into a corner. None when nothing
    happens (the plots then show every sample)."""
    lo, hi = math.inf, -math.inf
    for res in results:
        s = res.metrics.series
        for k, t in enumerate(s.time):
            if s.pending[k] or max(s.utilization[k], default=0.0) >= QUIET:
                lo = min(lo, t)
                nxt = s.time[k + 1] if k + 1 < len(s.time) else t
                hi = max(hi, nxt)
    if hi <= lo:
        return None
    pad = max((hi - lo) * 0.02, 60.0)
    return max(lo - pad, 0.0) / HOUR, (hi + pad) / HOUR


def _time_axis(ax: Axes, span: tuple[float, float] | None) -> None:
    if span is not None:
        ax.set_xlim(*span)


def _legend_below(ax: Axes, n: int, offset: float = -0.22) -> None:
    """A legend under the axes, outside the data."""
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, offset), ncol=min(max(n, 1), 4), fontsize=8,
        frameon=False,
    )  # fmt: skip


def plot_report(
    results: Sequence[SimResult], out: Path, names: Sequence[str] = PLOTS
) -> dict[str, Path]:
    """Draw the plots ``names`` (default the five of :data:`PLOTS`, in that order); with
    several results (what-if), one line per result. Every legend sits outside the axes,
    every panel has its y label, and the time axis covers the hours in which something
    happens (:func:`active_hours`). Each plot is drawn on its own figure, so any subset,
    in any process, gives the same files as all five at once."""
    out.mkdir(parents=True, exist_ok=True)
    span = active_hours(results)
    paths: dict[str, Path] = {}
    for name in names:
        paths[name] = out / f"{name}.png"
        _DRAW[name](results, paths[name], span)
    return paths


Span = tuple[float, float] | None


def _utilization(results: Sequence[SimResult], path: Path, span: Span) -> None:
    plt = _pyplot()
    many = len(results) > 1
    fig, ax = plt.subplots(figsize=(9, 3.6))
    lines = 0
    for res in results:
        m = res.metrics
        t = np.asarray(m.series.time) / HOUR
        util = np.asarray(m.series.utilization).reshape(len(t), len(m.resources))
        for i, r in enumerate(m.resources):
            if many and r != _main_resource(m.resources):
                continue
            ax.plot(t, util[:, i], label=f"{res.config_name}: {r}" if many else r, lw=1)
            lines += 1
    ax.set_ylim(0, 1.05)
    _time_axis(ax, span)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("allocated / allocatable")
    ax.set_title("Cluster utilization")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, lines)
    _save(fig, path)


def _queue_share(results: Sequence[SimResult], path: Path, span: Span) -> None:
    plt = _pyplot()
    many = len(results) > 1
    queues = results[0].metrics.queues
    ncol = 4 if len(queues) > 6 else max(1, min(3, len(queues)))
    nrow = max(1, -(-len(queues) // ncol))
    fig, axes = plt.subplots(
        nrow, ncol, figsize=(3.2 * ncol, 2.3 * nrow + 0.6), squeeze=False, sharex=True
    )
    for qi, q in enumerate(queues):
        ax = axes[qi // ncol][qi % ncol]
        for ri, res in enumerate(results):
            m = res.metrics
            t = np.asarray(m.series.time) / HOUR
            share = np.asarray(m.series.queue_share).reshape(len(t), len(m.queues))
            des = np.asarray(m.series.queue_deserved).reshape(len(t), len(m.queues))
            color = f"C{ri}" if many else "C0"
            name = f"{res.config_name}: " if many else ""
            ax.plot(t, share[:, qi], lw=1, color=color, label=f"{name}allocated")
            ax.plot(
                t, des[:, qi], lw=1, ls="--", color=color if many else "k",
                label=f"{name}deserved",
            )  # fmt: skip
        ax.set_title(q, fontsize=9)
        ax.set_ylabel("share", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        _time_axis(ax, span)
    for k in range(len(queues), nrow * ncol):
        axes[k // ncol][k % ncol].axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("hours", fontsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if labels:  # (none when no queue had a job)
        fig.legend(
            handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8,
            frameon=False, bbox_to_anchor=(0.5, 0.0),
        )  # fmt: skip
    fig.suptitle("Queue share (dominant resource) vs deserved share, over simulated hours")
    fig.tight_layout(rect=(0, 0.06 if nrow > 1 else 0.12, 1, 0.97))
    _save(fig, path)


def _cdf_plot(attr: str, title: str) -> Callable[[Sequence[SimResult], Path, Span], None]:
    """The drawer of one distribution: each result's jobs' ``attr`` in minutes."""

    def draw(results: Sequence[SimResult], path: Path, span: Span) -> None:
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(6, 3.6))
        every: list[float] = []
        for res in results:
            vals = [getattr(j, attr) for j in res.metrics.jobs.values()]
            vals = [v for v in vals if v is not None]
            every += [v / 60.0 for v in vals]
            _cdf(ax, vals, res.config_name)
        _minutes_axis(ax, every)
        ax.set_xlabel("minutes")
        ax.set_title(title)
        if len(results) > 1:
            _legend_below(ax, len(results))
        _save(fig, path)

    return draw


def _pending(results: Sequence[SimResult], path: Path, span: Span) -> None:
    plt = _pyplot()
    many = len(results) > 1
    fig, ax = plt.subplots(figsize=(9, 3.2))
    lines = 0
    for res in results:
        m = res.metrics
        t = np.asarray(m.series.time) / HOUR
        ax.plot(
            t, m.series.pending, lw=1, label=f"{res.config_name}: pending" if many else "pending"
        )
        lines += 1
        if not many:
            ax.plot(t, m.series.running, lw=1, label="running")
            lines += 1
    _time_axis(ax, span)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("jobs")
    ax.set_title("Jobs waiting (submitted, not started) and running")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, lines, -0.25)
    _save(fig, path)


#: How each plot of :data:`PLOTS` is drawn: ``(results, path, time axis span)``.
_DRAW: dict[str, Callable[[Sequence[SimResult], Path, Span], None]] = {
    "utilization": _utilization,
    "queue_share": _queue_share,
    "wait_cdf": _cdf_plot("wait", "Wait time (submit to gang bound), minutes"),
    "completion_cdf": _cdf_plot("completion", "Job completion time (submit to end), minutes"),
    "pending": _pending,
}


def plot_topology(results: Sequence[SimResult], out: Path, uids: set[str] | None = None) -> Path:
    """``topology.png``: per run, the gangs (``uids``, default every gang) by the tier
    they spanned (stacked; those that never ran on top), and their wait and completion
    times (mean, p95, max, in hours)."""
    plt = _pyplot()
    views = [gang_view(r, uids) for r in results]
    names = [r.config_name for r in results]
    who = "constrained gangs" if uids is not None else "gangs"
    tiers = sorted({int(t) for v in views for t in v["by_tier"]})
    root = views[0]["root_tier"] if views else None
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    left = axes[0]
    x = np.arange(len(results))
    bottom = np.zeros(len(results))
    for k, tier in enumerate(tiers):
        counts = np.array([v["by_tier"].get(str(tier), 0) for v in views], dtype=float)
        label = tier_label(tier, root) if root is not None else f"tier {tier}"
        left.bar(x, counts, 0.6, bottom=bottom, label=label, color=f"C{k}")
        bottom += counts
    never = np.array([v["never_ran"] for v in views], dtype=float)
    if never.any():
        left.bar(x, never, 0.6, bottom=bottom, label="never ran", color="0.7", hatch="//")
    left.set_xticks(x, names)
    left.set_ylabel(who)
    left.set_title(f"Highest tier spanned ({who})", fontsize=10)
    left.grid(True, axis="y", alpha=0.3)
    left.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    width = 0.26
    for ax, key, title in (
        (axes[1], "wait", "Wait (submit to bound)"),
        (axes[2], "completion", "Completion time (submit to end)"),
    ):
        for k, stat in enumerate(("mean", "p95", "max")):
            vals = [(v[key][stat] or 0.0) / HOUR for v in views]
            ax.bar(x + (k - 1) * width, vals, width, label=stat, color=f"C{k + 4}")
        ax.set_xticks(x, names)
        ax.set_ylabel("hours")
        ax.set_title(f"{title}, {who}", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    fig.tight_layout()
    path = out / "topology.png"
    _save(fig, path)
    return path


def plot_cycle_cost(result: SimResult, out: Path) -> Path:
    """``cycle_cost.png``: the wall milliseconds of a scheduling cycle against the jobs
    it left waiting, the median and 90th percentile of each bin of backlog
    (:func:`~pumice.sim.cycle_cost.plot_bins`), and the cycles per bin below."""
    plt = _pyplot()
    bins = plot_bins(result)
    fig, (ax, low) = plt.subplots(
        2, 1, figsize=(9, 4.4), sharex=True, gridspec_kw={"height_ratios": (3, 1)}
    )
    if bins:
        x = [b.backlog for b in bins]
        ax.plot(x, [b.p90_ms for b in bins], "o-", ms=3, lw=1, color="C3",
                label="90th percentile")  # fmt: skip
        ax.plot(x, [b.median_ms for b in bins], "o-", ms=3, lw=1, color="C0", label="median")
        ax.set_ylim(bottom=0)
        edges = [b.low for b in bins] + [bins[-1].high + 1]
        low.stairs([b.cycles for b in bins], edges, fill=True, color="0.7")
        low.set_xlim(left=0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    else:
        ax.text(0.5, 0.5, "no scheduling cycle ran", ha="center", va="center",
                transform=ax.transAxes)  # fmt: skip
    ax.set_ylabel("ms per cycle")
    ax.set_title(
        f"Wall time of a scheduling cycle by jobs left waiting (bins of at least "
        f"{MIN_CYCLES} cycles)",
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    low.set_ylabel("cycles", fontsize=8)
    low.tick_params(labelsize=8)
    low.grid(True, alpha=0.3)
    low.set_xlabel("jobs waiting after the cycle (backlog)")
    fig.align_ylabels()
    path = out / "cycle_cost.png"
    _save(fig, path)
    return path


def _main_resource(resources: Sequence[str]) -> str:
    return "nvidia.com/gpu" if "nvidia.com/gpu" in resources else resources[0]
