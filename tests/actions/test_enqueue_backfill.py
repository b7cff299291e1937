"""enqueue admits within overcommit and queue capability; backfill places best-effort."""

from __future__ import annotations

from tests.kit import conf, node, pod, podgroup, queue, run


def test_enqueue_refuses_a_job_beyond_overcommit_and_names_the_gate() -> None:
    objs = [
        queue(),
        node("n1", cpu="4"),
        podgroup("big", phase="Pending", min_resources={"cpu": "10"}),
        pod("big-0", group="big", cpu="10"),
    ]
    d = run(objs)
    assert d.podgroups["default/big"].phase == "Pending"
    # The pod is larger than the node: that comes first, then the gate that said no.
    assert d.pending["default/big"].startswith("task big-0 can never fit: asks cpu 10")
    assert "; not enqueued: overcommit" in d.pending["default/big"]


def test_enqueue_admits_within_overcommit_factor_and_allocate_binds() -> None:
    objs = [
        queue(),
        node("n1", cpu="4"),
        podgroup("ok", phase="Pending", min_resources={"cpu": "2"}),
        pod("ok-0", group="ok", cpu="2"),
    ]
    d = run(objs)
    assert d.binds == {"default/ok-0": "n1"}


def test_queue_capability_gates_enqueue() -> None:
    objs = [
        queue("capped", capability={"cpu": "1"}),
        node("n1", cpu="8"),
        podgroup("pg", queue="capped", phase="Pending", min_resources={"cpu": "2"}),
        pod("p", group="pg", cpu="2"),
    ]
    d = run(objs)
    assert d.binds == {}
    assert "proportion" in d.pending["default/pg"]


def test_without_enqueue_action_allocate_admits_pending_jobs() -> None:
    objs = [queue(), node("n1"), podgroup("pg", phase="Pending"), pod("p", group="pg")]
    d = run(objs, conf("allocate", ["gang", "predicates", "proportion"]))
    assert d.binds == {"default/p": "n1"}


def test_backfill_places_best_effort_pods_that_allocate_skips() -> None:
    objs = [
        queue(),
        node("n1", cpu="1"),
        podgroup("pg"),
        pod("be", group="pg", cpu=None, memory=None),
    ]
    only_allocate = run(objs, conf("allocate", ["gang", "predicates"]))
    assert only_allocate.binds == {}
    with_backfill = run(objs, conf("allocate, backfill", ["gang", "predicates"]))
    assert with_backfill.binds == {"default/be": "n1"}


def test_a_podgroup_without_pods_yet_is_admitted_but_not_placed() -> None:
    """Volcano's job controller creates a vcjob's pods only once its PodGroup is
    Inqueue: enqueue must admit a gang that has no pods yet, and allocate must leave it
    alone (too few pods) while saying why."""
    objs = [
        queue(),
        node("n1", cpu="8"),
        podgroup("vc", min_member=2, phase="Pending", min_resources={"cpu": "2"}),
        podgroup("big", min_member=2, phase="Pending", min_resources={"cpu": "100"}),
    ]
    d = run(objs)
    assert d.podgroups["default/vc"].phase == "Inqueue"
    assert d.binds == {}
    assert d.pending["default/vc"].startswith("admitted; waiting for its 2 pods")
    assert d.podgroups["default/big"].phase == "Pending"
    assert d.pending["default/big"].startswith("not enqueued: overcommit")


def test_a_refusal_quotes_the_figures_as_they_stood_when_the_job_was_refused() -> None:
    """The first job is refused before the second is admitted in the same cycle: its
    explanation, read after the cycle, quotes what was admitted then (nothing), not
    what the cycle admitted after it."""
    objs = [
        queue(),
        node("n1", cpu="10"),
        podgroup("a-big", phase="Pending", min_resources={"cpu": "20"},
                 created="2026-01-01T00:00:00Z"),
        pod("a-big-0", group="a-big", cpu="8"),
        podgroup("b-small", phase="Pending", min_resources={"cpu": "2"},
                 created="2026-01-01T00:00:01Z"),
        pod("b-small-0", group="b-small", cpu="2"),
    ]  # fmt: skip
    d = run(objs)
    assert d.podgroups["default/b-small"].phase == "Inqueue"
    said = d.pending["default/a-big"]
    assert "minResources (cpu 20) plus those of the jobs already admitted (cpu 0)" in said
    assert "what the cluster can take at that factor (cpu 12:" in said
