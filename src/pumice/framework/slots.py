"""How many tasks of one shape the nodes can still take, kept from cycle to cycle.

A backlog of admitted gangs that do not fit is looked at in every cycle (see
:mod:`pumice.actions.room`): for each, the slots of its shape on every node (how many of
its tasks fit one after another in the node's future idle resources) and, for the
explanation, which requested resources each node is short of once those slots are
taken. Computed from scratch, that is a pass over every node per job per cycle. Between
two looks only a few nodes change, so a :class:`SlotView` per shape is kept across
cycles and brought up to date row by row.

**Which rows changed.** Every change to a node table goes through ``add_task`` /
``remove_task``, which log the row (``NodeTable.changes``). A session's table is a copy
of the scheduler cache's table and remembers where that table's log stood
(``NodeTable.origin``). A view last brought up to date in session S (at position p of
S's log, from the cache's log at position b) differs from the current session's table
only in rows logged by the cache since b, rows S had changed by p, and rows the current
session changed. A rebuilt cache table (nodes added, relabelled, removed) has a new log,
and every view made on the old one starts afresh.

**Exactness.** A row is recomputed with the same float operations, in plain Python, as
the vector pass (division, floor, one correction step), so a view kept up to date row by
row holds the same numbers as one built afresh; a property test checks both against
trying the placements.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from pumice.api.job import FitError
from pumice.api.node import NodeTable
from pumice.api.quantity import PODS
from pumice.api.task import TaskInfo

#: Views kept (least recently used dropped first): a long run sees many shapes.
MAX_VIEWS = 512


def refresh_rows(nodes: int) -> int:
    """Beyond this many changed rows, a view is rebuilt in one vector pass instead of
    row by row. A row in plain floats costs about 4 us; a pass about 35 us on up to a
    couple of hundred nodes, 80 us on 1,000 and 550 us on 5,000 (measured): the break-even
    grows with the cluster, and this stays a little under it."""
    return 6 + nodes // 80


class SlotView:
    """One shape's slots per node and what each node is short of once they are taken."""

    __slots__ = (
        "blocked", "claimed", "counts", "dims", "error", "init", "left", "log", "names",
        "owner", "pos", "reasons", "session", "short", "slots", "spos", "srows", "total",
        "use",
    )  # fmt: skip

    def __init__(
        self,
        task: TaskInfo,
        blocked: np.ndarray | None,
        reasons: list[tuple[str, np.ndarray]],
        names: Sequence[str],
    ) -> None:
        req = task.init_resreq
        self.dims: list[int] = np.flatnonzero(req).tolist()
        self.init: list[float] = [float(req[d]) for d in self.dims]
        self.use: list[float] = [float(task.resreq[d]) for d in self.dims]
        self.names = [
            "too many pods" if names[d] == PODS else f"insufficient {names[d]}" for d in self.dims
        ]
        self.blocked = blocked
        # Nodes a predicate refuses are counted under the first predicate's reason only.
        self.reasons: dict[str, int] = {}
        claimed = None
        for reason, mask in reasons:
            new = mask if claimed is None else mask & ~claimed
            k = int(np.count_nonzero(new))
            if k:
                self.reasons[reason] = self.reasons.get(reason, 0) + k
                claimed = new if claimed is None else claimed | new
        self.claimed = claimed
        self.slots = np.zeros(0)
        self.short = np.zeros((0, len(self.dims)), dtype=bool)
        self.counts: list[int] = []
        self.total = 0.0
        self.log: list[int] | None = None
        self.pos = 0
        self.owner: object = None
        self.session: str = ""
        self.spos = 0
        self.srows: set[int] = set()
        #: The last fit error made, with its node count: kept while the counts stay.
        self.error: tuple[int, FitError] | None = None
        #: The nodes the current session leaves out, by reason (see NodeTable.left_out).
        self.left: dict[str, int] = {}

    # -- computing --------------------------------------------------------------------

    def rebuild(self, future: np.ndarray) -> None:
        dims = self.dims
        init, use = np.array(self.init), np.array(self.use)
        f = future[:, dims]
        head = f - init
        with np.errstate(divide="ignore", invalid="ignore"):
            more = np.where(use > 0, np.floor(head / use), np.inf)
            more += (head - (more + 1) * use >= 0) & (use > 0)
            slots = (
                np.where(head >= 0, more + 1, 0.0).min(axis=1)
                if dims
                else np.full(len(future), np.inf)
            )
            if self.blocked is not None:
                slots[self.blocked] = 0.0
            taken = np.where(np.isfinite(slots), slots, 0.0)
            self.short = (f - taken[:, None] * use) < init
        self.slots = slots
        self.total = float(slots.sum())
        counted = self.short if self.claimed is None else self.short & ~self.claimed[:, None]
        self.counts = np.count_nonzero(counted, axis=0).tolist()
        self.error = None

    def refresh(self, future: np.ndarray, rows: set[int]) -> None:
        """Bring ``rows`` up to date one by one, in plain floats (the same arithmetic as
        :meth:`rebuild`); the arrays are read and written only where a value changes."""
        init, use, dims = self.init, self.use, self.dims
        blocked, claimed = self.blocked, self.claimed
        slots, short, counts = self.slots, self.short, self.counts
        total = self.total
        # Row by row, in row order (the order ``total`` adds up in): most refreshes
        # are of a row or two, where gathering the rows into arrays first cost more
        # than the arithmetic.
        for i in sorted(rows):
            whole = future[i].tolist()
            row = [whole[d] for d in dims]
            before = slots.item(i)
            if blocked is not None and blocked.item(i):
                s = 0.0
            else:
                s = math.inf
                for k, head in enumerate(row):
                    head -= init[k]
                    if not head >= 0:
                        s = 0.0
                        break
                    u = use[k]
                    if u > 0:
                        more = float(math.floor(head / u))
                        if head - (more + 1) * u >= 0:
                            more += 1
                        s = min(s, more + 1)
            if s != before:
                total += s - before
                slots[i] = s
            taken = s if s != math.inf else 0.0
            counts_row = claimed is None or not claimed.item(i)
            flags = short[i].tolist()
            for k, x in enumerate(row):
                now = x - taken * use[k] < init[k]
                if now != flags[k]:
                    short[i, k] = now
                    if counts_row:
                        counts[k] += 1 if now else -1
                        self.error = None
        self.total = total

    def fit_error(self, n: int) -> FitError:
        """Why one more task of the shape finds no node, once every slot is taken, over
        the ``n`` nodes of the session and those it leaves out. (One object for as long
        as the counts stay: a fit error is read-only.)"""
        if self.error is not None and self.error[0] == n:
            return self.error[1]
        hist = dict(self.reasons)
        for name, k in zip(self.names, self.counts, strict=True):
            if k:
                hist[name] = hist.get(name, 0) + k
        left = self.left
        for reason, k in left.items():
            hist[reason] = hist.get(reason, 0) + k
        err = FitError(n + sum(left.values()), hist)
        self.error = (n, err)
        return err


