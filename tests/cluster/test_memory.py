"""Tests for the in-memory cluster: objects, watch events, bind, evict, status writes."""

from __future__ import annotations

from tests.kit import node, pod

from pumice.cluster.memory import DISRUPTION_TARGET, MemoryCluster
from pumice.cluster.protocol import ADDED, DELETED, MODIFIED


def _store() -> MemoryCluster:
    now = [0.0]
    store = MemoryCluster(clock=lambda: now[0])
    store.create_all([node("n2"), node("n1"), pod("p1"), pod("p2", node="n1")])
    return store


def test_list_is_sorted_by_key():
    """list() returns objects sorted by key, whatever the creation order."""
    store = _store()
    assert [n["metadata"]["name"] for n in store.list("Node")] == ["n1", "n2"]
    assert [p["metadata"]["name"] for p in store.list("Pod")] == ["p1", "p2"]


def test_watch_sees_changes_in_order():
    """A watch receives ADDED, MODIFIED and DELETED events in the order they happened."""
    store = _store()
    w = store.watch(("Pod",))
    store.create(pod("p3"))
    assert store.bind("default/p3", "n2")
    store.delete("Pod", "default/p3")
    store.create(node("n3"))  # another kind: not watched
    events = w.drain()
    assert [(e.type, e.key) for e in events] == [
        (ADDED, "default/p3"),
        (MODIFIED, "default/p3"),
        (DELETED, "default/p3"),
    ]
    assert w.drain() == []


def test_bind_refuses_stale_decisions():
    """Binding a bound pod, a missing pod or to a missing node returns False."""
    store = _store()
    assert store.bind("default/p1", "n1")
    assert store.get("Pod", "default/p1")["spec"]["nodeName"] == "n1"
    assert not store.bind("default/p1", "n2")
    assert not store.bind("default/nope", "n1")
    store.create(pod("p3"))
    assert not store.bind("default/p3", "n9")
    assert store.stats["binds"] == 1


def test_evict_bound_pod_turns_terminating():
    """Evicting a bound pod marks it terminating with a grace period and a condition."""
    store = _store()
    assert store.evict("default/p2", "preempted")
    p = store.get("Pod", "default/p2")
    assert p["metadata"]["deletionTimestamp"] == 0.0
    assert p["metadata"]["deletionGracePeriodSeconds"] == 30.0
    assert p["status"]["conditions"][-1]["type"] == DISRUPTION_TARGET
    assert not store.evict("default/p2")  # already terminating


def test_evict_pending_pod_deletes_it():
    """A pod on no node is deleted at once when evicted."""
    store = _store()
    assert store.evict("default/p1")
    assert store.get("Pod", "default/p1") is None


def test_podgroup_status_write_without_change_makes_no_event():
    """Rewriting the same phase and conditions (new transition id only) emits nothing."""
    store = MemoryCluster()
    store.create(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"minMember": 1},
        }
    )
    w = store.watch(("PodGroup",))
    cond = {"type": "Scheduled", "status": "True", "reason": "r", "message": "m"}
    assert store.update_podgroup_status("default/g", "Inqueue", [{**cond, "transitionID": "1"}])
    assert store.update_podgroup_status("default/g", "Inqueue", [{**cond, "transitionID": "2"}])
    assert len(w.drain()) == 1
    assert store.update_podgroup_status("default/g", "Running", [cond])
    assert len(w.drain()) == 1
    assert not store.update_podgroup_status("default/missing", "Running")
