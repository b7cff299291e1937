"""The rescheduling plugin: which pods lowNodeUtilization names, when, and its arguments."""

from __future__ import annotations

from itertools import pairwise

import pytest
import yaml
from tests.kit import node, pod, podgroup, priority_class, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.plugins import rescheduling
from pumice.scheduler import Scheduler
from pumice.sim.engine import SimOptions, Simulation
from pumice.sim.workload import JobSpec, QueueSpec, TaskSpec, Workload

LOW = {"cpu": 20, "memory": 20}
TARGET = {"cpu": 50, "memory": 50}


def config(params: dict | None = None, **arguments) -> str:
    """shuffle with rescheduling's lowNodeUtilization (thresholds 20%, targets 50%)."""
    p = {"thresholds": LOW, "targetThresholds": TARGET} if params is None else params
    args = {"strategies": [{"name": "lowNodeUtilization", "params": p}], **arguments}
    return yaml.safe_dump(
        {
            "actions": "allocate, shuffle",
            "tiers": [
                {"plugins": [{"name": "priority"}, {"name": "conformance"}]},
                {"plugins": [{"name": "rescheduling", "arguments": args}, {"name": "predicates"}]},
            ],
        }
    )


def scheduler(text: str) -> Scheduler:
    return Scheduler.create(parse_config(yaml.safe_load(text)))


def cycle(
    sched: Scheduler, objects: list[dict], now: float | None = None, carried: dict | None = None
):
    """One cycle; ``carried`` plays the snapshot's owner (a scheduler cache), which hands
    the same dict to every snapshot of one cluster."""
    snap = build_snapshot([SourcedObject(o, "test") for o in objects])
    if now is not None:
        snap.now = now
    if carried is not None:
        snap.carried = carried
    return sched.cycle(snap)


def run(objects: list[dict], text: str):
    return cycle(scheduler(text), objects)


def running(name: str, node_name: str, *, cpu: str = "1", priority: int = 0, **extra) -> list:
    """A job of one running pod on ``node_name``."""
    p = pod(name, group=name, node=node_name, cpu=cpu, memory="1Gi", priority=priority, **extra)
    return [podgroup(name, phase="Running"), p]


def cluster(*objs, nodes=("n1", "n2")) -> list[dict]:
    return [queue(), *(node(n, cpu="8", memory="16Gi") for n in nodes), *objs]


def busy(n: int, node_name: str = "n1", prefix: str = "p") -> list[dict]:
    """``n`` one-cpu pods on ``node_name``, priorities 0, 1, 2, ..."""
    return [o for i in range(n) for o in running(f"{prefix}{i}", node_name, priority=i)]


# -- which pods, from which nodes -------------------------------------------------------------


def test_victims_come_from_over_utilized_nodes_only() -> None:
    """n1 is over its target (6 of 8 cpus), n2 under its thresholds, n3 in between (3 of 8
    cpus: not under 20%, not over 50%): only n1's pods are named, lowest priority first,
    until n1 is below its target (Volcano keeps going while a resource is *at* it)."""
    d = run(cluster(*busy(6, "n1"), *busy(3, "n3", "q"), nodes=("n1", "n2", "n3")), config())
    assert d.evictions == ["default/p0", "default/p1", "default/p2"]


def test_the_most_used_node_goes_first_and_room_on_the_targets_runs_out() -> None:
    """Two over-utilized nodes; the under-utilized one can take 4 cpus below its 50%
    target: the busier n2 gives up pods first, and the eviction stops when that room is
    used up, before n1 gives any."""
    objs = cluster(*busy(6, "n1"), *busy(7, "n2", "q"), nodes=("n1", "n2", "n3"))
    d = run(objs, config())
    assert d.evictions == ["default/q0", "default/q1", "default/q2", "default/q3"]


def test_best_effort_pods_go_first_among_equal_priorities() -> None:
    objs = cluster(*busy(5, "n1"))
    objs += [podgroup("be", phase="Running"), pod("be", group="be", node="n1", cpu=None,
                                                 memory=None, priority=0)]  # fmt: skip
    d = run(objs, config())
    assert d.evictions[0] == "default/be"


