"""Nodes a session leaves out (not ready, out of sync): the scheduler cache and the
snapshot builder leave out the same ones, cycle after cycle, and the node table's
per-shape memory keeps working while they are out."""

from __future__ import annotations

import copy

import numpy as np
from tests.kit import node, pod, podgroup, queue

from pumice.api.node import NOT_READY, OUT_OF_SYNC
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.scheduler import Scheduler


def _ready(status: str):
    def change(n: dict) -> None:
        n["status"]["conditions"] = [{"type": "Ready", "status": status}]

    return change


def _rebuilt(store: MemoryCluster):
    objs = []
    for kind in ("Node", "Pod", "PodGroup", "Queue", "PriorityClass"):
        objs += [SourcedObject(copy.deepcopy(o)) for o in store.list(kind)]
    return build_snapshot(objs)


def _decide(snapshot) -> dict:
    return Scheduler.from_file(None).cycle(snapshot).to_json(sessions=False)


def test_not_ready_node_leaves_and_rejoins_the_session() -> None:
    """A node turning NotReady is out of the next snapshot (and its resources out of the
    cluster's total); Ready again, it is back. The cache's snapshot equals one built
    from the objects each time."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", cpu="4"), node("n2", cpu="8")])
    store.create(pod("busy", cpu="1", node="n2", scheduler="other"))
    cache = SchedulerCache(store)
    assert cache.snapshot().nodes.names == ["n1", "n2"]
    store.modify("Node", "n2", _ready("Unknown"))
    snap = cache.snapshot()
    assert snap.nodes.names == ["n1"]
    assert {n: w.reason for n, w in snap.nodes.left_out.items()} == {"n2": NOT_READY}
    assert snap.nodes.total()[0] == 4000  # millicores of n1 alone
    assert _rebuilt(store).nodes.names == ["n1"]
    store.create(podgroup("g"))
    store.create(pod("big", cpu="6", group="g"))
    out = _decide(cache.snapshot())
    assert out == _decide(_rebuilt(store))
    assert out["binds"] == {}
    # proportion refuses first (the queue deserves the cluster's total, n1's 4 cpu): the
    # reason names the node left out of that total.
    assert "(the cluster's total leaves out 1 node not ready)" in out["pending"]["default/g"]
    store.modify("Node", "n2", _ready("True"))
    assert _decide(cache.snapshot())["binds"] == {"default/big": "n2"}


def test_out_of_sync_node_recovers_when_its_allocatable_comes_back() -> None:
    """Volcano's OutOfSync: a node whose allocatable falls below what its pods use (the
    device plugin went down and its GPUs with it) is left out, though its cpu is
    free; once the GPUs are back, it is scheduled again."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", cpu="8", nvidia_gpu="8"), node("n2", cpu="2")])
    store.create(pod("trainer", cpu="1", gpu="8", node="n1", scheduler="other"))
    cache = SchedulerCache(store)
    store.modify("Node", "n1", lambda n: n["status"]["allocatable"].update({"nvidia.com/gpu": "0"}))
    snap = cache.snapshot()
    assert snap.nodes.names == ["n2"]
    why = snap.nodes.left_out["n1"]
    assert why.reason == OUT_OF_SYNC and "nvidia.com/gpu 8 of 0" in why.detail
    store.create(podgroup("g"))
    store.create(pod("web", cpu="3", group="g"))
    out = _decide(cache.snapshot())
    assert out == _decide(_rebuilt(store))
    assert "leaves out 1 node out of sync" in out["pending"]["default/g"]
    store.modify("Node", "n1", lambda n: n["status"]["allocatable"].update({"nvidia.com/gpu": "8"}))
    assert _decide(cache.snapshot())["binds"] == {"default/web": "n1"}


def test_a_pod_count_over_the_limit_is_not_out_of_sync() -> None:
    """Volcano's out-of-sync check compares resource amounts, not the pod count: a node
    holding more pods than its pods allocatable stays in the session (and takes no
    more pods)."""
    objs = [queue("default"), node("n1", pods="1"), podgroup("g"), pod("p", group="g")]
    objs += [pod(f"old-{i}", cpu="100m", node="n1", scheduler="other") for i in range(2)]
    snap = build_snapshot([SourcedObject(o) for o in objs])
    assert snap.nodes.names == ["n1"] and not snap.nodes.left_out
    assert "1 too many pods" in _decide(snap)["pending"]["default/g"]


