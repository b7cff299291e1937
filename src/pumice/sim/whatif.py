"""What-if: the same workload under several scheduler configurations, side by side.

Each configuration gets its own full report in a subdirectory named after it; the top
directory holds ``comparison.json``, ``comparison.csv``, overlay plots and an
``index.html`` with one column per configuration: wait and completion time (mean, p50,
p95) overall and per queue, utilization, fairness (mean |allocated share - deserved
share| per queue, the deserved share being independent of the configuration, see
:mod:`pumice.sim.metrics`), evictions and restarts.

The runs may differ in their workload too: a what-if over network-topology constraints
(``--network-topology hard,soft,none``) runs the same jobs with the large gangs' PodGroup
``networkTopology`` set to each mode. On a cluster with HyperNodes the comparison then
has a network section: waits and completion times (mean, p95, max) overall and for the
gangs whose constraint differs between the runs (every gang when none does),
utilization, and those gangs by the highest tier they spanned, with ``topology.png``.
"""

from __future__ import annotations

import csv
import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from pumice.sim.engine import SimResult
from pumice.sim.findings import findings
from pumice.sim.gpu_sharing import what_sharing_bought
from pumice.sim.report_folder import mark_report
from pumice.sim.report_html import PAGE_CSS, html_img, html_table
from pumice.sim.report_metrics import gang_view
from pumice.sim.report_plots import plot_report, plot_topology
from pumice.sim.summary_text import (
    HOUR,
    UTILIZATION_NOTE,
    duration,
    minutes,
    tier_label,
    utilization_rows,
)


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


def focus_gangs(results: Sequence[SimResult]) -> set[str] | None:
    """The jobs whose ``networkTopology`` differs between the runs' workloads (the
    gangs a topology what-if constrains differently); None when none does."""
    seen: dict[str, set[Any]] = {}
    for r in results:
        for j in r.workload.jobs:
            seen.setdefault(f"{j.namespace}/{j.name}", set()).add(j.network_topology)
    differ = {uid for uid, values in seen.items() if len(values) > 1}
    return differ or None


def has_topology(results: Sequence[SimResult]) -> bool:
    return any("topology" in r.summary for r in results)


def topology_rows(results: Sequence[SimResult]) -> list[tuple[str, list[Any]]]:
    """The network section's (metric, [value per run]) rows, in seconds and counts."""
    focus = focus_gangs(results)
    views = [gang_view(r, focus) for r in results]
    who = "constrained gangs" if focus is not None else "gangs"
    rows: list[tuple[str, list[Any]]] = []
    for key in ("wait", "completion"):
        for stat in ("mean", "p95", "max"):
            rows.append((f"{key} {stat} (s)", [r.summary[key][stat] for r in results]))
    for res in results[0].summary["utilization"]:
        rows.append((f"utilization {res}", [r.summary["utilization"].get(res) for r in results]))
    rows.append((f"{who}", [v["jobs"] for v in views]))
    rows.append((f"{who}: never ran", [v["never_ran"] for v in views]))
    for key in ("wait", "completion"):
        for stat in ("mean", "p95", "max"):
            rows.append((f"{who}: {key} {stat} (s)", [v[key][stat] for v in views]))
    tiers = sorted({int(t) for v in views for t in v["by_tier"]})
    root = views[0]["root_tier"]
    for t in tiers:
        label = tier_label(t, root) if root is not None else f"tier {t}"
        rows.append((f"{who} at {label}", [v["by_tier"].get(str(t), 0) for v in views]))
    rows.append((f"{who}: highest tier spanned", [v["highest_tier"] for v in views]))
    rows.append((f"{who}: mean tier spanned", [v["mean_tier"] for v in views]))
    rows.append(
        (
            "hard gangs above their limit",
            [
                ((r.summary.get("topology") or {}).get("constrained") or {})
                .get("hard", {})
                .get("above_limit", 0)
                for r in results
            ],
        )
    )
    rows.append(
        ("gangs slowed", [(r.summary.get("topology") or {}).get("slowed_gangs") for r in results])
    )
    return rows


