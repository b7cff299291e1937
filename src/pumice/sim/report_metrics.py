"""A report's numbers for programs: ``metrics.json`` and the CSV tables.

:func:`metrics_document` gathers a run's summary, findings, one row per job
(:func:`job_rows`: with a Volcano Job's phase and retries, and a network's tiers, when the
run had them), the time series and the line at the busiest moment
(:func:`line_document`); :func:`write_metrics` writes it and ``jobs.csv``, ``queues.csv``
and ``timeseries.csv`` with rounded values in a fixed order, so the same inputs give
byte-identical files. :func:`gang_view` sums up the gangs of a run on a cluster with
HyperNodes, for the topology plot and the what-if page.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from pumice.sim.engine import SimResult
from pumice.sim.findings import Finding, findings
from pumice.sim.metrics import JobRecord, stats


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
