"""A report's page: ``index.html``, one self-contained file (plots embedded as base64).

:func:`write_html` lays out the findings, the summary (:mod:`pumice.sim.summary_text`),
the plots, the queues, the line at the busiest moment, the jobs that never ran and the
wall time of the scheduling cycles (:func:`cycle_cost_html`).
:data:`PAGE_CSS`, :func:`html_table` and :func:`html_img` are shared with the what-if and
sweep pages, so every page pumice writes looks the same. Values are escaped; ``None``
shows as a dash.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pumice.sim.engine import SimResult
from pumice.sim.findings import Finding, findings
from pumice.sim.report_metrics import LINE_SHOWN
from pumice.sim.summary_text import HOUR, UTILIZATION_NOTE, duration, minutes, summary_rows
from pumice.visibility.line import PendingJob

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


def cycle_cost_html(plot: Path | None, run: Mapping[str, Any]) -> list[str]:
    """The section on the run's wall time: what a scheduling cycle cost against the
    backlog it left (the plot, and run.json's ranges as a table)."""
    if plot is None:
        return []
    rows = [
        [f"{r['backlog_from']:,}" if r["backlog_from"] == r["backlog_to"]
         else f"{r['backlog_from']:,}–{r['backlog_to']:,}",
         r["cycles"], r["median_ms"], r["p90_ms"]]
        for r in run.get("cycle_cost_by_backlog", ())
    ]  # fmt: skip
    parts = [
        "<h2>Wall time of the scheduling cycles</h2>",
        f"<p class='note'>Scheduling ({run.get('cycles', 0):,} cycles) took "
        f"{run.get('scheduling_seconds', 0):.1f} s of the {run.get('wall_seconds', 0):.1f} s "
        "of wall time. Below, the wall time of one cycle (the scheduler cache's sync and "
        "snapshot, the cycle, applying its decisions) against the number of jobs it left "
        "waiting: the median and 90th percentile of the cycles in each bin of backlog, and "
        "how many cycles each bin holds. It measures this machine's wall time, so another "
        "machine, or another run here, gives other figures; the slope is what to read.</p>",
        html_img(plot, "wall time per cycle against the backlog"),
    ]
    if rows:
        parts.append(html_table(["jobs waiting", "cycles", "median ms", "p90 ms"], rows))
    return parts


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
    """Write ``index.html`` into ``out`` and return its path: ``plots`` are the PNG files
    by name (:func:`~pumice.sim.report_plots.plot_report`'s, and ``topology`` when
    drawn), ``run`` the wall-clock facts; ``found``: the run's findings, when already made."""
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
    parts += cycle_cost_html(plots.get("cycle_cost"), run)
    parts.append(
        "<p class='note'>Files: metrics.json, jobs.csv, queues.csv, timeseries.csv, "
        "run.json, and the PNG plots. Definitions: docs/simulation.md.</p></body></html>"
    )
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
