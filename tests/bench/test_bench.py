"""The benchmark module: scenarios are what they claim, the validity check catches bad
decisions, and ``pumice bench`` runs end to end."""

from __future__ import annotations

from collections import Counter

import pytest

from pumice.bench import scenarios
from pumice.bench.runner import Result, run_scenario
from pumice.bench.scenarios import SCENARIOS, Scenario, resolve
from pumice.bench.validity import check_decisions
from pumice.cli import main
from pumice.framework.decisions import Decisions
from pumice.scheduler import Scheduler


def _kinds(objs: list[dict]) -> Counter:
    return Counter(o["kind"] for o in objs)


def _pending(objs: list[dict]) -> list[dict]:
    return [o for o in objs if o["kind"] == "Pod" and not o["spec"].get("nodeName")]


def test_uniform_builds_nodes_running_and_pending_pods() -> None:
    """Nodes, running pods spread over them, pending single pods: as asked."""
    objs = scenarios.uniform(10, 25, n_running=7, node_cpu="2")
    kinds = _kinds(objs)
    assert kinds["Node"] == 10 and kinds["Pod"] == 32 and kinds["Queue"] == 1
    assert len(_pending(objs)) == 25
    assert {o["status"]["allocatable"]["cpu"] for o in objs if o["kind"] == "Node"} == {"2"}


