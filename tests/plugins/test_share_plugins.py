"""proportion, drf, priority, gang and sla as a user notices them in decisions."""

from __future__ import annotations

import types

import numpy as np
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, pod, podgroup, priority_class, queue, run

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.framework.session import close_session, open_session, renew_session
from pumice.plugins import default_registry
from pumice.plugins.proportion import run_length


def test_proportion_weights_split_a_contended_cluster() -> None:
    """Queues of weight 3 and 1 on 4 cpu: the heavy queue gets 3, the light one 1."""
    objs = [queue("heavy", weight=3), queue("light", weight=1), node("n1", cpu="4")]
    for q in ("heavy", "light"):
        for i in range(4):
            objs += [podgroup(f"{q}{i}", queue=q), pod(f"{q}{i}-0", group=f"{q}{i}")]
    d = run(objs, conf("allocate", ["gang"], ["predicates", "proportion"]))
    got = sorted(k.split("/")[1].rstrip("0123456789-") for k in d.binds)
    assert got.count("heavy") == 3
    assert got.count("light") == 1


def test_queue_capability_caps_allocation() -> None:
    objs = [queue("capped", capability={"cpu": "2"}), node("n1", cpu="8")]
    for i in range(4):
        objs += [podgroup(f"j{i}", queue="capped"), pod(f"j{i}-0", group=f"j{i}")]
    d = run(objs, conf("allocate", ["gang"], ["predicates", "proportion"]))
    assert len(d.binds) == 2


def test_drf_serves_the_job_with_the_smaller_dominant_share() -> None:
    """Job big already holds 2 cpu; job small holds none: small's pending task goes first."""
    objs = [
        queue(),
        node("n1", cpu="3"),
        podgroup("big", phase="Running", created="2020-01-01T00:00:00Z"),
        pod("big-run", group="big", cpu="2", node="n1"),
        pod("big-more", group="big"),
        podgroup("small", created="2021-01-01T00:00:00Z"),
        pod("small-0", group="small"),
    ]
    d = run(objs, conf("allocate", ["gang"], ["drf", "predicates"]))
    assert d.binds == {"default/small-0": "n1"}


def test_priority_orders_tasks_within_a_job() -> None:
    objs = [
        queue(),
        node("n1", cpu="1"),
        priority_class("hi", 10),
        priority_class("lo", 1),
        podgroup("pg"),
        pod("a-x-0", group="pg", priority_class="lo"),
        pod("b-x-1", group="pg", priority_class="hi"),
    ]
    d = run(objs, conf("allocate", ["priority", "gang"], ["predicates"]))
    assert d.binds == {"default/b-x-1": "n1"}


def test_gang_invalid_job_is_explained_and_left_alone() -> None:
    """minMember 3 with only 2 pods can never run: not scheduled, reason says so."""
    objs = [
        queue(),
        node("n1", cpu="8"),
        podgroup("pg", min_member=3),
        pod("p0", group="pg"),
        pod("p1", group="pg"),
    ]
    d = run(objs)
    assert d.binds == {}
    assert "not enough valid tasks" in d.pending["default/pg"]
    cond = d.podgroups["default/pg"].conditions[0]
    assert cond["type"] == "Unschedulable"


def test_gang_sets_scheduled_condition_and_running_pods_make_running_phase() -> None:
    objs = [
        queue(),
        node("n1", cpu="8"),
        podgroup("pg", min_member=2),
        pod("p0", group="pg", node="n1"),
        pod("p1", group="pg", node="n1"),
    ]
    d = run(objs)
    assert d.podgroups["default/pg"].phase == "Running"
    assert d.podgroups["default/pg"].conditions[0]["type"] == "Scheduled"


def test_running_job_that_loses_its_gang_is_unknown() -> None:
    objs = [
        queue(),
        node("n1", cpu="1"),
        podgroup("pg", min_member=2, phase="Running"),
        pod("p0", group="pg", node="n1"),
        pod("p1", group="pg", cpu="4"),
    ]
    d = run(objs)
    assert d.podgroups["default/pg"].phase == "Unknown"


def test_sla_admits_a_job_that_waited_past_its_deadline() -> None:
    # sla in an earlier tier than overcommit: its permit ends the vote.
    cfg = conf(
        "enqueue", [{"name": "sla", "arguments": {"sla-waiting-time": "1m"}}], ["overcommit"]
    )
    late = podgroup(
        "late", phase="Pending", min_resources={"cpu": "100"}, created="2026-01-01T00:00:00Z"
    )
    fresh = podgroup(
        "fresh", phase="Pending", min_resources={"cpu": "100"}, created="2026-01-01T00:10:00Z"
    )
    objs = [
        queue(),
        node("n1", cpu="4"),
        late,
        fresh,
        pod("l", group="late"),
        pod("f", group="fresh", created="2026-01-01T00:10:00Z"),
    ]
    d = run(objs, cfg)
    assert d.podgroups["default/late"].phase == "Inqueue"
    assert d.podgroups["default/fresh"].phase == "Pending"


