"""allocate: gangs all-or-nothing, per-role minimums, pipelining, queue shares."""

from __future__ import annotations

import pytest
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.errors import InputError

ALLOC = conf("allocate", ["priority", "gang"], ["drf", "predicates", "proportion", "nodeorder"])


def test_gang_binds_nothing_when_the_whole_gang_cannot_fit() -> None:
    """A gang of 3 on room for 2 stays whole: no pod is bound."""
    objs = [queue(), node("n1", cpu="2"), podgroup("pg", min_member=3)]
    objs += [pod(f"p{i}", group="pg", cpu="1") for i in range(3)]
    d = run(objs, ALLOC)
    assert d.binds == {}
    assert "gang short: needs 3 tasks, 2 could be placed" in d.pending["default/pg"]


def test_gang_binds_all_members_when_it_fits() -> None:
    objs = [queue(), node("n1", cpu="2"), node("n2", cpu="2"), podgroup("pg", min_member=4)]
    objs += [pod(f"p{i}", group="pg", cpu="1") for i in range(4)]
    d = run(objs, ALLOC)
    assert len(d.binds) == 4
    assert "default/pg" not in d.pending


def test_elastic_job_binds_beyond_its_minimum_when_room_allows() -> None:
    objs = [queue(), node("n1", cpu="3"), podgroup("pg", min_member=2)]
    objs += [pod(f"p{i}", group="pg", cpu="1") for i in range(5)]
    d = run(objs, ALLOC)
    assert len(d.binds) == 3
    # The queue's deserved share is the whole 3-cpu cluster: the rest wait on it.
    assert "deserved share" in d.pending["default/pg"]


def test_per_role_minimum_blocks_a_gang_missing_a_role() -> None:
    """minTaskMember ps:1 cannot be met (ps asks for a GPU nobody has): nothing binds."""
    objs = [
        queue(),
        node("n1", cpu="8"),
        podgroup("pg", min_member=2, min_task_member={"ps": 1, "worker": 1}),
    ]
    objs += [
        pod("w0", group="pg", role="worker"),
        pod("w1", group="pg", role="worker"),
        pod("ps0", group="pg", role="ps", gpu="1"),
    ]
    d = run(objs, ALLOC)
    assert d.binds == {}
    assert "ps: 0/1" in d.pending["default/pg"]


def test_task_pipelined_onto_resources_of_a_terminating_pod() -> None:
    objs = [
        queue(),
        node("n1", cpu="2"),
        pod("old", cpu="2", node="n1", terminating=True, scheduler="other"),
        podgroup("pg", min_member=1),
        pod("new", group="pg", cpu="2"),
    ]
    d = run(objs, ALLOC)
    assert d.binds == {}
    assert d.pipelined == {"default/new": "n1"}


def test_lower_share_queue_is_served_first() -> None:
    """Queue b holds nothing, queue a holds 2 cpu: b's job gets the last free cpu."""
    objs = [
        queue("a"),
        queue("b"),
        node("n1", cpu="3"),
        pod("a-running", cpu="2", node="n1", group="ra"),
        podgroup("ra", queue="a", phase="Running"),
        podgroup("ja", queue="a", created="2020-01-01T00:00:00Z"),
        pod("ja-0", group="ja", cpu="1"),
        podgroup("jb", queue="b", created="2021-01-01T00:00:00Z"),
        pod("jb-0", group="jb", cpu="1"),
    ]
    d = run(objs, ALLOC)
    assert d.binds == {"default/jb-0": "n1"}


def test_missing_queue_is_not_scheduled_and_says_so() -> None:
    objs = [queue(), node("n1"), podgroup("pg", queue="nope"), pod("p", group="pg")]
    d = run(objs, ALLOC)
    assert d.binds == {}
    assert "queue 'nope' does not exist" in d.pending["default/pg"]


