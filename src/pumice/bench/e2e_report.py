"""Tables, ratios and JSON for ``pumice bench e2e``.

Runs of one scheduler on one workload are folded into their mean (:func:`mean`), one
table per workload, then pumice's figures are divided by each peer's: pods/s above 1
means pumice is faster; CPU and RSS below 1 mean it uses less. The JSON file holds every
run as measured and the means.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, TextIO

import orjson

from pumice.bench.e2e_model import E2EResult

#: Numeric figures averaged over runs.
MEASURED = tuple(
    f.name for f in fields(E2EResult)
    if f.name.endswith(("_s", "_mb")) or f.name in ("pods_per_s", "bound", "load_avg")
)  # fmt: skip


def mean(results: Sequence[E2EResult]) -> list[E2EResult]:
    """One result per (workload, scheduler, churn): the mean of its runs' figures; its
    problems are all of theirs, its gang check the worst run's."""
    keyed: dict[tuple[str, str, bool], list[E2EResult]] = {}
    for r in results:
        keyed.setdefault((r.workload, r.scheduler, r.churn), []).append(r)
    out = []
    for group in keyed.values():
        first = group[0]
        merged = E2EResult(**asdict(first))
        merged.run = len(group)
        for name in MEASURED:
            values = [getattr(r, name) for r in group if getattr(r, name) is not None]
            value: Any = statistics.fmean(values) if values else None
            if name == "bound" and value is not None:
                value = min(values)
            setattr(merged, name, value)
        merged.problems = [p for r in group for p in r.problems]
        checks = [r.gang_check for r in group if r.gang_check is not None]
        if checks:
            merged.gang_check = max(checks, key=lambda c: (c["violations"], c["longest_partial_s"]))
        out.append(merged)
    return out


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _gangs(r: E2EResult) -> str:
    c = r.gang_check
    if c is None:
        return "-"
    return f"{c['groups'] - c['violations']}/{c['groups']} whole"


HEADER = ("scheduler", "nodes / pods", "runs", "pods/s", "all bound s",
          "last create → last bind s", "created/s", "scheduler CPU s", "API server CPU s",
          "peak RSS MB", "gangs", "valid")  # fmt: skip


def table_rows(results: Sequence[E2EResult]) -> list[list[str]]:
    rows = []
    for r in results:
        rows.append(
            [
                r.scheduler + (" (churn)" if r.churn else ""),
                f"{r.nodes:,} / {r.pods:,}",
                str(r.run),
                _num(r.pods_per_s, 0),
                _num(r.all_bound_s, 2),
                _num(r.tail_s, 2),
                _num(r.created_per_s, 0),
                _num(r.scheduler_cpu_s, 1),
                _num(r.apiserver_cpu_s, 1),
                _num(r.scheduler_rss_mb, 0),
                _gangs(r),
                "yes" if r.valid else "NO",
            ]
        )
    return rows


def ratios(results: Sequence[E2EResult]) -> list[str]:
    """Lines ``pumice / PEER: pods/s 1.23x, ...`` for each peer in ``results``."""
    ours = [r for r in results if r.scheduler == "pumice"]
    lines = []
    for mine in ours:
        for other in results:
            if other.scheduler == "pumice" or other.churn != mine.churn:
                continue
            parts = []
            for label, name in (("pods/s", "pods_per_s"), ("scheduler CPU", "scheduler_cpu_s"),
                                ("peak RSS", "scheduler_rss_mb")):  # fmt: skip
                a, b = getattr(mine, name), getattr(other, name)
                if a is not None and b:
                    parts.append(f"{label} {a / b:.2f}x")
            churn = " (churn)" if mine.churn else ""
            lines.append(f"pumice / {other.scheduler}{churn}: " + ", ".join(parts))
    return lines


def details(r: E2EResult) -> str:
    """One line of what the table leaves out: etcd's and this process's CPU, the
    machine's load and CPU spent outside the run, and the API server's requests."""
    writes = {k: v for k, v in r.api_requests.items() if not k.startswith(("GET", "LIST", "WATCH"))}
    per_pod = sum(writes.values()) / r.pods if r.pods else 0.0
    top = ", ".join(f"{k} {v:,}" for k, v in list(writes.items())[:4])
    return (
        f"{r.scheduler}: etcd CPU {_num(r.etcd_cpu_s)} s, bench driver {_num(r.driver_cpu_s)} s,"
        f" other processes {_num(r.others_cpu_s)} s, load {_num(r.load_avg)};"
        f" writes to the API server {per_pod:.2f}/pod ({top});"
        f" latency p50 {_num(r.latency_p50_s, 2)} s, p99 {_num(r.latency_p99_s, 2)} s"
    )


def print_report(results: Sequence[E2EResult], out: TextIO) -> None:
    """A markdown table per workload, then the ratios."""
    means = mean(results)
    for workload in dict.fromkeys(r.workload for r in means):
        these = [r for r in means if r.workload == workload]
        first = these[0]
        if workload == "vcjob":
            _print_vcjob(these, out)
            continue
        shape = (f"{first.gangs} gangs of {first.gang_size}" if workload == "gangs"
                 else f"{first.pods:,} pods")  # fmt: skip
        print(f"\n{workload}: {shape} on {first.nodes:,} nodes", file=out)
        print("| " + " | ".join(HEADER) + " |", file=out)
        print("| " + " | ".join("---" if i in (0, 1, 10, 11) else "---:"
                                for i in range(len(HEADER))) + " |", file=out)  # fmt: skip
        for row in table_rows(these):
            print("| " + " | ".join(row) + " |", file=out)
        for line in ratios(these):
            print(line, file=out)
        for r in these:
            print(details(r), file=out)
        for r in these:
            for p in dict.fromkeys(r.problems):
                print(f"problem: {r.scheduler}: {p}", file=out)


def _print_vcjob(these: Sequence[E2EResult], out: TextIO) -> None:
    """The Volcano Job's table: its milestones and where the time went."""
    from pumice.bench import e2e_vcjob

    first = these[0]
    print(f"\nvcjob: one Volcano Job of {first.pods:,} pods (minAvailable "
          f"{first.job_min_available:,}) on {first.nodes:,} nodes", file=out)  # fmt: skip
    header = e2e_vcjob.HEADER
    print("| " + " | ".join(header) + " |", file=out)
    print("| " + " | ".join("---" if i in (0, 1, len(header) - 1) else "---:"
                            for i in range(len(header))) + " |", file=out)  # fmt: skip
    for row in e2e_vcjob.table_rows(list(these)):
        print("| " + " | ".join(row) + " |", file=out)
    for line in ratios(these):
        print(line, file=out)
    for r in these:
        rss = r.controller_rss_mb
        extra = "" if rss is None else f"; controllers' peak RSS {_num(rss, 0)} MB"
        print(details(r) + extra, file=out)
        for p in dict.fromkeys(r.problems):
            print(f"problem: {r.scheduler}: {p}", file=out)


def write_json(results: Sequence[E2EResult], path: str | Path) -> None:
    body = {"runs": [asdict(r) for r in results], "means": [asdict(r) for r in mean(results)]}
    Path(path).write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2))


__all__ = ["mean", "print_report", "ratios", "table_rows", "write_json"]
