"""The report shows what a scheduling cycle cost against the backlog it left: the plot
``cycle_cost.png`` and run.json's ``cycle_cost_by_backlog`` (no timing value is
asserted: they are this machine's wall time)."""

from __future__ import annotations

import json
from array import array
from itertools import pairwise

from pumice.cli import main
from pumice.sim.cycle_cost import MIN_CYCLES, plot_bins
from pumice.sim.engine import SimResult
from pumice.sim.metrics import Metrics
from pumice.sim.report_plots import plot_cycle_cost
from pumice.sim.workload import QueueSpec, Workload

SMALL = ["--jobs", "60", "--nodes", "4", "--no-progress"]


def _ordered_and_disjoint(ranges: list[tuple[int, int]]) -> bool:
    return all(lo <= hi for lo, hi in ranges) and all(a[1] < b[0] for a, b in pairwise(ranges))


def test_a_run_reports_the_cost_of_its_cycles_by_backlog(tmp_path, capsys):
    """The report has the plot, a section on the page, and in run.json ranges of
    backlog that are ordered, do not overlap and hold every cycle of the run."""
    assert main(["simulate", *SMALL, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert (tmp_path / "cycle_cost.png").read_bytes()[:4] == b"\x89PNG"
    assert "Wall time of the scheduling cycles" in (tmp_path / "index.html").read_text()
    run = json.loads((tmp_path / "run.json").read_text())
    ranges = run["cycle_cost_by_backlog"]
    assert ranges and ranges[0]["backlog_from"] >= 0
    assert sum(r["cycles"] for r in ranges) == run["cycles"] > 0
    assert _ordered_and_disjoint([(r["backlog_from"], r["backlog_to"]) for r in ranges])
    assert all(r["cycles"] > 0 and r["median_ms"] <= r["p90_ms"] for r in ranges)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert "cycle_cost_by_backlog" not in json.dumps(metrics)  # (wall time stays out)


def _result(backlogs: list[int]) -> SimResult:
    result = SimResult(Metrics({"cpu": 1.0}, [QueueSpec("a")]), {}, 0, 0.0, Workload((), ()))
    result.cycle_backlog = array("I", backlogs)
    result.cycle_wall = array("d", [0.001] * len(backlogs))
    return result


def test_the_plot_bins_cover_every_cycle_with_enough_cycles_each():
    """From no job waiting to the largest backlog, each bin holds enough cycles for a
    90th percentile, bins are ordered and disjoint, and every cycle is in one."""
    backlogs = [0] * 300 + list(range(1, 2000, 7)) + [5000] * 3
    bins = plot_bins(_result(backlogs))
    assert bins[0].low == 0 and bins[-1].high == 5000
    assert _ordered_and_disjoint([(b.low, b.high) for b in bins])
    assert sum(b.cycles for b in bins) == len(backlogs)
    assert all(b.cycles >= MIN_CYCLES for b in bins)
    assert len(bins) >= 10  # (enough to show a slope)


def test_a_run_without_cycles_still_has_its_plot(tmp_path):
    assert plot_bins(_result([])) == []
    assert plot_cycle_cost(_result([]), tmp_path).read_bytes()[:4] == b"\x89PNG"
    few = plot_bins(_result([3, 1, 2]))
    assert [(b.low, b.high, b.cycles) for b in few] == [(0, 3, 3)]
