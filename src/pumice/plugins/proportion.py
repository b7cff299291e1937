"""proportion: share the cluster between queues by weight.

Each queue's *deserved* share is found by water-filling: the remaining resources are
split by weight among the queues that still want more, each capped by what it requests
and by its capability, and raised to its guarantee, until nothing is left or nothing
changes. A queue that has allocated its deserved share is *overused* and gets no more
this cycle; the queue with the smallest share (allocated / deserved, dominant
resource) goes first. Admission (enqueue) refuses a job whose minimum resources would
take its queue past its capability.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain, compress
from operator import is_, ne
from typing import TypeVar

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.ledger import Ledger
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace
from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.framework.limits import (
    CAPABILITY,
    DESERVED,
    amounts,
    cluster_total,
    describe,
    finite_dims,
)
from pumice.framework.session import EventHandler, Session
from pumice.framework.verdicts import timeless
from pumice.framework.victims import on_kind

Vector = np.ndarray
T = TypeVar("T")


@dataclass(slots=True)
class QueueAttr:
    name: str
    weight: int
    deserved: Vector
    allocated: Vector
    request: Vector
    inqueue: Vector
    elastic: Vector
    guarantee: Vector
    capability: Vector  # +inf where unlimited
    real_capability: Vector
    share: float = 0.0


def _share(attr: QueueAttr) -> float:
    """max of allocated / deserved over the dimensions deserved > 0 (0 if none), in
    plain floats: it runs on every allocation."""
    return _share_of(attr.allocated.tolist(), attr.deserved.tolist())


def _share_of(allocated: list[float], deserved: list[float]) -> float:
    """:func:`_share` of a queue's figures as lists."""
    best = None
    for a, d in zip(allocated, deserved, strict=True):
        if d > 0:
            v = a / d
            if best is None or v > best:
                best = v
    return 0.0 if best is None else best


def run_length(r: float, d: float, a: float, x: float, limit: int) -> int:
    """How many steps in a row, at most ``limit``, pass ``r <= max(d - a, 0)`` while
    ``a`` grows by ``x`` after each (one dimension of a queue taking equal tasks: ``r``
    what a task asks, ``d`` deserved, ``a`` allocated, ``x`` what the task adds).

    The answer is exactly that of stepping, float addition by float addition: the test
    only gets harder as ``a`` grows (``x >= 0``; rounding is monotonic), so the run is
    a prefix. When ``a`` and ``x`` are whole numbers below 2**53 (millicores, bytes,
    devices: the usual case), every partial sum is exact, ``a + i * x``, and the end of
    the prefix is found from an estimate checked on both sides; otherwise it steps."""
    if limit <= 0:
        return 0
    if x <= 0.0:
        return limit if r <= max(d - a, 0.0) else 0
    if a.is_integer() and x.is_integer() and abs(a) + limit * x < 2.0**53:
        # First guess from the real numbers, then move to the boundary the floats draw.
        guess = (d - a - r) / x + 1.0
        if not guess > 0.0:  # (NaN too)
            i = 0
        elif guess >= limit:  # (infinity too)
            i = limit
        else:
            i = int(guess)
        while i > 0 and not r <= max(d - (a + (i - 1) * x), 0.0):
            i -= 1
        while i < limit and r <= max(d - (a + i * x), 0.0):
            i += 1
        return i
    steps = 0
    while steps < limit and r <= max(d - a, 0.0):
        steps += 1
        a += x
    return steps


def _per_request(
    derive: Callable[[Vector], T], memo: dict[int, tuple[Vector, T]]
) -> Callable[[Vector], T]:
    """``derive`` memoized per (interned, read-only) request vector in ``memo``: a
    session asks the same few requests again and again, and so do the cycles after it.
    Keyed by identity; the entry keeps the vector alive, so an id is never reused while
    it is in the memo."""

    def get(req: Vector) -> T:
        got = memo.get(id(req))
        if got is not None and got[0] is req:
            return got[1]
        out = derive(req)
        memo[id(req)] = (req, out)
        return out

    return get


#: How many requests the per-request memos hold before they start afresh (at a cycle's
#: open; the requests of a run are interned, so they are few).
_MEMO_KEPT = 4096


class _Sums:
    """A queue's sums from the ledger, clipped to the shared dimensions (read-only),
    with the ledger's stamp and the mask they were clipped with: kept while both stand.
    """

    __slots__ = ("alloc_list", "allocated", "elastic", "inqueue", "live", "mask", "request",
                 "request_bytes", "request_list", "rows", "short", "stamp")  # fmt: skip

    def __init__(
        self, stamp: int, mask: np.ndarray, sums: np.ndarray, like: _Sums | None = None
    ) -> None:
        """The sums ``sums`` (the ledger's rows) clipped with ``mask``. ``like``, the
        queue's sums before (clipped with the same mask), lends what follows from the
        request alone when the request is the same (a task that starts moves its
        resources from pending to allocated)."""
        self.stamp, self.mask = stamp, mask
        clipped = np.where(mask, sums, 0.0)  # (allocated, pending, inqueue, elastic)
        clipped.setflags(write=False)
        self.allocated, self.inqueue, self.elastic = clipped[0], clipped[2], clipped[3]
        self.alloc_list: list[float] = clipped[0].tolist()
        request = clipped[0] + clipped[1]
        request_bytes = request.tobytes()
        if like is not None and like.request_bytes == request_bytes:
            request, request_list = like.request, like.request_list
            rows, live, short = like.rows, like.live, like.short
        else:
            request.setflags(write=False)
            request_list = request.tolist()
            rows, live, short = None, [], False
        self.request: Vector = request
        self.request_bytes: bytes = request_bytes
        self.request_list: list[float] = request_list
        #: The rows the two below were worked out for (see :meth:`place`).
        self.rows: _Rows | None = rows
        #: :func:`_live` of the queue there: the resources its water fill walks, and
        #: whether one it skips falls short of the request.
        self.live: list[int] = live
        self.short: bool = short

    def place(self, rows: _Rows, k: int) -> None:
        """Work out :attr:`live` and :attr:`short` for the queue as the ``k``-th of
        ``rows``."""
        self.rows = rows
        self.live, self.short = _live(rows.cap_list[k], self.request_list, rows.guarantee_list[k])


