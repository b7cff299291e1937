"""allocate serves queues and jobs in the order the plugins give, however it keeps them.

With sort keys, a queue's jobs are ordered only when the queue is first served, and a
queue whose turn placed nothing is served again without going back into the heap of
queues. A cycle must decide and explain exactly as one that walks the order functions
through heaps at every turn (no sort keys), and the line of waiting jobs must come out
the same.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import node, pod, podgroup, queue, run

from pumice.actions import allocate
from pumice.framework.pqueue import KeyedQueue, Lines, PriorityQueue


@st.composite
def contended(draw) -> list[dict]:
    """Three queues of different weights on a few nodes: gangs and single pods of
    several sizes and priorities, some too big for any node, some queues past their
    share."""
    objs = [queue(q, weight=draw(st.integers(1, 4))) for q in ("a", "b", "c")]
    n_nodes = draw(st.integers(1, 4))
    for i in range(n_nodes):
        objs.append(node(f"n{i}", cpu=draw(st.sampled_from(["2", "4", "8"])), memory="16Gi"))
    for k in range(draw(st.integers(0, 3))):
        objs.append(
            pod(f"busy-{k}", cpu="1", memory="1Gi", node=f"n{k % n_nodes}", scheduler="other")
        )
    for j in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 4))
        objs.append(
            podgroup(
                f"g{j}",
                min_member=draw(st.integers(1, size)),
                queue=draw(st.sampled_from(["a", "b", "c"])),
                created=f"2026-01-01T00:00:0{j}Z",
            )
        )
        cpu = draw(st.sampled_from(["500m", "1", "2", "3", "9"]))
        priority = draw(st.sampled_from([None, 5, 10]))
        for k in range(size):
            objs.append(pod(f"g{j}-{k}", cpu=cpu, group=f"g{j}", priority=priority))
    return objs


def _decide(objs: list[dict], keys: bool) -> dict:
    if keys:
        return run(objs).to_json(sessions=False)
    with (
        mock.patch.object(allocate, "queue_key", lambda ssn: None),
        mock.patch.object(allocate, "job_key", lambda ssn: None),
    ):
        return run(objs).to_json(sessions=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contended())
def test_sort_keys_serve_queues_and_jobs_as_the_order_functions_do(objs: list[dict]) -> None:
    assert _decide(objs, keys=True) == _decide(objs, keys=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("xyz"), st.integers(0, 20)), max_size=30))
def test_a_line_pops_in_key_order_and_an_unserved_line_costs_no_key(
    items: list[tuple[str, int]],
) -> None:
    asked: list[int] = []

    def key(v: tuple[int, int]) -> tuple:
        asked.append(v[1])
        return v

    lines: Lines[tuple[int, int]] = Lines(lambda a, b: a < b, key)
    plain: Lines[tuple[int, int]] = Lines(lambda a, b: a < b, None)
    for seq, (name, value) in enumerate(items):
        lines.add(name, (value, seq))
        plain.add(name, (value, seq))
    assert lines.of("x") is None or isinstance(lines.of("x"), KeyedQueue)
    of_x = [seq for seq, (name, _) in enumerate(items) if name == "x"]
    assert sorted(asked) == (of_x if len(of_x) > 1 else [])  # (one job alone: nothing to compare)
    for name in "xyz":
        keyed, walked = lines.of(name), plain.of(name)
        if keyed is None:
            assert walked is None
            continue
        assert isinstance(walked, PriorityQueue)
        got = [keyed.pop() for _ in range(len(keyed))]
        assert got == [walked.pop() for _ in range(len(walked))]
        assert got == sorted(got)
