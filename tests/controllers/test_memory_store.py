"""The in-memory store: its cascading delete (what a Job's garbage collection removes
when the owners of its objects changed after they were made, or a name was used again),
the creation timestamps it writes, and the events its watches get."""

from __future__ import annotations

from typing import Any

from pumice.cluster.memory import MemoryCluster
from pumice.controllers.store import MemoryStore


def configmap(name: str, *owners: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owners:
        meta["ownerReferences"] = [{"kind": "ConfigMap", "name": o, "uid": o} for o in owners]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def names(store: MemoryStore) -> list[str]:
    return [c["metadata"]["name"] for c in store.list("ConfigMap")]


def test_an_owner_added_by_a_later_write_takes_the_object_with_it() -> None:
    cluster = MemoryCluster()
    store = MemoryStore(cluster)
    owner = store.create(configmap("owner"))
    assert owner is not None
    uid = owner["metadata"]["uid"]
    store.create(configmap("adopted"))
    store.patch("ConfigMap", "default/adopted", {"data": {"a": "1"}})
    refs = [{"kind": "ConfigMap", "name": "owner", "uid": uid}]
    store.patch("ConfigMap", "default/adopted", {"metadata": {"ownerReferences": refs}})
    store.patch("ConfigMap", "default/adopted", {"data": {"a": "2"}})
    store.create(configmap("bystander"))

    assert store.delete("ConfigMap", "default/owner")
    assert names(store) == ["bystander"]


def test_an_owner_removed_by_a_later_write_leaves_the_object() -> None:
    cluster = MemoryCluster()
    store = MemoryStore(cluster)
    owner = store.create(configmap("owner"))
    assert owner is not None
    uid = owner["metadata"]["uid"]
    store.create(configmap("freed", uid))
    store.patch("ConfigMap", "default/freed", {"metadata": {"ownerReferences": None}})

    assert store.delete("ConfigMap", "default/owner")
    assert names(store) == ["freed"]


def test_a_name_made_again_under_another_owner_is_judged_by_its_new_owner() -> None:
    cluster = MemoryCluster()
    store = MemoryStore(cluster)
    first, second = store.create(configmap("first")), store.create(configmap("second"))
    assert first is not None and second is not None
    store.create(configmap("child", first["metadata"]["uid"]))
    store.delete("ConfigMap", "default/child")
    store.create(configmap("child", second["metadata"]["uid"]))
    store.create(configmap("other-child", first["metadata"]["uid"]))

    assert store.delete("ConfigMap", "default/first")
    assert names(store) == ["child", "second"]
    assert store.delete("ConfigMap", "default/second")
    assert names(store) == []


def test_creation_timestamps_are_the_clock_in_whole_utc_seconds_across_days() -> None:
    now = [0.0]
    store = MemoryStore(MemoryCluster(clock=lambda: now[0]))
    stamps = {}
    for i, t in enumerate([86399.9, 86400.0, 86400.5, 1_700_000_000.25, 1_700_086_399.0, 59.0]):
        now[0] = t
        made = store.create(configmap(f"cm{i}"))
        assert made is not None
        stamps[t] = made["metadata"]["creationTimestamp"]
    assert stamps == {
        86399.9: "1970-01-01T23:59:59Z",
        86400.0: "1970-01-02T00:00:00Z",
        86400.5: "1970-01-02T00:00:00Z",
        1_700_000_000.25: "2023-11-14T22:13:20Z",
        1_700_086_399.0: "2023-11-15T22:13:19Z",
        59.0: "1970-01-01T00:00:59Z",
    }


def test_a_watch_gets_the_kinds_it_asks_for_from_when_it_is_made() -> None:
    cluster = MemoryCluster()
    store = MemoryStore(cluster)
    store.create(configmap("before"))
    maps = cluster.watch(["ConfigMap"])
    store.create(configmap("first"))
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})
    everything = cluster.watch(["ConfigMap", "Secret"])
    store.patch("ConfigMap", "default/first", {"data": {"a": "1"}})
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}})
    maps.close()
    store.delete("ConfigMap", "default/first")

    assert [(e.type, e.key) for e in maps.drain()] == [
        ("ADDED", "default/first"),
        ("MODIFIED", "default/first"),
    ]
    assert [(e.type, e.kind, e.key) for e in everything.drain()] == [
        ("MODIFIED", "ConfigMap", "default/first"),
        ("ADDED", "Secret", "default/t"),
        ("DELETED", "ConfigMap", "default/first"),
    ]


def _index_from_scratch(cluster: MemoryCluster) -> dict[str, set[tuple[str, str]]]:
    """Who owns what, read off every object as it is now."""
    owned: dict[str, set[tuple[str, str]]] = {}
    for kind, objs in cluster.objects.items():
        for key, obj in objs.items():
            for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
                owned.setdefault(ref["uid"], set()).add((kind, key))
    return owned


def test_the_ownership_index_kept_from_the_watch_is_the_one_read_off_the_objects() -> None:
    """The index of who owns what, kept from the store's watch, is the one the objects
    say after every kind of write (binds, evictions, status writes, owners set and
    dropped), and a cascading delete takes exactly the objects owned."""
    cluster = MemoryCluster()
    store = MemoryStore(cluster)
    cluster.create({"kind": "Node", "metadata": {"name": "n1"}})
    owner = store.create(configmap("owner"))
    assert owner is not None
    uid = owner["metadata"]["uid"]
    ref = [{"kind": "ConfigMap", "name": "owner", "uid": uid, "controller": True}]
    for i in range(4):
        store.create({"kind": "Pod", "metadata": {"name": f"p{i}", "ownerReferences": list(ref)}})
    store.create({"kind": "PodGroup", "metadata": {"name": "g"}})
    store.create(configmap("later"))
    writes = [
        lambda: cluster.bind("default/p0", "n1"),
        lambda: cluster.set_pod_phase("default/p0", "Running"),
        lambda: store.patch(
            "Pod", "default/p1", {"status": {"phase": "Failed"}}, subresource="status"
        ),
        lambda: cluster.update_podgroup_status("default/g", "Inqueue"),
        lambda: store.patch("Pod", "default/p2", {"metadata": {"ownerReferences": None}}),
        lambda: store.patch("ConfigMap", "default/later", {"metadata": {"ownerReferences": ref}}),
        lambda: cluster.evict("default/p0", "make room"),
        lambda: cluster.evict("default/p3", "make room"),  # (on no node: deleted)
        lambda: store.patch("PodGroup", "default/g", {"metadata": {"ownerReferences": ref}}),
        lambda: cluster.update_podgroup_status("default/g", "Running"),
    ]  # fmt: skip
    for write in writes:
        write()
        fresh = _index_from_scratch(cluster)
        assert {u: sorted(store._dependents(u)) for u in fresh} == {
            u: sorted(refs) for u, refs in fresh.items()
        }
    assert store.delete("ConfigMap", "default/owner")
    assert sorted(cluster.objects["Pod"]) == ["default/p2"]
    assert names(store) == []
    assert cluster.objects["PodGroup"] == {}