class _Rows:
    """The fixed figures of the queues that have jobs (name order), as matrices: their
    guarantees, real capabilities and weights, and the water fill's fixed inputs as
    bytes. Read-only: every cycle with the same queues shares them."""

    __slots__ = (
        "cap_list", "guarantee", "guarantee_list", "inputs", "names", "queues", "real_cap",
        "row_of", "total_list", "weight", "weight_list", "weights",
    )  # fmt: skip

    def __init__(self, fixed: _Fixed, names: list[str]) -> None:
        self.names = list(names)
        self.row_of = {n: k for k, n in enumerate(names)}
        self.queues = [fixed.by_name[n] for n in names]
        self.guarantee = fixed.guarantees[[fixed.row_of[n] for n in names]]
        real_cap = fixed.free + self.guarantee
        capped = [q.has_capability for q in self.queues]
        if any(capped):
            caps = np.array([q.capability for q in self.queues])
            real_cap = np.where(np.array(capped)[:, None], np.minimum(real_cap, caps), real_cap)
        self.real_cap = real_cap
        self.weights = [q.weight for q in self.queues]
        self.weight = np.array([float(w) for w in self.weights])
        for m in (self.guarantee, self.real_cap, self.weight):
            m.setflags(write=False)
        self.inputs = b"".join(
            m.tobytes() for m in (fixed.total, self.real_cap, self.guarantee, self.weight)
        )
        # (the water fill's inputs in plain floats)
        self.total_list: list[float] = fixed.total.tolist()
        self.cap_list: list[list[float]] = real_cap.tolist()
        self.guarantee_list: list[list[float]] = self.guarantee.tolist()
        self.weight_list: list[float] = self.weight.tolist()


class _Fixed:
    """What follows from the queues' specs and the cluster's total alone (see
    :meth:`ProportionPlugin._fixed_figures`): the clipped total and guarantees, what is
    left free beyond the guarantees, and the :class:`_Rows` of the last set of queues
    with jobs."""

    __slots__ = (
        "_names", "_rows", "by_name", "free", "guaranteed", "guarantees", "mask", "queues",
        "raw_total", "row_of", "share_dims", "total",
    )  # fmt: skip

    def __init__(self, mask: np.ndarray, queues: tuple[QueueInfo, ...], total: Vector) -> None:
        self.mask, self.queues, self.total = mask, queues, total
        #: The cluster's total as the snapshot gave it (before clipping), as bytes.
        self.raw_total = b""
        self.share_dims: list[int] = np.flatnonzero(mask).tolist()
        self.by_name = {q.name: q for q in queues}
        self.row_of = {q.name: k for k, q in enumerate(queues)}
        # Every queue's guarantee, clipped, one row per queue; summed row by row in the
        # queues' order (the same floats as adding them one at a time).
        guarantees = (
            np.where(mask, np.array([q.guarantee for q in queues]), 0.0)
            if queues
            else np.zeros((0, total.size))
        )
        total_guarantee = np.zeros(total.size)
        for row in guarantees:
            total_guarantee += row
        self.guarantees = guarantees
        self.free = np.maximum(total - total_guarantee, 0.0)
        self.guaranteed = bool(np.any(total_guarantee > 0))
        for m in (total, guarantees, self.free):
            m.setflags(write=False)
        self._names: list[str] | None = None
        self._rows: _Rows | None = None

    def rows(self, names: list[str]) -> _Rows:
        """The :class:`_Rows` of the queues ``names`` (kept for the last names asked)."""
        if self._rows is None or self._names != names:
            self._rows, self._names = _Rows(self, names), names
        return self._rows


#: How many water-fill results a plugin keeps by their inputs (oldest dropped first).
_FILLED_KEPT = 256
#: How many sums a plugin keeps per queue by their bytes (oldest dropped first).
_SUMS_SEEN = 16


class _Filled:
    """A water fill's deserved shares, one row per queue (read-only), and each row's
    bytes (what a queue's attr is compared with): the same objects for the same inputs.
    """

    __slots__ = ("deserved", "row_bytes")

    def __init__(self, deserved: np.ndarray) -> None:
        self.deserved = deserved
        width = deserved.itemsize * deserved.shape[1]
        whole = deserved.tobytes()
        self.row_bytes = [whole[k * width : (k + 1) * width] for k in range(deserved.shape[0])]


class _Last:
    """What the last cycle's figures were worked out from and came to: the fixed rows,
    the queues' stamps and sums (name order), their requests' bytes (the water fill's
    key) and the fill. Every queue's attr was built or re-deserved from these."""

    __slots__ = ("filled", "requests", "rows", "stamps", "sums")

    def __init__(
        self, rows: _Rows, stamps: list[int], sums: list[_Sums], requests: list[bytes],
        filled: _Filled,
    ) -> None:  # fmt: skip
        self.rows, self.stamps, self.sums, self.requests = rows, stamps, sums, requests
        self.filled = filled


