"""nodeorder's pod topology spread score (soft constraints), on numbers worked out by
hand from Kubernetes' PodTopologySpread scoring, and the constraints' input checks."""

from __future__ import annotations

import numpy as np
import pytest
from tests.kit import node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.errors import InputError
from pumice.plugins.nodeorder import SpreadScore
from pumice.scheduler import Scheduler


def _spread(key: str, skew: int = 1, when: str = "ScheduleAnyway", app: str = "x") -> list:
    return [
        {
            "maxSkew": skew,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": app}},
        }
    ]


def _labelled(p: dict, **labels: str) -> dict:
    p["metadata"]["labels"] = labels
    return p


def _scores(objects: list[dict], cand: list[str]) -> dict[str, float]:
    """SpreadScore of the pending pod ``p`` over the nodes named in ``cand``."""
    snap = build_snapshot([SourcedObject(o) for o in objects])
    ssn = Scheduler.from_file(None).open(snap)
    task = snap.jobs["default/pg"].tasks["default/p"]
    rows = np.array([ssn.nodes.index[n] for n in cand])
    return dict(zip(cand, SpreadScore(ssn.nodes)(task, rows).tolist(), strict=True))


def test_zone_counts_skip_terminating_and_other_namespace_pods() -> None:
    """Zone z1 holds 3 matching pods (a terminating one and one of another namespace
    left out), z2 one; the node without a zone label scores 0. Two zones: each pod
    weighs log(4); raw a, b round(3 log 4 + 1) = 5, c round(log 4 + 1) = 2; normalized
    100 (5 + 2 - raw) / 5."""
    objs = [
        queue(),
        node("a", labels={"zone": "z1"}),
        node("b", labels={"zone": "z1"}),
        node("c", labels={"zone": "z2"}),
        node("d"),
        *[_labelled(pod(f"a{i}", node="a", scheduler="other"), app="x") for i in range(2)],
        _labelled(pod("b0", node="b", scheduler="other"), app="x"),
        _labelled(pod("b1", node="b", scheduler="other", terminating=True), app="x"),
        _labelled(pod("c0", node="c", scheduler="other"), app="x"),
        _labelled(pod("c1", ns="elsewhere", node="c", scheduler="other"), app="x"),
        *[_labelled(pod(f"d{i}", node="d", scheduler="other"), app="x") for i in range(3)],
        _labelled(pod("other", node="c", scheduler="other"), app="y"),
        podgroup("pg"),
        _labelled(pod("p", group="pg", topologySpreadConstraints=_spread("zone", 2)), app="x"),
    ]
    assert _scores(objs, ["a", "b", "c", "d"]) == {"a": 40.0, "b": 40.0, "c": 100.0, "d": 0.0}


def test_domains_are_the_candidates_but_counts_take_every_matching_node() -> None:
    """With b not a candidate, z1 still counts b's pod (b matches the pod's node
    selector), while e, which the selector excludes, counts for nothing; the domains are
    the candidates' zones (a in z1, c in z2: log 4 per pod)."""
    sel = {"disk": "ssd"}
    objs = [
        queue(),
        node("a", labels={"zone": "z1", "disk": "ssd"}),
        node("b", labels={"zone": "z1", "disk": "ssd"}),
        node("c", labels={"zone": "z2", "disk": "ssd"}),
        node("e", labels={"zone": "z2"}),
        _labelled(pod("b0", node="b", scheduler="other"), app="x"),
        *[_labelled(pod(f"e{i}", node="e", scheduler="other"), app="x") for i in range(4)],
        podgroup("pg"),
        _labelled(
            pod("p", group="pg", nodeSelector=sel, topologySpreadConstraints=_spread("zone")),
            app="x",
        ),
    ]
    # raw a: round(1 x log 4) = 1, c: 0 -> a 100 (1 + 0 - 1) / 1 = 0, c 100.
    assert _scores(objs, ["a", "c"]) == {"a": 0.0, "c": 100.0}


def test_hostname_counts_the_node_itself_and_domains_are_the_candidates() -> None:
    """kubernetes.io/hostname: counts on the node itself; the domain count is the number
    of candidates (3, log 5). raw h1 round(2 log 5) = 3, h2 round(log 5) = 2, h3 0."""
    objs = [queue()]
    for n in ("h1", "h2", "h3"):
        objs.append(node(n, labels={"kubernetes.io/hostname": n}))
    objs += [_labelled(pod(f"x{i}", node="h1", scheduler="other"), app="x") for i in range(2)]
    objs += [_labelled(pod("y", node="h2", scheduler="other"), app="x")]
    objs += [podgroup("pg")]
    spread = _spread("kubernetes.io/hostname", 1)
    objs += [_labelled(pod("p", group="pg", topologySpreadConstraints=spread), app="x")]
    assert _scores(objs, ["h1", "h2", "h3"]) == {"h1": 0.0, "h2": 33.0, "h3": 100.0}


def test_hard_constraints_and_pods_without_constraints_score_alike_everywhere() -> None:
    objs = [queue(), node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})]
    objs += [_labelled(pod("x", node="a", scheduler="other"), app="x"), podgroup("pg")]
    hard = _spread("zone", when="DoNotSchedule")
    objs += [_labelled(pod("p", group="pg", topologySpreadConstraints=hard), app="x")]
    assert _scores(objs, ["a", "b"]) == {"a": 100.0, "b": 100.0}


@pytest.mark.parametrize(
    ("constraint", "field", "message"),
    [
        ({"topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}, "maxSkew", "required"),
        ({"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
         "maxSkew", "greater than zero"),
        ({"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}, "topologyKey", "required"),
        ({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"},
         "whenUnsatisfiable", "DoNotSchedule or ScheduleAnyway"),
        ({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
          "minDomains": 2}, "minDomains", "only be set with whenUnsatisfiable DoNotSchedule"),
    ],
)  # fmt: skip
def test_bad_constraints_name_the_field(constraint: dict, field: str, message: str) -> None:
    objs = [queue(), node("a"), podgroup("pg")]
    objs.append(pod("p", group="pg", topologySpreadConstraints=[constraint]))
    with pytest.raises(InputError) as err:
        build_snapshot([SourcedObject(o, "snap.yaml") for o in objs])
    text = str(err.value)
    assert f"spec.topologySpreadConstraints[0].{field}" in text
    assert message in text and "default/p" in text


def test_a_duplicate_key_and_action_is_refused() -> None:
    twice = _spread("zone") + _spread("zone", skew=2)
    objs = [queue(), node("a"), podgroup("pg")]
    objs.append(pod("p", group="pg", topologySpreadConstraints=twice))
    with pytest.raises(InputError, match="duplicate constraint for topologyKey 'zone'"):
        build_snapshot([SourcedObject(o) for o in objs])
