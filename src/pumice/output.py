"""Render decisions: JSON for programs, tables for people."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from rich.console import Console
from rich.table import Table

from pumice.framework.decisions import Decisions
from pumice.visibility.line import pending_jobs, select
from pumice.visibility.render import pending_table

if TYPE_CHECKING:
    from pumice.forecast.replay import StartEstimate


def to_json(decisions: Decisions, eta: Mapping[str, StartEstimate] | None = None) -> bytes:
    """The decisions, and under ``pending_jobs`` the jobs left waiting in the order the
    scheduler tries them (see :mod:`pumice.visibility.line`); with ``eta``, the start
    estimates under the key ``eta`` (job -> ``{start, assumption}``, start in seconds
    since the epoch or null)."""
    data = decisions.to_json()
    data["pending_jobs"] = [j.to_json() for j in pending_jobs(decisions)]
    if eta is not None:
        data["eta"] = {
            job: {"start": est.start, "assumption": est.assumption} for job, est in eta.items()
        }
    return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"


def print_eta(eta: Mapping[str, StartEstimate], now: float, console: Console | None = None) -> None:
    """The start estimates as a table: when (UTC, and how long from ``now``) and why."""
    console = console or Console(width=None if sys.stdout.isatty() else 200)
    t = Table(title=f"Start estimates ({len(eta)})", title_justify="left")
    t.add_column("job", no_wrap=True)
    t.add_column("start (UTC)", no_wrap=True)
    t.add_column("in", no_wrap=True)
    t.add_column("assumption", overflow="fold", ratio=3)
    for job, est in eta.items():
        if est.start is None:
            t.add_row(job, "-", "-", est.assumption)
            continue
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(est.start))
        t.add_row(job, when, f"{est.start - now:,.0f} s", est.assumption)
    console.print(t)


def print_table(decisions: Decisions, console: Console | None = None) -> None:
    # Piped output gets a wide page rather than rich's 80-column default, so that pod
    # and node names stay on one line; the explanation columns fold.
    console = console or Console(width=None if sys.stdout.isatty() else 200)
    data: dict[str, Any] = decisions.to_json()

    def table(title: str, *cols: str) -> Table:
        t = Table(title=title, title_justify="left", show_lines=False)
        for c in cols:
            wide = c in ("why", "condition")
            t.add_column(c, overflow="fold", no_wrap=not wide, ratio=3 if wide else None)
        return t

    t = table(f"Binds ({len(data['binds'])})", "pod", "node")
    for pod, node in data["binds"].items():
        t.add_row(pod, node)
    console.print(t)
    writes = _prebind_rows(data)
    if writes:
        t = table(f"Written before the binds ({len(writes)})", "object", "what")
        for row in writes:
            t.add_row(*row)
        console.print(t)
    if data["pipelined"]:
        t = table(f"Pipelined ({len(data['pipelined'])})", "pod", "node (resources releasing)")
        for pod, node in data["pipelined"].items():
            t.add_row(pod, node)
        console.print(t)
    if data["evictions"]:
        t = table(f"Evictions ({len(data['evictions'])})", "pod")
        for pod in data["evictions"]:
            t.add_row(pod)
        console.print(t)
    if data["audit"]:
        t = table("Audit", "action", "decision", "job", "for pod", "victim", "node", "why")
        for rec in data["audit"]:
            t.add_row(
                *(
                    str(rec.get(k, ""))
                    for k in ("action", "kind", "preemptor", "task", "victim", "node", "reason")
                )
            )
        console.print(t)
    t = table("PodGroups", "podgroup", "phase", "condition")
    for pg, st in data["podgroups"].items():
        cond = "; ".join(f"{c['type']}: {c['message'] or c['reason']}" for c in st["conditions"])
        t.add_row(pg, st["phase"], cond)
    console.print(t)
    if data["pending"]:
        page = select(pending_jobs(decisions))
        title = f"Pending ({page.total}), in the order the scheduler tries them"
        console.print(pending_table(page, title))
    skipped = data.get("skipped") or {}
    if skipped:
        t = table(f"Skipped: objects pumice cannot read ({len(skipped)})", "object", "why")
        for obj, why in skipped.items():
            t.add_row(obj, why)
        console.print(t)


def _prebind_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    """What the binds write first, a row per object: a claim's PV or the node its volume
    is provisioned for, a ResourceClaim's devices, a pod's annotations."""
    rows = [(f"PersistentVolumeClaim {c}", f"bound to PV {pv}")
            for c, pv in data.get("volumes", {}).items()]  # fmt: skip
    rows += [(f"PersistentVolumeClaim {c}", f"a volume provisioned for node {node}")
             for c, node in data.get("provision", {}).items()]  # fmt: skip
    for claim, allocation in data.get("claims", {}).items():
        devices = ", ".join(
            f"{r['request']}: {r['driver']} {r['pool']}/{r['device']}"
            for r in (allocation.get("devices") or {}).get("results") or ()
        )
        rows.append((f"ResourceClaim {claim}", f"allocated {devices}"))
    for pod, notes in data.get("annotations", {}).items():
        shown = ", ".join(f"{k}={v}" for k, v in notes.items())
        rows.append((f"Pod {pod}", f"annotated {shown}"))
    return rows
