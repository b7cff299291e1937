"""A run's figures in words, the same on the terminal and on the report's page.

The summary's headline rows (:func:`summary_rows`: jobs, wait and completion, utilization
over its three windows, fairness, evictions, the job controller, the network, forecasts,
gang atomicity, cycles) as (label, value) pairs, and the units they are written in:
:func:`minutes`, :func:`duration`, :func:`tier_label`, :data:`HOUR`. Nothing here draws or
writes a file; ``pumice simulate``'s table, the HTML page and the what-if and sweep
pages all say a figure the same way through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Seconds in an hour: the report gives long times in hours.
HOUR = 3600.0


def minutes(v: float | None) -> str:
    """Seconds as minutes, one decimal; None (no such figure) as a dash."""
    return "–" if v is None else f"{v / 60.0:,.1f} min"


def duration(v: float | None) -> str:
    """Seconds as minutes, or as hours from 10 hours on (a wait of days stays readable)."""
    if v is None:
        return "–"
    return f"{v / HOUR:,.1f} h" if v >= 10 * HOUR else f"{v / 60.0:,.1f} min"


STATS = ("mean", "p50", "p95", "max")

#: The time averages of utilization a summary has: (its key, what the average is over).
#: The whole run is the long-standing ``utilization``; a run whose last jobs run long
#: after the last arrival averages a mostly idle tail into it, so the arrival window and
#: the time in which some job waited say how full the cluster was while it was busy.
UTILIZATION_WINDOWS = (
    ("utilization", "whole run"),
    ("utilization_arrivals", "arrivals"),
    ("utilization_waiting", "waiting"),
)


#: What the utilization rows average over, said under the tables that show them.
UTILIZATION_NOTE = (
    "Utilization is a time average of what bound pods hold, as a share of the cluster: "
    "whole run = from the first arrival to the end; arrivals = over the arrival window, "
    "from the first arrival to the last; waiting = over the time in which at least one "
    "job was pending. When a few long jobs run on after the last arrival, the whole-run "
    "figure is mostly that idle tail; the other two say how full the cluster was while "
    "work was coming in or waiting."
)


def utilization_rows(summary: Mapping[str, Any]) -> list[tuple[str, str, dict[str, float]]]:
    """The summary's utilization averages: (key, window, {resource: share}); a window
    without time (all jobs arrived at once, no job ever waited) has no figures."""
    return [(key, window, dict(summary.get(key) or {})) for key, window in UTILIZATION_WINDOWS]


def _utilization_summary(s: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The summary table's utilization rows, each saying what it averages over."""

    def shares(values: Mapping[str, float]) -> str:
        return ", ".join(f"{r} {v:.1%}" for r, v in values.items()) or "–"

    rows = [
        (
            "utilization, whole run",
            f"{shares(s['utilization'])} (first arrival to the end)",
        )
    ]
    if "utilization_arrivals" in s:
        rows.append(
            (
                "utilization, arrival window",
                f"{shares(s['utilization_arrivals'])} (first to last arrival, "
                f"{s['arrival_window'] / HOUR:,.1f} h)"
                if s["utilization_arrivals"]
                else "– (all jobs arrived at once)",
            )
        )
    if "utilization_waiting" in s:
        rows.append(
            (
                "utilization while jobs waited",
                f"{shares(s['utilization_waiting'])} (the {s['waiting_seconds'] / HOUR:,.1f} h "
                "in which a job was pending)"
                if s["utilization_waiting"]
                else "– (no job waited)",
            )
        )
    return rows


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The headline figures as (label, value) pairs: terminal table and HTML."""
    s = summary
    return [
        (
            "jobs",
            f"{s['jobs']:,} ({s['jobs_ended']:,} ended: {s['jobs_succeeded']:,} "
            f"succeeded, {s['jobs_failed']:,} failed, {s['jobs_cancelled']:,} "
            f"cancelled; {s['jobs_never_ran']:,} never ran)",
        ),
        ("makespan", f"{s['makespan'] / HOUR:,.1f} h"),
        (
            "wait (mean / p50 / p95 / max)",
            " / ".join(duration(s["wait"][k]) for k in STATS),
        ),
        (
            "completion (mean / p50 / p95 / max)",
            " / ".join(duration(s["completion"][k]) for k in STATS),
        ),
        *_utilization_summary(s),
        ("fairness gap (mean |share - deserved|)", f"{s['fairness_gap']:.3f}"),
        (
            "evictions / restarts / lost work",
            f"{s['evictions']:,} / {s['restarts']:,} / "
            f"{s['lost_work_pod_seconds'] / HOUR:,.1f} pod-h",
        ),
        *_controller_rows(s),
        *_topology_rows(s),
        *_forecast_rows(s),
        (
            "gang atomicity violations",
            f"{s['gang_violations']} (of {s['gang_checks']:,} gangs checked)",
        ),
        ("scheduling cycles", f"{s['cycles']:,} run, {s['skipped_ticks']:,} idle ticks skipped"),
    ]


def _forecast_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The start forecasts' error, when ``--forecast-error`` asked for them."""
    fc = s.get("forecast")
    if not fc:
        return []
    err = fc["abs_error"]
    coverage = "-" if fc["coverage"] is None else f"{fc['coverage']:.0%}"
    shown = " / ".join(duration(err[k]) for k in ("mean", "p90"))
    return [
        (
            f"start forecast |error| (mean / p90; {fc['durations']} run times)",
            f"{shown}; {fc['with_estimate']:,} of {fc['jobs']:,} jobs had an estimate ({coverage})",
        )
    ]


def _controller_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """What the job controller did, when it ran: the Jobs' final phases, and each
    lifecycle action executed with the work lost to it (and to evictions)."""
    rows = []
    phases = s.get("jobs_by_phase") or {}
    if phases:
        rows.append(("Volcano Jobs (final phase)",
                     ", ".join(f"{n:,} {p}" for p, n in phases.items())))  # fmt: skip
    actions = s.get("actions") or {}
    lost = s.get("lost_by_cause") or {}
    causes = sorted(set(actions) | set(lost))
    if causes and (phases or actions):
        parts = []
        for c in causes:
            n = f"{actions[c]:,}× " if c in actions else ""
            parts.append(f"{c} {n}{lost.get(c, 0.0) / HOUR:,.1f} pod-h")
        rows.append(("actions (times, lost work)", "; ".join(parts)))
    return rows


def tier_label(tier: str | int, root: int) -> str:
    """A HyperNode tier as the report names it; ``root``, the whole cluster's, says so."""
    return f"tier {tier} (cluster)" if int(tier) == root else f"tier {tier}"


def _topology_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The network side, on a cluster with HyperNodes: gangs by the tier they spanned,
    the slowdown, and the jobs with a networkTopology."""
    t = s.get("topology")
    if t is None:
        return []
    root = t["root_tier"]

    def tiers(counts: dict[str, int]) -> str:
        return ", ".join(f"{tier_label(k, root)}: {n:,}" for k, n in counts.items()) or "–"

    rows = [("gangs by tier spanned", tiers(t["gangs_by_tier"]))]
    if t["slowdown"]:
        factors = ", ".join(f"{tier_label(k, root)} ×{v:g}" for k, v in t["slowdown"].items())
        rows.append(("topology slowdown", f"{factors}; {t['slowed_gangs']:,} gangs slowed"))
    for mode, v in t["constrained"].items():
        text = f"{v['jobs']:,} jobs, {v['started']:,} started: {tiers(v['by_tier'])}"
        if mode == "hard":
            text += f"; {v['above_limit']:,} above their limit"
        rows.append((f"networkTopology {mode}", text))
    return rows
