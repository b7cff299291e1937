"""proportion's water fill, worked in plain floats, gives the deserved shares of the
loop written over resource vectors, one queue at a time (the way Volcano writes it).

Deserved shares decide which queue goes first and which is overused, so a share a
rounding away from Volcano's would move decisions: the fast form must give the very
same floats, for any weights, requests, capabilities and guarantees.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.plugins.proportion import ProportionPlugin

DIMS = 3


def vector_loop(
    total: np.ndarray,
    request: np.ndarray,
    cap: np.ndarray,
    guarantee: np.ndarray,
    weights: list[int],
) -> np.ndarray:
    """The reference: each round, every queue that still wants more takes its weight's
    part of what remained at the start of the round, capped by its capability and its
    request and raised to its guarantee."""
    deserved = np.zeros(request.shape)
    met = [False] * len(weights)
    remaining = total.copy()
    while True:
        open_rows = [i for i in range(len(weights)) if not met[i]]
        total_weight = sum(weights[i] for i in open_rows)
        if total_weight == 0:
            break
        increased, decreased = np.zeros(total.size), np.zeros(total.size)
        for i in open_rows:
            old = deserved[i].copy()
            grown = np.minimum(old + remaining * (weights[i] / total_weight), cap[i])
            new = np.maximum(np.minimum(grown, request[i]), guarantee[i])
            if np.all(request[i] <= new) or np.array_equal(new, old):
                met[i] = True
            diff = new - old
            increased += np.maximum(diff, 0.0)
            decreased += np.maximum(-diff, 0.0)
            deserved[i] = new
        old_remaining = remaining
        remaining = remaining - increased + decreased
        if np.all(remaining < 0.1) or np.array_equal(remaining, old_remaining):
            break
    return deserved


amount = st.one_of(
    st.integers(0, 64_000).map(float),  # whole units (millicores, devices, bytes)
    st.floats(0.0, 5_000.0, allow_nan=False, allow_infinity=False),
)


@st.composite
def queues(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    n = draw(st.integers(1, 8))
    rows = st.lists(st.lists(amount, min_size=DIMS, max_size=DIMS), min_size=n, max_size=n)
    total = np.array(draw(st.lists(amount, min_size=DIMS, max_size=DIMS)))
    request = np.array(draw(rows))
    guarantee = np.array(draw(rows)) * draw(st.sampled_from([0.0, 0.1, 1.0]))
    cap = np.array(draw(rows))
    unlimited = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    cap[unlimited] = np.inf
    weights = draw(st.lists(st.integers(0, 10), min_size=n, max_size=n))
    return total, request, cap, guarantee, weights


@settings(max_examples=300, deadline=None)
@given(queues())
def test_plain_float_fill_gives_the_vector_loops_shares(case) -> None:
    total, request, cap, guarantee, weights = case
    got = ProportionPlugin._fill(
        total, weights, np.zeros(request.shape), request, cap, guarantee,
        np.array([float(w) for w in weights]),
    )  # fmt: skip
    want = vector_loop(total, request, cap, guarantee, weights)
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want)


@settings(max_examples=200, deadline=None)
@given(queues(), st.lists(st.booleans(), min_size=DIMS, max_size=DIMS))
def test_resources_nobody_has_leave_the_shares_of_the_others(case, absent) -> None:
    """A resource the cluster lacks and nobody asks for or is guaranteed (a dimension
    outside the shared ones) gives a share of zero and leaves the others' as the loop
    over every resource gives them."""
    total, request, cap, guarantee, weights = case
    gone = np.array(absent)
    total, request, guarantee = (np.where(gone, 0.0, m) for m in (total, request, guarantee))
    got = ProportionPlugin._fill(
        total, weights, np.zeros(request.shape), request, cap, guarantee,
        np.array([float(w) for w in weights]),
    )  # fmt: skip
    want = vector_loop(total, request, cap, guarantee, weights)
    assert got.tobytes() == want.tobytes(), (got, want)  # (the very floats, signs of zero too)


@settings(max_examples=200, deadline=None)
@given(queues(), st.lists(st.booleans(), min_size=DIMS, max_size=DIMS))
def test_resources_a_queue_does_not_ask_for_keep_the_loops_floats(case, unasked) -> None:
    """A queue that asks for none of a resource (or may have none of it), with no
    guarantee of it, keeps a share of exactly zero in every round: the shares come out
    as the loop's very floats, signs of zero too, unlimited capabilities included."""
    total, request, cap, guarantee, weights = case
    gone = np.array(unasked)
    request = np.where(gone, 0.0, request)
    guarantee = np.where(gone, 0.0, guarantee)
    cap = np.where(gone[::-1], 0.0, cap)
    got = ProportionPlugin._fill(
        total, weights, np.zeros(request.shape), request, cap, guarantee,
        np.array([float(w) for w in weights]),
    )  # fmt: skip
    want = vector_loop(total, request, cap, guarantee, weights)
    assert got.tobytes() == want.tobytes(), (got, want)
