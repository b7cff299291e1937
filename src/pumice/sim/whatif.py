"""What-if: the same workload under several scheduler configurations, side by side.

Each configuration gets its own full report in a subdirectory named after it; the top
directory holds ``comparison.json``, ``comparison.csv``, overlay plots and an
``index.html`` with one column per configuration: wait and completion time (mean, p50,
p95) overall and per queue, utilization, fairness (mean |allocated share - deserved
share| per queue, the deserved share being independent of the configuration, see
:mod:`pumice.sim.metrics`), evictions and restarts.
"""

from __future__ import annotations

import csv
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from pumice.sim.engine import SimResult
from pumice.sim.report import _CSS, _img, _table, minutes, plot_report


def config_names(paths: Sequence[str]) -> list[str]:
    """Short, unique names for config files (file stems; numbered when they clash)."""
    names: list[str] = []
    for p in paths:
        base = Path(p).stem or "config"
        name, k = base, 2
        while name in names:
            name, k = f"{base}-{k}", k + 1
        names.append(name)
    return names


def comparison_rows(results: Sequence[SimResult]) -> list[tuple[str, list[Any]]]:
    """(metric, [value per configuration]) rows, in the order the page shows them."""
    rows: list[tuple[str, list[Any]]] = []

    def add(label: str, fn) -> None:
        rows.append((label, [fn(r.summary) for r in results]))

    for key in ("wait", "completion"):
        for stat in ("mean", "p50", "p95"):
            add(f"{key} {stat} (s)", lambda s, k=key, st=stat: s[k][st])
    for r in results[0].summary["utilization"]:
        add(f"utilization {r}", lambda s, r=r: s["utilization"].get(r))
    add("fairness gap (mean over queues)", lambda s: s["fairness_gap"])
    add("evictions", lambda s: s["evictions"])
    add("restarts", lambda s: s["restarts"])
    add("jobs never ran", lambda s: s["jobs_never_ran"])
    add("makespan (s)", lambda s: s["makespan"])
    add("gang violations", lambda s: s["gang_violations"])
    for q in results[0].summary["queues"]:
        for key in ("wait", "completion"):
            for stat in ("mean", "p50", "p95"):
                add(f"{q}: {key} {stat} (s)", lambda s, q=q, k=key, st=stat: s["queues"][q][k][st])
        add(f"{q}: fairness gap", lambda s, q=q: s["queues"][q]["fairness_gap"])
        add(f"{q}: evictions", lambda s, q=q: s["queues"][q]["evictions"])
    return rows


def write_comparison(results: Sequence[SimResult], out: str | Path, run: dict) -> Path:
    """Write the comparison files into ``out`` (the per-config reports are written by
    the caller into ``out/<config name>/``); return the HTML page's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = [r.config_name for r in results]
    rows = comparison_rows(results)
    doc = {
        "configs": names,
        "rows": [
            {"metric": label, "values": dict(zip(names, vals, strict=True))} for label, vals in rows
        ],
        "summaries": {r.config_name: r.summary for r in results},
    }
    (out / "comparison.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    with (out / "comparison.csv").open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["metric", *names])
        for label, vals in rows:
            w.writerow([label, *("" if v is None else v for v in vals)])
    plots = plot_report(results, out)
    (out / "run.json").write_bytes(orjson.dumps(run, option=orjson.OPT_INDENT_2) + b"\n")

    def head_rows() -> list[list[Any]]:
        out_rows = []
        for key, label in (("wait", "wait"), ("completion", "completion time")):
            for stat in ("mean", "p50", "p95"):
                out_rows.append(
                    [f"{label} {stat}", *(minutes(r.summary[key][stat]) for r in results)]
                )
        for res in results[0].summary["utilization"]:
            out_rows.append(
                [f"utilization {res}", *(f"{r.summary['utilization'][res]:.1%}" for r in results)]
            )
        for key, label in (
            ("fairness_gap", "fairness gap"),
            ("evictions", "evictions"),
            ("restarts", "restarts"),
            ("jobs_never_ran", "jobs never ran"),
            ("gang_violations", "gang violations"),
        ):
            out_rows.append([label, *(r.summary[key] for r in results)])
        return out_rows

    queue_rows = []
    for q in results[0].summary["queues"]:
        row: list[Any] = [q]
        for r in results:
            v = r.summary["queues"][q]
            row += [
                minutes(v["wait"]["mean"]),
                minutes(v["wait"]["p95"]),
                minutes(v["completion"]["mean"]),
                f"{v['fairness_gap']:.3f}",
            ]
        queue_rows.append(row)
    qhead = ["queue"]
    for n in names:
        qhead += [f"{n}: wait mean", f"{n}: wait p95", f"{n}: JCT mean", f"{n}: gap"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>pumice simulate: what-if</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>pumice simulate — what-if: " + html.escape(" vs ".join(names)) + "</h1>",
        f"<p class='note'>The same workload ({len(results[0].workload.jobs):,} jobs) under "
        f"{len(results)} configurations. Each has its own full report: "
        + ", ".join(f"<a href='{html.escape(n)}/index.html'>{html.escape(n)}</a>" for n in names)
        + ".</p>",
        "<h2>Side by side</h2>",
        _table(["metric", *names], head_rows()),
        "<h2>Per queue</h2>",
        _table(qhead, queue_rows),
        "<p class='note'>gap: mean |allocated share - deserved share| of the queue over "
        "time (0 = always exactly its fair share).</p>",
        "<h2>Plots</h2>",
        _img(plots["wait_cdf"], "wait CDF"),
        _img(plots["completion_cdf"], "completion CDF"),
        _img(plots["utilization"], "utilization"),
        _img(plots["pending"], "pending jobs"),
        _img(plots["queue_share"], "queue shares"),
        "</body></html>",
    ]
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


__all__ = ["comparison_rows", "config_names", "write_comparison"]
