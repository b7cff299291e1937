"""Pod topology spread: nodeorder's score (soft constraints) and the predicates' filter
(hard constraints), on numbers worked out by hand from Kubernetes' PodTopologySpread
scoring and filtering, and the constraints' input checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import assert_same_but_bounded, node, pod, podgroup, queue, run
from tests.properties.test_fast_path_equivalence import all_modes, clusters

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


def test_a_key_no_node_carries_scores_zero_everywhere() -> None:
    """Every candidate lacks the key: all score 0 (and the pod is still placed)."""
    objs = [queue(), node("a"), node("b"), podgroup("pg")]
    objs += [_labelled(pod("p", group="pg", topologySpreadConstraints=_spread("rack")), app="x")]
    assert _scores(objs, ["a", "b"]) == {"a": 0.0, "b": 0.0}
    assert run(objs).binds == {"default/p": "a"}


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


# -- hard constraints: the predicates' filter ------------------------------------------

SPREAD = "didn't match pod topology spread constraints"
MISSING = f"{SPREAD} (missing required label)"


def _session(objects: list[dict]):
    snap = build_snapshot([SourcedObject(o) for o in objects])
    return Scheduler.from_file(None).open(snap), snap


def _refused(ssn, task) -> dict[str, list[str]]:
    """The spread refusals of the predicates plugin for ``task``: reason -> nodes."""
    (fn,) = ssn.hooks.flat("predicate")
    _blocked, reasons = fn(task)
    names = ssn.nodes.names
    return {r: [names[i] for i in np.flatnonzero(m)] for r, m in reasons if r in (SPREAD, MISSING)}


def _pending(name: str, spread: list, app: str = "x", **extra) -> dict:
    return _labelled(pod(name, group="pg", topologySpreadConstraints=spread, **extra), app=app)


def _running(name: str, on: str, app: str = "x", **extra) -> dict:
    return _labelled(pod(name, node=on, scheduler="other", cpu="100m", **extra), app=app)


def _zones_cluster(*pending: dict) -> list[dict]:
    """z1: a (2 matching pods), b (1 matching, 1 terminating, 1 of another namespace);
    z2: c (1 matching, 1 of another app); z3: d (no pod, no disk label); e: no zone."""
    return [
        queue(),
        node("a", labels={"zone": "z1", "disk": "ssd"}),
        node("b", labels={"zone": "z1", "disk": "ssd"}),
        node("c", labels={"zone": "z2", "disk": "ssd"}),
        node("d", labels={"zone": "z3"}),
        node("e", labels={"disk": "ssd"}),
        _running("a0", "a"),
        _running("a1", "a"),
        _running("b0", "b"),
        _running("b1", "b", terminating=True),
        _running("b2", "b", ns="elsewhere"),
        _running("c0", "c"),
        _running("c1", "c", app="y"),
        podgroup("pg"),
        *pending,
    ]


def _task(snap, name: str = "p"):
    return snap.jobs["default/pg"].tasks[f"default/{name}"]


def test_hard_spread_counts_domains_worked_by_hand() -> None:
    """Counting z1 = 3 (a 2, b 1: the terminating pod and the other namespace's left
    out), z2 = 1, z3 = 0 (d has no pod); the pod matches its own selector. maxSkew 2,
    minimum 0: z1 gives 3 + 1 - 0 = 4 > 2 (a, b refused), z2 2 and z3 1 pass; e has no
    zone label."""
    ssn, snap = _session(_zones_cluster(_pending("p", _spread("zone", 2, "DoNotSchedule"))))
    assert _refused(ssn, _task(snap)) == {SPREAD: ["a", "b"], MISSING: ["e"]}


def test_domains_outside_the_node_selector_do_not_lower_the_minimum() -> None:
    """With nodeSelector disk=ssd, d (z3, no disk label) is not counted: the domains are
    z1 (3) and z2 (1), the minimum 1. maxSkew 2: z1 3 + 1 - 1 = 3 > 2, z2 1 + 1 - 1 = 1.
    d is refused by the node selector, not by spreading (its z3 counts 0 there: 0 + 1 -
    1 = 0)."""
    p = _pending("p", _spread("zone", 2, "DoNotSchedule"), nodeSelector={"disk": "ssd"})
    ssn, snap = _session(_zones_cluster(p))
    assert _refused(ssn, _task(snap)) == {SPREAD: ["a", "b"], MISSING: ["e"]}
    p = _pending("p", _spread("zone", 3, "DoNotSchedule"), nodeSelector={"disk": "ssd"})
    ssn, snap = _session(_zones_cluster(p))
    assert _refused(ssn, _task(snap)) == {MISSING: ["e"]}  # 3 <= 3 everywhere


def test_a_pod_outside_its_own_selector_does_not_add_itself() -> None:
    """The pod (app=w) does not match app=x: no self-match. maxSkew 3, minimum 0:
    z1 3 + 0 - 0 = 3 passes; with maxSkew 2 it does not."""
    ssn, snap = _session(_zones_cluster(_pending("p", _spread("zone", 3, "DoNotSchedule"), "w")))
    assert _refused(ssn, _task(snap)) == {MISSING: ["e"]}
    ssn, snap = _session(_zones_cluster(_pending("p", _spread("zone", 2, "DoNotSchedule"), "w")))
    assert _refused(ssn, _task(snap)) == {SPREAD: ["a", "b"], MISSING: ["e"]}


def test_min_domains_is_left_to_its_gate() -> None:
    """Kubernetes 1.25 (Volcano 1.7) keeps MinDomainsInPodTopologySpread off: minDomains
    3 over two domains of 1 pod each does not make the minimum 0 (which would refuse
    every node: 1 + 1 - 0 > 1); 1 + 1 - 1 = 1 passes."""
    objs = [queue(), node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})]
    objs += [_running("a0", "a"), _running("b0", "b"), podgroup("pg")]
    spread = _spread("zone", 1, "DoNotSchedule")
    spread[0]["minDomains"] = 3
    ssn, snap = _session([*objs, _pending("p", spread)])
    assert _refused(ssn, _task(snap)) == {}


def test_the_first_constraint_that_fails_names_the_reason() -> None:
    """Constraints zone (maxSkew 1) then rack (maxSkew 5). Spreading counts only nodes
    with both keys: d (z2, no rack) holds 3 matching pods that z2 does not count, so z1 =
    2 (a), z2 = 0 (c), minimum 0. a: 2 + 1 - 0 = 3 > 1, refused for the constraints; b
    (z1, no rack) fails the zone constraint first: refused for the constraints too; c
    passes both; d passes the zone (0 + 1 - 0 = 1) and lacks the rack: missing label."""
    objs = [
        queue(),
        node("a", labels={"zone": "z1", "rack": "r1"}),
        node("b", labels={"zone": "z1"}),
        node("c", labels={"zone": "z2", "rack": "r2"}),
        node("d", labels={"zone": "z2"}),
        _running("a0", "a"),
        _running("a1", "a"),
        *[_running(f"d{i}", "d") for i in range(3)],
        podgroup("pg"),
    ]
    spread = _spread("zone", 1, "DoNotSchedule") + _spread("rack", 5, "DoNotSchedule")
    ssn, snap = _session([*objs, _pending("p", spread)])
    assert _refused(ssn, _task(snap)) == {SPREAD: ["a", "b"], MISSING: ["d"]}


def test_hostname_domains_are_the_nodes() -> None:
    """kubernetes.io/hostname: h1 1 pod, h2 none, h3 2; minimum 0, maxSkew 1: h1 and h3
    refused (2 and 3 > 1)."""
    objs = [queue()]
    for n in ("h1", "h2", "h3"):
        objs.append(node(n, labels={"kubernetes.io/hostname": n}))
    objs += [_running("x0", "h1"), _running("y0", "h3"), _running("y1", "h3"), podgroup("pg")]
    hard = _spread("kubernetes.io/hostname", 1, "DoNotSchedule")
    ssn, snap = _session([*objs, _pending("p", hard)])
    assert _refused(ssn, _task(snap)) == {SPREAD: ["h1", "h3"]}


def test_a_constraint_without_selector_counts_nothing_but_still_needs_the_key() -> None:
    spread = _spread("zone", 1, "DoNotSchedule")
    del spread[0]["labelSelector"]
    ssn, snap = _session(_zones_cluster(_pending("p", spread)))
    assert _refused(ssn, _task(snap)) == {MISSING: ["e"]}


def test_counts_follow_the_placements_of_the_cycle_and_their_undoing() -> None:
    """Zones z1 (a) and z2 (b), no pod yet, maxSkew 1: both pass for p0; once p0 is
    allocated to a (in a statement), p1 meets z1 at 1 + 1 - 0 = 2 and a is refused;
    discarding the statement frees it again."""
    from pumice.framework.statement import Statement

    objs = [queue(), node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})]
    objs.append(podgroup("pg", min_member=2))
    hard = _spread("zone", 1, "DoNotSchedule")
    objs += [_pending("p0", hard), _pending("p1", hard)]
    ssn, snap = _session(objs)
    p0, p1 = _task(snap, "p0"), _task(snap, "p1")
    assert _refused(ssn, p1) == {}
    stmt = Statement(ssn)
    stmt.allocate(p0, "a")
    assert _refused(ssn, p1) == {SPREAD: ["a"]}
    stmt.discard()
    assert _refused(ssn, p1) == {}


def test_hard_spread_tasks_take_the_long_way() -> None:
    """No fast-path choice and no slot view for a task with a hard constraint (its answer
    moves with every placement); its shape key carries the constraint and whether the
    task matches it, so tasks differing only there are not taken for one another. A
    soft constraint leaves the key alone (it changes scores, not the filter)."""
    from pumice.framework.fastpath import for_session, shape_key

    objs = [queue(), node("a", labels={"zone": "z1"}), podgroup("pg")]
    objs += [
        _pending("hard-x", _spread("zone", 1, "DoNotSchedule")),
        _pending("hard-y", _spread("zone", 1, "DoNotSchedule"), app="y"),
        _pending("soft", _spread("zone", 1, "ScheduleAnyway")),
        _labelled(pod("plain", group="pg"), app="x"),
    ]
    ssn, snap = _session(objs)
    fast = for_session(ssn)
    hard_x, hard_y = _task(snap, "hard-x"), _task(snap, "hard-y")
    soft, plain = _task(snap, "soft"), _task(snap, "plain")
    assert fast.choose(hard_x) is None
    assert fast.slot_view(hard_x, shape_key(hard_x)) is None
    assert fast.slot_view(plain, shape_key(plain)) is not None
    keys = {shape_key(t) for t in (hard_x, hard_y, plain)}
    assert len(keys) == 3
    assert shape_key(soft) == shape_key(plain)


def test_a_refused_spread_task_does_not_refuse_another_of_the_same_shape() -> None:
    """pg-x's pod (app=x) meets zone z1 at 2 + 1 - 0 = 3 > 1 and z2's only node is full;
    pg-y's pod has the same requests and placement but counts app=y pods (none): it
    binds to a. (Allocate remembers a shape's fit failure for the rest of the cycle; the
    spread constraint and self-match are part of the shape.)"""
    objs = [
        queue(),
        node("a", cpu="4", labels={"zone": "z1"}),
        node("b", cpu="1", labels={"zone": "z2"}),
        _running("a0", "a"),
        _running("a1", "a"),
        _labelled(pod("full", node="b", scheduler="other", cpu="1", memory="1Gi"), app="z"),
        podgroup("pg-x", created="2026-01-01T00:00:00Z"),
        podgroup("pg-y", created="2026-01-01T00:00:01Z"),
    ]
    for app in ("x", "y"):
        p = pod(f"p-{app}", group=f"pg-{app}", created="2026-01-01T00:00:00Z",
                topologySpreadConstraints=_spread("zone", 1, "DoNotSchedule", app=app))  # fmt: skip
        objs.append(_labelled(p, app=app))
    out = run(objs)
    assert out.binds == {"default/p-y": "a"}
    assert SPREAD in out.pending["default/pg-x"]


def test_a_zone_refused_at_first_opens_once_the_other_catches_up() -> None:
    """z1 (a) already holds 2 matching pods, z2 (b, 3 cpu) none; a gang of 4 with maxSkew
    1. At first only b passes (a: 2 + 1 - 0 = 3), and b has room for 3: the gang looks
    short, but each placement moves the counts: p0 and p1 go to b (a is 2 + 1 - 1 = 2
    over), then at 2 and 2 p2 takes the emptier a, and p3 at 3 against 2 goes to b."""
    objs = [
        queue(),
        node("a", cpu="4", labels={"zone": "z1"}),
        node("b", cpu="3", labels={"zone": "z2"}),
        _running("a0", "a"),
        _running("a1", "a"),
        podgroup("pg", min_member=4),
    ]
    hard = _spread("zone", 1, "DoNotSchedule")
    objs += [_pending(f"p{i}", hard, memory="256Mi") for i in range(4)]
    out = run(objs)
    assert out.binds == {"default/p0": "b", "default/p1": "b", "default/p2": "a", "default/p3": "b"}


# -- every mode decides alike --------------------------------------------------------


@st.composite
def _spread_clusters(draw) -> list[dict]:
    """The fast-path property's random clusters, with spread constraints (hard or soft,
    over zone, tier, the hostname or a key no node has) on some gangs, and labels that
    the selectors count on running and pending pods."""
    objs = draw(clusters())
    for o in objs:
        if o["kind"] != "Pod":
            continue
        meta, spec = o["metadata"], o["spec"]
        group = meta["annotations"].get("scheduling.k8s.io/group-name")
        app = group or draw(st.sampled_from(["g0", "g1", "none"]))
        meta["labels"] = {"app": app}
        if group is None or draw(st.integers(0, 2)) == 0:
            continue
        constraints = []
        for key in draw(st.lists(st.sampled_from(["zone", "tier", "host", "rack"]),
                                 min_size=1, max_size=2, unique=True)):  # fmt: skip
            constraints.append(
                {
                    "maxSkew": draw(st.integers(1, 2)),
                    "topologyKey": "kubernetes.io/hostname" if key == "host" else key,
                    "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                    "labelSelector": {"matchLabels": {"app": draw(st.sampled_from([group, "g0"]))}},
                }
            )
        spec["topologySpreadConstraints"] = constraints
    for o in objs:
        if o["kind"] == "Node" and draw(st.booleans()):
            o["metadata"]["labels"]["kubernetes.io/hostname"] = o["metadata"]["name"]
    return objs


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_spread_clusters())
def test_spread_decisions_agree_in_every_mode(objs: list[dict]) -> None:
    """With hard and soft spread constraints about, the fast path (as shipped), the long
    way and the per-node reference make the same decisions."""
    results = all_modes(objs, Scheduler.from_file(None))
    assert_same_but_bounded(results["fast"], results["vector"])
    assert results["vector"] == results["reference"]