def _live(c: list[float], r: list[float], g: list[float]) -> tuple[list[int], bool]:
    """The resources a queue's water fill must walk (capability ``c``, request ``r``,
    guarantee ``g``), and whether one it need not falls short of the request.

    A resource whose guarantee is zero and whose capability or request is zero (a
    resource the queue does not ask for: most queues ask for no GPU, say) keeps a
    deserved share of exactly 0.0 in every round: whatever the round adds is capped
    back to the zero, or, if it takes away, raised back to the guarantee. That holds
    when the three figures are finite where it matters and no zero is a negative zero
    (then the float is the same, not only equal): the request and guarantee finite,
    the capability not negative; with the total finite too (:func:`_fill_rows`
    checks), everything the rounds add stays finite."""
    size = len(r)
    if not all(map(math.isfinite, r)) or not all(map(math.isfinite, g)):
        return list(range(size)), False
    live, short = [], False
    for k in range(size):
        ck, rk, gk = c[k], r[k], g[k]
        if (
            gk == 0.0
            and (ck == 0.0 or rk == 0.0)
            and ck >= 0.0
            and rk >= 0.0
            and math.copysign(1.0, ck) > 0.0
            and math.copysign(1.0, rk) > 0.0
            and math.copysign(1.0, gk) > 0.0
        ):
            if not rk <= 0.0:
                short = True
        else:
            live.append(k)
    return live, short


def _fill_rows(
    total: list[float],
    weights: list[int],
    req: list[list[float]],
    cp: list[list[float]],
    gu: list[list[float]],
    w: list[float],
    live: list[list[int]],
    short: list[bool],
) -> list[list[float]]:
    """The water fill's rounds from zero deserved shares, in plain floats: a dozen
    queues by four resources is too small for numpy's calls to pay. Every step is the
    vector form's, element by element (sums over queues add rows in name order), so
    the floats are the same.

    Each queue walks only the resources ``live`` lists for it (see :func:`_live`: the
    others keep 0.0 and move no sums), and is never met by reaching its request when
    ``short`` says one it skips falls short of it. With a total that is not finite,
    every resource is walked."""
    n, size = len(weights), len(total)
    dims = range(size)
    if not all(map(math.isfinite, total)):
        every = list(dims)
        live, short = [every] * n, [False] * n
    des = [[0.0] * size for _ in range(n)]
    # Per queue, each resource it walks with its capability, request and guarantee
    # there (taken once: the rounds read them again and again).
    walks = [
        [(k, c[k], r[k], g[k]) for k in ks] for ks, c, r, g in zip(live, cp, req, gu, strict=True)
    ]
    # The queues still open, and their weights' sum (whole numbers: the same sum as
    # adding the open queues' weights afresh every round).
    open_rows = list(range(n))
    total_weight = sum(weights)
    remaining = list(total)
    while total_weight != 0:
        increased, decreased = [0.0] * size, [0.0] * size
        still = []
        left_weight = total_weight
        for i in open_rows:
            part = w[i] / total_weight
            row = des[i]
            reached = not short[i]
            moved = False  # (any share not equal to what it was: else the queue is met)
            for k, ck, rk, gk in walks[i]:
                # max(min(min(old + remaining * part, c), r), g), with the builtins'
                # choices spelled out (their calls are most of the fill's time).
                was = row[k]
                x = was + remaining[k] * part
                if ck < x:
                    x = ck
                if rk < x:
                    x = rk
                if gk > x:
                    x = gk
                row[k] = x
                if not rk <= x:
                    reached = False
                if x == was:  # (a zero diff, either sign: adds nothing to the sums)
                    continue
                moved = True
                # increased += max(diff, 0.0), decreased += max(-diff, 0.0) (a - d is
                # a + -d); a NaN goes into both, as there.
                diff = x - was
                if diff > 0.0:
                    increased[k] += diff
                elif diff < 0.0:
                    decreased[k] -= diff
                else:
                    increased[k] += diff
                    decreased[k] -= diff
            if reached or not moved:
                left_weight -= weights[i]
            else:
                still.append(i)
        open_rows, total_weight = still, left_weight
        old_remaining = remaining
        remaining = [remaining[k] - increased[k] + decreased[k] for k in dims]
        if all(v < 0.1 for v in remaining) or remaining == old_remaining:
            break
    return des


