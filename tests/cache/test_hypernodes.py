"""HyperNodes through the in-memory cluster and the scheduler cache: each change
reaches the next snapshot's tree, a relabelled node moves between labelMatch
HyperNodes, bad ones are reported and skipped, and the tree is kept while nothing it
reads changes."""

from __future__ import annotations

import copy

import pytest
import yaml
from tests.kit import node, pod, podgroup, queue

from pumice.api.hypernode import CLUSTER
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cache.load import load_objects
from pumice.cluster.memory import MemoryCluster
from pumice.errors import InputError
from pumice.run.dump import write_dump

#: Two racks, by label, under one spine; gpu nodes by name.
TOPOLOGY = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: rack-a}
spec:
  tier: 1
  members:
  - type: Node
    selector:
      labelMatch: {matchLabels: {rack: a}}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: rack-b}
spec:
  tier: 1
  members:
  - type: Node
    selector:
      labelMatch: {matchLabels: {rack: b}}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spine}
spec:
  tier: 2
  tierName: spine
  members:
  - type: HyperNode
    selector: {exactMatch: {name: rack-a}}
  - type: HyperNode
    selector: {exactMatch: {name: rack-b}}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: gpus}
spec:
  tier: 1
  members:
  - type: Node
    selector: {regexMatch: {pattern: "^gpu-"}}
"""


def hypernodes() -> list[dict]:
    return list(yaml.safe_load_all(TOPOLOGY))


def cluster() -> MemoryCluster:
    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1", labels={"rack": "a"}),
            node("n2", labels={"rack": "a"}),
            node("n3", labels={"rack": "b"}),
        ]
    )
    return store


def members(snapshot) -> dict[str, list[str]]:
    """Each real HyperNode's nodes, as a snapshot's tree has them."""
    assert snapshot.topology is not None
    return {h.name: sorted(h.nodes) for h in snapshot.topology.real()}


def test_hypernodes_listed_at_start_are_in_the_first_snapshot():
    store = cluster()
    store.create_all(hypernodes())
    snap = SchedulerCache(store).snapshot()
    assert members(snap) == {
        "gpus": [],
        "rack-a": ["n1", "n2"],
        "rack-b": ["n3"],
        "spine": ["n1", "n2", "n3"],
    }
    assert snap.topology.ancestors("rack-b") == ["rack-b", "spine", CLUSTER]
    # What the tree leaves unsaid reaches the snapshot's notes, as with pumice cycle.
    assert any("nodes matching /^gpu-/ matches no node" in n for n in snap.notes)


def test_a_hypernode_added_changed_and_removed_reaches_the_next_snapshot():
    store = cluster()
    cache = SchedulerCache(store)
    assert cache.snapshot().topology is None
    leaf = hypernodes()[0]
    store.create(leaf)
    assert members(cache.snapshot()) == {"rack-a": ["n1", "n2"]}

    def to_rack_b(obj):
        obj["spec"]["members"][0]["selector"]["labelMatch"]["matchLabels"] = {"rack": "b"}

    store.modify("HyperNode", "rack-a", to_rack_b)
    assert members(cache.snapshot()) == {"rack-a": ["n3"]}
    store.delete("HyperNode", "rack-a")
    assert cache.snapshot().topology is None


def test_a_relabelled_node_moves_between_label_hypernodes():
    store = cluster()
    store.create_all(hypernodes())
    cache = SchedulerCache(store)
    cache.snapshot()
    store.modify("Node", "n2", lambda o: o["metadata"]["labels"].update(rack="b"))
    snap = cache.snapshot()
    assert members(snap)["rack-a"] == ["n1"]
    assert members(snap)["rack-b"] == ["n2", "n3"]
    assert snap.topology.span(["n2", "n3"]) == "rack-b"
    store.modify("Node", "n2", lambda o: o["metadata"]["labels"].pop("rack"))
    snap = cache.snapshot()
    assert members(snap)["rack-b"] == ["n3"]
    assert "n2" not in members(snap)["spine"]
    assert snap.topology.home("n2") == CLUSTER


def test_nodes_that_come_and_go_join_and_leave_their_hypernodes():
    store = cluster()
    store.create_all(hypernodes())
    cache = SchedulerCache(store)
    cache.snapshot()
    store.create(node("gpu-1", labels={"rack": "b"}))
    snap = cache.snapshot()
    assert members(snap)["gpus"] == ["gpu-1"]
    assert members(snap)["rack-b"] == ["gpu-1", "n3"]
    store.delete("Node", "n1")
    assert members(cache.snapshot())["rack-a"] == ["n2"]


def test_the_tree_is_kept_while_nothing_it_reads_changes():
    """Pods, podgroups, a node's status and a HyperNode's status leave the tree as it
    was (the same tree, not one built again); a HyperNode's spec does not."""
    store = cluster()
    store.create_all(hypernodes())
    cache = SchedulerCache(store)
    tree = cache.snapshot().topology
    store.create(podgroup("g", min_member=1))
    store.create(pod("p", group="g"))
    store.modify("Node", "n1", lambda o: o["status"].update(allocatable={"cpu": "8",
                 "memory": "8Gi", "pods": "110"}))  # fmt: skip
    store.modify("HyperNode", "spine", lambda o: o.setdefault("status", {}).update(nodeCount=3))
    assert cache.snapshot().topology is tree
    store.modify("HyperNode", "spine", lambda o: o["spec"]["members"].pop())
    snap = cache.snapshot()
    assert snap.topology is not tree
    assert members(snap)["spine"] == ["n1", "n2"]