def comparison_rows(results: Sequence[SimResult]) -> list[tuple[str, list[Any]]]:
    """(metric, [value per configuration]) rows, in the order the page shows them."""
    rows: list[tuple[str, list[Any]]] = []

    # (``fn`` takes a run's summary; the lambdas' other parameters hold loop values)
    def add(label: str, fn: Callable[..., Any]) -> None:
        rows.append((label, [fn(r.summary) for r in results]))

    for key in ("wait", "completion"):
        for stat in ("mean", "p50", "p95"):
            add(f"{key} {stat} (s)", lambda s, k=key, st=stat: s[k][st])
        add(f"{key} max (s)", lambda s, k=key: s[k]["max"])
    for key, window, values in utilization_rows(results[0].summary):
        # (the whole run's rows keep their plain label: files that read it find it)
        suffix = "" if key == "utilization" else f" ({window})"
        for r in values or results[0].summary["utilization"]:
            add(f"utilization {r}{suffix}", lambda s, k=key, r=r: (s.get(k) or {}).get(r))
    add("fairness gap (mean over queues)", lambda s: s["fairness_gap"])
    add("evictions", lambda s: s["evictions"])
    add("restarts", lambda s: s["restarts"])
    add("jobs never ran", lambda s: s["jobs_never_ran"])
    add("makespan (s)", lambda s: s["makespan"])
    add("gang violations", lambda s: s["gang_violations"])
    add("lost work (pod-seconds)", lambda s: s["lost_work_pod_seconds"])
    for q in results[0].summary["queues"]:
        add(f"{q}: jobs", lambda s, q=q: s["queues"][q]["jobs"])
        for key in ("wait", "completion"):
            for stat in ("mean", "p50", "p95"):
                add(f"{q}: {key} {stat} (s)", lambda s, q=q, k=key, st=stat: s["queues"][q][k][st])
            add(f"{q}: {key} max (s)", lambda s, q=q, k=key: s["queues"][q][k]["max"])
        add(f"{q}: fairness gap", lambda s, q=q: s["queues"][q]["fairness_gap"])
        add(f"{q}: evictions", lambda s, q=q: s["queues"][q]["evictions"])
    if has_topology(results):
        rows += [(f"network: {label}", vals) for label, vals in topology_rows(results)]
    return rows


