"""The what-if tables: max waits, makespan, lost work and job counts per queue."""

from __future__ import annotations

import csv

from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import simulate
from pumice.sim.synthetic import generate
from pumice.sim.whatif import comparison_rows, write_comparison
from pumice.sim.workload import GPU

GiB = float(2**30)
RECLAIM = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: binpack
"""


def test_whatif_of_two_configs_has_max_waits_makespan_lost_work_and_jobs_per_queue(tmp_path):
    nodes = [
        node_object(f"n{i}", {"cpu": 96000.0, "memory": 768 * GiB, GPU: 8.0}) for i in range(4)
    ]
    w = generate(30, seed=2, n_queues=3, capacity_gpus=32, max_gang=4)
    conf = tmp_path / "reclaim.yaml"
    conf.write_text(RECLAIM)
    runs = [
        simulate(nodes, w, Scheduler.from_file(None)),
        simulate(nodes, w, Scheduler.from_file(str(conf)), config_name="reclaim"),
    ]
    rows = dict(comparison_rows(runs))
    assert rows["wait max (s)"] == [r.summary["wait"]["max"] for r in runs]
    assert rows["makespan (s)"] == [r.summary["makespan"] for r in runs]
    assert rows["lost work (pod-seconds)"] == [r.summary["lost_work_pod_seconds"] for r in runs]
    queues = list(runs[0].summary["queues"])
    per_queue = [rows[f"{q}: jobs"][0] for q in queues]
    assert sum(per_queue) == len(w.jobs) and all(n > 0 for n in per_queue)
    assert all(f"{q}: wait max (s)" in rows for q in queues)

    page = write_comparison(runs, tmp_path / "cmp", {}).read_text()
    with (tmp_path / "cmp" / "comparison.csv").open() as f:
        metrics = [row[0] for row in csv.reader(f)]
    assert {"wait max (s)", "makespan (s)", "lost work (pod-seconds)"} <= set(metrics)
    for header in ("<th>jobs</th>", "default: wait max", "reclaim: wait max"):
        assert header in page
    assert "makespan" in page and "lost work" in page and "<h2>Findings</h2>" in page


def test_whatif_shows_utilization_over_the_arrivals_and_while_jobs_waited(tmp_path):
    """Beside the whole-run average, each configuration's utilization over the arrival
    window and while jobs waited, in the files and on the page, which says which is
    which."""
    nodes = [
        node_object(f"n{i}", {"cpu": 96000.0, "memory": 768 * GiB, GPU: 8.0}) for i in range(2)
    ]
    w = generate(20, seed=3, n_queues=2, capacity_gpus=16, max_gang=2)
    conf = tmp_path / "reclaim.yaml"
    conf.write_text(RECLAIM)
    runs = [
        simulate(nodes, w, Scheduler.from_file(None)),
        simulate(nodes, w, Scheduler.from_file(str(conf)), config_name="reclaim"),
    ]
    rows = dict(comparison_rows(runs))
    for key, label in (
        ("utilization", f"utilization {GPU}"),
        ("utilization_arrivals", f"utilization {GPU} (arrivals)"),
        ("utilization_waiting", f"utilization {GPU} (waiting)"),
    ):
        assert rows[label] == [r.summary[key][GPU] for r in runs]
    page = write_comparison(runs, tmp_path / "cmp", {}).read_text()
    shown = f"{runs[0].summary['utilization_arrivals'][GPU]:.1%}"
    assert f"<td>utilization {GPU} (arrivals)</td><td>{shown}</td>" in page
    assert f"utilization {GPU} (whole run)" in page and f"utilization {GPU} (waiting)" in page
    assert "at least one job was pending" in page
