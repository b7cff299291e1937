"""Tests for the report directory and the what-if comparison."""

from __future__ import annotations

import csv

import pytest

from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import simulate
from pumice.sim.report import write_report
from pumice.sim.report_plots import PLOTS
from pumice.sim.summary_text import summary_rows
from pumice.sim.synthetic import generate
from pumice.sim.whatif import config_names, write_comparison
from pumice.sim.workload import GPU

GiB = float(2**30)
BINPACK_ONLY = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: binpack
"""


@pytest.fixture(scope="module")
def run():
    nodes = [
        node_object(f"n{i}", {"cpu": 96000.0, "memory": 768 * GiB, GPU: 8.0}) for i in range(4)
    ]
    w = generate(30, seed=2, n_queues=3, capacity_gpus=32, max_gang=4)
    return nodes, w, simulate(nodes, w, Scheduler.from_file(None))


def test_report_directory_has_metrics_plots_and_page(run, tmp_path):
    """The report holds JSON, CSVs, the five PNGs (and the cost of a cycle's) and an HTML
    page embedding them."""
    _nodes, w, result = run
    page = write_report(result, tmp_path, {"wall_seconds": 1.0, "nodes": 4})
    for name in ("metrics.json", "jobs.csv", "queues.csv", "timeseries.csv", "run.json"):
        assert (tmp_path / name).stat().st_size > 0
    for name in (*PLOTS, "cycle_cost"):
        assert (tmp_path / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    text = page.read_text()
    assert text.count("data:image/png;base64,") == len(PLOTS) + 1
    assert "Gang atomicity: 0 violation" in text
    rows = list(csv.DictReader((tmp_path / "jobs.csv").open()))
    assert len(rows) == len(w.jobs)


def test_summary_says_what_each_utilization_averages_over(run, tmp_path):
    """The summary shows utilization over the whole run, the arrival window and the time
    jobs waited, each labelled, with its own figures; the page explains them."""
    _nodes, _w, result = run
    s = result.summary
    rows = dict(summary_rows(s))
    assert rows["utilization, whole run"].startswith(f"cpu {s['utilization']['cpu']:.1%}") and rows[
        "utilization, whole run"
    ].endswith("(first arrival to the end)")
    arrivals = rows["utilization, arrival window"]
    assert f"{GPU} {s['utilization_arrivals'][GPU]:.1%}" in arrivals
    assert f"first to last arrival, {s['arrival_window'] / 3600:,.1f} h" in arrivals
    waited = rows["utilization while jobs waited"]
    assert f"{GPU} {s['utilization_waiting'][GPU]:.1%}" in waited
    assert f"{s['waiting_seconds'] / 3600:,.1f} h in which a job was pending" in waited
    text = write_report(result, tmp_path, {"wall_seconds": 1.0}).read_text()
    assert "<td>utilization, arrival window</td>" in text
    assert "at least one job was pending" in text


def test_metrics_files_are_byte_identical_across_runs(run, tmp_path):
    """Same inputs, same metrics.json and CSV bytes (run.json holds wall-clock facts)."""
    nodes, w, result = run
    write_report(result, tmp_path / "a", {"wall_seconds": 1.0})
    again = simulate(nodes, w, Scheduler.from_file(None))
    write_report(again, tmp_path / "b", {"wall_seconds": 2.0})
    for name in ("metrics.json", "jobs.csv", "queues.csv", "timeseries.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_whatif_compares_two_configs_side_by_side(run, tmp_path):
    """Two configurations on one workload give one comparison with both columns."""
    nodes, w, result = run
    conf = tmp_path / "binpack.yaml"
    conf.write_text(BINPACK_ONLY)
    other = simulate(nodes, w, Scheduler.from_file(str(conf)), config_name="binpack")
    page = write_comparison([result, other], tmp_path / "cmp", {})
    with (tmp_path / "cmp" / "comparison.csv").open() as f:
        header = next(csv.reader(f))
    assert header == ["metric", "default", "binpack"]
    text = page.read_text()
    assert "default vs binpack" in text and text.count("data:image/png;base64,") == 5


def test_config_names_are_unique():
    """Config files with the same stem get numbered names."""
    assert config_names(["a/x.yaml", "b/x.yaml", "y.yml"]) == ["x", "x-2", "y"]