class ProportionPlugin:
    name = "proportion"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.attrs: dict[str, QueueAttr] = {}
        #: queue -> (the figures quoted, the sentence): see :meth:`explain_enqueue`.
        self._refusals: dict[str, tuple[bytes, str]] = {}
        #: queue -> (the figures named, the words): see :meth:`refusal_limit`.
        self._limits: dict[str, tuple[bytes, QueueInfo, np.ndarray, ResourceSpace, str]] = {}
        #: The session's queues and shared dimensions, for explanations.
        self._queues: dict[str, QueueInfo] = {}
        self._mask = np.zeros(0, dtype=bool)
        self._guarantees = False  # does any queue have a guarantee (the derived limit)
        #: Water-fill results by their inputs (see :meth:`_water_fill`).
        self._filled: dict[tuple[bytes, tuple[bytes, ...]], _Filled] = {}
        #: The figures that follow from the queues' specs (see :meth:`_fixed_figures`).
        self._fixed: _Fixed | None = None
        #: queue -> its sums as the cycle opened (kept with the ledger's stamp).
        self._sums: dict[str, _Sums] = {}
        #: queue -> its last few sums by their bytes (see :meth:`_sums_of`).
        self._seen: dict[str, dict[bytes, _Sums]] = {}
        #: queue -> what its attr was built from: its sums, the fixed rows and its
        #: deserved share's bytes (an attr stands while they do and nothing wrote it).
        self._built: dict[str, tuple[_Sums, _Rows, bytes]] = {}
        #: The queues whose attr an event of this cycle wrote (allocation, admission).
        self._dirty: set[str] = set()
        #: The last cycle's fixed rows, its queues' stamps, their sums and the water
        #: fill: the figures stand while the rows and the stamps do.
        self._last: _Last | None = None
        #: The cycle's memos (see :meth:`on_cycle_open` and :meth:`on_session_open`).
        self._share_dims: list[int] = []
        self._runs: dict[str, dict[int, tuple[Vector, int, int]]] = {}
        #: queue -> its figures when its ``_runs`` were counted (see on_cycle_open).
        self._run_stamps: dict[str, list[float]] = {}
        self._gives_nothing: dict[str, set[int]] = {}
        self._over: dict[str, bool] = {}
        self._admission: dict[str, tuple[list[float], ...]] = {}
        #: The per-request memos, kept from cycle to cycle while the shared dimensions
        #: are the same object (their answers follow from the request and those alone).
        self._memos: tuple[dict, dict, dict] = ({}, {}, {})
        self._clip_req: Callable[[Vector], Vector] = self._clip
        self._share_asks: Callable[[Vector], list[tuple[int, float]]] = self._asks
        self._clipped_list: Callable[[Vector], list[float]] = lambda req: self._clip(req).tolist()

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's deserved shares (water-filled from what the queues hold and ask)
        and its memos; the functions registered at open read them.

        The cost follows what changed: a queue's figures are taken again only when the
        ledger's stamp of its sums moved, the water fill runs only for inputs it has
        not seen lately, and a queue's attr is built again only when its figures moved
        or an event of the last cycle wrote it (a deserved share that moved alone is
        written into it)."""
        mask = ssn.space.share
        memos = self._memos
        if mask is not self._mask or max(map(len, memos)) > _MEMO_KEPT:
            self._mask = mask
            for m in memos:
                m.clear()
            # (allocatable_run's answers follow from the requests' shared dimensions)
            self._runs.clear()
            self._run_stamps.clear()
            self._over.clear()
            self._admission.clear()
            clip = self._clip
            self._clip_req = _per_request(clip, memos[0])  # the same values as clip(t.resreq)
            self._share_asks = _per_request(self._asks, memos[1])
            self._clipped_list = _per_request(lambda req: self._clip_req(req).tolist(), memos[2])
        self._gives_nothing.clear()
        self._refusals = {}
        self._queues = ssn.queues
        fixed = self._fixed_figures(ssn)
        if self._share_dims != fixed.share_dims:
            self._share_dims[:] = fixed.share_dims
        self._guarantees = fixed.guaranteed

        # A queue takes part when it has jobs; its sums come from the snapshot's ledger
        # (kept job by job, so running jobs cost nothing here). Clipping is a mask, so
        # the clipped sums are the sums of the clipped parts.
        ledger = ssn.snapshot.job_ledger()
        names = ledger.queues_with_jobs(ssn.queues)
        dirty = self._dirty
        if not names:
            if self.attrs:
                self._forget(names)
            self._last = None
            dirty.clear()
            return
        rows = fixed.rows(names)
        stamps = ledger.stamps(names)
        last = self._last
        if last is not None and last.rows is rows:
            # The same queues on the same fixed figures: only the queues whose sums
            # moved or whose attr an event wrote are looked at one by one.
            self._follow(fixed, last, stamps, ledger)
            return
        if list(self.attrs) != names:
            self._forget(names)
        kept_sums = self._sums
        sums: list[_Sums] = []
        for name, stamp in zip(names, stamps, strict=True):
            got = kept_sums.get(name)
            if got is None or got.stamp != stamp or got.mask is not mask:
                got = kept_sums[name] = self._sums_of(name, stamp, ledger)
            if got.rows is not rows:
                got.place(rows, len(sums))
            sums.append(got)
        requests = [s.request_bytes for s in sums]
        filled = self._water_fill(fixed, rows, sums, requests)
        self._last = _Last(rows, stamps, sums, requests, filled)
        deserved, row_bytes = filled.deserved, filled.row_bytes
        built = self._built
        for k, name in enumerate(names):
            got = sums[k]
            was = built.get(name)
            row = row_bytes[k]
            if was is None or name in dirty or was[0] is not got or was[1] is not rows:
                self._build(k, rows, got, deserved, row)
            elif was[2] != row:
                self._redeserve(name, k, got, deserved, row)
        dirty.clear()
        attrs = self.attrs
        if list(attrs) != names:  # (queues came: the attrs in name order, as the rows)
            by_name = dict(attrs)
            attrs.clear()  # (in place: the registered functions hold the dict)
            attrs.update((name, by_name[name]) for name in names)

    def _follow(self, fixed: _Fixed, last: _Last, stamps: list[int], ledger: Ledger) -> None:
        """:meth:`on_cycle_open` when the queues with jobs and the fixed rows are the
        last cycle's (``last``): every attr was built from ``last``, so a queue's attr is
        built again only when its sums moved (its stamp) or an event wrote it, and
        re-deserved when only its row of the water fill moved."""
        rows = last.rows
        names = rows.names
        dirty = self._dirty
        if last.stamps == stamps:
            # Nothing the figures follow moved: only the attrs the last cycle's events
            # wrote are built again.
            if dirty:
                sums, filled = last.sums, last.filled
                for name in dirty:
                    k = rows.row_of[name]
                    self._build(k, rows, sums[k], filled.deserved, filled.row_bytes[k])
                dirty.clear()
            return
        moved = list(compress(range(len(stamps)), map(ne, stamps, last.stamps)))
        sums, requests = last.sums.copy(), last.requests.copy()
        kept_sums = self._sums
        asked = False  # (some queue's request moved: else the water fill stands)
        for k in moved:
            got = kept_sums[names[k]] = self._sums_of(names[k], stamps[k], ledger, sums[k])
            if got.rows is not rows:
                got.place(rows, k)
            sums[k] = got
            if got.request_bytes != requests[k]:
                requests[k] = got.request_bytes
                asked = True
        filled = self._water_fill(fixed, rows, sums, requests) if asked else last.filled
        self._last = _Last(rows, stamps, sums, requests, filled)
        deserved, row_bytes = filled.deserved, filled.row_bytes
        build = dirty.union([names[k] for k in moved]) if dirty else {names[k] for k in moved}
        if filled is not last.filled:
            for k in compress(range(len(names)), map(ne, row_bytes, last.filled.row_bytes)):
                name = names[k]
                if name not in build:
                    self._redeserve(name, k, sums[k], deserved, row_bytes[k])
        for name in build:
            k = rows.row_of[name]
            self._build(k, rows, sums[k], deserved, row_bytes[k])
        dirty.clear()

    def _sums_of(self, name: str, stamp: int, ledger: Ledger, like: _Sums | None = None) -> _Sums:
        """Queue ``name``'s :class:`_Sums` for the ledger's ``stamp``: one of its last
        few when the sums are the same floats again (a job that starts and ends, a
        pod that comes and goes), with what was worked out for it; else new (with
        what ``like``, its sums before, lends: see :class:`_Sums`)."""
        sums = ledger.sums_of(name)
        key = sums.tobytes()
        seen = self._seen.get(name)
        if seen is None:
            seen = self._seen[name] = {}
        got = seen.get(key)
        mask = self._mask
        if got is None or got.mask is not mask:
            got = seen[key] = _Sums(
                stamp, mask, sums, like if like is not None and like.mask is mask else None
            )
            if len(seen) > _SUMS_SEEN:
                del seen[next(iter(seen))]
        else:
            got.stamp = stamp
        return got

    def _forget(self, names: list[str]) -> None:
        """What is kept for each queue, of the queues ``names`` alone (queues went)."""
        keep = set(names)
        kept_per_queue = (
            self.attrs, self._sums, self._built, self._runs, self._run_stamps, self._over,
            self._admission, self._seen, self._limits,
        )  # fmt: skip
        for kept in kept_per_queue:
            for name in [n for n in kept if n not in keep]:
                del kept[name]

    def _build(self, k: int, rows: _Rows, got: _Sums, deserved: np.ndarray, row: bytes) -> None:
        """The attr of the ``k``-th queue of ``rows`` from its sums and deserved share
        (whose bytes are ``row``), with its allocation and admitted demand afresh."""
        q = rows.queues[k]
        name = q.name
        alloc_row, des_row = got.alloc_list, deserved[k].tolist()
        # (the share in plain floats: the same comparisons and divisions as _share;
        # the vectors are shared, read-only: the events replace them as they move)
        self.attrs[name] = QueueAttr(
            name, q.weight, deserved[k], got.allocated, got.request, got.inqueue,
            got.elastic, rows.guarantee[k], q.capability, rows.real_cap[k],
            _share_of(alloc_row, des_row),
        )  # fmt: skip
        self._built[name] = (got, rows, row)
        self._admission.pop(name, None)
        self._runs_stand(name, des_row, alloc_row)

    def _redeserve(self, name: str, k: int, got: _Sums, deserved: np.ndarray, row: bytes) -> None:
        """:meth:`_build` of queue ``name`` (the ``k``-th) when only its deserved share
        moved (its sums and the fixed rows are those it was built from, and no event
        wrote it since): its attr takes the new share (bytes ``row``) in place."""
        built = self._built
        attr = self.attrs[name]
        des_row = deserved[k].tolist()
        attr.deserved = deserved[k]
        attr.share = _share_of(got.alloc_list, des_row)
        was = built[name]
        built[name] = (got, was[1], row)
        self._runs_stand(name, des_row, got.alloc_list)

    def _runs_stand(self, name: str, des_row: list[float], alloc_row: list[float]) -> None:
        """Forget the queue's ``allocatable_run`` answers unless its deserved share and
        its allocation are what they were counted with."""
        # allocatable_run's answers stand while the queue's deserved share and its
        # allocation are what they were when they were counted: kept from the last
        # cycle for a queue that had no allocation event since and whose figures came
        # back the same (a backlog that waits asks the same questions every cycle). A
        # queue whose attr stands kept both.
        # overused's answer follows from the same two.
        figures = des_row + alloc_row
        if self._run_stamps.get(name) != figures:
            self._runs.pop(name, None)
            self._over.pop(name, None)
            self._run_stamps[name] = figures

    def _fixed_figures(self, ssn: Session) -> _Fixed:
        """The figures that follow from the queues' specs and the cluster's total alone,
        kept while the snapshot has the same queue objects, total and shared dimensions
        (they change with a queue or node event, not with pods)."""
        raw = ssn.total.tobytes()
        got = self._fixed
        if (
            got is not None
            and got.mask is self._mask
            and got.raw_total == raw
            and len(got.queues) == len(ssn.queues)
            and all(map(is_, got.queues, ssn.queues.values()))
        ):
            return got
        got = self._fixed = _Fixed(self._mask, tuple(ssn.queues.values()), self._clip(ssn.total))
        got.raw_total = raw
        return got

    def _clip(self, v: Vector) -> Vector:
        """``v`` in the cycle's shared dimensions (0 elsewhere)."""
        return np.where(self._mask, v, 0.0)

    def _asks(self, req: Vector) -> list[tuple[int, float]]:
        """The shared dimensions ``req`` asks for, as (dim, amount) floats."""
        r = req.tolist()
        return [(k, r[k]) for k in self._share_dims if r[k] != 0]

    def on_session_open(self, ssn: Session) -> None:
        """Register the functions, once for as long as the session lives: they read the
        cycle's shares and memos from the plugin (see :meth:`on_cycle_open`)."""
        attrs = self.attrs
        clip = self._clip
        # allocatable_run's answers, kept until the queue's next allocation event: a
        # backlog of gangs asks the same question for each job of a shape between two
        # placements. Per queue, keyed by the request's identity; the entry keeps the
        # vector alive, with the run and the limit it was counted to (a run cut short
        # by the limit answers smaller limits; one the share ended answers every limit).
        # Only the queue's own allocation moves its answer: deserved is fixed for the
        # cycle.
        runs = self._runs
        run_stamps = self._run_stamps
        # queue -> ids of the requests it has nothing to give to, as its allocation
        # stands: cleared with the queue's next allocation event.
        gives_nothing = self._gives_nothing
        # queue -> its allocated, inqueue, elastic and real capability as lists, for the
        # admission vote of each waiting job: forgotten when the queue's allocation or
        # admitted demand moves, or its attr is built again at an open.
        admission = self._admission
        # The queues whose attr this cycle's events wrote: built again at the next open.
        dirty = self._dirty
        # queue -> overused's answer, forgotten with the queue's next allocation event
        # and when an open finds its deserved share or allocation moved (it follows
        # from those two alone: a queue whose figures stand keeps it across cycles).
        over = self._over

        def queue_order(a: QueueInfo, b: QueueInfo) -> int:
            if a.priority != b.priority:
                return -1 if a.priority > b.priority else 1
            sa = self.attrs[a.name].share if a.name in self.attrs else 0.0
            sb = self.attrs[b.name].share if b.name in self.attrs else 0.0
            return (sa > sb) - (sa < sb)

        def queue_rank(q: QueueInfo) -> tuple[int, float]:
            attr = self.attrs.get(q.name)
            return (-q.priority, attr.share if attr is not None else 0.0)

        # overused and allocatable are asked once per job turn and per task: plain
        # floats over the few dimensions, the same comparisons as the vector forms.

        def overused(q: QueueInfo) -> bool:
            got = over.get(q.name)
            if got is not None:
                return got
            attr = self.attrs.get(q.name)
            if attr is None:
                return False
            alloc = attr.allocated.tolist()
            got = True
            for k, d in enumerate(attr.deserved.tolist()):
                if not d <= alloc[k]:
                    got = False
                    break
            over[q.name] = got
            return got

        def allocatable(q: QueueInfo, task: TaskInfo) -> bool:
            if not q.is_open():
                return False
            memo = runs.get(q.name)
            if memo is not None:  # (a run counted from one step or more answers this)
                got = memo.get(id(task.resreq))
                if got is not None and got[0] is task.resreq and got[2] >= 1:
                    return got[1] > 0
            attr = self.attrs.get(q.name)
            if attr is None:
                return True
            # free = max(deserved - allocated, 0); the request clipped to the shared
            # dimensions must fit it wherever it asks for something.
            asks = self._share_asks(task.resreq)
            if not asks:
                return True
            des, alloc = attr.deserved.tolist(), attr.allocated.tolist()
            for k, r in asks:  # noqa: SIM110 - hot path
                if not r <= max(des[k] - alloc[k], 0.0):
                    return False
            return True

        def allocatable_run(q: QueueInfo, task: TaskInfo, limit: int) -> int:
            """How many tasks like ``task``, one after another, ``allocatable`` would
            let the queue take (at most ``limit``): the same float steps as the
            checks and the allocation events in between."""
            if not q.is_open():
                return 0
            req = task.resreq
            memo = runs.get(q.name)
            if memo is not None:  # (an answer is kept only for a queue with an attr)
                got = memo.get(id(req))
                if got is not None and got[0] is req and (got[1] < got[2] or limit <= got[2]):
                    return min(got[1], limit)
            attr = self.attrs.get(q.name)
            asks = self._share_asks(req)
            if attr is None or not asks:
                return limit
            if memo is None:
                memo = runs[q.name] = {}
            des, alloc = attr.deserved.tolist(), attr.allocated.tolist()
            add = self._clipped_list(req)
            n = limit
            for k, r in asks:
                n = run_length(r, des[k], alloc[k], add[k], n)
            memo[id(req)] = (req, n, limit)
            return n

        def admits(job: JobInfo) -> int:
            """The vote, without counting the job into its queue (the ``pure`` facet)."""
            attr = self.attrs.get(job.queue)
            if attr is None or job.min_resources is None:
                return 1
            # need = minreq + allocated + inqueue - elastic; only the dimensions the job's
            # demand names are checked against capability (plain floats, once per job).
            # Outside the shared dimensions every term is clipped to 0: nothing to check.
            m = job.min_resources.tolist()
            figures = admission.get(job.queue)
            if figures is None:
                figures = admission[job.queue] = (
                    attr.allocated.tolist(), attr.inqueue.tolist(), attr.elastic.tolist(),
                    attr.real_capability.tolist(),
                )  # fmt: skip
            a, q, e, cap = figures
            for k in self._share_dims:
                need = m[k] + a[k] + q[k] - e[k]
                if (need > 0 or m[k] > 0) and not need <= cap[k]:
                    return -1
            return 1

        def enqueueable(job: JobInfo) -> int:
            if admits(job) < 0:
                return -1
            attr = self.attrs.get(job.queue)
            if attr is not None and job.min_resources is not None:
                attr.inqueue = attr.inqueue + clip(job.min_resources)
                dirty.add(job.queue)
                admission.pop(job.queue, None)
            return 1

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            """Take from a queue only while it holds more than its deserved share, and
            never below its guarantee.

            Reclaim asks this node by node, for every candidate node of every starving
            task: in plain floats (the same comparisons and subtractions as the vector
            form). A queue's allocation left only shrinks as its tasks are taken, so a
            queue found within its deserved share gives nothing more in this call: its
            other tasks are skipped at once. (A queue holding less than the request may
            still give: reclaim counts the node's idle resources too, as Volcano has
            since 1.12.) That a queue gives nothing to a request as it stands is also
            kept from call to call, until the queue's next allocation event."""
            clipped_list = self._clipped_list
            want = clipped_list(reclaimer.resreq)
            dims = range(len(want))
            out = []
            # queue -> (allocation left, deserved, guarantee), or None once it gives
            # nothing more
            state: dict[str, tuple[list[float], list[float], list[float]] | None] = {}
            for t in candidates:
                job = ssn.jobs.get(t.job or "")
                if job is None:
                    continue
                name = job.queue
                fresh = name not in state  # (nothing taken from the queue yet)
                if not fresh:
                    got = state[name]
                    if got is None:
                        continue
                else:
                    barren = gives_nothing.get(name)
                    if barren is None:
                        barren = gives_nothing[name] = set()
                    if id(reclaimer.resreq) in barren:
                        state[name] = None
                        continue
                    attr = attrs.get(name)
                    if attr is None or not ssn.queues[name].reclaimable:
                        state[name] = None
                        continue
                    got = state[name] = (
                        attr.allocated.tolist(),
                        attr.deserved.tolist(),
                        attr.guarantee.tolist(),
                    )
                left, des, guarantee = got
                if all(left[k] <= des[k] for k in dims):
                    if fresh:
                        # As its allocation stands: so it stays, for this request,
                        # until its next allocation event (the request is interned and
                        # kept alive by clipped_list's memo, so its id stands for it).
                        gives_nothing[name].add(id(reclaimer.resreq))
                    state[name] = None
                    continue
                # Never below the guarantee (Volcano's proportion does not check).
                r = clipped_list(t.resreq)
                after = [left[k] - r[k] for k in dims]
                if not all(guarantee[k] <= after[k] for k in dims):
                    continue
                left[:] = after
                out.append(t)
            return out

        def preemptive_run(q: QueueInfo, task: TaskInfo, limit: int) -> int:
            """How many tasks like ``task``, one after another, ``preemptive`` would let
            the queue reclaim for (at most ``limit``), each one pipelined adding to the
            queue's allocation as the allocation event does: the same float steps."""
            if not q.is_open():
                return 0
            attr = self.attrs.get(q.name)
            if attr is None:
                return limit
            req = self._clipped_list(task.resreq)
            a, d = attr.allocated.tolist(), attr.deserved.tolist()
            dims = [k for k, r in enumerate(req) if r > 0]
            n = 0
            while n < limit:
                for k in dims:
                    if not a[k] + req[k] <= d[k]:
                        return n
                for k in dims:
                    a[k] += req[k]
                n += 1
            return n

        def preemptive(q: QueueInfo, task: TaskInfo) -> bool:
            """May the queue reclaim for ``task``: it is open and, with the task, stays
            within its deserved share in every dimension the task asks for (the first
            step of :func:`preemptive_run`)."""
            return preemptive_run(q, task, 1) > 0

        def on_allocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job or "")
            if job is not None:
                attr = attrs.get(job.queue)
                if attr is not None:
                    attr.allocated = attr.allocated + self._clip_req(task.resreq)
                    attr.share = _share(attr)
                    dirty.add(job.queue)
                    runs.pop(job.queue, None)
                    over.pop(job.queue, None)
                    admission.pop(job.queue, None)
                    run_stamps.pop(job.queue, None)
                    gives_nothing.pop(job.queue, None)

        def on_deallocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job or "")
            if job is not None:
                attr = attrs.get(job.queue)
                if attr is not None:
                    attr.allocated = attr.allocated - self._clip_req(task.resreq)
                    attr.share = _share(attr)
                    dirty.add(job.queue)
                    runs.pop(job.queue, None)
                    over.pop(job.queue, None)
                    admission.pop(job.queue, None)
                    run_stamps.pop(job.queue, None)
                    gives_nothing.pop(job.queue, None)

        ssn.on("queue_order", self.name, queue_order, key=queue_rank)
        ssn.on("overused", self.name, overused)
        ssn.on("allocatable", self.name, allocatable, run=allocatable_run)
        ssn.on("job_enqueueable", self.name, enqueueable, pure=admits)
        ssn.on("reclaimable", self.name, reclaimable, alike=True)
        ssn.on("gang_evictable", self.name, on_kind("gangreclaim", reclaimable))
        ssn.on("preemptive", self.name, preemptive, run=preemptive_run)
        ssn.add_event_handler(EventHandler(on_allocate, on_deallocate))

    def _water_fill(
        self, fixed: _Fixed, rows: _Rows, sums: list[_Sums], requests: list[bytes]
    ) -> _Filled:
        """The deserved shares, one row per queue (name order): Volcano's loop, with the
        queues as rows of matrices. Within one round every queue that still wants more
        takes its weight's part of what remained at the start of the round, so the rows
        can be updated together. The arithmetic is the per-queue arithmetic (sums over
        queues add rows in name order, as the loop did), so the deserved shares are the
        same floats.

        A pure function of its inputs, which most cycles repeat (a task moving from
        pending to allocated leaves a queue's request as it was): the last few hundred
        answers are kept by their inputs (read-only, and the same object for the same
        inputs). ``requests`` are the bytes of the queues' requests (``_Sums``)."""
        key = (rows.inputs, tuple(requests))
        got = self._filled.get(key)
        if got is None:
            des = _fill_rows(
                rows.total_list, rows.weights, [s.request_list for s in sums], rows.cap_list,
                rows.guarantee_list, rows.weight_list, [s.live for s in sums],
                [s.short for s in sums],
            )  # fmt: skip
            size = fixed.total.size
            flat = np.fromiter(chain.from_iterable(des), np.float64, len(des) * size)
            deserved = flat.reshape(len(des), size)
            deserved.setflags(write=False)
            got = self._filled[key] = _Filled(deserved)
            if len(self._filled) > _FILLED_KEPT:
                del self._filled[next(iter(self._filled))]
        return got

    @staticmethod
    def _fill(
        total: np.ndarray,
        weights: list[int],
        deserved: np.ndarray,
        request: np.ndarray,
        cap: np.ndarray,
        guarantee: np.ndarray,
        weight: np.ndarray,
    ) -> np.ndarray:
        """:func:`_fill_rows` of matrices, from zero deserved shares (``deserved``, for
        its shape)."""
        req, cp, gu = request.tolist(), cap.tolist(), guarantee.tolist()
        lives = [_live(c, r, g) for c, r, g in zip(cp, req, gu, strict=True)]
        des = _fill_rows(
            total.tolist(), weights, req, cp, gu, weight.tolist(),
            [live for live, _ in lives], [short for _, short in lives],
        )  # fmt: skip
        return np.array(des, dtype=np.float64).reshape(deserved.shape)

    # -- explanations -------------------------------------------------------------------

    def _deserved_sources(self, q: QueueInfo, attr: QueueAttr) -> list[str]:
        """Per resource, what bounds the queue's deserved share: its capability where
        water-filling stopped there, else the share itself."""
        capped = q.has_capability & np.isfinite(q.capability) & (attr.deserved >= q.capability)
        return [CAPABILITY if c else DESERVED for c in capped.tolist()]

    def _real_sources(self, q: QueueInfo, attr: QueueAttr) -> list[str]:
        """Per resource, what the queue's real capability is: its ``spec.capability``
        where set and binding, else what is derived from the cluster."""
        derived = cluster_total(self._guarantees)
        own = q.has_capability & np.isfinite(q.capability) & (attr.real_capability >= q.capability)
        return [CAPABILITY if c else derived for c in own.tolist()]

    def capability_exceeded(self, queue: str, request: Vector) -> tuple[str, int] | None:
        """The queue and the first resource in which ``request`` alone asks for more than
        the queue's ``spec.capability``: no deserved share (capped by it) and no
        admission can ever hold it. None when within (or no capability)."""
        q = self._queues.get(queue)
        if q is None or not q.has_capability:
            return None
        over = np.flatnonzero(self._mask & (request > q.capability))
        return (queue, int(over[0])) if over.size else None

    def refusal_limit(self, queue: str, space: ResourceSpace) -> str | None:
        """What ``allocatable`` held the queue's tasks to, named by source: ``its
        deserved share (cpu 4)``, ``its capability (cpu 8)``."""
        attr, q = self.attrs.get(queue), self._queues.get(queue)
        if attr is None or q is None:
            return None
        # The same words for the same figures: a waiting backlog asks for each queue in
        # every cycle, and its deserved share moves far less often.
        # (The queue, mask and space compared by identity: replaced, never changed.)
        deserved = attr.deserved.tobytes()
        got = self._limits.get(queue)
        if (
            got is not None
            and got[1] is q
            and got[2] is self._mask
            and got[3] is space
            and got[0] == deserved
        ):
            return got[4]
        dims = finite_dims(attr.deserved, self._mask)
        if not dims:
            text = "its deserved share (nothing)"
        else:
            text = describe(space, attr.deserved, self._deserved_sources(q, attr), dims)
        self._limits[queue] = (deserved, q, self._mask, space, text)
        return text

    def explain_overused(self, q: QueueInfo, space: ResourceSpace) -> str:
        attr = self.attrs.get(q.name)
        if attr is None:
            return f"queue {q.name} is overused"
        dims = finite_dims(attr.deserved, self._mask)
        sources = self._deserved_sources(q, attr)
        if not dims:
            return f"queue {q.name} has a deserved share of nothing (it requests nothing)"
        if all(sources[d] == DESERVED for d in dims):
            return (
                f"queue {q.name} has used its deserved share (deserved "
                f"{space.render(attr.deserved)}; allocated {space.render(attr.allocated)})"
            )
        return (
            f"queue {q.name} has used {describe(space, attr.deserved, sources, dims)}; "
            f"allocated {space.render(attr.allocated)}"
        )

    def explain_enqueue(self, ssn: Session, job: JobInfo) -> str:
        """Why the queue's real capability refuses ``job``, naming each resource's limit
        by its source (``spec.capability``, or the cluster's total where none is set)
        and quoting the resources that do not fit. The same sentence for every job the
        queue refuses with the same minimum until one is admitted, so it is kept by the
        figures it quotes (a backlog asks for each refused job in every cycle)."""
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return f"queue {job.queue} refused the job"
        minreq = np.where(self._mask, job.min_resources, 0.0)
        figures = b"".join(
            v.tobytes() for v in (attr.real_capability, attr.allocated, attr.inqueue, minreq)
        )
        got = self._refusals.get(job.queue)
        if got is not None and got[0] == figures:
            return got[1]
        need = minreq + attr.allocated + attr.inqueue - attr.elastic
        over = ((need > 0) | (minreq > 0)) & ~(need <= attr.real_capability)
        dims = np.flatnonzero(over).tolist() or finite_dims(attr.real_capability, self._mask)
        q = ssn.queues[job.queue]
        space = ssn.space
        limit = describe(space, attr.real_capability, self._real_sources(q, attr), dims)
        text = (
            f"admitting it would take queue {job.queue} past {limit}: minResources "
            f"{amounts(space, minreq, dims)}, already allocated "
            f"{amounts(space, attr.allocated, dims)}, admitted {amounts(space, attr.inqueue, dims)}"
        )
        self._refusals[job.queue] = (figures, text)
        return text
