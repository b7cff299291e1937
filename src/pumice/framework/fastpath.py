"""Allocate's fast path: per task *shape*, the fit masks and node scores, kept current
row by row.

A task's candidate nodes and their scores depend on the task only through its shape:
placement (selector, affinity, tolerations), requests and scoring requests. The replicas
of a gang, or thousands of identical single pods, share one shape. For each shape seen
in a session this module keeps, over all nodes:

- ``ok_future``: the predicates allow the node and the task fits its future idle
  resources (``NodeTable.future_idle``: idle + releasing - pipelined, a releasing pod's
  pod slot not counted as free); ``ok_now``: and it fits the idle ones;
- the node scores: the sum, in hook order, of every ``node_order`` function's score.

Nodes change only through :meth:`NodeTable.add_task` / :meth:`NodeTable.remove_task`,
which log the row (``NodeTable.changes``); each use of a shape first refreshes the rows
logged since its last use: a few rows in plain floats, many rows as one vector
operation. Placing a task then costs a masked argmax instead of a full fit and scoring
pass over every node, and the cost of a cycle grows with nodes x shapes, not
nodes x pods.

A shape outlives its session: the snapshot's owner keeps it (``Snapshot.slot_memory``),
and the next session adopts it, refreshing the rows that may differ: those the
scheduler cache logged since (``NodeTable.origin``), those the last session had changed,
and this session's own (see :meth:`FastPath._adopt`).

The choice is exactly the one :func:`pumice.actions.place.place` makes the long way
(same candidates, same float arithmetic per node, the first best node in name order),
which a property test checks against a per-node reference. It applies only when
every predicate function declares ``by_placement`` (its answer depends on the task's
placement alone; the task has no host ports) and every node_order function offers the
separable form ``context(task, cand)``, ``rows(task, rows, ctx)``, ``one(task, i, ctx)``
(see :class:`pumice.plugins.nodeorder.NodeOrderScore`), and to tasks without topology
spread constraints (a node's spread score depends on its domain's pods and on every
candidate; the hard constraints' filter on the pods placed so far, this cycle's too, so
such a task gets no slot view either). Otherwise, and when no node fits (to explain
why), the caller takes the long way.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from pumice.api.job import FitError
from pumice.api.quantity import PODS
from pumice.api.spread import hard, hard_key
from pumice.api.task import TaskInfo
from pumice.framework.fit import fits, predicate_filter
from pumice.framework.session import Session
from pumice.framework.slots import SlotMemory, SlotView

#: Up to this many changed rows are refreshed one by one in plain floats: a row costs
#: about a sixteenth of the vector pass over a few rows (fit masks and every scorer's
#: arrays), measured on the demo's nodes.
SCALAR_ROWS = 16
#: A shape kept from an earlier session is adopted while the cache logged at most this
#: many changes per node since.
ADOPT_LOG = 16


def shape_key(task: TaskInfo) -> Hashable:
    """What fit, predicates and scores may look at in a task. A task with hard topology
    spread constraints also carries what the spread filter reads of it (namespace,
    constraints, self-match: :func:`pumice.api.spread.hard_key`), so that tasks sharing
    a key get the same predicate answer on the same nodes (allocate's memo of fit
    failures relies on it); such tasks never take the fast path itself."""
    key = (
        task.placement,
        task.init_resreq.tobytes(),
        task.resreq.tobytes(),
        None if task.nonzero is None else task.nonzero.tobytes(),
    )
    spread = hard_key(task) if task.spread else None
    return ShapeKey(key if spread is None else (*key, spread))


class ShapeKey(tuple):
    """A shape key (see :func:`shape_key`): the tuple, hashed once. Hashing the
    placement walks its selector terms and tolerations in Python, and a backlog looks
    its shapes up in several tables per job per cycle (equal to, and hashed as, the
    plain tuple)."""

    _hash: int

    def __new__(cls, parts: tuple) -> ShapeKey:
        self = super().__new__(cls, parts)
        self._hash = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:
        return (ShapeKey, (tuple(self),))  # (hashed again where it is loaded)


class _Shape:
    """The cached view of all nodes for one task shape."""

    __slots__ = (
        "blocked", "changes", "ctx", "dims", "log", "m_future", "m_now", "n_future", "n_now",
        "ok_future", "ok_now", "owner", "pos", "seen", "total",
    )  # fmt: skip

    def __init__(self, fast: FastPath, task: TaskInfo, blocked: np.ndarray | None) -> None:
        nodes = fast.nodes
        req = task.init_resreq
        self.blocked = blocked
        self.dims = [(int(d), float(req[d])) for d in np.flatnonzero(req)]
        self.seen = len(nodes.changes)
        self.ok_future = fits(req, nodes.future_idle())
        if blocked is not None:
            self.ok_future &= ~blocked
        self.ok_now = self.ok_future & fits(req, nodes.idle)
        self.n_future = int(np.count_nonzero(self.ok_future))
        self.n_now = int(np.count_nonzero(self.ok_now))
        self.ctx: tuple | None = None
        self.total: np.ndarray | None = None
        #: ``total`` where ok_now / ok_future, -inf elsewhere: the argmax is the choice.
        self.m_now: np.ndarray | None = None
        self.m_future: np.ndarray | None = None
        # Where this state comes from, for the next session (see ``FastPath._adopt``):
        # the cache's change log and its length when the session's table was copied,
        # the session's own log (``seen`` counts into it) and the configuration.
        self.log: list[int] | None
        self.pos: int
        self.log, self.pos = nodes.origin if nodes.origin is not None else (None, 0)
        self.changes = nodes.changes
        self.owner: object = fast.ssn.config


class FastPath:
    """The shape caches of one session."""

    __slots__ = (
        "__weakref__", "_asks", "_future", "_future_version", "_peak", "_peak_version",
        "_pods", "_views", "affinity_about", "enabled", "no_fit", "nodes", "others",
        "per_task", "predicates", "scorers", "separable", "shapes", "ssn", "within_ok",
    )  # fmt: skip

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.nodes = ssn.nodes
        self._pods = ssn.space.index[PODS]
        self.predicates: tuple[Callable, ...] = ssn.hooks.flat("predicate")
        self.scorers: tuple = ssn.hooks.flat("node_order")
        # What the registrations allow (kept while they stay: a living session's are
        # the same tuples from cycle to cycle).
        memory = self._memory()
        said = memory.hooks_said
        if said is None or said[0] is not self.predicates or said[1] is not self.scorers:
            said = memory.hooks_said = (self.predicates, self.scorers, *_hooks_allow(ssn))
        _, _, self.enabled, self.within_ok, self.separable, self.others, self.per_task = said
        self.shapes: dict[Hashable, _Shape] = {}
        #: Why a task shape found no node, by (shape, host ports, node table version):
        #: see ``place`` in :mod:`pumice.actions.allocate`.
        self.no_fit: dict[Hashable, FitError] = {}
        #: Some job or node holds a task with inter-pod (anti-)affinity terms.
        self.affinity_about = ssn.snapshot.affinity_about()
        #: Each resource's largest future idle amount on any node, at a table version.
        self._peak: list[float] = []
        self._peak_version = -1
        #: A request vector's nonzero (dimension, amount) pairs, by the vector's id
        #: (the entry keeps the vector alive, so the id cannot be reused).
        self._asks: dict[int, tuple[np.ndarray, list[tuple[int, float]]]] = {}
        #: Future idle resources at a table version (see :meth:`future`).
        self._future = np.zeros((0, 0))
        self._future_version = -1
        #: Slot views handed out, with the table version they are current with: a
        #: backlog of jobs of one shape asks for the same view many times between two
        #: placements.
        self._views: dict[Hashable, tuple[int, SlotView]] = {}

    def choose_within(self, task: TaskInfo, rows: np.ndarray) -> tuple[int, bool] | None:
        """:meth:`choose` among ``rows`` (one HyperNode's nodes, sorted): the choice
        :func:`pumice.actions.place.place` makes the long way over them. The fit masks
        and the separable scorers' sums come from the task's shape (rescored over the
        candidates when the scorers' context over them is not the cached one); the
        other scorers are asked over the candidates. None when the fast path does not
        apply or no node of ``rows`` can take the task."""
        if not self.within_ok or task.host_ports or task.nonzero is None or task.spread:
            return None
        if self.ssn.attaching(task):  # (what volumes, devices, CPUs are left moves)
            return None
        shape = self._shape(task)
        if shape is None or shape.n_future == 0:
            return None
        inside = shape.ok_now[rows]
        now = bool(inside.any())
        if not now:
            inside = shape.ok_future[rows]
            if not inside.any():
                return None
        cand = rows[inside]
        if cand.size == 1:
            return int(cand[0]), now
        sep = self.separable
        ctx = tuple([fn.context(task, cand) for fn in sep])
        if sep:
            if shape.ctx is None:
                full = tuple([fn.context(task, shape.ok_future) for fn in sep])
                self._score_all(task, shape, full)
            if ctx == shape.ctx:
                assert shape.total is not None
                scores = shape.total[cand]
            else:
                scores = sep[0].rows(task, cand, ctx[0])
                for fn, c in zip(sep[1:], ctx[1:], strict=True):
                    scores = scores + fn.rows(task, cand, c)
            for fn in self.others:
                scores = scores + fn(task, cand)
        elif self.others:
            scores = self.others[0](task, cand)
            for fn in self.others[1:]:
                scores = scores + fn(task, cand)
        else:
            return int(cand[0]), now
        return int(cand[int(np.argmax(scores))]), now

    def _shape(self, task: TaskInfo) -> _Shape | None:
        """The task's shape, made, adopted or refreshed; None when no node can ever
        take the request (see ``_beyond_every_node``; a shape made later, when room
        appears, starts fresh)."""
        key = shape_key(task)
        shape = self.shapes.get(key)
        if shape is None:
            if self._beyond_every_node(task):
                return None
            shape = self._adopt(task, key)
            if shape is None:
                blocked = None
                for fn in self.predicates:
                    b, _ = fn(task)
                    if b is not None:
                        blocked = b.copy() if blocked is None else (blocked | b)
                shape = _Shape(self, task, blocked)
                self._memory().keep_shape(key, shape)
            self.shapes[key] = shape
        else:
            self._refresh(task, shape)
        return shape

    def choose(self, task: TaskInfo) -> tuple[int, bool] | None:
        """(node row, fits now) for ``task``; None when the fast path does not apply or
        no node can take the task."""
        if not self.enabled or task.host_ports or task.nonzero is None or task.spread:
            return None
        if self.ssn.attaching(task):  # (what volumes, devices, CPUs are left moves)
            return None
        shape = self._shape(task)
        if shape is None or shape.n_future == 0:
            return None
        now = shape.n_now > 0
        mask = shape.ok_now if now else shape.ok_future
        scorers = self.scorers
        if not scorers:
            return int(mask.argmax()), now
        if len(scorers) == 2:  # the default configuration: nodeorder and binpack
            ctx: tuple = (scorers[0].context(task, mask), scorers[1].context(task, mask))
        else:
            ctx = tuple([fn.context(task, mask) for fn in scorers])
        if ctx != shape.ctx:
            self._score_all(task, shape, ctx)
        masked = shape.m_now if now else shape.m_future
        assert masked is not None
        return int(masked.argmax()), now

    def _beyond_every_node(self, task: TaskInfo) -> bool:
        """The request exceeds, in some dimension, every node's future idle resources:
        no node can take it, whatever the predicates say. One comparison against the
        column maxima (kept per node-table version) instead of building the shape's
        masks over every node, which a backlog of large gangs would do for each of
        them in every cycle."""
        nodes = self.nodes
        if self._peak_version != nodes.version:
            future = self.future()
            peak = future.max(axis=0) if len(nodes) else np.zeros(future.shape[1])
            self._peak = peak.tolist()
            self._peak_version = nodes.version
        peak = self._peak
        req = task.init_resreq
        asks = self._asks.get(id(req))
        if asks is None or asks[0] is not req:
            asks = self._asks[id(req)] = (req, [(d, r) for d, r in enumerate(req.tolist()) if r])
        for d, r in asks[1]:  # noqa: SIM110 - plain floats, asked per job in a backlog
            if not peak[d] >= r:
                return True
        return False

    def future(self) -> np.ndarray:
        """The nodes' future idle resources, computed once per node-table version.
        Read-only: the array is shared until the table changes."""
        nodes = self.nodes
        if self._future_version != nodes.version:
            self._future = nodes.future_idle()
            self._future_version = nodes.version
        return self._future

    def slot_view(self, task: TaskInfo, key: Hashable) -> SlotView | None:
        """The slots of ``task``'s shape (``key``) on every node, and what each node is
        short of once they are taken, current with this session's nodes (see
        :mod:`pumice.framework.slots`); None where the fast path does not apply (the
        predicates must depend on placement alone)."""
        if not self.enabled or task.host_ports or task.nonzero is None:
            return None
        if self.ssn.attaching(task):
            return None
        if task.spread and hard(task.spread):
            return None  # (the spread filter's answer moves with every placement)
        version = self.nodes.version
        got = self._views.get(key)
        if got is not None and got[0] == version:
            return got[1]
        ssn = self.ssn
        memory = ssn.snapshot.slot_memory  # (self._memory(), without the call)
        if memory is None:
            memory = self._memory()
        view = memory.view(
            key,
            task,
            self.nodes,
            self.future,
            ssn.uid,
            ssn.config,
            lambda: predicate_filter(ssn, task),
        )
        self._views[key] = (version, view)
        return view

    def no_room(self, task: TaskInfo) -> FitError | None:
        """Why no node can take ``task``, once :meth:`choose` has found none: the fit
        error of its shape's slot view, where the view has no slot on any node. It is
        the error the long way gives (each node under the first predicate refusing
        it, else under every resource it is short of; the nodes left out under their
        reason), read from a view kept row by row instead of a pass over every node:
        a backlog of single pods that fit nowhere asks it for each pod shape in every
        cycle. None where the fast path does not apply, or where the predicates'
        answers may differ between tasks of a shape or move with other pods (the
        long way then explains)."""
        if (
            not self.enabled
            or self.per_task
            or self.affinity_about
            or task.host_ports
            or task.nonzero is None
            or task.spread
            or task.pod_affinity is not None
            or self.ssn.attaching(task)
        ):
            return None
        view = self.slot_view(task, shape_key(task))
        if view is None or view.total:
            return None
        return view.fit_error(len(self.nodes))

    # -- keeping a shape current --------------------------------------------------------

    def _memory(self) -> SlotMemory:
        snapshot = self.ssn.snapshot
        if snapshot.slot_memory is None:
            snapshot.slot_memory = SlotMemory()
        return snapshot.slot_memory

    def _adopt(self, task: TaskInfo, key: Hashable) -> _Shape | None:
        """The shape as an earlier session left it, brought up to date with this one.

        It differs from this session's table only in the rows the cache logged since
        that session's copy, the rows that session changed before the shape last looked
        (``changes[:seen]``), and the rows this session has changed: those are
        refreshed, as within a session. None when nothing usable is kept (another
        configuration, a rebuilt cache table, or a log too long to be worth reading)."""
        shape = self._memory().shapes.get(key)
        nodes = self.nodes
        if shape is None or shape.owner is not self.ssn.config or nodes.origin is None:
            return None
        log, base = nodes.origin
        n = len(nodes)
        # Refreshing rows costs at most what building the shape afresh does, even when
        # every row changed (the vector pass costs about the same on a few rows as on
        # all; the predicates are not asked again): a shape unused for a few cycles of
        # a busy cluster is still worth adopting. Only a long log is not read (a row
        # changes many times in it).
        if shape.log is not log or shape.pos > base or base - shape.pos > ADOPT_LOG * n:
            return None
        rows = set(log[shape.pos : base])
        rows.update(shape.changes[: shape.seen])
        rows.update(nodes.changes)
        if len(rows) > SCALAR_ROWS:
            self._refresh_many(task, shape, np.fromiter(sorted(rows), dtype=np.intp))
        else:  # (as within a session: a few rows cost less in plain floats)
            for i in rows:
                self._refresh_one(task, shape, i)
        shape.log, shape.pos, shape.changes = log, base, nodes.changes
        shape.seen = len(nodes.changes)
        return shape

    def _score_all(self, task: TaskInfo, shape: _Shape, ctx: tuple) -> None:
        """Score the rows that can take the shape (at least in the future); the others
        only count once a change makes them fit, and a row is rescored whenever it
        changes (``_refresh_one`` / ``_refresh_many``), so their score is never read
        before it is computed. On a busy cluster few rows fit a large shape."""
        rows = np.flatnonzero(shape.ok_future)
        total = np.zeros(len(self.nodes))
        if rows.size:
            scores = [fn.rows(task, rows, c) for fn, c in zip(self.separable, ctx, strict=True)]
            part = scores[0]
            for s in scores[1:]:
                part = part + s
            total[rows] = part
        shape.total = total
        shape.m_now = np.where(shape.ok_now, shape.total, -np.inf)
        shape.m_future = np.where(shape.ok_future, shape.total, -np.inf)
        shape.ctx = ctx

    def _refresh(self, task: TaskInfo, shape: _Shape) -> None:
        changes = self.nodes.changes
        n = len(changes)
        if shape.seen == n:
            return
        if n - shape.seen == 1:  # the usual case: one placement since the last use
            shape.seen = n
            self._refresh_one(task, shape, changes[-1])
            return
        rows = set(changes[shape.seen :])
        shape.seen = n
        if len(rows) <= SCALAR_ROWS:
            for i in rows:
                self._refresh_one(task, shape, i)
        else:
            self._refresh_many(task, shape, np.fromiter(sorted(rows), dtype=np.intp))

    def _refresh_one(self, task: TaskInfo, shape: _Shape, i: int) -> None:
        nodes = self.nodes
        blocked = shape.blocked
        fut_ok = now_ok = blocked is None or not blocked[i]
        if fut_ok:
            idle, rel = nodes.idle[i].tolist(), nodes.releasing[i].tolist()
            rel[self._pods] = 0.0  # (a releasing pod's slot is not free: see future_idle)
            pipe = nodes.pipelined[i].tolist()
            for d, r in shape.dims:
                if not idle[d] + rel[d] - pipe[d] >= r:
                    fut_ok = now_ok = False
                    break
                if not idle[d] >= r:
                    now_ok = False
        if fut_ok != shape.ok_future[i]:
            shape.ok_future[i] = fut_ok
            shape.n_future += 1 if fut_ok else -1
        if now_ok != shape.ok_now[i]:
            shape.ok_now[i] = now_ok
            shape.n_now += 1 if now_ok else -1
        ctx = shape.ctx
        if ctx is not None and not fut_ok:
            # A row that cannot take the shape is not scored: its masked scores say so,
            # and its total is read only once a change makes it fit, which rescores it
            # (as ``_score_all`` leaves such rows).
            assert shape.m_now is not None and shape.m_future is not None
            shape.m_now[i] = shape.m_future[i] = -np.inf
        elif ctx is not None:
            scorers = self.separable
            if len(scorers) == 2:  # the default configuration: nodeorder and binpack
                t = scorers[0].one(task, i, ctx[0]) + scorers[1].one(task, i, ctx[1])
            else:
                t = 0.0
                for k, (fn, c) in enumerate(zip(scorers, ctx, strict=True)):
                    v = fn.one(task, i, c)
                    t = v if k == 0 else t + v
            # (set with ctx, by _score_all)
            assert shape.total is not None
            assert shape.m_now is not None and shape.m_future is not None
            shape.total[i] = t
            shape.m_now[i] = t if now_ok else -np.inf
            shape.m_future[i] = t if fut_ok else -np.inf

    def _refresh_many(self, task: TaskInfo, shape: _Shape, rows: np.ndarray) -> None:
        nodes = self.nodes
        req = task.init_resreq
        fut = fits(req, nodes.future_idle(rows))
        if shape.blocked is not None:
            fut &= ~shape.blocked[rows]
        shape.ok_future[rows] = fut
        shape.ok_now[rows] = fut & fits(req, nodes.idle[rows])
        shape.n_future = int(np.count_nonzero(shape.ok_future))
        shape.n_now = int(np.count_nonzero(shape.ok_now))
        if shape.ctx is not None:
            assert shape.total is not None
            part = None
            for fn, c in zip(self.separable, shape.ctx, strict=True):
                s = fn.rows(task, rows, c)
                part = s if part is None else part + s
            assert part is not None  # (ctx is set by _score_all, only with scorers)
            shape.total[rows] = part
            assert shape.m_now is not None and shape.m_future is not None
            shape.m_now[rows] = np.where(shape.ok_now[rows], part, -np.inf)
            shape.m_future[rows] = np.where(shape.ok_future[rows], part, -np.inf)


def _hooks_allow(ssn: Session) -> tuple[bool, bool, tuple, tuple, bool]:
    """What the predicate and node_order registrations allow: the fast path at all
    (``enabled``), within a HyperNode's nodes (``within_ok``), the separable scorers
    and the others, and whether some predicate answers task by task (facet
    ``per_task``: an extender's HTTP predicate), so that no answer is shared between
    tasks of a shape."""
    scorers = ssn.hooks.flat("node_order")
    by_placement = all(ssn.hooks.facets("predicate", "by_placement"))
    separable = [
        hasattr(fn, "rows") and hasattr(fn, "one") and hasattr(fn, "context") for fn in scorers
    ]
    enabled = by_placement and all(separable)
    # Within one HyperNode's nodes (see ``choose_within``) the separable scorers are
    # read from the shape caches and the others, which must come after them (the same
    # sum, in the same order), are asked over the candidates.
    first_other = separable.index(False) if False in separable else len(separable)
    within_ok = by_placement and all(not s for s in separable[first_other:])
    per_task = any(ssn.hooks.facets("predicate", "per_task"))
    return enabled, within_ok, scorers[:first_other], scorers[first_other:], per_task


def for_session(ssn: Session) -> FastPath:
    """The fast path of ``ssn`` (made on first use, after every plugin registered).

    Kept on the session itself, not in a module-level weak dictionary: the fast path
    holds the plugins' hook closures, which hold the session, so a weak key would never
    die and every session of a long run (``pumice simulate``) would be kept alive.
    """
    fast = ssn.fastpath
    if fast is None:
        fast = ssn.fastpath = FastPath(ssn)
    return fast
