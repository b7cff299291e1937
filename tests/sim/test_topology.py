"""The simulated cluster's network: the generated HyperNode tree, networkTopology in
workloads, the tier each gang spans, and the run-time slowdown per tier."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pumice.api.hypernode import CLUSTER, NodeFacts, build_topology, parse_hypernode
from pumice.api.topology_spec import NetworkTopology
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.errors import InputError
from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import default_cluster, load_cluster_spec, node_object
from pumice.sim.engine import SimOptions, simulate
from pumice.sim.loader import load_workload
from pumice.sim.objects import job_objects, to_compact, volcano_job
from pumice.sim.report_metrics import job_rows
from pumice.sim.topology import Slowdown, TreeShape, hypernode_objects
from pumice.sim.workload import GPU, JobSpec, QueueSpec, TaskSpec, Workload

GiB = float(2**30)
EXAMPLES = Path(__file__).parents[2] / "src/pumice/examples/topology"
WHOLE_NODE = {"cpu": 8000.0, "memory": 64 * GiB, GPU: 8.0}


def _names(nodes: list[dict]) -> list[str]:
    return [n["metadata"]["name"] for n in nodes]


def test_the_generated_tree_over_the_builtin_cluster_is_valid() -> None:
    """The default shape over the built-in 56 nodes: build_topology accepts it without a
    note, every node is in exactly one leaf of at most 4 nodes, each spine holds at most
    4 leaves, and the cluster is tier 3, above them."""
    nodes = default_cluster()
    objects = hypernode_objects(_names(nodes), TreeShape())
    records = [parse_hypernode(o) for o in objects]
    topo = build_topology(records, [NodeFacts(n, {}) for n in _names(nodes)])
    assert topo is not None and topo.notes == []
    assert topo.tiers == [1, 2, 3] and topo.root.tier == 3
    leaves = [h for h in topo.real() if h.tier == 1]
    spines = [h for h in topo.real() if h.tier == 2]
    assert len(leaves) == 14 and len(spines) == 4
    assert all(len(h.nodes) <= 4 for h in leaves)
    assert sorted(n for h in leaves for n in h.nodes) == sorted(_names(nodes))
    assert all(len(h.children) <= 4 and h.parent == CLUSTER for h in spines)
    assert topo.span(["gpu-a100-000", "gpu-a100-003"]) == "leaf-00"
    assert topo.tier_of(topo.span(["gpu-a100-000", "gpu-a100-004"])) == 2
    assert topo.span(["gpu-a100-000", "cpu-000"]) == CLUSTER
    # The scheduler's own snapshot path reads the same objects into the same tree.
    snap = build_snapshot(SourcedObject(o) for o in [*nodes, *objects])
    assert snap.topology is not None and snap.topology.tiers == [1, 2, 3]


def test_a_three_tier_shape_and_uneven_counts() -> None:
    """Ten nodes, 3 per leaf, 2 leaves per spine, 3 tiers: 4 leaves (the last of one
    node), 2 spines, one core; the root is tier 4."""
    names = [f"n{i}" for i in range(10)]
    objects = hypernode_objects(names, TreeShape(3, 2, 3))
    topo = build_topology([parse_hypernode(o) for o in objects], [NodeFacts(n, {}) for n in names])
    assert topo is not None and topo.notes == []
    assert [len(topo.by_tier[t]) for t in (1, 2, 3)] == [4, 2, 1]
    assert topo.root.tier == 4
    assert topo.hypernodes["leaf-3"].nodes == frozenset({"n9"})
    assert topo.hypernodes["core-0"].nodes == frozenset(names)


def test_the_example_cluster_files_carry_their_network() -> None:
    """A compact cluster's topology: block generates the tree over its nodes; a file of
    Node and HyperNode manifests keeps its HyperNodes."""
    spec = load_cluster_spec(str(EXAMPLES / "cluster.yaml"))
    assert len(spec.nodes) == 64
    tiers = sorted(h["spec"]["tier"] for h in spec.hypernodes)
    assert tiers == [1] * 16 + [2] * 2
    manifests = load_cluster_spec(str(EXAMPLES / "hypernodes.yaml"))
    assert len(manifests.nodes) == 4
    assert sorted(h["metadata"]["name"] for h in manifests.hypernodes) == [
        "leaf-a",
        "leaf-b",
        "spine",
    ]


@pytest.mark.parametrize(
    ("topology", "field", "message"),
    [
        ("{leaves: 4}", "topology.leaves", "unknown key"),
        ("{nodesPerLeaf: 0}", "topology.nodesPerLeaf", "must be >= 1"),
        ("{tiers: two}", "topology.tiers", "expected an integer"),
    ],
)
def test_a_bad_topology_block_names_the_field(
    tmp_path: Path, topology: str, field: str, message: str
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        f"nodes:\n- {{count: 4, allocatable: {{cpu: 8, memory: 64Gi}}}}\ntopology: {topology}\n"
    )
    with pytest.raises(InputError, match=message) as err:
        load_cluster_spec(str(path))
    assert err.value.field == field and err.value.file == str(path)


def test_a_cycle_of_hypernodes_in_a_cluster_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    hn = "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\n"
    path.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n"
        "status: {allocatable: {cpu: '8', memory: 64Gi}}\n---\n"
        f"{hn}metadata: {{name: x}}\nspec: {{tier: 2, members: "
        "[{type: HyperNode, selector: {exactMatch: {name: y}}}]}\n---\n"
        f"{hn}metadata: {{name: y}}\nspec: {{tier: 3, members: "
        "[{type: HyperNode, selector: {exactMatch: {name: x}}}]}\n"
    )
    with pytest.raises(InputError, match="cycle") as err:
        load_cluster_spec(str(path))
    assert err.value.file == str(path) and "HyperNode" in (err.value.obj or "")


def test_network_topology_in_compact_and_manifest_workloads(tmp_path: Path) -> None:
    """networkTopology is read from the compact form and from PodGroup manifests, put on
    the PodGroup (and on a Volcano Job) when rendered, and written back by to_compact."""
    w = load_workload([str(EXAMPLES / "workload.yaml")])
    by = {j.name: j for j in w.jobs}
    assert by["allreduce"].network_topology == NetworkTopology("hard", 1)
    assert by["sweep"].network_topology == NetworkTopology("soft")
    assert by["wide"].network_topology is None
    assert by["pretrain"].network_topology == NetworkTopology("hard", 2)
    pg = job_objects(by["allreduce"])[0]
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert volcano_job(by["sweep"])["spec"]["networkTopology"] == {"mode": "soft"}
    assert "networkTopology" not in job_objects(by["wide"])[0]["spec"]
    again = tmp_path / "again.json"
    again.write_bytes(orjson.dumps(to_compact(w)))
    assert load_workload([str(again)]).jobs == w.jobs


def test_a_bad_network_topology_names_the_job_and_field(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "kind: Workload\nqueues: [{name: default}]\njobs:\n"
        "- {name: j, duration: 60, replicas: 2, requests: {cpu: 1},\n"
        "   networkTopology: {mode: strict}}\n"
    )
    with pytest.raises(InputError, match="hard or soft") as err:
        load_workload([str(path)])
    assert err.value.field == "jobs[0].networkTopology.mode"
    assert err.value.obj == "Workload job j"


def _two_leaves() -> tuple[list[dict], list[dict]]:
    """Two 8-GPU nodes, each alone under its leaf, both under one spine (tier 2);
    the cluster is tier 3."""
    nodes = [node_object(f"n{i}", {"cpu": 16000.0, "memory": 128 * GiB, GPU: 8.0}) for i in (0, 1)]
    return nodes, hypernode_objects(_names(nodes), TreeShape(1, 2, 2))


def _job(name: str, pods: int, arrival: float = 0.0) -> JobSpec:
    return JobSpec(
        name=name,
        namespace="default",
        queue="q",
        arrival=arrival,
        duration=1000.0,
        tasks=(TaskSpec("worker", pods, WHOLE_NODE),),
        min_available=pods,
    )


def test_the_slowdown_lengthens_a_gang_spanning_the_spine_by_its_factor() -> None:
    """A gang of two whole-node pods must take both nodes, so it spans the spine (tier
    2) and runs 1.15 times its duration; a one-pod job after it stays in its leaf and
    runs its duration. The tier and HyperNode are in the job rows."""
    nodes, hypernodes = _two_leaves()
    w = Workload(jobs=(_job("gang", 2), _job("single", 1, 10.0)), queues=(QueueSpec("q"),))
    options = SimOptions(topology_slowdown=Slowdown.parse("1=1.0,2=1.15,3=1.4"))
    res = simulate(nodes, w, Scheduler.from_file(None), options, hypernodes=hypernodes)
    plain = simulate(nodes, w, Scheduler.from_file(None), SimOptions(), hypernodes=hypernodes)
    gang, single = res.metrics.jobs["default/gang"], res.metrics.jobs["default/single"]
    startup = options.startup_delay
    assert (gang.tier, gang.hypernode, gang.nodes_spanned) == (2, "spine-0", 2)
    assert gang.end - gang.start == pytest.approx(startup + 1000.0 * 1.15)
    assert (single.tier, single.slowdown) == (1, 1.0)
    assert single.end - single.start == pytest.approx(startup + 1000.0)
    slow_gang = plain.metrics.jobs["default/gang"]
    assert slow_gang.end - slow_gang.start == pytest.approx(startup + 1000.0)
    rows = {r["job"]: r for r in job_rows(res)}
    assert rows["default/gang"]["tier"] == 2 and rows["default/gang"]["slowdown"] == 1.15
    topo = res.summary["topology"]
    assert topo["gangs_by_tier"] == {"1": 0, "2": 1, "3": 0} and topo["slowed_gangs"] == 1


def test_a_tier_not_listed_takes_the_factor_below_it() -> None:
    s = Slowdown.parse({2: 1.2})
    assert [s.factor(t) for t in (1, 2, 3)] == [1.0, 1.2, 1.2]
    assert not Slowdown.parse("")
    for bad, message in (("0=1.1", "tiers start at 1"), ("2=-1", "must be > 0"), ("2", "tier=")):
        with pytest.raises(InputError, match=message):
            Slowdown.parse(bad)


def test_without_hypernodes_a_run_reports_no_network() -> None:
    """No HyperNodes: the job rows have no tier columns and the summary no topology
    section, so the files of a run that does not ask for a network are as before."""
    nodes, _ = _two_leaves()
    w = Workload(jobs=(_job("gang", 2),), queues=(QueueSpec("q"),))
    res = simulate(nodes, w, Scheduler.from_file(None))
    assert "topology" not in res.summary
    assert "tier" not in job_rows(res)[0]


def test_a_living_network_topology_plugin_decides_as_a_new_one_each_cycle() -> None:
    """network-topology-aware keeps its registrations from cycle to cycle and builds
    its sums per HyperNode when a cycle opens: a run on the example leaf-spine cluster,
    with hard and soft gangs, small jobs and ends freeing resources in between, gives
    the same job records and metrics as one that opens a new session every cycle."""
    import dataclasses
    import random

    spec = load_cluster_spec(str(EXAMPLES / "cluster.yaml"))
    config = str(Path(__file__).parents[2] / "src/pumice/examples/configs/network-topology.yaml")
    rng = random.Random(7)
    jobs = []
    for k in range(60):
        pods = rng.choice([1, 1, 2, 4, 8])
        mode = rng.choice([None, NetworkTopology("hard", 1), NetworkTopology("soft", 1)])
        jobs.append(
            JobSpec(
                name=f"j{k:02d}", namespace="default", queue="q", arrival=40.0 * k,
                duration=rng.choice([300.0, 900.0, 2400.0]),
                tasks=(TaskSpec("worker", pods, WHOLE_NODE),), min_available=pods,
                network_topology=mode if pods > 1 else None,
            )
        )  # fmt: skip
    w = Workload(jobs=tuple(jobs), queues=(QueueSpec("q"),))
    living = Scheduler.from_file(config)
    assert living.living
    runs = [
        simulate(spec.nodes, w, sched, SimOptions(), hypernodes=spec.hypernodes)
        for sched in (living, dataclasses.replace(Scheduler.from_file(config), living=False))
    ]
    rows = [job_rows(r) for r in runs]
    assert rows[0] == rows[1]
    assert runs[0].summary == runs[1].summary
    placed = [r for r in rows[0] if r.get("tier")]
    assert len(placed) > 20  # (the run placed gangs on the network)