def test_the_cache_tree_equals_the_one_pumice_cycle_builds():
    store = cluster()
    store.create_all(hypernodes())
    store.create(node("gpu-7"))
    cache = SchedulerCache(store)
    objects = [
        SourcedObject(copy.deepcopy(o)) for kind in ("Node", "Queue", "HyperNode")
        for o in store.list(kind)
    ]  # fmt: skip
    built = build_snapshot(objects)
    assert members(cache.snapshot()) == members(built)
    assert cache.snapshot().topology.notes == built.topology.notes


def _bad_reports(store: MemoryCluster) -> tuple[SchedulerCache, list[tuple[str, str, str]]]:
    seen: list[tuple[str, str, str]] = []
    cache = SchedulerCache(
        store, on_bad=lambda kind, key, obj, err: seen.append((kind, key, err.render()))
    )
    return cache, seen


def test_a_bad_hypernode_is_reported_and_skipped_in_run_mode():
    store = cluster()
    docs = hypernodes()
    docs[1]["spec"]["members"][0]["type"] = "Switch"  # rack-b
    store.create_all(docs)
    cache, seen = _bad_reports(store)
    assert seen == [("HyperNode", "rack-b", "HyperNode rack-b: field spec.members[0].type: "
                     "expected Node or HyperNode, got 'Switch'")]  # fmt: skip
    snap = cache.snapshot()
    assert "rack-b" not in members(snap)
    assert members(snap)["rack-a"] == ["n1", "n2"]
    # The spine names a HyperNode that is not there: a note, not an error.
    assert any("names HyperNode 'rack-b' as a member" in n for n in snap.notes)
    # A bad update of a good one removes it; fixed, it comes back.
    store.modify("HyperNode", "rack-a", lambda o: o["spec"].update(tier=-1))
    assert "rack-a" not in members(cache.snapshot())
    assert seen[-1][:2] == ("HyperNode", "rack-a")
    store.modify("HyperNode", "rack-a", lambda o: o["spec"].update(tier=1))
    assert members(cache.snapshot())["rack-a"] == ["n1", "n2"]


def test_a_cycle_is_reported_and_its_hypernodes_left_out_in_run_mode():
    store = cluster()
    store.create_all(hypernodes())
    cache, seen = _bad_reports(store)
    loop = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "core"},
        "spec": {"tier": 3, "members": [{"type": "HyperNode",
                                          "selector": {"exactMatch": {"name": "spine"}}}]},
    }  # fmt: skip
    store.create(loop)
    store.modify("HyperNode", "spine", lambda o: o["spec"]["members"].append(
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "core"}}}))  # fmt: skip
    snap = cache.snapshot()
    assert [(kind, key) for kind, key, _ in seen] == [("HyperNode", "spine")]
    assert "HyperNode members form a cycle: core -> spine -> core" in seen[0][2]
    assert sorted(members(snap)) == ["gpus", "rack-a", "rack-b"]


def test_without_a_reporter_a_tree_that_lies_is_an_error():
    store = cluster()
    docs = hypernodes()
    docs.append(copy.deepcopy(docs[2]))
    docs[-1]["metadata"]["name"] = "spine-2"  # claims both racks again
    store.create_all(docs)
    with pytest.raises(InputError) as err:
        SchedulerCache(store)
    assert err.value.obj == "HyperNode spine-2"
    assert err.value.field == "spec.members[0].selector.exactMatch.name"


def test_a_cache_dump_holds_the_hypernodes_and_replays_to_the_same_tree(tmp_path):
    """``pumice run``'s SIGUSR1 dump (every kind the cache follows) read back by
    ``pumice cycle``'s loader gives the tree the cache has."""
    store = cluster()
    store.create_all(hypernodes())
    cache = SchedulerCache(store)
    path = write_dump(store, str(tmp_path), clock=lambda: 0.0)
    replayed = build_snapshot(load_objects([str(path)]))
    assert members(replayed) == members(cache.snapshot())
    assert len(members(replayed)) == 4
