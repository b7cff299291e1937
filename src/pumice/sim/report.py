"""The report of a simulation: a directory a person can open and a program can read.

Files (see ``docs/simulation.md`` for every column):

- ``metrics.json``: summary, per-queue figures, every job, the time series;
- ``jobs.csv``, ``queues.csv``, ``timeseries.csv``: the same as tables;
- ``utilization.png``, ``queue_share.png``, ``wait_cdf.png``, ``completion_cdf.png``,
  ``pending.png``: plots (matplotlib, Agg backend: no display needed);
- ``index.html``: one self-contained page (plots embedded as base64) with the summary;
- ``run.json``: wall-clock facts of the run (duration, speed); the only file that differs
  between two runs of the same inputs, which is why it is kept apart.

Metrics files are written with sorted, rounded values, so the same inputs give
byte-identical ``metrics.json`` and CSV files.
"""

from __future__ import annotations

import base64
import csv
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from pumice.sim.engine import SimResult
from pumice.sim.findings import Finding, findings
from pumice.sim.metrics import JobRecord, stats
from pumice.visibility.line import PendingJob

PLOTS = ("utilization", "queue_share", "wait_cdf", "completion_cdf", "pending")
HOUR = 3600.0
#: The file that says a directory is a pumice report (written into every report).
MARKER = ".pumice-report"
#: What a report directory holds besides the marker: the files pumice writes there.
_REPORT_SUFFIXES = (".html", ".json", ".csv", ".png")
#: A report written before the marker existed still had these files.
_LEGACY = ("index.html", "run.json")


