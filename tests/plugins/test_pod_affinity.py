"""Required inter-pod affinity and anti-affinity in the predicates."""

from __future__ import annotations

from tests.kit import node, pod, podgroup, queue, run


def term(**labels):
    return {
        "labelSelector": {"matchLabels": labels},
        "topologyKey": "kubernetes.io/hostname",
    }


def hostnode(name):
    return node(name, cpu="8", memory="32Gi", labels={"kubernetes.io/hostname": name})


def labelled(p, **labels):
    p["metadata"]["labels"] = labels
    return p


def with_affinity(p, kind, *terms):
    p["spec"]["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}
    return p


def base():
    return [
        queue("default"),
        hostnode("n1"),
        hostnode("n2"),
        podgroup("db", phase="Running"),
        labelled(pod("db-0", group="db", node="n1"), app="db"),
        podgroup("w"),
    ]


def test_anti_affinity_keeps_a_pod_off_the_node_of_a_matching_pod() -> None:
    p = with_affinity(pod("w-0", group="w"), "podAntiAffinity", term(app="db"))
    assert run([*base(), p]).binds == {"default/w-0": "n2"}


def test_affinity_draws_a_pod_to_the_node_of_a_matching_pod() -> None:
    p = with_affinity(pod("w-0", group="w"), "podAffinity", term(app="db"))
    objs = base()
    objs[4]["spec"]["nodeName"] = "n2"
    assert run([*objs, p]).binds == {"default/w-0": "n2"}


def test_existing_pods_anti_affinity_is_respected() -> None:
    objs = base()
    with_affinity(objs[4], "podAntiAffinity", term(app="web"))
    p = labelled(pod("w-0", group="w"), app="web")
    assert run([*objs, p]).binds == {"default/w-0": "n2"}


def test_affinity_with_no_match_anywhere_admits_the_first_of_its_group() -> None:
    p = labelled(with_affinity(pod("w-0", group="w"), "podAffinity", term(app="web")), app="web")
    assert "default/w-0" in run([*base(), p]).binds


def test_unmet_affinity_leaves_the_pod_pending_with_a_reason() -> None:
    p = with_affinity(pod("w-0", group="w"), "podAffinity", term(app="cache"))
    d = run([*base(), p])
    assert d.binds == {}
    assert "pod affinity" in d.pending["default/w"]