def write_comparison(results: Sequence[SimResult], out: str | Path, run: dict) -> Path:
    """Write the comparison files into ``out`` (the per-config reports are written by
    the caller into ``out/<config name>/``); return the HTML page's path."""
    out = Path(out)
    mark_report(out)
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
    network = has_topology(results)
    if network:
        plots["topology"] = plot_topology(results, out, focus_gangs(results))
    (out / "run.json").write_bytes(orjson.dumps(run, option=orjson.OPT_INDENT_2) + b"\n")

    def head_rows() -> list[list[Any]]:
        out_rows = []
        for key, label in (("wait", "wait"), ("completion", "completion time")):
            for stat in ("mean", "p50", "p95", "max"):
                out_rows.append(
                    [f"{label} {stat}", *(duration(r.summary[key][stat]) for r in results)]
                )
        out_rows.append(["makespan", *(f"{r.summary['makespan'] / HOUR:,.1f} h" for r in results)])
        for key, window, values in utilization_rows(results[0].summary):
            for res in values or results[0].summary["utilization"]:
                shown = [(r.summary.get(key) or {}).get(res) for r in results]
                out_rows.append(
                    [
                        f"utilization {res} ({window})",
                        *("–" if v is None else f"{v:.1%}" for v in shown),
                    ]
                )
        for key, label in (
            ("fairness_gap", "fairness gap"),
            ("evictions", "evictions"),
            ("restarts", "restarts"),
            ("jobs_never_ran", "jobs never ran"),
            ("gang_violations", "gang violations"),
        ):
            out_rows.append([label, *(r.summary[key] for r in results)])
        out_rows.append(
            [
                "lost work (evicted or restarted)",
                *(f"{r.summary['lost_work_pod_seconds'] / HOUR:,.1f} pod-h" for r in results),
            ]
        )
        return out_rows

    queue_rows = []
    for q in results[0].summary["queues"]:
        row: list[Any] = [q, results[0].summary["queues"][q]["jobs"]]
        for r in results:
            v = r.summary["queues"][q]
            row += [
                minutes(v["wait"]["mean"]),
                minutes(v["wait"]["p95"]),
                duration(v["wait"]["max"]),
                minutes(v["completion"]["mean"]),
                f"{v['fairness_gap']:.3f}",
            ]
        queue_rows.append(row)
    qhead = ["queue", "jobs"]
    for n in names:
        qhead += [
            f"{n}: wait mean",
            f"{n}: wait p95",
            f"{n}: wait max",
            f"{n}: JCT mean",
            f"{n}: gap",
        ]
    net_parts: list[str] = []
    if network:
        net_rows = []
        for label, vals in topology_rows(results):
            if label.endswith("(s)"):
                shown = [minutes(v) for v in vals]
                label = label.removesuffix(" (s)")
            elif label.startswith("utilization"):
                shown = ["–" if v is None else f"{v:.1%}" for v in vals]
            else:
                shown = vals
            net_rows.append([label, *shown])
        net_parts = [
            "<h2>Network topology</h2>",
            "<p class='note'>Constrained gangs: the jobs whose PodGroup networkTopology "
            "differs between the runs (all gangs when none does). Tier spanned: the tier of "
            "the lowest HyperNode holding the nodes a gang's pods were on when it started "
            "running; the highest tier is the whole cluster.</p>",
            html_table(["metric", *names], net_rows),
            html_img(plots["topology"], "gangs by tier spanned, and their waits"),
        ]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>pumice simulate: what-if</title>",
        f"<style>{PAGE_CSS}</style></head><body>",
        "<h1>pumice simulate — what-if: " + html.escape(" vs ".join(names)) + "</h1>",
        f"<p class='note'>The same workload ({len(results[0].workload.jobs):,} jobs) under "
        f"{len(results)} configurations. Each has its own full report: "
        + ", ".join(f"<a href='{html.escape(n)}/index.html'>{html.escape(n)}</a>" for n in names)
        + ".</p>",
        *_findings_parts(results),
        *(
            f"<p>{html.escape(line)}</p>"
            for line in what_sharing_bought(names, [r.summary for r in results])
        ),
        "<h2>Side by side</h2>",
        html_table(["metric", *names], head_rows()),
        f"<p class='note'>{html.escape(UTILIZATION_NOTE)}</p>",
        *net_parts,
        "<h2>Per queue</h2>",
        html_table(qhead, queue_rows),
        "<p class='note'>gap: mean |allocated share - deserved share| of the queue over "
        "time (0 = always exactly its fair share).</p>",
        "<h2>Plots</h2>",
        html_img(plots["wait_cdf"], "wait CDF"),
        html_img(plots["completion_cdf"], "completion CDF"),
        html_img(plots["utilization"], "utilization"),
        html_img(plots["pending"], "pending jobs"),
        html_img(plots["queue_share"], "queue shares"),
        "</body></html>",
    ]
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _findings_parts(results: Sequence[SimResult]) -> list[str]:
    """Each configuration's findings, by title (the details are in its own report)."""
    parts = ["<h2>Findings</h2>"]
    for r in results:
        name = html.escape(r.config_name)
        found = findings(r.metrics)
        titles = "".join(f"<li>{html.escape(f.title)}</li>" for f in found)
        parts.append(
            f"<p><a href='{name}/index.html'>{name}</a>: "
            + (f"</p><ul>{titles}</ul>" if found else "nothing stands out.</p>")
        )
    return parts


__all__ = [
    "comparison_rows",
    "config_names",
    "focus_gangs",
    "topology_rows",
    "write_comparison",
]