def mark_report(out: Path) -> None:
    """Write the marker that makes ``out`` a pumice report (see :func:`prepare_out`)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text(
        "This directory is a report written by pumice simulate; the next run with this\n"
        "--out replaces what is in it.\n",
        encoding="utf-8",
    )


def is_report(path: Path) -> bool:
    """Whether ``path`` is a directory pumice wrote a report into: its marker, or the
    files of a report from before the marker (index.html and run.json)."""
    return (path / MARKER).is_file() or all((path / name).is_file() for name in _LEGACY)


def _made_by_pumice(path: Path) -> bool:
    """A report, or a directory holding only such (a grid's ``<config>/seed-N/``)."""
    if is_report(path):
        return True
    entries = list(path.iterdir())
    return bool(entries) and all(
        e.is_dir() and not e.is_symlink() and _made_by_pumice(e) for e in entries
    )


def prepare_out(out: str | Path) -> Path:
    """Make ``out`` ready to hold one run's report, before the run, and mark it: a new
    or empty directory as it is; a pumice report emptied of the files of the run before
    (its report files, and its subdirectories that pumice wrote: a what-if's or a grid's
    reports), leaving anything else alone; any other non-empty directory, or a file, is
    refused (:class:`~pumice.errors.InputError`, exit status 2), so a mistyped --out
    never deletes a user's files nor mixes a report with them."""
    import shutil

    from pumice.errors import InputError

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file, not a directory", field="--out")
    if out.exists() and any(out.iterdir()):
        if not is_report(out):
            raise InputError(
                f"{out} is not empty and is not a pumice report (it has no {MARKER} file): "
                "choose a new or empty directory, or remove this one",
                field="--out",
            )
        for child in out.iterdir():
            if child.is_dir() and not child.is_symlink():
                if _made_by_pumice(child):
                    shutil.rmtree(child)
            elif child.name == MARKER or child.suffix in _REPORT_SUFFIXES:
                child.unlink()
    mark_report(out)
    return out


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


def job_rows(result: SimResult) -> list[dict[str, Any]]:
    rows = []
    jobs = result.metrics.jobs.values()
    volcano = any(j.phase for j in jobs)  # Volcano Jobs: their final phase and retries
    network = result.metrics.spans is not None  # a cluster with HyperNodes
    for j in jobs:
        row = _job_row(j)
        if volcano:
            row["phase"] = j.phase
            row["retries"] = j.retries
        if network:
            row["network_topology"] = _nt_text(j)
            row["hypernode"] = j.hypernode
            row["tier"] = j.tier
            row["nodes_spanned"] = j.nodes_spanned
            row["slowdown"] = j.slowdown
        rows.append(row)
    return rows


def _nt_text(j: JobRecord) -> str:
    """``hard<=2``, ``soft<=2``, ``soft`` or "" (no networkTopology)."""
    if not j.nt_mode:
        return ""
    return j.nt_mode if j.nt_limit is None else f"{j.nt_mode}<={j.nt_limit}"


def _job_row(j: JobRecord) -> dict[str, Any]:
    return {
        "job": j.uid,
        "queue": j.queue,
        "pods": j.pods,
        "min_available": j.min_available,
        "gpus": _r(j.gpus),
        "outcome": j.outcome,
        "submit": _r(j.submit),
        "start": _r(j.start),
        "end": _r(j.end),
        "wait": _r(j.wait),
        "completion": _r(j.completion),
        "restarts": j.restarts,
        "evictions": j.evictions,
        "lost_pod_seconds": _r(j.lost),
        "pending_reason": j.pending_reason if j.start is None else "",
    }


def metrics_document(result: SimResult, found: Sequence[Finding] | None = None) -> dict[str, Any]:
    """The ``metrics.json`` document; ``found``: the run's findings, when already made."""
    m = result.metrics
    if found is None:
        found = findings(m)
    s = m.series
    w = result.workload
    return {
        "config": result.config_name,
        "workload": {
            "jobs": len(w.jobs),
            "queues": [q.name for q in w.queues],
            "skipped_rows": w.skipped,
            "warnings": list(w.warnings),
        },
        "resources": m.resources,
        "summary": result.summary,
        "findings": [f.as_dict() for f in found],
        "jobs": job_rows(result),
        "series": {
            "time": s.time,
            "utilization": {r: [u[i] for u in s.utilization] for i, r in enumerate(m.resources)},
            "queue_share": {q: [v[i] for v in s.queue_share] for i, q in enumerate(m.queues)},
            "queue_deserved": {q: [v[i] for v in s.queue_deserved] for i, q in enumerate(m.queues)},
            "pending_jobs": s.pending,
            "running_jobs": s.running,
        },
        "busiest_line": line_document(result),
    }


#: How many jobs of the line at the busiest moment the report lists.
LINE_SHOWN = 20


def line_document(result: SimResult) -> dict[str, Any] | None:
    """The line at the busiest moment for ``metrics.json``: when, how many waited, by
    stage and by queue, and the first :data:`LINE_SHOWN` jobs in the order the
    scheduler tried them (the shape of ``pumice run``'s visibility endpoint's items)."""
    if result.busiest_line is None:
        return None
    t, jobs = result.busiest_line
    stages: dict[str, int] = {}
    queues: dict[str, int] = {}
    for j in jobs:
        stages[j.stage] = stages.get(j.stage, 0) + 1
        queues[j.queue] = queues.get(j.queue, 0) + 1
    return {
        "time": t,
        "waiting": len(jobs),
        "stages": dict(sorted(stages.items())),
        "queues": dict(sorted(queues.items())),
        "items": [j.to_json() for j in jobs[:LINE_SHOWN]],
    }


def line_html(result: SimResult) -> list[str]:
    """The report's section on the line at the busiest moment: per queue, how many
    waited, stopped at which stage, and who was next; then the head of the line."""
    if result.busiest_line is None:
        return []
    t, jobs = result.busiest_line
    per: dict[str, list[PendingJob]] = {}
    for j in jobs:
        per.setdefault(j.queue, []).append(j)
    rows = []
    for queue, mine in per.items():
        stages: dict[str, int] = {}
        for j in mine:
            stages[j.stage] = stages.get(j.stage, 0) + 1
        head = mine[0]
        by_stage = ", ".join(f"{n} {s}" for s, n in sorted(stages.items()))
        rows.append([queue, len(mine), by_stage, f"{head.namespace}/{head.name}", head.reason])
    first = [
        [j.position_in_cluster, j.position_in_queue, f"{j.namespace}/{j.name}", j.queue,
         j.priority, j.stage, j.reason]
        for j in jobs[:LINE_SHOWN]
    ]  # fmt: skip
    return [
        "<h2>The line at the busiest moment</h2>",
        f"<p class='note'>At {minutes(t)} the most jobs waited after a cycle: "
        f"{len(jobs):,}. Queues in the order the scheduler served them, each with the "
        "stage that stopped its jobs (enqueue: not admitted; queue: its share or "
        "capability; allocate: no node fits, or the gang falls short) and the job it "
        "would try first.</p>",
        html_table(["queue", "waiting", "stopped at", "first in line", "why it waits"], rows),
        f"<p class='note'>The first {len(first)} of the line, in the order the scheduler "
        "tried them (as <code>pumice queue pending</code> shows a cluster's).</p>",
        html_table(["#", "in queue", "job", "queue", "priority", "stage", "why"], first),
    ]


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for row in rows:
            w.writerow(["" if v is None else v for v in row])


def write_metrics(
    result: SimResult, out: Path, found: Sequence[Finding] | None = None
) -> dict[str, Any]:
    """Write ``metrics.json`` and the CSV files; return the metrics document."""
    out.mkdir(parents=True, exist_ok=True)
    doc = metrics_document(result, found)
    (out / "metrics.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    jobs = doc["jobs"]
    if jobs:
        _write_csv(out / "jobs.csv", list(jobs[0]), [list(j.values()) for j in jobs])
    else:
        _write_csv(out / "jobs.csv", ["job"], [])
    qrows = []
    for q, v in result.summary["queues"].items():
        qrows.append(
            [
                q,
                v["jobs"],
                v["wait"]["mean"],
                v["wait"]["p50"],
                v["wait"]["p95"],
                v["completion"]["mean"],
                v["completion"]["p50"],
                v["completion"]["p95"],
                v["mean_share"],
                v["mean_deserved"],
                v["fairness_gap"],
                v["evictions"],
                v["wait"]["max"],
                v["completion"]["max"],
            ]
        )
    _write_csv(
        out / "queues.csv",
        [
            "queue",
            "jobs",
            "wait_mean",
            "wait_p50",
            "wait_p95",
            "completion_mean",
            "completion_p50",
            "completion_p95",
            "mean_share",
            "mean_deserved",
            "fairness_gap",
            "evictions",
            "wait_max",
            "completion_max",
        ],
        qrows,
    )
    m = result.metrics
    s = m.series
    header = ["time", *(f"util_{r}" for r in m.resources), "pending_jobs", "running_jobs"]
    header += [f"share_{q}" for q in m.queues] + [f"deserved_{q}" for q in m.queues]
    rows = [
        [
            s.time[i],
            *s.utilization[i],
            s.pending[i],
            s.running[i],
            *s.queue_share[i],
            *s.queue_deserved[i],
        ]
        for i in range(len(s.time))
    ]
    _write_csv(out / "timeseries.csv", header, rows)
    return doc


# -- plots -------------------------------------------------------------------------------


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=100, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)


def _cdf(ax, values: Sequence[float], label: str) -> None:
    if not values:
        return
    v = np.sort(np.asarray(values, dtype=np.float64)) / 60.0
    y = np.arange(1, len(v) + 1) / len(v)
    ax.step(v, y, where="post", label=label)


def _minutes_axis(ax, values: Sequence[float]) -> None:
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


def _time_axis(ax, span: tuple[float, float] | None) -> None:
    if span is not None:
        ax.set_xlim(*span)


def _legend_below(ax, n: int, offset: float = -0.22) -> None:
    """A legend under the axes, outside the data."""
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, offset), ncol=min(max(n, 1), 4), fontsize=8,
        frameon=False,
    )  # fmt: skip