class SlotMemory:
    """What allocate keeps per task shape for one scheduler cache, from cycle to cycle:
    the slot views, and the fast path's shapes (``pumice.framework.fastpath``)."""

    def __init__(self) -> None:
        self.views: dict[Hashable, SlotView] = {}
        self.shapes: dict[Hashable, Any] = {}
        #: What the fast path made of the last predicate and node_order registrations
        #: (those tuples first; see ``pumice.framework.fastpath.FastPath``).
        self.hooks_said: tuple | None = None

    def forget(self) -> None:
        """Drop every view and shape: what they hold of the predicates' answers (the
        nodes refused) stands only while those answers stay as they were, and a plugin
        whose answers move without any node changing (with the clock, or with new
        node metrics) calls this when they did, from ``on_cycle_open``."""
        self.views.clear()
        self.shapes.clear()

    def keep_shape(self, key: Hashable, shape: Any) -> None:
        """Keep a fast-path shape for the sessions to come (least recently made first
        out)."""
        self.shapes.pop(key, None)
        self.shapes[key] = shape
        if len(self.shapes) > MAX_VIEWS:
            del self.shapes[next(iter(self.shapes))]

    def view(
        self,
        key: Hashable,
        task: TaskInfo,
        nodes: NodeTable,
        future: Callable[[], np.ndarray],
        session: str,
        owner: object,
        make: Callable[[], tuple[np.ndarray | None, list[tuple[str, np.ndarray]]]],
    ) -> SlotView:
        """The view of shape ``key`` brought up to date with ``nodes``, the table of
        session ``session`` (its uid), whose future idle resources ``future()`` returns
        (asked only when some row is to be recomputed).
        ``owner`` is what the predicates' answers depend on besides the nodes (the
        configuration): a view made for another is made afresh. ``make()`` returns
        (blocked, reasons) from the predicates when a view is made."""
        views = self.views
        view = views.pop(key, None)
        if view is not None and view.owner is not owner:
            view = None
        log, base = nodes.origin if nodes.origin is not None else (None, 0)
        rows: set[int] | None = None
        if view is not None:
            if view.session == session:
                rows = set(nodes.changes[view.spos :])
            elif (
                log is not None
                and view.log is log
                and view.pos <= base
                and base - view.pos <= len(nodes)  # (a long-unused view: rebuilt)
            ):
                rows = set(log[view.pos : base])
                if view.srows:
                    rows |= view.srows
                if nodes.changes:
                    rows.update(nodes.changes)
        if view is None:
            blocked, reasons = make()
            view = SlotView(task, blocked, reasons, nodes.space.names)
            view.owner = owner
        if rows is None:
            view.rebuild(future())
        elif rows:  # (most views: no row changed, and nothing to weigh)
            if len(rows) > refresh_rows(len(nodes)):
                view.rebuild(future())
            else:
                view.refresh(future(), rows)
        if nodes.left_out or view.left:
            left = nodes.left_out_counts() if nodes.left_out else {}
            if left != view.left:
                view.left = left
                view.error = None
        changes = nodes.changes
        if view.session == session:
            if view.spos < len(changes):
                view.srows.update(changes[view.spos :])
        else:
            view.srows = set(changes)
        view.log, view.pos, view.session, view.spos = log, base, session, len(changes)
        views[key] = view
        if len(views) > MAX_VIEWS:
            del views[next(iter(views))]
        return view


__all__ = ["MAX_VIEWS", "SlotMemory", "SlotView"]
