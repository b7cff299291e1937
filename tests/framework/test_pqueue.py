"""The keyed heap pops what the comparison heap pops, whatever the pushes and pops in
between, and makes a key only where two items are compared."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.framework.pqueue import KeyedQueue, PriorityQueue

#: A script: the items to start with, then pushes (an int) and pops (None).
SCRIPTS = st.tuples(
    st.lists(st.integers(0, 20), max_size=6),
    st.lists(st.one_of(st.integers(0, 20), st.none()), max_size=30),
)


def _run(heap, start: list[int], steps: list[int | None]) -> list[int]:
    out = []
    for step in steps:
        if step is None:
            if not heap.empty():
                out.append(heap.pop())
        else:
            heap.push(step)
    while not heap.empty():
        out.append(heap.pop())
    return out


@settings(max_examples=300, deadline=None)
@given(SCRIPTS)
def test_keyed_heap_pops_as_the_comparison_heap(script) -> None:
    start, steps = script
    # Items are (value, arrival): a total order, as job and queue keys are.
    numbered = [(v, i) for i, v in enumerate(start)]
    later = [None if s is None else (s, len(start) + k) for k, s in enumerate(steps)]
    keyed = _run(KeyedQueue(lambda x: x, numbered), numbered, later)
    compared = _run(PriorityQueue(lambda a, b: a < b, numbered), numbered, later)
    assert keyed == compared


def test_an_item_alone_is_never_keyed() -> None:
    asked: list[str] = []

    def key(x: str) -> str:
        asked.append(x)
        return x

    heap = KeyedQueue(key, ["b"])
    assert heap.pop() == "b" and asked == []
    heap.push("c")
    assert asked == []
    heap.push("a")
    assert sorted(asked) == ["a", "c"]
    assert [heap.pop(), heap.pop()] == ["a", "c"]