def plot_report(results: Sequence[SimResult], out: Path) -> dict[str, Path]:
    """Draw the five plots; with several results (what-if), one line per result. Every
    legend sits outside the axes, every panel has its y label, and the time axis covers
    the hours in which something happens (:func:`active_hours`)."""
    plt = _pyplot()
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    many = len(results) > 1
    first = results[0].metrics
    span = active_hours(results)

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
    paths["utilization"] = out / "utilization.png"
    _save(fig, paths["utilization"])

    queues = first.queues
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
    paths["queue_share"] = out / "queue_share.png"
    _save(fig, paths["queue_share"])

    for name, attr, title in (
        ("wait_cdf", "wait", "Wait time (submit to gang bound), minutes"),
        ("completion_cdf", "completion", "Job completion time (submit to end), minutes"),
    ):
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
        if many:
            _legend_below(ax, len(results))
        paths[name] = out / f"{name}.png"
        _save(fig, paths[name])

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
    paths["pending"] = out / "pending.png"
    _save(fig, paths["pending"])
    return paths


def gang_view(result: SimResult, uids: set[str] | None = None) -> dict[str, Any]:
    """The gangs ``uids`` (default: every job of more than one pod) of a run on a cluster
    with HyperNodes: how many, how many never ran, by the tier they spanned, their wait
    and completion times (mean, p50, p95, max) and the highest tier any spanned."""
    jobs = [
        j
        for j in result.metrics.jobs.values()
        if (j.uid in uids if uids is not None else j.pods > 1)
    ]
    spans = result.metrics.spans
    tiers = list(spans.topology.tiers) if spans is not None else []
    by_tier = {str(t): 0 for t in tiers}
    for j in jobs:
        if j.start is not None and j.tier is not None:
            by_tier[str(j.tier)] = by_tier.get(str(j.tier), 0) + 1
    spanned = [j.tier for j in jobs if j.start is not None and j.tier is not None]
    return {
        "jobs": len(jobs),
        "never_ran": sum(1 for j in jobs if j.start is None),
        "by_tier": by_tier,
        "highest_tier": max(spanned, default=None),
        "mean_tier": round(float(np.mean(spanned)), 3) if spanned else None,
        "wait": stats([j.wait for j in jobs if j.wait is not None]),
        "completion": stats([j.completion for j in jobs if j.completion is not None]),
        "root_tier": spans.root_tier if spans is not None else None,
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


def _main_resource(resources: Sequence[str]) -> str:
    return "nvidia.com/gpu" if "nvidia.com/gpu" in resources else resources[0]


# -- HTML --------------------------------------------------------------------------------

PAGE_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
img{max-width:100%;margin:.5em 0}.note{color:#555;font-size:.9em}
.bad{color:#b00;font-weight:bold}.ok{color:#070}
.finding{border-left:4px solid #c60;padding:.2em .8em;margin:.8em 0;background:#fffaf4}
.finding h3{font-size:1em;margin:.3em 0}.remedy{color:#050}
"""


def html_img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _scheduling(run: Mapping[str, Any]) -> str:
    """How much of the wall time went to scheduling (the cycles and the cache's work
    around them), when the run says; the rest was the simulated cluster."""
    seconds = run.get("scheduling_seconds")
    return "" if seconds is None else f" ({seconds:.1f} s of it scheduling)"


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{h}</tr>{body}</table>"


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def minutes(v: float | None) -> str:
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


def _queue_table(summary: dict[str, Any]) -> str:
    rows = []
    for q, v in summary["queues"].items():
        rows.append(
            [
                q,
                v["jobs"],
                minutes(v["wait"]["mean"]),
                minutes(v["wait"]["p50"]),
                minutes(v["wait"]["p95"]),
                duration(v["wait"]["max"]),
                minutes(v["completion"]["mean"]),
                minutes(v["completion"]["p95"]),
                f"{v['mean_share']:.3f}",
                f"{v['mean_deserved']:.3f}",
                f"{v['fairness_gap']:.3f}",
                v["evictions"],
            ]
        )
    return html_table(
        [
            "queue",
            "jobs",
            "wait mean",
            "wait p50",
            "wait p95",
            "wait max",
            "JCT mean",
            "JCT p95",
            "share",
            "deserved",
            "gap",
            "evictions",
        ],
        rows,
    )


def findings_html(found: Sequence[Finding]) -> str:
    """The "Findings" section: each finding's title, what happened, the remedy to try;
    the longest waits as a table of the reasons that held each job."""
    if not found:
        return (
            "<h2>Findings</h2><p class='ok'>Nothing stands out: no job waited an hour, no "
            "queue stayed far below its deserved share, no capacity sat idle while jobs "
            "waited.</p>"
        )
    parts = ["<h2>Findings</h2>"]
    for f in found:
        parts.append("<div class='finding'>")
        parts.append(f"<h3>{html.escape(f.title)}</h3><p>{html.escape(f.text)}</p>")
        if f.kind == "long_waits":
            rows = []
            for j in f.numbers["jobs"]:
                held = "; ".join(
                    f"{r['reason']}: {r['seconds'] / HOUR:,.1f} h" for r in j["reasons"]
                )
                last = j["reasons"][0]["example"] if j["reasons"] else ""
                rows.append(
                    [
                        j["job"],
                        j["queue"],
                        j["pods"],
                        j["gpus"],
                        duration(j["wait"]) + (" (never ran)" if j["never_ran"] else ""),
                        held or "–",
                        last or "–",
                    ]
                )
            parts.append(
                html_table(
                    ["job", "queue", "pods", "GPUs", "wait", "what held it (hours)",
                     "the scheduler's explanation (longest-held reason)"],
                    rows,
                )
            )  # fmt: skip
        if f.remedy:
            parts.append(f"<p class='remedy'>{html.escape(f.remedy)}</p>")
        parts.append("</div>")
    parts.append(
        "<p class='note'>Read from the scheduler's explanations of each waiting job, "
        "sampled with the time series, and from the allocated and deserved shares; the "
        "remedies are estimates from this run, to try in a what-if (several --config).</p>"
    )
    return "".join(parts)


def write_html(
    result: SimResult,
    plots: dict[str, Path],
    out: Path,
    run: dict,
    found: Sequence[Finding] | None = None,
) -> Path:
    s = result.summary
    if found is None:
        found = findings(result.metrics)
    never = [j for j in result.metrics.jobs.values() if j.start is None]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>pumice simulate: {html.escape(result.config_name)}</title>",
        f"<style>{PAGE_CSS}</style></head><body>",
        f"<h1>pumice simulate — {html.escape(result.config_name)}</h1>",
        f"<p class='note'>{len(result.workload.jobs):,} jobs on {run.get('nodes', '?')} "
        f"nodes, {result.sim_time / HOUR:,.1f} simulated hours in "
        f"{run.get('wall_seconds', 0):.1f} s of wall time{_scheduling(run)}.</p>",
        findings_html(found),
        "<h2>Summary</h2>",
        html_table(["metric", "value"], summary_rows(s)),
        f"<p class='note'>{html.escape(UTILIZATION_NOTE)}</p>",
    ]
    gv = s["gang_violations"]
    parts.append(
        f"<p class='{'bad' if gv else 'ok'}'>Gang atomicity: {gv} violation(s). "
        "Every job that received binds held at least minMember pods after the cycle.</p>"
        if not gv
        else f"<p class='bad'>Gang atomicity: {gv} violation(s)!</p>"
    )
    if result.workload.skipped:
        parts.append(
            f"<p class='bad'>{result.workload.skipped} input row(s) were skipped: "
            + html.escape("; ".join(result.workload.warnings[:5]))
            + "</p>"
        )
    parts += [
        "<h2>Utilization</h2>",
        html_img(plots["utilization"], "utilization over time"),
        "<h2>Queues</h2>",
        _queue_table(s),
        "<p class='note'>share: time-averaged dominant share of the cluster held by the "
        "queue; deserved: weighted max-min fair share of its demand; gap: mean absolute "
        "difference of the two.</p>",
        html_img(plots["queue_share"], "queue share vs deserved"),
        "<h2>Wait and completion times</h2>",
        html_img(plots["wait_cdf"], "wait time CDF"),
        html_img(plots["completion_cdf"], "JCT CDF"),
        "<h2>Pending jobs</h2>",
        html_img(plots["pending"], "pending jobs over time"),
        *line_html(result),
    ]
    if "topology" in plots:
        parts += [
            "<h2>Network topology</h2>",
            "<p class='note'>Each gang (job of more than one pod) by the tier of the lowest "
            "HyperNode holding the nodes its pods were on when it started running; the "
            "highest tier is the whole cluster.</p>",
            html_img(plots["topology"], "gangs by tier spanned"),
        ]
    if never:
        parts.append(f"<h2>Jobs that never ran ({len(never):,})</h2>")
        parts.append(
            "<p class='note'>The simulation ended with these jobs still waiting and nothing "
            "left that could change a decision (no arrival, no pod to end): every further "
            "cycle would decide the same. The reason is the scheduler's own explanation "
            "from its last cycle.</p>"
        )
        parts.append(
            html_table(
                ["job", "queue", "pods", "why (the scheduler's last explanation)"],
                [
                    [j.uid, j.queue, j.pods, j.pending_reason or "never considered"]
                    for j in never[:50]
                ],
            )
        )
        if len(never) > 50:
            parts.append(f"<p class='note'>… and {len(never) - 50:,} more in jobs.csv</p>")
    parts.append(
        "<p class='note'>Files: metrics.json, jobs.csv, queues.csv, timeseries.csv, "
        "run.json, and the PNG plots. Definitions: docs/simulation.md.</p></body></html>"
    )
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def write_report(result: SimResult, out: str | Path, run: dict | None = None) -> Path:
    """Write the whole report directory for one run; return the HTML page's path."""
    out = Path(out)
    run = dict(run or {})
    found = findings(result.metrics)
    write_metrics(result, out, found)
    mark_report(out)
    plots = plot_report([result], out)
    if result.metrics.spans is not None:
        plots["topology"] = plot_topology([result], out)
    (out / "run.json").write_bytes(orjson.dumps(run, option=orjson.OPT_INDENT_2) + b"\n")
    return write_html(result, plots, out, run, found)


__all__ = [
    "MARKER",
    "PLOTS",
    "UTILIZATION_NOTE",
    "UTILIZATION_WINDOWS",
    "findings_html",
    "gang_view",
    "is_report",
    "line_document",
    "line_html",
    "mark_report",
    "metrics_document",
    "plot_report",
    "plot_topology",
    "prepare_out",
    "summary_rows",
    "utilization_rows",
    "write_report",
]