def test_gang_builds_podgroups_of_full_size() -> None:
    """Each gang is a PodGroup whose minMember is its pod count."""
    objs = scenarios.gang(3, 4, n_nodes=2)
    groups = [o for o in objs if o["kind"] == "PodGroup"]
    assert len(groups) == 3 and {g["spec"]["minMember"] for g in groups} == {4}
    members = Counter(
        o["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for o in _pending(objs)
    )
    assert members == {g["metadata"]["name"]: 4 for g in groups}


def test_constraints_covers_every_placement_kind() -> None:
    """Selector, required and preferred affinity, tolerations and plain pods all occur;
    some nodes carry hard and some soft taints."""
    objs = scenarios.constraints(30, 10)
    specs = [p["spec"] for p in _pending(objs)]
    assert any("nodeSelector" in s for s in specs)
    assert any("requiredDuringSchedulingIgnoredDuringExecution" in str(s) for s in specs)
    assert any("preferredDuringSchedulingIgnoredDuringExecution" in str(s) for s in specs)
    assert any("tolerations" in s for s in specs)
    effects = {
        t["effect"] for o in objs if o["kind"] == "Node" for t in o["spec"].get("taints", [])
    }
    assert effects == {"NoSchedule", "PreferNoSchedule"}
    assert len({o["metadata"]["labels"]["group"] for o in objs if o["kind"] == "Node"}) == 10


def test_named_scenarios_match_their_description() -> None:
    """The node and pending counts a scenario declares are what it builds."""
    for name in ("basic", "gang", "scale-500x1000"):
        s = SCENARIOS[name]
        objs = s.build()
        assert _kinds(objs)["Node"] == s.nodes, name
        assert len(_pending(objs)) == s.pending, name
    assert len([o for o in SCENARIOS["basic"].build() if o["kind"] == "Pod"]) == 11_000


def test_resolve_expands_scale_and_rejects_unknown_names() -> None:
    assert [s.name for s in resolve(["scale"])] == [
        f"scale-{n}x{p}" for n in scenarios.SCALE_NODES for p in scenarios.SCALE_PODS
    ]
    with pytest.raises(KeyError):
        resolve(["nope"])


def _cluster() -> list[dict]:
    objs = scenarios.uniform(1, 0, node_cpu="1", node_memory="1Gi")
    objs.append(scenarios.podgroup("g", 2))
    objs.append(scenarios.pod("g-0", "600m", "100Mi", group="g"))
    objs.append(scenarios.pod("g-1", "600m", "100Mi", group="g"))
    objs.append(scenarios.pod("solo", "300m", "100Mi"))
    return objs


def test_check_accepts_valid_decisions() -> None:
    d = Decisions(binds={"bench/solo": "node-00000"})
    assert check_decisions(_cluster(), d) == []


def test_check_catches_a_node_over_capacity() -> None:
    """Two 600m pods on a 1-CPU node: the node is over capacity."""
    d = Decisions(binds={"bench/g-0": "node-00000", "bench/g-1": "node-00000"})
    problems = check_decisions(_cluster(), d)
    assert any("over capacity in cpu" in p for p in problems), problems


def test_check_catches_a_half_gang() -> None:
    """One pod of a gang of minMember 2 bound alone."""
    d = Decisions(binds={"bench/g-0": "node-00000"})
    problems = check_decisions(_cluster(), d)
    assert any("podgroup bench/g" in p and "minMember 2" in p for p in problems), problems


def test_check_counts_running_pods_against_capacity() -> None:
    """Pods already on the node take capacity too."""
    objs = [*_cluster(), scenarios.pod("run", "800m", "100Mi", node_name="node-00000")]
    problems = check_decisions(objs, Decisions(binds={"bench/solo": "node-00000"}))
    assert any("over capacity in cpu" in p for p in problems)


def test_run_scenario_times_a_small_case() -> None:
    """A tiny scenario runs, decides every pod and reports positive figures."""
    tiny = Scenario("tiny", "3 nodes, 12 pods", lambda: scenarios.uniform(3, 12), 3, 12)
    r = run_scenario(tiny, Scheduler.from_file(None), repeats=2)
    assert isinstance(r, Result) and r.valid and r.repeats == 2
    assert r.bound == 12 and r.waiting == 0
    assert r.pods_per_s > 0 and r.cycle_p99_s >= r.cycle_p50_s > 0 and r.peak_rss_mib > 0


def test_cli_bench_prints_a_row_per_scenario(capsys, tmp_path) -> None:
    out = tmp_path / "r.json"
    rc = main(["bench", "scale-500x1000", "--repeat", "1", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "scale-500x1000" in text and "yes" in text
    assert out.read_bytes().startswith(b"[")


def test_cli_bench_rejects_an_unknown_scenario(capsys) -> None:
    assert main(["bench", "nope"]) == 2
    assert "unknown scenario 'nope'" in capsys.readouterr().err


def test_a_small_volumes_case_gives_each_claim_its_own_pv_on_the_pods_node() -> None:
    """3 nodes with 2 local PVs each and 8 pods with a claim each: 6 placed, one PV per
    claim, on the PV's node; the other 2 wait (no PV left), as the check confirms."""
    small = Scenario("v", "", lambda: scenarios.volumes(3, 8, per_node=2), 3, 8)
    r = run_scenario(small, Scheduler.from_file(None), repeats=1)
    assert r.valid, r.problems
    assert r.bound == 6 and r.waiting == 2


def test_check_catches_a_pv_given_twice_or_far_from_its_pod() -> None:
    from pumice.framework.decisions import PreBind

    objs = scenarios.volumes(2, 2, per_node=1)
    pv0 = "node-00000-disk-0"
    d = Decisions(
        binds={"bench/pend-000000": "node-00000", "bench/pend-000001": "node-00001"},
        prebind={
            "bench/pend-000000": PreBind(volumes={"bench/pend-000000-data": pv0}),
            "bench/pend-000001": PreBind(volumes={"bench/pend-000001-data": pv0}),
        },
    )
    problems = check_decisions(objs, d)
    assert any("given to claims" in p for p in problems), problems
    assert any("its claim's PV node-00000-disk-0 elsewhere" in p for p in problems), problems


# -- what pods attach: shared GPU cards, NUMA-pinned CPUs, DRA devices ---------------------


def _tiny(name: str, build, nodes: int, pending: int) -> Scenario:
    return Scenario(name, "tiny", build, nodes, pending, config=SCENARIOS[name].config)


def _scheduler_for(s: Scenario) -> Scheduler:
    import yaml

    from pumice.conf.config import parse_config

    if s.config is None:
        return Scheduler.from_file(None)
    return Scheduler.create(parse_config(yaml.safe_load(s.config)))


@pytest.mark.parametrize(
    ("name", "build", "nodes", "pending"),
    [
        ("deviceshare", lambda: scenarios.deviceshare(4, 120, n_running=4), 4, 120),
        ("numa", lambda: scenarios.numa(6, 60, n_running=3), 6, 60),
        ("dra", lambda: scenarios.dra(3, 30), 3, 30),
    ],
)
def test_attaching_scenarios_run_valid_and_tight(name, build, nodes, pending) -> None:
    """Each scenario (tiny) runs under its own configuration and its decisions pass the
    checks of what pods attach; the sizes leave some pods waiting, so the checks see
    full cards, NUMA nodes and devices."""
    s = _tiny(name, build, nodes, pending)
    objs = build()
    assert _kinds(objs)["Node"] == nodes and len(_pending(objs)) == pending
    r = run_scenario(s, _scheduler_for(s), repeats=1)
    assert r.valid, r.problems
    assert 0 < r.bound < pending


def test_full_scenarios_declare_what_they_build() -> None:
    """Counts only (the builds are cheap; the cycles are not run here)."""
    for name, kind, count in (
        ("deviceshare", "Node", 1000),
        ("numa", "Numatopology", 1000),
        ("dra", "ResourceSlice", 1000),
    ):
        s = SCENARIOS[name]
        objs = s.build()
        assert _kinds(objs)[kind] == count and len(_pending(objs)) == s.pending, name


def test_deviceshare_without_the_plugin_is_caught_binding_pods_without_cards() -> None:
    """Under the default configuration (no deviceshare) the pods fit by memory sums but
    get no card: the check says so."""
    s = Scenario("ds", "tiny", lambda: scenarios.deviceshare(2, 6, n_running=0), 2, 6)
    r = run_scenario(s, Scheduler.from_file(None), repeats=1)
    assert any("without a card" in p for p in r.problems), r.problems


def _share_node() -> dict:
    objs = scenarios.deviceshare(1, 0, cards=2, n_running=0)
    return objs[1]


def _gpu_pod(name: str, mib: int, card: str | None = None, node_name: str | None = None) -> dict:
    p = scenarios.pod(name, "1", "1Gi", node_name=node_name)
    p["spec"]["containers"][0]["resources"]["limits"] = {scenarios.GPU_MEMORY: str(mib)}
    if card is not None:
        p["metadata"]["annotations"] = {"volcano.sh/gpu-index": card}
    return p


def test_check_catches_a_card_over_its_memory() -> None:
    """A running pod on card 0 and a bound one given card 0 too, more than it holds."""
    half = scenarios.CARD_MIB // 2
    objs = [scenarios.queue(), _share_node(), _gpu_pod("run", half + 1, "0", "node-00000"),
            _gpu_pod("new", half)]  # fmt: skip
    d = Decisions(binds={"bench/new": "node-00000"})
    d.prebind_of("bench/new").annotations["volcano.sh/gpu-index"] = "0"
    problems = check_decisions(objs, d)
    assert any("card 0 over its memory" in p for p in problems), problems
    d.prebind_of("bench/new").annotations["volcano.sh/gpu-index"] = "1"
    assert check_decisions(objs, d) == []


def test_check_catches_cpus_no_single_numa_node_has() -> None:
    """Two NUMA nodes of 16 CPUs, 6 taken on the first: a 12-CPU pod fits the second,
    a second one fits neither (though the node has 14 CPUs left)."""
    objs = scenarios.numa(1, 2, n_running=1)
    for p in _pending(objs):
        res = p["spec"]["containers"][0]["resources"]
        res["requests"]["cpu"] = res["limits"]["cpu"] = "12"
    d = Decisions(binds={"bench/pend-000000": "node-00000"})
    assert check_decisions(objs, d) == []
    d.binds["bench/pend-000001"] = "node-00000"
    problems = check_decisions(objs, d)
    assert any("needs 12 CPUs of one NUMA node" in p and "numa0: 10, numa1: 4" in p
               for p in problems), problems  # fmt: skip


def test_check_catches_a_device_given_twice() -> None:
    objs = scenarios.dra(2, 2)
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": "node-00000",
              "device": "gpu-0"}  # fmt: skip
    d = Decisions(binds={"bench/pend-000000": "node-00000", "bench/pend-000001": "node-00001"})
    for i in range(2):
        d.prebind_of(f"bench/pend-00000{i}").claims[f"bench/c{i}"] = {
            "devices": {"results": [result]}
        }
    problems = check_decisions(objs, d)
    assert any("given to bench/c0 and bench/c1" in p for p in problems), problems
    assert any("of node node-00000, its pod is bound to node-00001" in p for p in problems)
    del d.prebind["bench/pend-000001"]
    assert any("without all its ResourceClaims" in p for p in check_decisions(objs, d))


def test_a_small_attach_case_places_both_kinds_of_claims_validly() -> None:
    """3 nodes (8 PVs and 8 GPUs each) and 10 pods, half with a volume claim, half with
    a device claim: all placed, each claim on its pod's node, nothing given twice."""
    small = Scenario("a", "", lambda: scenarios.attach(3, 10), 3, 10)
    r = run_scenario(small, Scheduler.from_file(None), repeats=1)
    assert r.valid, r.problems
    assert r.bound == 10