def test_a_running_job_whose_tasks_ended_claims_nothing_at_admission() -> None:
    """A Running podgroup whose pods all finished must not hold its minResources back
    from the overcommit gate (else a cluster fills with claims of finished jobs)."""
    done = podgroup("done", phase="Running", min_member=2, min_resources={"cpu": "4"})
    finished = [
        pod(f"done-{i}", group="done", cpu="2", node="n1", phase="Succeeded") for i in range(2)
    ]
    new = podgroup("new", phase="Pending", min_resources={"cpu": "4"})
    objs = [queue(), node("n1", cpu="4"), done, *finished, new, pod("new-0", group="new", cpu="4")]
    d = run(objs)
    assert d.binds == {"default/new-0": "n1"}


def _stepped(r: float, d: float, a: float, x: float, limit: int) -> int:
    """A queue taking equal tasks one at a time, the share checked before each."""
    steps = 0
    while steps < limit and r <= max(d - a, 0.0):
        steps += 1
        a += x
    return steps


@settings(max_examples=400, deadline=None)
@given(
    r=st.one_of(st.integers(1, 64).map(float), st.floats(0.001, 64.0)),
    d=st.one_of(
        st.integers(0, 4096).map(float),
        st.floats(0.0, 4096.0),
        st.just(float("inf")),
    ),
    a=st.one_of(st.integers(0, 4096).map(float), st.floats(0.0, 4096.0)),
    x=st.one_of(st.integers(0, 64).map(float), st.floats(0.0, 64.0)),
    limit=st.integers(0, 300),
)
def test_run_length_is_the_stepped_run(r, d, a, x, limit):
    """How many tasks in a row a queue's share lets through, counted without stepping
    where the sums are exact, is the count the task-by-task checks give, to the task
    (the gang proofs and every explanation that quotes it depend on it)."""
    assert run_length(r, d, a, x, limit) == _stepped(r, d, a, x, limit)


def test_run_length_at_float_boundaries():
    # Deserved shares are water-filled floats: a boundary a hair above or below a
    # whole number of tasks, and large exact sums (bytes of memory).
    gib = float(2**30)
    for d in (24.0, 24.000000000000004, 23.999999999999996, 3 * gib, 3 * gib - 1):
        for r, x in ((8.0, 8.0), (1.0, 1.0), (gib, gib), (3.0, 3.0)):
            for a in (0.0, 8.0, gib):
                for limit in (0, 1, 3, 64):
                    assert run_length(r, d, a, x, limit) == _stepped(r, d, a, x, limit)
    # Deserved one ulp below a whole number of tasks, where the real-number estimate
    # counts one task too many (found by search; 3 GiB tasks and 3-cpu ones).
    for r, d, a in (
        (3 * gib, float.fromhex("0x1.980000017ffffp+35"), 12.0),
        (3 * gib, float.fromhex("0x1.b0000091fffffp+34"), 584.0),
        (3.0, float.fromhex("0x1.c7fffffffffffp+6"), 15.0),
    ):
        assert run_length(r, d, a, r, 100) == _stepped(r, d, a, r, 100) < 100


def test_overcommits_vote_on_many_rows_follows_what_is_admitted_and_in_use() -> None:
    """overcommit's vote on rows of minResources at once is kept while the rows and
    its figures stand: asked again with the same rows after a job was admitted, or in
    the next cycle with a pod in use, it answers for the figures of that moment."""
    config = parse_config(yaml.safe_load(conf("enqueue", ["overcommit"], [])))
    registry = default_registry()
    base = [queue(), node("n1", cpu="4", memory="8Gi")]
    first = build_snapshot([SourcedObject(o) for o in base])
    ssn = open_session(first, config, registry)
    cpu = first.space.index["cpu"]

    def wants(*cores: float) -> np.ndarray:
        rows = np.zeros((len(cores), first.space.size))
        rows[:, cpu] = [c * 1000.0 for c in cores]
        rows.setflags(write=False)
        return rows

    def vote(ssn, rows: np.ndarray) -> list[bool]:
        fn = ssn.hooks.flat("job_enqueueable")[0]
        return np.asarray(ssn.hooks.facet("job_enqueueable", fn, "refuses")(rows)).tolist()

    rows = wants(2, 4)  # (4 cpu at factor 1.2: 4.8 to take)
    assert vote(ssn, rows) == [False, False]
    assert vote(ssn, rows) == [False, False]
    admitted = types.SimpleNamespace(min_resources=wants(2)[0])
    ssn.hooks.flat("job_enqueued")[0](admitted)
    assert vote(ssn, rows) == [False, True]
    close_session(ssn, keep=True)
    busy = build_snapshot(
        [SourcedObject(o) for o in [*base, pod("p", cpu="3", node="n1", phase="Running")]]
    )
    ssn = renew_session(ssn, busy, registry)
    assert vote(ssn, rows) == [True, True]  # (3 of the 4 cpu in use: 1.8 left to take)
    close_session(ssn, keep=True)
    ssn = renew_session(ssn, build_snapshot([SourcedObject(o) for o in base]), registry)
    assert vote(ssn, rows) == [False, False]
