"""Invariants of shuffle with rescheduling's lowNodeUtilization on random clusters.

Shuffle never evicts a pod the rules forbid (not Running, another scheduler's, at or
above the threshold priority, of kube-system, a DaemonSet pod, a static pod's mirror,
marked not preemptable); it evicts only from nodes that were over a target, only when
some schedulable node was under every threshold, and no more than the under-utilized
nodes' room below their targets (plus the one pod that used the last of it); each
eviction is audited with its strategy. The oracle reads the objects, not pumice's model.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.kit import node, pod, podgroup, priority_class, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.scheduler import Scheduler

THRESHOLD = 1000  # thresholdPriority: pods at or above it are protected
KINDS = (
    "plain", "plain", "plain", "best-effort", "critical", "high-priority", "kube-system",
    "daemonset", "mirror", "not-preemptable", "other-scheduler", "terminating",
)  # fmt: skip
EVICTABLE = {"plain", "best-effort"}


def make_pod(kind: str, name: str, node_name: str, cpu: int, prio: int) -> list[dict]:
    ns = "kube-system" if kind == "kube-system" else "default"
    if kind == "other-scheduler":
        return [pod(name, node=node_name, cpu=str(cpu), scheduler="default-scheduler")]
    extra: dict = {}
    if kind == "daemonset":
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        extra["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    p = pod(
        name,
        ns=ns,
        group=name,
        node=node_name,
        cpu=None if kind == "best-effort" else str(cpu),
        memory=None if kind == "best-effort" else "1Gi",
        priority=THRESHOLD + prio if kind == "high-priority" else prio,
        priority_class="system-node-critical" if kind == "critical" else "",
        terminating=kind == "terminating",
        **extra,
    )
    if kind == "mirror":
        p["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "x"
    if kind == "not-preemptable":
        p["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    return [podgroup(name, ns=ns, phase="Running"), p]


@st.composite
def clusters(draw):
    low = draw(st.integers(0, 60))
    high = draw(st.integers(low, 90))
    n_nodes = draw(st.integers(2, 4))
    objs: list[dict] = [queue(), priority_class("system-node-critical", 2_000_001_000)]
    nodes = {}
    for i in range(n_nodes):
        cpus = draw(st.sampled_from([4, 8]))
        cordoned = draw(st.integers(0, 4)) == 0
        nodes[f"n{i}"] = (cpus, cordoned)
        objs.append(node(f"n{i}", cpu=str(cpus), memory="64Gi", unschedulable=cordoned))
    pods: dict[str, tuple[str, str, int]] = {}  # key -> (kind, node, cpu)
    k = 0
    for name, (cpus, _) in nodes.items():
        free = cpus
        while free > 0 and draw(st.integers(0, 3)) > 0:
            cpu = draw(st.integers(1, min(2, free)))
            kind = draw(st.sampled_from(KINDS))
            objs += make_pod(kind, f"p{k}", name, cpu, draw(st.integers(0, 20)))
            ns = "kube-system" if kind == "kube-system" else "default"
            pods[f"{ns}/p{k}"] = (kind, name, 0 if kind == "best-effort" else cpu)
            free -= cpu
            k += 1
    node_fit = draw(st.booleans())
    return objs, nodes, pods, low, high, node_fit


def config(low: int, high: int, node_fit: bool) -> dict:
    params = {
        "thresholds": {"cpu": low},
        "targetThresholds": {"cpu": high},
        "thresholdPriority": THRESHOLD,
        "nodeFit": node_fit,
    }
    args = {"strategies": [{"name": "lowNodeUtilization", "params": params}]}
    return {
        "actions": "shuffle",
        "tiers": [
            {"plugins": [{"name": "rescheduling", "arguments": args}, {"name": "predicates"}]}
        ],
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_shuffle_evicts_only_what_the_rules_allow_from_over_utilized_nodes(case) -> None:
    objs, nodes, pods, low, high, node_fit = case
    sched = Scheduler.create(parse_config(config(low, high, node_fit)))
    d = sched.cycle(build_snapshot([SourcedObject(o, "test") for o in objs]))

    event("some evicted" if d.evictions else "none evicted")
    used = dict.fromkeys(nodes, 0)
    for kind, n, cpu in pods.values():
        if kind != "terminating":
            used[n] += cpu
    pct = {n: used[n] * 100 / nodes[n][0] for n in nodes}
    under = {n for n in nodes if pct[n] < low and not nodes[n][1]}
    over = {n for n in nodes if n not in under and pct[n] > high}

    for key in d.evictions:
        kind, n, _cpu = pods[key]
        assert kind in EVICTABLE, (key, kind)
        assert n in over, (key, n, pct)
    if d.evictions:
        assert under and under != set(nodes)
        room = sum((high - pct[n]) * nodes[n][0] / 100 for n in under)
        evicted = sum(pods[k][2] for k in d.evictions)
        assert evicted < room + 2  # the last pod may use more than the room left
    assert sorted(r["victim"] for r in d.audit) == sorted(d.evictions)
    assert all(r["strategy"] == "lowNodeUtilization" for r in d.audit)
