"""The report of a simulation: a directory a person can open and a program can read.

Files (see ``docs/simulation.md`` for every column):

- ``metrics.json``: summary, per-queue figures, every job, the time series;
- ``jobs.csv``, ``queues.csv``, ``timeseries.csv``: the same as tables;
- ``utilization.png``, ``queue_share.png``, ``wait_cdf.png``, ``completion_cdf.png``,
  ``pending.png``: plots (matplotlib, Agg backend: no display needed);
- ``cycle_cost.png``: the wall time of a scheduling cycle against the backlog;
- ``index.html``: one self-contained page (plots embedded as base64) with the summary;
- ``run.json``: wall-clock facts of the run (duration, speed, the cost of a cycle by
  backlog); with ``cycle_cost.png``, the only files that differ between two runs of the
  same inputs, which is why they are kept apart.

Metrics files are written with sorted, rounded values, so the same inputs give
byte-identical ``metrics.json`` and CSV files.

:func:`write_report` writes them all; the parts are in :mod:`pumice.sim.report_metrics`
(metrics.json and the CSV files), :mod:`pumice.sim.report_plots` (the PNG files),
:mod:`pumice.sim.report_html` (the page), :mod:`pumice.sim.summary_text` (the figures
in words) and :mod:`pumice.sim.report_folder` (the directory's marker, and ``--out``
made ready before a run). Where a second CPU is free, a child process forked by
:mod:`pumice.sim.report_fork` draws part of the plots meanwhile.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import orjson

from pumice.sim.cycle_cost import cost_document
from pumice.sim.engine import SimResult
from pumice.sim.findings import findings
from pumice.sim.report_folder import mark_report
from pumice.sim.report_fork import ForkedWork, fork_pays
from pumice.sim.report_html import write_html
from pumice.sim.report_metrics import write_metrics
from pumice.sim.report_plots import PLOTS, plot_cycle_cost, plot_report, plot_topology

#: The plots a forked child draws while the parent draws the rest and writes the metrics:
#: ``queue_share.png`` (a grid of panels and a tight layout) takes about as long as all the
#: others together.
CHILD_PLOTS = ("queue_share",)


def write_report(
    result: SimResult, out: str | Path, run: dict | None = None, *, fork: bool | None = None
) -> Path:
    """Write the whole report directory for one run; return the HTML page's path.

    With ``fork`` (default: when it pays, :func:`~pumice.sim.report_fork.fork_pays`), a
    forked child draws :data:`CHILD_PLOTS` while this process writes everything else;
    the page, which embeds every plot, is written once both are done. ``fork=False``
    draws everything here. The files are the same either way, and a plot that fails in
    the child raises here as it would have in this process.
    """
    out = Path(out)
    run = dict(run or {})
    forked = fork_pays() if fork is None else fork and hasattr(os, "fork")
    away = CHILD_PLOTS if forked else ()
    child = None
    if away:
        try:
            child = ForkedWork(partial(plot_report, [result], out, away))
        except OSError:  # (fork refused, e.g. a process limit: everything is drawn here)
            away = ()
    with child if child is not None else nullcontext():
        found = findings(result.metrics)
        write_metrics(result, out, found)
        mark_report(out)
        plots = plot_report([result], out, [n for n in PLOTS if n not in away])
        if result.metrics.spans is not None:
            plots["topology"] = plot_topology([result], out)
        plots["cycle_cost"] = plot_cycle_cost(result, out)
        run["cycle_cost_by_backlog"] = cost_document(result)
        (out / "run.json").write_bytes(orjson.dumps(run, option=orjson.OPT_INDENT_2) + b"\n")
        if child is not None:
            plots.update(child.result())
    order = (*PLOTS, "topology", "cycle_cost")
    return write_html(result, {n: plots[n] for n in order if n in plots}, out, run, found)