def test_cycles_with_a_node_left_out_decide_as_fresh_snapshots() -> None:
    """Cycle after cycle, with a node left out the whole time, the cache's snapshots
    (whose per-shape memory is kept across sessions on a log of the session's own rows)
    decide exactly as snapshots built afresh from the objects."""
    store = MemoryCluster()
    nodes = [node(f"n{i}", cpu="4", memory="8Gi") for i in range(6)]
    store.create_all([queue("default"), *nodes])
    store.modify("Node", "n2", _ready("False"))
    cache = SchedulerCache(store)
    cache.track_active = False  # (every job's status in the decisions, as a fresh snapshot's)
    sched = Scheduler.from_file(None)
    for step in range(8):
        store.create(podgroup(f"g{step}", min_member=2))
        for k in range(2):
            store.create(pod(f"g{step}-{k}", cpu="1500m", memory="1Gi", group=f"g{step}"))
        if step == 3:
            store.delete("Pod", "default/g0-0")
        snap = cache.snapshot()
        assert "n2" in snap.nodes.left_out
        expected = _decide(_rebuilt(store))
        decisions = sched.cycle(snap)
        assert decisions.to_json(sessions=False) == expected, step
        cache.apply(decisions)
        for key in list(decisions.binds):
            store.set_pod_phase(key, "Running")
    final = cache.snapshot()
    assert not any(t.node == "n2" for t in cache.tasks.values())
    assert np.array_equal(final.nodes.used, _rebuilt(store).nodes.used)


def test_cluster_total_follows_allocatable_and_left_out_nodes_cycle_after_cycle() -> None:
    """The cluster's total (what proportion shares out and overcommit multiplies) is
    kept from one snapshot to the next while no node's allocatable changes: it must
    follow a node that shrinks, one that leaves the session and comes back, and each
    snapshot's total must be the one a snapshot built from the objects has."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", cpu="4"), node("n2", cpu="8")])
    cache = SchedulerCache(store)

    def totals() -> tuple[float, float]:
        return cache.snapshot().nodes.total()[0], _rebuilt(store).nodes.total()[0]

    assert totals() == (12000, 12000)
    assert totals() == (12000, 12000)  # (kept: nothing changed)

    def shrink(n: dict) -> None:
        n["status"]["allocatable"]["cpu"] = "2"

    store.modify("Node", "n2", shrink)
    assert totals() == (6000, 6000)
    store.modify("Node", "n1", _ready("Unknown"))
    assert totals() == (2000, 2000)
    assert totals() == (2000, 2000)
    store.modify("Node", "n1", _ready("True"))
    assert totals() == (6000, 6000)


def test_a_node_whose_pods_come_to_use_more_than_it_has_leaves_and_rejoins() -> None:
    """Out of sync by its pods alone, its allocatable the same: a node that another
    scheduler's pods overfill is left out of the next snapshot (the node table's
    bounds for its quick answer are kept from the snapshot before), and back once a
    pod goes; each time as a snapshot built from the objects has it."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", cpu="2"), node("n2", cpu="8")])
    store.create(pod("a", cpu="1", node="n1", scheduler="other"))
    cache = SchedulerCache(store)
    assert cache.snapshot().nodes.names == ["n1", "n2"]
    store.create(pod("b", cpu="2", node="n1", scheduler="other"))
    snap = cache.snapshot()
    assert snap.nodes.names == ["n2"] == _rebuilt(store).nodes.names
    assert snap.nodes.left_out["n1"].reason == OUT_OF_SYNC
    assert cache.snapshot().nodes.names == ["n2"]  # (kept: nothing changed)
    store.delete("Pod", "default/b")
    assert cache.snapshot().nodes.names == ["n1", "n2"] == _rebuilt(store).nodes.names
