"""``pumice simulate --network-topology hard,soft,none``: one workload three ways on a
cluster with HyperNodes, compared side by side."""

from __future__ import annotations

import csv
from pathlib import Path

import orjson
import pytest

from pumice.cli import main

CONFIG = Path(__file__).parents[2] / "src/pumice/examples/configs/network-topology.yaml"
SLOWDOWN = {1: 1.0, 2: 1.15, 3: 1.4}
STARTUP = 5.0

# Eight 8-GPU nodes, two per leaf, two leaves per spine: a spine holds 4 nodes, and the
# whole cluster (tier 3) 8.
CLUSTER = """\
nodes:
- {count: 8, namePrefix: gpu, allocatable: {cpu: 32, memory: 256Gi, nvidia.com/gpu: 8}}
topology: {nodesPerLeaf: 2, leavesPerSpine: 2, tiers: 2}
"""

WORKLOAD = """\
kind: Workload
queues: [{name: default, weight: 1}]
jobs:
- name: single-a
  duration: 2h
  replicas: 1
  requests: &node {cpu: 16, memory: 64Gi, nvidia.com/gpu: 8}
- {name: single-b, duration: 1h, replicas: 1, requests: *node}
- {name: single-c, arrival: 10s, duration: 90m, replicas: 1, requests: *node}
- {name: pair, arrival: 20s, duration: 40m, replicas: 2, requests: *node}
- {name: gang-1, arrival: 1m, duration: 30m, replicas: 4, requests: *node}
- {name: gang-2, arrival: 2m, duration: 20m, replicas: 4, requests: *node}
- {name: gang-3, arrival: 3m, duration: 25m, replicas: 3, requests: *node}
- {name: too-wide, arrival: 4m, duration: 10m, replicas: 6, requests: *node}
"""
DURATION = {
    "single-a": 7200.0,
    "single-b": 3600.0,
    "single-c": 5400.0,
    "pair": 2400.0,
    "gang-1": 1800.0,
    "gang-2": 1200.0,
    "gang-3": 1500.0,
    "too-wide": 600.0,
}
LARGE = {"default/gang-1", "default/gang-2", "default/gang-3", "default/too-wide"}


@pytest.fixture(scope="module")
def whatif(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    tmp = tmp_path_factory.mktemp("topology-whatif")
    (tmp / "cluster.yaml").write_text(CLUSTER)
    (tmp / "jobs.yaml").write_text(WORKLOAD)
    out = tmp / "report"
    rc = main(
        [
            "simulate",
            str(tmp / "jobs.yaml"),
            "--cluster",
            str(tmp / "cluster.yaml"),
            "--config",
            str(CONFIG),
            "--network-topology",
            "hard,soft,none",
            "--topology-min-pods",
            "3",
            "--topology-tier",
            "2",
            "--topology-slowdown",
            ",".join(f"{t}={f}" for t, f in SLOWDOWN.items()),
            "--workers",
            "1",
            "--no-progress",
            "--out",
            str(out),
        ]
    )
    return rc, out


def _jobs(out: Path, run: str) -> dict[str, dict[str, str]]:
    with (out / run / "jobs.csv").open() as f:
        return {row["job"]: row for row in csv.DictReader(f)}


def test_three_runs_and_a_comparison_with_a_network_section(whatif) -> None:
    rc, out = whatif
    assert rc == 0
    for run in ("hard", "soft", "none"):
        assert (out / run / "index.html").exists() and (out / run / "topology.png").exists()
    assert (out / "topology.png").read_bytes()[:4] == b"\x89PNG"
    page = (out / "index.html").read_text()
    assert "Network topology" in page
    doc = orjson.loads((out / "comparison.json").read_bytes())
    rows = {r["metric"]: r["values"] for r in doc["rows"]}
    assert rows["network: constrained gangs"] == {"hard": 4, "soft": 4, "none": 4}
    for key in ("wait", "completion"):
        for stat in ("mean", "p95", "max"):
            assert f"network: constrained gangs: {key} {stat} (s)" in rows
    assert "network: constrained gangs at tier 3 (cluster)" in rows
    assert "network: utilization nvidia.com/gpu" in rows


def test_the_runs_differ_only_in_the_large_gangs_constraint(whatif) -> None:
    _rc, out = whatif
    for run, text in (("hard", "hard<=2"), ("soft", "soft<=2"), ("none", "")):
        jobs = _jobs(out, run)
        assert {j for j, r in jobs.items() if r["network_topology"]} == (LARGE if text else set())
        assert all(jobs[j]["network_topology"] == text for j in LARGE)


def test_no_hard_gang_spans_above_its_limit(whatif) -> None:
    """Under hard, every large gang that ran stayed within one spine (tier <= 2), and the
    six-node gang, wider than any spine, never ran; under soft it ran anyway."""
    _rc, out = whatif
    hard = _jobs(out, "hard")
    for uid in LARGE - {"default/too-wide"}:
        assert hard[uid]["start"] != "", uid
        assert int(hard[uid]["tier"]) <= 2, (uid, hard[uid]["hypernode"])
    assert hard["default/too-wide"]["start"] == ""
    summary = orjson.loads((out / "hard" / "metrics.json").read_bytes())["summary"]
    assert summary["topology"]["constrained"]["hard"]["above_limit"] == 0
    soft = _jobs(out, "soft")
    assert all(soft[uid]["start"] != "" for uid in LARGE)
    assert int(soft["default/too-wide"]["tier"]) == 3  # six nodes: only the cluster


def test_every_job_ran_its_duration_times_the_factor_of_its_tier(whatif) -> None:
    _rc, out = whatif
    for run in ("hard", "soft", "none"):
        for uid, row in _jobs(out, run).items():
            if not row["start"]:
                continue
            tier = int(row["tier"])
            expected = STARTUP + DURATION[uid.split("/")[1]] * SLOWDOWN[tier]
            ran = float(row["end"]) - float(row["start"])
            assert ran == pytest.approx(expected, abs=1e-3), (run, uid, tier)


def test_a_what_if_over_network_topology_needs_hypernodes(tmp_path: Path, capsys) -> None:
    rc = main(
        [
            "simulate",
            "--jobs",
            "5",
            "--nodes",
            "2",
            "--network-topology",
            "hard,none",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 2
    assert "--network-topology" in capsys.readouterr().err