@pytest.mark.parametrize(
    ("objs", "why"),
    [
        (cluster(*busy(6, "n1"), *busy(2, "n2", "q")), "no schedulable node is under"),
        (cluster(*busy(1, "n1")), "every node is under its thresholds"),
        (cluster(*busy(3, "n1"), nodes=("n1", "n2")), "no node is above a target"),
    ],
)
def test_nothing_is_named_without_an_under_and_an_over_utilized_node(objs, why) -> None:
    d = run(objs, config())
    assert d.evictions == []
    assert any(why in n for n in d.notes), d.notes


def test_an_extended_resource_threshold_counts() -> None:
    """GPUs named in both maps: n1 uses 3 of 4 (75%, target 50%) while its cpu is low."""
    gpus = {"thresholds": {"nvidia.com/gpu": 20}, "targetThresholds": {"nvidia.com/gpu": 50}}
    objs = [queue(), node("n1", cpu="32", memory="64Gi", nvidia_gpu="4"),
            node("n2", cpu="32", memory="64Gi", nvidia_gpu="4")]  # fmt: skip
    for i in range(3):
        objs += [podgroup(f"g{i}", phase="Running"),
                 pod(f"g{i}", group=f"g{i}", node="n1", gpu="1", priority=i)]  # fmt: skip
    assert run(objs, config(gpus)).evictions == ["default/g0", "default/g1"]


def test_default_thresholds_never_evict() -> None:
    """Volcano's defaults are 100% everywhere: no node is ever over its target."""
    d = run(cluster(*busy(8, "n1")), config(params={}))
    assert d.evictions == []


def test_a_cordoned_node_is_no_target() -> None:
    objs = [queue(), node("n1", cpu="8", memory="16Gi"),
            node("n2", cpu="8", memory="16Gi", unschedulable=True), *busy(6, "n1")]  # fmt: skip
    assert run(objs, config()).evictions == []


def test_pods_of_other_schedulers_count_but_are_never_named() -> None:
    """Another scheduler's pods make n1 over-utilized; only ours may go."""
    objs = cluster(*busy(1, "n1"))
    objs += [pod(f"o{i}", node="n1", cpu="1", memory="1Gi", scheduler="default-scheduler")
             for i in range(5)]  # fmt: skip
    d = run(objs, config())
    assert d.evictions == ["default/p0"]


# -- the rules: pods that are never evicted ---------------------------------------------------

DAEMON_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]
        }
    }
}


