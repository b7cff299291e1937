"""No hard gang ever spans a HyperNode above its limit, and no gang is left half placed.

Random HyperNode trees (two or three tiers, leaves of one to three nodes, some nodes in
no HyperNode), pods of another scheduler filling some nodes, and random gangs: hard
(tier limit 1 or 2, by number or by tier name), soft, or unconstrained, some elastic
(more pods than minMember), some cut into sub-groups with a hard tier-1 limit of their
own. Several cycles run with each cycle's binds applied. After every cycle:

- the pods of a hard gang that hold nodes are all within one HyperNode of its tier or
  lower (the lowest HyperNode holding all their nodes is of that tier at most);
- the pods of a hard sub-group likewise, for the sub-group's own limit;
- a gang with any pod bound has at least minMember pods bound or running;
- no node holds more than it has.
"""

from __future__ import annotations

from collections import Counter

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import hypernode, node, pod, podgroup, queue

from pumice.api.quantity import to_canonical
from pumice.bench.scenarios import TOPOLOGY_CONFIG
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.scheduler import Scheduler

CONFIG = Scheduler.create(parse_config(yaml.safe_load(TOPOLOGY_CONFIG)))

PARTITION = "volcano.sh/partition-id"


@st.composite
def clusters(draw) -> tuple[list[dict], dict[str, dict]]:
    """(objects, gang name -> what it asks: min, limit, sub-groups)."""
    objs: list[dict] = [queue("default")]
    three = draw(st.booleans())
    n_leaves = draw(st.integers(2, 5))
    nodes: list[str] = []
    leaves: list[str] = []
    for k in range(n_leaves):
        members = []
        for _ in range(draw(st.integers(1, 3))):
            name = f"n{len(nodes)}"
            nodes.append(name)
            members.append(name)
            objs.append(node(name, cpu=draw(st.sampled_from(["2", "4"])), memory="16Gi"))
        leaves.append(f"leaf{k}")
        objs.append(hypernode(f"leaf{k}", 1, "Node", members, "rack"))
    if draw(st.booleans()):  # a node under no switch
        nodes.append("loose")
        objs.append(node("loose", cpu="4", memory="16Gi"))
    if three:
        half = max(1, n_leaves // 2)
        objs.append(hypernode("spine0", 2, "HyperNode", leaves[:half], "zone"))
        objs.append(hypernode("spine1", 2, "HyperNode", leaves[half:], "zone"))
        objs.append(hypernode("core", 3, "HyperNode", ["spine0", "spine1"]))
    else:
        objs.append(hypernode("spine0", 2, "HyperNode", leaves, "zone"))
    busy = draw(st.lists(st.sampled_from(nodes), max_size=3, unique=True))
    for r, on in enumerate(busy):  # another scheduler's pods, one per node
        objs.append(pod(f"busy{r}", cpu="1", memory="1Gi", node=on, scheduler="other"))
    gangs: dict[str, dict] = {}
    for g in range(draw(st.integers(1, 4))):
        name = f"g{g}"
        minimum = draw(st.integers(1, 4))
        size = minimum + draw(st.integers(0, 2))
        kind = draw(st.sampled_from(["hard", "hard-name", "soft", "none", "sub"]))
        pg = podgroup(name, min_member=minimum, created=f"2026-01-01T00:00:0{g}Z")
        limit = None
        subs = 0
        if kind == "hard":
            limit = draw(st.integers(1, 2))
            pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": limit}
        elif kind == "hard-name":
            limit = 1
            pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierName": "rack"}
        elif kind == "soft":
            pg["spec"]["networkTopology"] = {"mode": "soft"}
        elif kind == "sub":
            subs = 2
            part = max(1, size // 2)
            size = part * 2
            minimum = min(minimum, size)
            pg["spec"]["minMember"] = minimum
            pg["spec"]["subGroupPolicy"] = [
                {
                    "name": "workers",
                    "subGroupSize": part,
                    "matchLabelKeys": [PARTITION],
                    "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                }
            ]
        objs.append(pg)
        cpu = draw(st.sampled_from(["1", "2"]))
        for i in range(size):
            p = pod(f"{name}-{i}", cpu=cpu, memory="1Gi", group=name,
                    created=f"2026-01-01T00:00:0{g}Z")  # fmt: skip
            if subs:
                p["metadata"]["labels"] = {PARTITION: str(i // (size // 2))}
            objs.append(p)
        gangs[name] = {"min": minimum, "limit": limit, "sub": subs > 0}
    return objs, gangs


def _apply(objs: list[dict], binds: dict[str, str]) -> None:
    for o in objs:
        if o["kind"] == "Pod":
            key = f"{o['metadata']['namespace']}/{o['metadata']['name']}"
            if key in binds:
                o["spec"]["nodeName"] = binds[key]
                o["status"]["phase"] = "Running"


def _check(objs: list[dict], gangs: dict[str, dict]) -> None:
    snap = build_snapshot([SourcedObject(o) for o in objs])
    tree = snap.topology
    assert tree is not None
    on: dict[str, list[str]] = {}
    parts: dict[tuple[str, str], list[str]] = {}
    used: Counter = Counter()
    for o in objs:
        if o["kind"] != "Pod" or not o["spec"].get("nodeName"):
            continue
        n = o["spec"]["nodeName"]
        used[n] += to_canonical("cpu", o["spec"]["containers"][0]["resources"]["requests"]["cpu"])
        group = o["metadata"]["annotations"].get("scheduling.k8s.io/group-name")
        if group:
            on.setdefault(group, []).append(n)
            label = (o["metadata"].get("labels") or {}).get(PARTITION)
            if label is not None:
                parts.setdefault((group, label), []).append(n)
    for o in objs:
        if o["kind"] == "Node":
            cap = to_canonical("cpu", o["status"]["allocatable"]["cpu"])
            assert used[o["metadata"]["name"]] <= cap, f"node {o['metadata']['name']} over"
    for name, ask in gangs.items():
        nodes = on.get(name, [])
        if nodes:
            assert len(nodes) >= ask["min"], f"{name}: {len(nodes)} of {ask['min']} placed"
        if ask["limit"] is not None and nodes:
            span = tree.span(nodes)
            assert tree.tier_of(span) <= ask["limit"], f"{name} spans {span}: {nodes}"
    for (name, _label), nodes in parts.items():
        span = tree.span(nodes)
        assert tree.tier_of(span) <= 1, f"{name} sub-group spans {span}: {nodes}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_hard_gangs_stay_within_their_tier(case) -> None:
    objs, gangs = case
    for _ in range(3):
        snap = build_snapshot([SourcedObject(o) for o in objs])
        decisions = CONFIG.cycle(snap)
        _apply(objs, decisions.binds)
        _check(objs, gangs)


def test_a_gang_no_rack_can_hold_waits_and_says_which_were_tried() -> None:
    """Two racks of two 4-CPU nodes; a hard rack-level gang of three 4-CPU pods fits
    in no rack (though the cluster has room), so it waits, naming both racks."""
    objs = [queue("default")]
    for i in range(4):
        objs.append(node(f"n{i}", cpu="4", memory="16Gi"))
    objs.append(hypernode("rack-a", 1, "Node", ["n0", "n1"], "rack"))
    objs.append(hypernode("rack-b", 1, "Node", ["n2", "n3"], "rack"))
    objs.append(hypernode("zone", 2, "HyperNode", ["rack-a", "rack-b"], "zone"))
    pg = podgroup("big", min_member=3)
    pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierName": "rack"}
    objs.append(pg)
    for i in range(3):
        objs.append(pod(f"big-{i}", cpu="4", memory="1Gi", group="big"))
    d = CONFIG.cycle(build_snapshot([SourcedObject(o) for o in objs]))
    assert d.binds == {}
    reason = d.pending["default/big"]
    assert "rack-a" in reason and "rack-b" in reason and "tier 'rack'" in reason
    # The same gang, soft: placed across the racks.
    pg["spec"]["networkTopology"] = {"mode": "soft"}
    d = CONFIG.cycle(build_snapshot([SourcedObject(o) for o in objs]))
    assert len(d.binds) == 3


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_placing_within_a_hypernode_from_the_shape_caches_changes_no_decision(case) -> None:
    """The choice inside one HyperNode's nodes read from the per-shape caches
    (``FastPath.choose_within``) is the one the long way makes, cycle after cycle."""
    from pumice.framework import fastpath

    objs, _gangs = case
    long_objs = [dict(o) for o in yaml.safe_load(yaml.safe_dump(objs))]
    for _ in range(2):
        fast = CONFIG.cycle(build_snapshot([SourcedObject(o) for o in objs]))
        saved = fastpath.FastPath.choose_within
        fastpath.FastPath.choose_within = lambda self, task, rows: None  # type: ignore[method-assign]
        try:
            slow = CONFIG.cycle(build_snapshot([SourcedObject(o) for o in long_objs]))
        finally:
            fastpath.FastPath.choose_within = saved  # type: ignore[method-assign]
        assert fast.binds == slow.binds
        assert fast.pipelined == slow.pipelined
        assert fast.pending == slow.pending
        _apply(objs, fast.binds)
        _apply(long_objs, slow.binds)