def test_pods_of_other_schedulers_occupy_their_node() -> None:
    objs = [
        queue(),
        node("n1", cpu="2"),
        pod("foreign", cpu="2", node="n1", scheduler="x"),
        podgroup("pg"),
        pod("p", group="pg", cpu="1"),
    ]
    d = run(objs, ALLOC)
    assert d.binds == {}
    assert "insufficient cpu" in d.pending["default/pg"]


def test_pod_count_limit_is_a_resource() -> None:
    objs = [queue(), node("n1", pods="1"), node("n2", pods="2"), podgroup("pg", min_member=3)]
    objs += [pod(f"p{i}", group="pg", cpu="100m", memory="10Mi") for i in range(3)]
    d = run(objs, ALLOC)
    assert len(d.binds) == 3
    assert list(d.binds.values()).count("n2") == 2


def test_higher_priority_job_goes_first() -> None:
    objs = [
        queue(),
        node("n1", cpu="1"),
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 100,
        },
        podgroup("low", created="2020-01-01T00:00:00Z"),
        pod("low-0", group="low"),
        podgroup("high", priority_class="high", created="2021-01-01T00:00:00Z"),
        pod("high-0", group="high"),
    ]
    d = run(objs, ALLOC)
    assert d.binds == {"default/high-0": "n1"}


# -- gangs that count on best-effort tasks --------------------------------------------

GANG_ONLY = """
actions: "{actions}"
tiers:
- plugins:
  - name: gang
    arguments: {arguments}
- plugins:
  - name: predicates
  - name: proportion
"""


def _master_and_worker(pods: str = "110") -> list[dict]:
    return [
        queue(),
        node("n1", pods=pods),
        podgroup("pg", min_member=2),
        pod("m", group="pg"),
        pod("w", group="pg", cpu=None, memory=None),
    ]


def test_without_backfill_a_gang_that_needs_its_best_effort_tasks_is_not_bound() -> None:
    """Nothing places best-effort tasks without backfill: binding the master would
    leave the gang at 1 of 2 for good, which Volcano's arithmetic does."""
    ours = run(_master_and_worker(), GANG_ONLY.format(actions="allocate", arguments="{}"))
    assert ours.binds == {}
    assert "no action of this configuration places best-effort tasks" in ours.pending["default/pg"]
    volcano = GANG_ONLY.format(actions="allocate", arguments="{gang.bestEffortReady: optimistic}")
    assert run(_master_and_worker(), volcano).binds == {"default/m": "n1"}


def test_a_gang_ready_on_its_best_effort_tasks_is_bound_whole_by_backfill() -> None:
    config = GANG_ONLY.format(actions="allocate, backfill", arguments="{}")
    assert run(_master_and_worker(), config).binds == {"default/m": "n1", "default/w": "n1"}
    one_slot = run(_master_and_worker(pods="1"), config)
    assert one_slot.binds == {}
    assert (
        "best-effort task w has no node: node n1 is at its pod limit (1)"
        in (one_slot.pending["default/pg"])
    )


def test_an_unknown_best_effort_ready_value_is_refused_naming_the_field() -> None:
    config = GANG_ONLY.format(actions="allocate", arguments="{gang.bestEffortReady: maybe}")
    with pytest.raises(InputError) as err:
        run(_master_and_worker(), config)
    assert "gang.bestEffortReady" in str(err.value)
    assert "placeable or optimistic" in str(err.value)


def test_backfill_tries_every_best_effort_task_of_a_job() -> None:
    """A worker that no node takes does not stop the next one (as in Volcano): the
    master and the second worker make the gang of 2."""
    objs = [queue(), node("n1"), podgroup("pg", min_member=2), pod("m", group="pg")]
    objs.append(pod("w-0", group="pg", cpu=None, memory=None, nodeSelector={"zone": "none"}))
    objs.append(pod("w-1", group="pg", cpu=None, memory=None))
    d = run(objs, GANG_ONLY.format(actions="allocate, backfill", arguments="{}"))
    assert d.binds == {"default/m": "n1", "default/w-1": "n1"}
