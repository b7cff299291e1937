"""The simulator's report shows the line of waiting jobs at the busiest moment."""

from __future__ import annotations

import orjson
import pytest

from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import simulate
from pumice.sim.report import write_report
from pumice.sim.synthetic import generate
from pumice.sim.workload import GPU

GiB = float(2**30)


@pytest.fixture(scope="module")
def result():
    # 16 GPUs for a workload sized for 32: jobs queue up
    nodes = [
        node_object(f"n{i}", {"cpu": 96000.0, "memory": 768 * GiB, GPU: 8.0}) for i in range(2)
    ]
    w = generate(40, seed=3, n_queues=3, capacity_gpus=32, max_gang=1)
    return simulate(nodes, w, Scheduler.from_file(None))


def test_the_report_has_the_line_at_the_busiest_moment(result, tmp_path) -> None:
    page = write_report(result, tmp_path, {"wall_seconds": 1.0, "nodes": 2}).read_text()
    assert "<h2>The line at the busiest moment</h2>" in page
    doc = orjson.loads((tmp_path / "metrics.json").read_bytes())["busiest_line"]
    t, jobs = result.busiest_line
    assert doc["time"] == t and doc["waiting"] == len(jobs) > 1
    assert sum(doc["stages"].values()) == sum(doc["queues"].values()) == doc["waiting"]
    items = doc["items"]
    assert [i["positionInCluster"] for i in items] == list(range(1, len(items) + 1))
    seen: dict[str, int] = {}
    for i in items:  # positions in a queue count that queue's jobs only
        seen[i["queue"]] = seen.get(i["queue"], 0) + 1
        assert i["positionInQueue"] == seen[i["queue"]]
        assert i["reason"] and f"{i['namespace']}/{i['name']}" in page
    # the busiest moment: no sample of the run saw more jobs waiting
    assert doc["waiting"] >= max(result.metrics.series.pending)