def protected_cluster() -> list[dict]:
    """n1 over its target holding one pod of each protected kind, all of priority 0,
    and one ordinary pod of priority 5."""
    objs = cluster(priority_class("system-cluster-critical", 2_000_000_000))
    objs += running("critical", "n1", priority_class="system-cluster-critical")
    objs += running("daemon", "n1", affinity=DAEMON_AFFINITY)
    objs += running("kept", "n1")
    objs[-1]["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    objs += running("mirror", "n1")
    objs[-1]["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "abc"
    sys_pg = podgroup("sys", ns="kube-system", phase="Running")
    objs += [sys_pg, pod("sys", ns="kube-system", group="sys", node="n1", cpu="1", priority=0)]
    objs += running("plain", "n1", priority=5)
    objs += running("plain2", "n1", priority=6)
    return objs


def test_protected_pods_are_never_named() -> None:
    d = run(protected_cluster(), config())
    assert d.evictions == ["default/plain", "default/plain2"]


def test_forbidding_rule_names_each_rule() -> None:
    snap = build_snapshot([SourcedObject(o, "t") for o in protected_cluster()])
    rules = {
        t.name: rescheduling.forbidding_rule(t, 2_000_000_000)
        for job in snap.jobs.values()
        for t in job.tasks.values()
    }
    assert rules["plain"] is None
    assert "critical" in rules["critical"]
    assert "DaemonSet" in rules["daemon"]
    assert "preemptable" in rules["kept"]
    assert "mirror" in rules["mirror"]
    assert "kube-system" in rules["sys"]


def test_threshold_priority_protects_pods_at_and_above_it() -> None:
    params = {"thresholds": LOW, "targetThresholds": TARGET, "thresholdPriority": 1}
    d = run(cluster(*busy(6, "n1")), config(params))
    assert d.evictions == ["default/p0"]  # the only pod below priority 1
    params["thresholdPriority"] = 2
    d = run(cluster(*busy(6, "n1")), config(params))
    assert d.evictions == ["default/p0", "default/p1"]


def test_node_fit_passes_over_a_pod_no_under_utilized_node_could_take() -> None:
    """p0 may only run on n1 (its nodeSelector): evicting it would bring it back there."""
    objs = cluster(*busy(6, "n1"))
    objs[1]["metadata"]["labels"] = {"only": "here"}
    p0 = next(o for o in objs if o["kind"] == "Pod" and o["metadata"]["name"] == "p0")
    p0["spec"]["nodeSelector"] = {"only": "here"}
    assert run(objs, config()).evictions == ["default/p1", "default/p2", "default/p3"]
    params = {"thresholds": LOW, "targetThresholds": TARGET, "nodeFit": False}
    assert run(objs, config(params)).evictions == ["default/p0", "default/p1", "default/p2"]


# -- the interval, on the session's clock ---------------------------------------------------


def test_the_interval_is_counted_on_the_session_clock() -> None:
    """The first cycle runs the strategies; then not again until more than the interval
    (5m) has passed on the snapshots' clock, whatever the wall clock says."""
    sched = scheduler(config())
    objs = cluster(*busy(6, "n1"))
    kept: dict = {}
    times = (1000, 1100, 1300, 1301, 1500)
    ran = [bool(cycle(sched, objs, now=t, carried=kept).evictions) for t in times]
    assert ran == [True, False, False, True, False]


def test_each_cluster_keeps_its_own_clock_and_a_clock_going_back_starts_afresh() -> None:
    sched = scheduler(config())
    objs = cluster(*busy(6, "n1"))
    a: dict = {}
    b: dict = {}
    assert cycle(sched, objs, now=1000, carried=a).evictions
    assert cycle(sched, objs, now=1010, carried=b).evictions  # b's cluster has not run yet
    assert not cycle(sched, objs, now=1020, carried=a).evictions
    assert cycle(sched, objs, now=10, carried=a).evictions  # a new timeline
    # A snapshot built from files carries nothing: pumice cycle always runs them.
    assert cycle(sched, objs, now=1030).evictions


def test_interval_argument() -> None:
    sched = scheduler(config(interval="1m"))
    objs = cluster(*busy(6, "n1"))
    kept: dict = {}
    ran = [bool(cycle(sched, objs, now=t, carried=kept).evictions) for t in (0, 60, 61)]
    assert ran == [True, False, True]


def test_in_a_simulation_the_interval_follows_the_virtual_clock(monkeypatch) -> None:
    """Jobs arrive every minute for 20 virtual minutes, so there is a cycle every minute:
    the strategies run at the first cycle with a running pod to offer (the second job's
    arrival) and then at the first cycle after more than 5 virtual minutes."""
    times: list[float] = []
    real = rescheduling.low_node_utilization

    def spy(ssn, strategy, tasks):
        times.append(ssn.now)
        return real(ssn, strategy, tasks)

    monkeypatch.setattr(rescheduling, "low_node_utilization", spy)
    jobs = tuple(
        JobSpec(f"j{i}", "default", "q", 60.0 * i, 3600.0,
                (TaskSpec("w", 1, {"cpu": 1000.0, "memory": 2.0**30}),), 1)
        for i in range(20)
    )  # fmt: skip
    nodes = [node("n1", cpu="64", memory="256Gi"), node("n2", cpu="64", memory="256Gi")]
    sim = Simulation(nodes, Workload(jobs=jobs, queues=(QueueSpec("q"),)), scheduler(config()),
                     SimOptions())  # fmt: skip
    sim.run()
    assert len(times) >= 3
    assert all(b - a > 300 for a, b in pairwise(times))
    assert all(b - a <= 360 for a, b in pairwise(times)), times
    assert times[0] == 60.0, times


# -- arguments ----------------------------------------------------------------------------


def test_defaults() -> None:
    from pumice.conf.arguments import Arguments

    s = rescheduling.parse_settings(Arguments({}, "plugin rescheduling"))
    assert s.interval == 300
    (lnu,) = s.strategies
    assert dict(lnu.thresholds) == {"cpu": 100, "memory": 100, "pods": 100}
    assert dict(lnu.targets) == {"cpu": 100, "memory": 100, "pods": 100}
    assert lnu.threshold_class == "system-cluster-critical" and lnu.node_fit


def test_given_thresholds_are_merged_over_the_defaults() -> None:
    from pumice.conf.arguments import Arguments

    args = {"strategies": [{"name": "lowNodeUtilization", "params": {"thresholds": {"cpu": 10}}}]}
    (lnu,) = rescheduling.parse_settings(Arguments(args, "plugin rescheduling")).strategies
    assert dict(lnu.thresholds) == {"cpu": 10, "memory": 100, "pods": 100}


def lnu(**params) -> dict:
    return {"strategies": [{"name": "lowNodeUtilization", "params": params}]}


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"interval": "five minutes"}, "arguments.interval"),
        ({"interval": 5}, "arguments.interval"),
        ({"strategies": "lowNodeUtilization"}, "arguments.strategies"),
        ({"strategies": ["lowNodeUtilization"]}, "arguments.strategies[0]"),
        ({"strategies": [{"name": "lowNodeUtilisation"}]}, "arguments.strategies[0].name"),
        ({"strategies": [{"name": "lowNodeUtilization", "parms": {}}]},
         "arguments.strategies[0].parms"),
        (lnu(threshold={"cpu": 1}), "arguments.strategies[0].params.threshold"),
        (lnu(thresholds={"cpu": 120}), "arguments.strategies[0].params.thresholds.cpu"),
        (lnu(thresholds={"cpu": "20%"}), "arguments.strategies[0].params.thresholds.cpu"),
        (lnu(thresholds={"pod": 20}), "arguments.strategies[0].params.thresholds.pod"),
        (lnu(thresholds={"cpu": 60}, targetThresholds={"cpu": 50}),
         "arguments.strategies[0].params.thresholds.cpu"),
        (lnu(targetThresholds=[50]), "arguments.strategies[0].params.targetThresholds"),
        (lnu(targetThresholds={"nvidia.com/gpu": 50}),
         "arguments.strategies[0].params.thresholds.nvidia.com/gpu"),
        (lnu(nodeFit="yes"), "arguments.strategies[0].params.nodeFit"),
        (lnu(numberOfNodes=-1), "arguments.strategies[0].params.numberOfNodes"),
        (lnu(thresholdPriority="high"), "arguments.strategies[0].params.thresholdPriority"),
        (lnu(thresholdPriority=5, thresholdPriorityClassName="x"),
         "arguments.strategies[0].params.thresholdPriority"),
    ],
)  # fmt: skip
def test_bad_arguments_name_the_field(arguments, field) -> None:
    text = yaml.safe_dump(
        {
            "actions": "allocate, shuffle",
            "tiers": [{"plugins": [{"name": "rescheduling", "arguments": arguments}]}],
        }
    )
    with pytest.raises(InputError) as err:
        scheduler(text)
    assert err.value.field == f"tiers[0].plugins[0].{field}"
    assert err.value.obj == "plugin rescheduling"


def test_a_bad_argument_fails_before_any_cycle() -> None:
    """Nothing is half-applied: the plugin fails when the scheduler is built."""
    with pytest.raises(InputError):
        scheduler(config(interval="soon"))


def test_metrics_period_loads_with_a_warning(tmp_path) -> None:
    path = tmp_path / "sched.conf"
    path.write_text(config(metricsPeriod="5m"))
    warnings = Scheduler.from_file(str(path)).config.warnings
    assert any("argument metricsPeriod of plugin rescheduling" in w for w in warnings), warnings


def test_strategies_volcano_only_designed_load_and_choose_nothing() -> None:
    args = {"strategies": [{"name": "offlineOnly"}, {"name": "lowPriorityFirst"}]}
    text = yaml.safe_dump(
        {
            "actions": "allocate, shuffle",
            "tiers": [{"plugins": [{"name": "rescheduling", "arguments": args}]}],
        }
    )
    d = cycle(scheduler(text), cluster(*busy(6, "n1")))
    assert d.evictions == []
    assert any("offlineOnly, lowPriorityFirst are not implemented" in n for n in d.notes)
