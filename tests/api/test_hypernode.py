"""HyperNodes: a bad object's error names its field; the tree is checked (cycles, a
second parent, members naming nothing) and answers ancestors, LCA and spans."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pumice.api.hypernode import (
    CLUSTER,
    NodeFacts,
    build_topology,
    parse_hypernode,
)
from pumice.errors import InputError

API = "topology.volcano.sh/v1alpha1"


def hypernode(name: str, tier: Any = 1, *members: dict, tier_name: str = "") -> dict:
    spec: dict[str, Any] = {"tier": tier, "members": list(members)}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": API, "kind": "HyperNode", "metadata": {"name": name}, "spec": spec}


def nodes_(*names: str) -> list[dict]:
    """One member per node name, by exactMatch."""
    return [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in names]


def child(name: str) -> dict:
    return {"type": "HyperNode", "selector": {"exactMatch": {"name": name}}}


def facts(*names: str, **labels: dict[str, str]) -> list[NodeFacts]:
    return [NodeFacts(n, labels.get(n, {})) for n in names]


def tree(docs: list[dict], nodes: list[NodeFacts], **kw: Any):
    return build_topology([parse_hypernode(d) for d in docs], nodes, **kw)


# -- parsing ---------------------------------------------------------------------------


def _error(obj: dict) -> InputError:
    with pytest.raises(InputError) as err:
        parse_hypernode(obj)
    return err.value


def test_a_manifest_as_volcano_documents_it_parses():
    doc = yaml.safe_load(
        """
        apiVersion: topology.volcano.sh/v1alpha1
        kind: HyperNode
        metadata: {name: s0}
        spec:
          tier: 1
          tierName: leaf
          members:
          - type: Node
            selector: {exactMatch: {name: node-0}}
          - type: Node
            selector: {regexMatch: {pattern: "^gpu-"}}
          - type: Node
            selector: {labelMatch: {matchLabels: {rack: r1}}}
        """
    )
    rec = parse_hypernode(doc)
    assert (rec.name, rec.tier, rec.tier_name) == ("s0", 1, "leaf")
    assert [m.describe() for m in rec.members] == [
        "Node 'node-0'",
        "nodes matching /^gpu-/",
        "nodes with the labels selected",
    ]


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d["metadata"].pop("name"), "metadata.name"),
        (lambda d: d["spec"].update(tier="1"), "spec.tier"),
        (lambda d: d["spec"].update(tier=True), "spec.tier"),
        (lambda d: d["spec"].update(tier=-1), "spec.tier"),
        (lambda d: d["spec"].update(tierName=3), "spec.tierName"),
        (lambda d: d["spec"].update(members={"type": "Node"}), "spec.members"),
        (lambda d: d["spec"].update(members=[]), "spec.members"),
        (lambda d: d["spec"]["members"].append("n3"), "spec.members[1]"),
        (lambda d: d["spec"]["members"][0].update(type="Switch"), "spec.members[0].type"),
        (lambda d: d["spec"]["members"][0].update(selector={}), "spec.members[0].selector"),
        (
            lambda d: d["spec"]["members"][0]["selector"].update(regexMatch={"pattern": "x"}),
            "spec.members[0].selector",
        ),
        (
            lambda d: d["spec"]["members"][0]["selector"]["exactMatch"].pop("name"),
            "spec.members[0].selector.exactMatch.name",
        ),
        (
            lambda d: d["spec"]["members"].append(
                {"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-("}}}
            ),
            "spec.members[1].selector.regexMatch.pattern",
        ),
        (
            lambda d: d["spec"]["members"].append({"type": "Node", "selector": {"labelMatch": {}}}),
            "spec.members[1].selector.labelMatch",
        ),
        (
            lambda d: d["spec"]["members"].append(
                {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "s"}}}
            ),
            "spec.members[1].selector.regexMatch",
        ),
        (
            lambda d: d["spec"]["members"].append(
                {
                    "type": "Node",
                    "selector": {
                        "labelMatch": {"matchExpressions": [{"key": "k", "operator": "Near"}]}
                    },
                }
            ),
            "spec.members[1].selector.labelMatch.matchExpressions[0].operator",
        ),
    ],
)
def test_a_bad_hypernode_is_refused_naming_the_field(change, field):
    doc = hypernode("s0", 1, *nodes_("n1"))
    change(doc)
    assert _error(doc).field == field


def test_two_selectors_in_one_member_are_both_named():
    doc = hypernode("s0", 1, *nodes_("n1"))
    doc["spec"]["members"][0]["selector"]["regexMatch"] = {"pattern": "n"}
    assert "(has exactMatch, regexMatch)" in _error(doc).message


# -- the tree --------------------------------------------------------------------------


def test_no_hypernodes_is_no_tree():
    assert build_topology([], facts("n1", "n2")) is None


def test_exact_regex_and_label_members_choose_their_nodes():
    docs = [
        hypernode("by-name", 1, *nodes_("n1", "n2")),
        hypernode("by-regex", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "gpu"}}}),
        hypernode(
            "by-label",
            1,
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}},
        ),
        hypernode(
            "by-expression",
            1,
            {
                "type": "Node",
                "selector": {
                    "labelMatch": {
                        "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]
                    }
                },
            },
        ),
    ]
    topo = tree(
        docs,
        facts("n1", "n2", "a-gpu-1", "gpu-2", "x", "y", x={"rack": "r1"}, y={"rack": "r2"}),
    )
    got = {h.name: sorted(h.nodes) for h in topo.real()}
    assert got == {
        "by-name": ["n1", "n2"],
        "by-regex": ["a-gpu-1", "gpu-2"],  # (searched anywhere in the name)
        "by-label": ["x"],
        "by-expression": ["y"],
    }
    assert topo.notes == []


def test_regex_members_are_read_as_go_reads_them():
    """Go's regexp (RE2) refuses what Python's re would take (a lookahead, a
    back-reference), and matches in time linear in the name: a pattern that makes a
    backtracking engine try every split (about 1.6**n tries for a name of n letters)
    still chooses its nodes."""
    for pattern in ["gpu-(?=a)", "(a)\\1"]:
        member = {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}
        err = _error(hypernode("s", 1, member))
        assert err.field == "spec.members[0].selector.regexMatch.pattern"
        assert err.message.startswith("not a valid regular expression: ")
        assert "\n" not in err.message
    long = "a" * 200
    member = {"type": "Node", "selector": {"regexMatch": {"pattern": "^(a|aa)+$"}}}
    topo = tree([hypernode("s", 1, member)], facts(long, long + "b", "b" + long))
    assert {h.name: sorted(h.nodes) for h in topo.real()} == {"s": [long]}


def test_the_tree_joins_tiers_under_the_cluster_and_answers_lca_and_ancestors():
    docs = [
        hypernode("s0", 1, *nodes_("n0", "n1"), tier_name="leaf"),
        hypernode("s1", 1, *nodes_("n2", "n3"), tier_name="leaf"),
        hypernode("s2", 1, *nodes_("n4")),
        hypernode("spine", 2, child("s0"), child("s1"), tier_name="spine"),
    ]
    topo = tree(docs, facts("n0", "n1", "n2", "n3", "n4", "n5"))
    assert topo.tiers == [1, 2, 3]  # the cluster is one tier above the highest
    assert topo.tier_names == {"leaf": 1, "spine": 2}
    assert topo.root.name == CLUSTER and topo.root.children == ["s2", "spine"]
    assert topo.hypernodes["spine"].nodes == {"n0", "n1", "n2", "n3"}
    assert topo.ancestors("s0") == ["s0", "spine", CLUSTER]
    assert topo.ancestors("s2") == ["s2", CLUSTER]
    assert topo.lca("s0", "s1") == "spine"
    assert topo.lca("s0", "s2") == CLUSTER
    assert topo.lca("", "s1") == "s1"
    assert topo.home("n3") == "s1" and topo.home("n5") == CLUSTER
    assert topo.span(["n0", "n1"]) == "s0"
    assert topo.span(["n0", "n3"]) == "spine"
    assert topo.span(["n0", "n4"]) == CLUSTER
    assert topo.span([]) == ""
    assert [h.name for h in topo.subtree("spine")] == ["spine", "s0", "s1"]
    # Node rows of a table, and each row's leaf (lowest-tier) HyperNode.
    names = ["n5", "n3", "n0"]
    rows, leaf = topo.rows(names)
    assert rows["spine"].tolist() == [1, 2]
    assert rows[CLUSTER].tolist() == [0, 1, 2]
    assert list(leaf) == ["", "s1", "s0"]
    assert any("1 node is in no HyperNode (n5)" in n for n in topo.notes)


def test_a_cycle_of_members_is_an_error_naming_a_hypernode_and_field():
    docs = [
        hypernode("a", 2, child("b")),
        hypernode("b", 3, child("c")),
        hypernode("c", 4, child("a")),
        hypernode("leaf", 1, *nodes_("n1")),
    ]
    with pytest.raises(InputError) as err:
        tree(docs, facts("n1"))
    assert "cycle" in err.value.message
    assert err.value.obj.startswith("HyperNode ")
    assert err.value.field.endswith(".selector.exactMatch.name")


def test_a_running_scheduler_reports_a_cycle_and_leaves_its_hypernodes_out():
    docs = [
        hypernode("a", 2, child("b")),
        hypernode("b", 3, child("a")),
        hypernode("leaf", 1, *nodes_("n1")),
    ]
    bad: list[tuple[str, str]] = []
    topo = tree(docs, facts("n1"), on_bad=lambda obj, msg: bad.append((obj, msg)))
    assert len(bad) == 1 and "a -> b -> a" in bad[0][1]
    assert [h.name for h in topo.real()] == ["leaf"]


def test_a_hypernode_with_two_parents_is_an_error_or_keeps_the_first_by_name():
    docs = [
        hypernode("leaf", 1, *nodes_("n1")),
        hypernode("p1", 2, child("leaf")),
        hypernode("p2", 2, child("leaf")),
    ]
    with pytest.raises(InputError) as err:
        tree(docs, facts("n1"))
    assert err.value.obj == "HyperNode p2"
    assert err.value.field == "spec.members[0].selector.exactMatch.name"
    assert "already a member of HyperNode p1" in err.value.message
    bad: list[tuple[str, str]] = []
    topo = tree(docs, facts("n1"), on_bad=lambda obj, msg: bad.append((obj, msg)))
    assert [obj for obj, _ in bad] == ["HyperNode p2"]
    assert topo.hypernodes["leaf"].parent == "p1"
    assert topo.hypernodes["p2"].nodes == frozenset()


def test_a_hypernode_cannot_hold_itself():
    with pytest.raises(InputError, match="its own member"):
        tree([hypernode("a", 2, child("a"), *nodes_("n1"))], facts("n1"))


def test_members_naming_nothing_and_nodes_in_none_are_notes():
    docs = [
        hypernode("s0", 1, *nodes_("n1", "gone")),
        hypernode("s1", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "^zz"}}}),
        hypernode("spine", 2, child("s0"), child("missing")),
    ]
    topo = tree(docs, facts("n1", "n2", "n3"))
    notes = "\n".join(topo.notes)
    assert "names HyperNode 'missing' as a member, which does not exist" in notes
    assert "HyperNode s0: Node 'gone' matches no node" in notes
    assert "HyperNode s1: nodes matching /^zz/ matches no node" in notes
    assert "2 nodes are in no HyperNode (n2, n3)" in notes
    # A node named before it exists joins when it appears.
    later = tree(docs, facts("n1", "gone"))
    assert later.hypernodes["s0"].nodes == {"n1", "gone"}


def test_odd_tiers_and_a_node_under_two_switches_are_notes():
    docs = [
        hypernode("s0", 1, *nodes_("n1")),
        hypernode("s1", 1, *nodes_("n1")),
        hypernode("up", 1, child("s0")),
    ]
    topo = tree(docs, facts("n1"))
    notes = "\n".join(topo.notes)
    assert "HyperNode up (tier 1) holds HyperNode s0 of tier 1" in notes
    assert "1 node is in two HyperNodes of tier 1 (node n1 in s0 and s1)" in notes
    rows, leaf = topo.rows(["n1"])
    assert list(leaf) == ["s0"]  # the first by name
    assert rows["s1"].tolist() == rows["s0"].tolist() == [0]


def test_a_tier_beyond_a_thousand_is_refused_not_walked() -> None:
    """A tier of 2**63 once kept a cycle busy for ever, walking the tiers one by one."""
    from pumice.api.hypernode import parse_hypernode

    member = {"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}
    assert parse_hypernode(hypernode("s", 1000, member)).tier == 1000
    with pytest.raises(InputError) as err:
        parse_hypernode(hypernode("s", 2**63, member))
    assert "spec.tier" in str(err.value) and "at most 1000" in str(err.value)
