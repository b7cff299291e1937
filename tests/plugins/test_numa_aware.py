"""numa-aware as a user notices it: which nodes a Guaranteed pod's whole CPUs may go to
under each topology manager policy, what a refusal says, how CPUs taken in a cycle
and by earlier binds count, and what bad Numatopology objects and arguments say.

The kubelet arithmetic is also checked against Volcano's own unit cases
(``pkg/scheduler/plugins/numaaware/policy/*_test.go`` and
``provider/cpumanager/cpu_mng_test.go``), ported table by table."""

from __future__ import annotations

from typing import Any

import pytest
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.api.numa import parse_numatopology
from pumice.api.parse import parse_pod
from pumice.api.task import NUMA_POLICY_ANNOTATION
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.plugins.numa_aware import CARRY_KEY
from pumice.plugins.numa_cpus import CpuTopology, bits, mask_of, merge_hints
from pumice.scheduler import Scheduler

#: Volcano's test topology: 8 CPUs, two NUMA nodes of two cores of two threads each.
EIGHT = {c: (0 if c < 4 else 1) for c in range(8)}


def numatopo(
    name: str,
    policy: str = "single-numa-node",
    free: str = "0-7",
    numa_of: dict[int, int] | None = None,
    *,
    cpu_policy: str = "static",
    reserved: str | None = None,
    allocations: tuple[dict, ...] = (),
) -> dict[str, Any]:
    """A Numatopology as Volcano's exporter writes it: CPU ``c`` on NUMA node
    ``numa_of[c]``, its socket the NUMA node's and its core ``c // 2``."""
    numa_of = EIGHT if numa_of is None else numa_of
    spec: dict[str, Any] = {
        "policies": {"CPUManagerPolicy": cpu_policy, "TopologyManagerPolicy": policy},
        "numares": {"cpu": {"allocatable": free, "capacity": len(numa_of)}},
        "cpuDetail": {str(c): {"numa": n, "socket": n, "core": c // 2} for c, n in numa_of.items()},
    }
    if reserved is not None:
        spec["resReserved"] = {"cpu": reserved}
    if allocations:
        spec["podAllocations"] = list(allocations)
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": spec,
    }


def gpod(name: str, cpus: str, *, policy: str | None = None, **kw: Any) -> dict[str, Any]:
    """A Guaranteed pod (limits equal to requests) asking ``cpus``."""
    p = pod(name, cpu=cpus, memory="1Gi", **kw)
    res = p["spec"]["containers"][0]["resources"]
    res["limits"] = dict(res["requests"])
    if policy is not None:
        p["metadata"]["annotations"][NUMA_POLICY_ANNOTATION] = policy
    return p


def numa_conf(weight: int | None = None, actions: str = "enqueue, allocate") -> str:
    plugin: dict[str, Any] = {"name": "numa-aware"}
    if weight is not None:
        plugin["arguments"] = {"weight": weight}
    return conf(actions, ["priority", "gang"], ["predicates", "nodeorder", plugin])


def gang(name: str, n: int, cpus: str, **kw: Any) -> list[dict[str, Any]]:
    return [podgroup(name, min_member=n)] + [
        gpod(f"{name}-{i}", cpus, group=name, created=f"2026-01-01T00:00:0{i}Z", **kw)
        for i in range(n)
    ]


# -- the topology manager's merge (Volcano's policy unit tests) ----------------------------


def m(*ids: int) -> int:
    return mask_of(ids)


_CPU_GPU_CASES = {  # test name -> (cpu hints, gpu hints)
    "test-1": ([(m(0, 1), False), (m(0), True)], [(m(0, 1), False), (m(0), True)]),
    "test-2": ([(m(0, 1), False), (m(1), True)], [(m(0, 1), False), (m(1), True)]),
    "test-3": (
        [(m(0, 1), False), (m(0), True), (m(1), True)],
        [(m(0, 1), False), (m(0), True), (m(1), True)],
    ),
    "test-4": ([(m(0, 1), False), (m(0), True)], [(m(0, 1), False), (m(1), True)]),
    "test-5": ([(m(0, 1), False), (m(0), True)], [(m(0, 1), True)]),
    "test-6": ([(m(0, 1), True)], [(m(0, 1), True)]),
}


@pytest.mark.parametrize(
    ("policy", "case", "best", "preferred"),
    [
        # policy_single_numa_node_test.go, Test_single_numa_node_predicate
        ("single-numa-node", "test-1", m(0), True),
        ("single-numa-node", "test-2", m(1), True),
        ("single-numa-node", "test-3", m(0), True),
        ("single-numa-node", "test-4", m(0, 1), False),
        ("single-numa-node", "test-5", m(0, 1), False),
        # policy_best_effort_test.go, Test_best_effort_predicate
        ("best-effort", "test-1", m(0), True),
        ("best-effort", "test-2", m(1), True),
        ("best-effort", "test-3", m(0), True),
        ("best-effort", "test-4", m(0), False),
        ("best-effort", "test-5", m(0), True),
        ("best-effort", "test-6", m(0, 1), True),
        # policy_restricted_test.go, Test_restricted_predicate
        ("restricted", "test-1", m(0), True),
        ("restricted", "test-2", m(1), True),
        ("restricted", "test-3", m(0), True),
        ("restricted", "test-4", m(0), False),
        ("restricted", "test-5", m(0), True),
        ("restricted", "test-6", m(0, 1), True),
    ],
)
def test_merged_hint_is_volcanos(policy: str, case: str, best: int, preferred: bool) -> None:
    got, pref, admit = merge_hints(policy, [0, 1], list(_CPU_GPU_CASES[case]))
    assert (got, pref) == (best, preferred)
    assert admit == (preferred or policy == "best-effort")


def test_none_policy_admits_without_a_hint() -> None:
    """policy_none_test.go, Test_none_predicate, test-1."""
    assert merge_hints("none", [0, 1], []) == (None, False, True)


# -- the CPU manager (Volcano's cpu_mng_test.go) -------------------------------------------


def topology(**kw: Any) -> CpuTopology:
    return CpuTopology(parse_numatopology(numatopo("n", **kw)))


@pytest.mark.parametrize(
    ("name", "request_", "free", "hints"),
    [
        ("test-1", 4, range(8), [(m(0), True), (m(1), True), (m(0, 1), False)]),
        ("test-2", 4, range(1, 8), [(m(1), True), (m(0, 1), False)]),
        ("test-3", 5, range(8), [(m(0, 1), True)]),
        ("test-4", 8, range(8), [(m(0, 1), True)]),
        ("test-5", 9, range(8), []),
        ("test-6", 4, (2, 3, 4, 5), [(m(0, 1), False)]),
    ],
)
def test_cpu_hints_are_volcanos(name: str, request_: int, free, hints) -> None:
    """Test_GetTopologyHints."""
    assert topology().hints(mask_of(free), request_)[0] == hints, name


@pytest.mark.parametrize(
    ("name", "request_", "free", "best", "cpus"),
    [
        ("test-1", 4, range(8), m(0), [0, 1, 2, 3]),
        ("test-2", 4, range(1, 8), m(1), [4, 5, 6, 7]),
        ("test-3", 5, range(8), m(0, 1), [0, 1, 2, 3, 4]),
        ("test-4", 5, range(1, 8), m(0, 1), [1, 4, 5, 6, 7]),
        ("test-5", 8, range(1, 8), m(0, 1), []),
    ],
)
def test_cpu_assignment_is_volcanos(name: str, request_: int, free, best: int, cpus) -> None:
    """Test_Allocate: whole sockets, then whole cores, then the partly used core."""
    assert bits(topology().assign(mask_of(free), request_, best)) == cpus, name


def test_reserved_cpus_are_never_free() -> None:
    """resReserved cpu 1.5 reserves two whole CPUs (the first core): a 4-CPU request
    then finds numa0 short."""
    topo = topology(reserved="1500m")
    assert bits(topo.reserved) == [0, 1]
    hints, _ = topo.hints(mask_of(range(8)), 4)
    assert hints == [(m(1), True), (m(0, 1), False)]


# -- the predicate ---------------------------------------------------------------------


def test_single_numa_node_refuses_a_node_without_one_numa_node_free_enough() -> None:
    objs = [
        queue(),
        node("n1", cpu="8"),
        node("n2", cpu="8"),
        numatopo("n1", free="0-3,4-5"),  # numa0 4 free, numa1 2
        numatopo("n2", free="0-1,4-5"),  # 2 and 2
        *gang("pg", 1, "4"),
    ]
    d = run(objs, numa_conf())
    assert d.binds == {"default/pg-0": "n1"}
    objs[3] = numatopo("n1", free="0-1,4-5")
    d = run(objs, numa_conf())
    assert d.binds == {}
    why = d.pending["default/pg"]
    assert (
        "2 could not align the pod's CPUs with NUMA nodes (node n1: single-numa-node "
        "policy, no NUMA node has 4 free CPUs (numa0: 2, numa1: 2))" in why
    )


def test_restricted_admits_the_fewest_numa_nodes_that_could_hold_the_request() -> None:
    """6 CPUs need both NUMA nodes of 4: restricted takes them, single-numa-node not."""
    for policy, bound in (("restricted", True), ("single-numa-node", False)):
        objs = [queue(), node("n1", cpu="8"), numatopo("n1", policy), *gang("pg", 1, "6")]
        d = run(objs, numa_conf())
        assert bool(d.binds) is bound, policy
    objs = [queue(), node("n1", cpu="8"), numatopo("n1", "single-numa-node"), *gang("pg", 1, "6")]
    assert (
        "no NUMA node has 6 CPUs at all (numa0: 4, numa1: 4)"
        in run(objs, numa_conf()).pending["default/pg"]
    )


def test_restricted_refuses_when_the_smallest_numa_set_is_short() -> None:
    """cpu_mng test-6's state: {2,3,4,5} free, 4 CPUs only across both NUMA nodes,
    where one NUMA node could hold them: restricted refuses, best-effort admits."""
    for policy, bound in (("restricted", False), ("best-effort", True)):
        objs = [
            queue(),
            node("n1", cpu="8"),
            numatopo("n1", policy, free="2-5"),
            *gang("pg", 1, "4"),
        ]
        d = run(objs, numa_conf())
        assert bool(d.binds) is bound, policy
        if not bound:
            assert (
                "restricted policy, no NUMA node has 4 free CPUs (numa0: 2, numa1: 2)"
                in (d.pending["default/pg"])
            )


def test_cpus_taken_in_the_cycle_count_for_the_next_task() -> None:
    """Two 3-CPU pods fit a node's two 4-CPU NUMA nodes one each; a third does not,
    though the node still has 2 CPUs (1 per NUMA node) and the cluster cpu to spare."""
    objs = [queue(), node("n1", cpu="16"), numatopo("n1"), *gang("pg", 3, "3")]
    d = run(objs, numa_conf())
    assert d.binds == {}
    assert "no NUMA node has 3 free CPUs (numa0: 1, numa1: 1)" in d.pending["default/pg"]
    objs = [queue(), node("n1", cpu="16"), numatopo("n1"), *gang("pg", 2, "3")]
    assert len(run(objs, numa_conf()).binds) == 2


def test_a_gang_given_back_frees_its_cpus_for_the_next_job() -> None:
    """pg-a (3 x 3 CPUs) places two pods, misses the third and gives them back; pg-b
    (2 x 4 CPUs) then gets a NUMA node each."""
    objs = [
        queue(),
        node("n1", cpu="16"),
        numatopo("n1"),
        *gang("a", 3, "3"),
        podgroup("b", min_member=2, created="2026-01-02T00:00:00Z"),
        gpod("b-0", "4", group="b"),
        gpod("b-1", "4", group="b"),
    ]
    d = run(objs, numa_conf())
    assert d.binds == {"default/b-0": "n1", "default/b-1": "n1"}


def test_pods_numa_aware_does_not_constrain_go_anywhere() -> None:
    """A Burstable pod, and a Guaranteed pod of 1.5 CPUs, ignore NUMA nodes."""
    objs = [queue(), node("n1", cpu="8"), numatopo("n1", free="0,4")]
    objs += [podgroup("pg", min_member=2), pod("bu", cpu="4", group="pg")]
    objs.append(gpod("frac", "1500m", group="pg"))
    assert len(run(objs, numa_conf()).binds) == 2


def test_nodes_without_static_cpu_manager_or_aligning_policy_are_not_checked() -> None:
    for topo in (numatopo("n1", cpu_policy="none", free="0"), numatopo("n1", "none", free="0")):
        objs = [queue(), node("n1", cpu="8"), topo, *gang("pg", 1, "4")]
        assert run(objs, numa_conf()).binds == {"default/pg-0": "n1"}


def test_the_policy_annotation_refuses_nodes_that_cannot_honour_it() -> None:
    objs = [
        queue(),
        node("bare", cpu="8"),
        node("dyn", cpu="8"),
        node("other", cpu="8"),
        node("full", cpu="8"),
        numatopo("dyn", cpu_policy="none"),
        numatopo("other", "best-effort"),
        numatopo("full", free=""),
        podgroup("pg"),
        gpod("p", "1", group="pg", policy="single-numa-node"),
    ]
    d = run(objs, numa_conf())
    assert d.binds == {}
    why = d.pending["default/pg"]
    assert "1 had no Numatopology for the pod's single-numa-node topology policy" in why
    assert "1 had a CPU manager policy other than static" in why
    assert "1 had another topology manager policy than the pod's single-numa-node" in why
    assert "(node other: best-effort)" in why
    assert "1 had no free CPUs in their Numatopology" in why
    objs.append(node("good", cpu="8"))
    objs.append(numatopo("good"))
    assert run(objs, numa_conf()).binds == {"default/p": "good"}


def test_annotated_pods_prefer_nodes_spanning_fewer_numa_nodes() -> None:
    """best-effort admits both nodes; the 6-CPU pod spans one NUMA node of 8 on big and
    two of 4 on split: the score sends it to big, though nodeorder alone prefers split
    (the emptier node)."""
    numa16 = {c: (0 if c < 8 else 1) for c in range(16)}
    objs = [
        queue(),
        node("big", cpu="16"),
        node("split", cpu="32"),
        numatopo("big", "best-effort", free="0-15", numa_of=numa16),
        numatopo("split", "best-effort"),
        podgroup("pg"),
        gpod("p", "6", group="pg", policy="best-effort"),
    ]
    assert run(objs, numa_conf(weight=10)).binds == {"default/p": "big"}
    assert run(objs, numa_conf(weight=0)).binds == {"default/p": "split"}


def test_bound_pods_keep_their_cpus_until_the_kubelet_reports_them() -> None:
    """Cycle 1 binds a 4-CPU pod to numa0 of n1. In cycle 2 the Numatopology has not
    caught up (all CPUs still listed free): the next 4-CPU pod gets numa1, and a third
    finds no NUMA node. Once the pod is listed in podAllocations (its CPUs no longer
    free), the forecast is dropped."""
    sched = Scheduler.create(parse_config(_yaml(numa_conf())))
    carried: dict = {}
    base = [queue(), node("n1", cpu="16"), *gang("a", 1, "4")]

    def cycle(objs: list[dict]) -> Any:
        snap = build_snapshot([SourcedObject(o, "test") for o in objs])
        snap.carried = carried
        return sched.cycle(snap)

    d = cycle([*base, numatopo("n1")])
    assert d.binds == {"default/a-0": "n1"}
    assert carried[CARRY_KEY]["n1"]
    running = gpod("a-0", "4", group="a", node="n1", created="2026-01-01T00:00:00Z")
    base = [queue(), node("n1", cpu="16"), podgroup("a", phase="Running"), running]
    later = [podgroup("b", min_member=2), gpod("b-0", "4", group="b"), gpod("b-1", "4", group="b")]
    d = cycle([*base, numatopo("n1"), *later])
    assert d.binds == {}
    assert "no NUMA node has 4 free CPUs (numa0: 0, numa1: 0)" in d.pending["default/b"]
    assert "1 could be placed" in d.pending["default/b"]
    reported = numatopo(
        "n1", free="4-7", allocations=({"uid": "x", "namespace": "default", "name": "a-0"},)
    )
    d = cycle([*base, reported, podgroup("c"), gpod("c-0", "4", group="c")])
    assert d.binds == {"default/c-0": "n1"}
    assert [ref[2] for ref in carried[CARRY_KEY]["n1"]] == ["c-0"]  # (a-0's is dropped)


def test_a_bound_pod_that_is_gone_keeps_no_cpus() -> None:
    sched = Scheduler.create(parse_config(_yaml(numa_conf())))
    carried = {CARRY_KEY: {"n1": {("gone", "default", "gone"): mask_of(range(4))}}}
    objs = [queue(), node("n1", cpu="16"), numatopo("n1"), *gang("b", 2, "4")]
    snap = build_snapshot([SourcedObject(o, "test") for o in objs])
    snap.carried = carried
    assert len(sched.cycle(snap).binds) == 2


def test_only_pinned_pods_leave_the_per_shape_shortcuts_and_only_with_numa_known() -> None:
    """A Guaranteed pod with whole CPUs counts as attaching (no shared fit answers)
    only once some node has a Numatopology; an annotated one always; others never.
    And with no Numatopology, Guaranteed pods place as any other."""
    sched = Scheduler.create(parse_config(_yaml(numa_conf())))
    pods = [
        podgroup("pg", min_member=3),
        gpod("whole", "2", group="pg"),
        gpod("annotated", "1500m", group="pg", policy="restricted"),
        pod("burstable", cpu="2", group="pg"),
    ]
    for topo, expected in (
        ([], {"whole": False, "annotated": True, "burstable": False}),
        ([numatopo("other")], {"whole": True, "annotated": True, "burstable": False}),
    ):
        objs = [queue(), node("n1", cpu="16"), *topo, *pods]
        ssn = sched.open(build_snapshot([SourcedObject(o, "test") for o in objs]))
        tasks = {t.name: t for t in ssn.jobs["default/pg"].tasks.values()}
        assert {name: ssn.attaching(t) for name, t in tasks.items()} == expected
    objs = [queue(), *[node(f"n{i}", cpu="16", memory="64Gi") for i in range(4)]]
    objs += [podgroup("h", min_member=40)] + [gpod(f"h-{i}", "1", group="h") for i in range(40)]
    assert len(run(objs, numa_conf()).binds) == 40


# -- bad input -------------------------------------------------------------------------


def _yaml(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


@pytest.mark.parametrize(
    ("weight", "message"), [("heavy", "an integer"), (-1, "must not be negative")]
)
def test_a_bad_weight_is_refused_naming_it(weight: Any, message: str) -> None:
    text = conf("allocate", ["numa-aware"]).replace(
        "- name: numa-aware", f"- name: numa-aware\n    arguments:\n      weight: {weight}"
    )
    with pytest.raises(InputError, match=message) as err:
        Scheduler.create(parse_config(_yaml(text)))
    assert "weight" in str(err.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s["numares"]["cpu"].update(allocatable="0-x"), "spec.numares.cpu"),
        (lambda s: s["numares"]["cpu"].update(allocatable="3-1"), "spec.numares.cpu"),
        (lambda s: s["numares"]["cpu"].update(allocatable="0-9"), "spec.numares.cpu.allocatable"),
        (lambda s: s["cpuDetail"].update({"one": {"numa": 0}}), "spec.cpuDetail.one"),
        (lambda s: s["cpuDetail"]["0"].update(numa=-1), "spec.cpuDetail.0.numa"),
        (lambda s: s["numares"]["cpu"].update(capacity=-2), "spec.numares.cpu.capacity"),
        (lambda s: s.update(resReserved={"cpu": "lots"}), "spec.resReserved.cpu"),
        (lambda s: s.update(podAllocations={"uid": "x"}), "spec.podAllocations"),
    ],
)
def test_a_bad_numatopology_is_refused_naming_the_field(change, field: str) -> None:
    obj = numatopo("n1")
    change(obj["spec"])
    with pytest.raises(InputError) as err:
        build_snapshot([SourcedObject(queue(), "t"), SourcedObject(obj, "t")])
    assert field in str(err.value)
    assert "n1" in str(err.value)


def test_a_null_container_is_read_as_an_empty_one_for_the_qos_class_too() -> None:
    """``containers: [null, ...]`` counts as a container without resources, as the
    pod's requests read it: the pod is then not Guaranteed and asks NUMA nothing."""
    whole = {"cpu": "2", "memory": "1Gi"}
    c = {"name": "c", "resources": {"requests": whole, "limits": whole}}
    p = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-null-container"},
        "spec": {"containers": [c]},
    }
    asked = parse_pod(p).numa
    assert asked is not None and asked.cpus == (("c", 2),)
    p["spec"]["containers"] = [None, c]
    p["metadata"]["uid"] = "u-null-container-2"
    assert parse_pod(p).numa is None
