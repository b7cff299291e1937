"""A slot view brought up to date row by row holds the numbers of one built afresh.

allocate proves a gang turn hopeless from the slots each node has for the gang's shape
and, for the explanation, from what each node is short of once they are taken
(:mod:`pumice.framework.slots`). The view is kept from cycle to cycle and only the
rows that changed are recomputed, in plain floats; the counts a user reads ("3
insufficient cpu, 2 insufficient memory") come from it. Here random node rows change
between two looks, and the view refreshed row by row must say exactly what a rebuild
over the new rows says.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.framework.slots import SlotView

#: Amounts with fractions that are not exact in binary, zeros and large values.
AMOUNTS = st.sampled_from([0.0, 0.1, 0.3, 1.0, 2.5, 3.0, 7.0, 100.0, 4e9, 1e10])
DIMS = 3


@st.composite
def looks(draw):
    """A shape, the nodes' future idle resources at two looks, the rows that changed
    between them, and which nodes a predicate blocks or refuses with a reason."""
    n = draw(st.integers(1, 10))
    init = np.array([draw(AMOUNTS) for _ in range(DIMS)])
    if not init.any():
        init[0] = 1.0
    use = np.array([draw(AMOUNTS) if init[d] else 0.0 for d in range(DIMS)])
    use[int(np.flatnonzero(init)[0])] = max(use[int(np.flatnonzero(init)[0])], 0.5)
    before = np.array([[draw(AMOUNTS) for _ in range(DIMS)] for _ in range(n)])
    changed = draw(st.sets(st.integers(0, n - 1)))
    after = before.copy()
    for i in changed:
        after[i] = [draw(AMOUNTS) - draw(st.sampled_from([0.0, 0.1, 1.0])) for _ in range(DIMS)]
    blocked = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    refused = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return init, use, before, after, changed, blocked, refused


def _view(init, use, blocked, refused) -> SlotView:
    task = SimpleNamespace(init_resreq=init, resreq=use)
    reasons = [("node(s) had untolerated taint", refused)] if refused.any() else []
    return SlotView(task, blocked if blocked.any() else None, reasons, ["cpu", "memory", "gpu"])


@settings(max_examples=300, deadline=None)
@given(looks())
def test_refreshed_rows_say_what_a_rebuild_says(case):
    init, use, before, after, changed, blocked, refused = case
    kept = _view(init, use, blocked, refused)
    kept.rebuild(before)
    kept.refresh(after, changed)
    fresh = _view(init, use, blocked, refused)
    fresh.rebuild(after)
    assert kept.slots.tolist() == fresh.slots.tolist()
    assert kept.short.tolist() == fresh.short.tolist()
    assert kept.counts == fresh.counts
    assert kept.total == fresh.total
    n = len(after)
    assert kept.fit_error(n).render() == fresh.fit_error(n).render()
