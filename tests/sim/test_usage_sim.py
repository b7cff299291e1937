"""The usage plugin in the simulator: nodes' measured load is written every metrics
period from the pods on them, so a loaded node is refused while it stays loaded."""

from __future__ import annotations

import pytest
import yaml

from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import SimOptions, Simulation
from pumice.sim.workload import JobSpec, QueueSpec, TaskSpec, Workload

GiB = float(2**30)

USAGE = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: usage
    arguments:
      thresholds: {cpu: 30, mem: 90}
metrics:
  interval: 10s
"""


def _job(name: str, arrival: float, duration: float, cpu: float) -> JobSpec:
    req = {"cpu": cpu, "memory": GiB}
    return JobSpec(
        name=name,
        namespace="default",
        queue="q",
        arrival=arrival,
        duration=duration,
        tasks=(TaskSpec("main", 1, req),),
        min_available=1,
    )


def _run(config: str, factor: float = 1.0):
    w = Workload(jobs=(_job("big", 0.0, 600.0, 5000.0), _job("small", 120.0, 60.0, 1000.0)),
                 queues=(QueueSpec("q"),))  # fmt: skip
    nodes = [node_object("n0", {"cpu": 10000.0, "memory": 64 * GiB})]
    scheduler = Scheduler.create(parse_config(yaml.safe_load(config)))
    sim = Simulation(nodes, w, scheduler, SimOptions(usage_factor=factor))
    return sim, sim.run()


def test_a_loaded_node_is_refused_until_its_load_falls() -> None:
    """The node is measured at half its CPU while `big` runs (factor 1, threshold 30%):
    `small` waits, told why, until `big` ends and the next measurement (every 10 s, the
    configuration's metrics.interval) shows the node idle."""
    sim, r = _run(USAGE)
    assert sim.metrics_period == 10.0
    big, small = r.metrics.jobs["default/big"], r.metrics.jobs["default/small"]
    assert big.end is not None and small.start is not None
    assert big.end <= small.start <= big.end + 10.0 + 1.0
    told = " ".join(reason for _, reason in small.reasons)
    assert "over the CPU load threshold (30%)" in told


def test_a_light_load_lets_the_pod_in_at_once() -> None:
    """The same jobs with pods using a tenth of their requests: 5% load, under the
    threshold; `small` starts when it arrives."""
    _, r = _run(USAGE, factor=0.1)
    small = r.metrics.jobs["default/small"]
    assert small.start is not None and small.start - small.submit <= 1.0


def test_no_measurements_without_the_usage_plugin() -> None:
    sim, r = _run(USAGE.replace("  - name: usage\n    arguments:\n      thresholds: {cpu: 30, "
                                "mem: 90}\n", ""))  # fmt: skip
    assert sim.metrics_period is None and not sim.store.list("NodeMetrics")
    assert r.metrics.jobs["default/small"].start == 121.0


def test_a_negative_usage_factor_is_refused() -> None:
    with pytest.raises(InputError, match="usage factor"):
        _run(USAGE, factor=-1.0)
