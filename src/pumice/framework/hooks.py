"""The extension points, as data.

Each row of :data:`HOOKS` names one extension point, the enable flag that gates it
(Volcano's YAML key maps onto the row's name in :mod:`pumice.conf.config`) and the rule
that combines the functions plugins register for it, tier by tier. :class:`HookTable`
holds the registered functions of one session and implements each rule once; adding a
hook is adding a row.

Combination rules (Volcano's):

``order``
    The first non-zero comparison, walking tiers and plugins in order, wins.
``all``
    Every function must say yes (predicates, job ready, allocatable).
``any``
    One yes is enough (overused).
``vote``
    Functions return -1 (reject), 0 (abstain) or +1 (permit). A reject wins at once;
    a permit ends the walk at the end of its tier; all abstaining means yes.
``victims``
    Each function returns the candidates it allows, or None to abstain. Within a tier
    the answers intersect; an empty answer (or an empty intersection) leaves the tier
    undecided and the next tier decides, as Volcano's ``Preemptable`` and
    ``Reclaimable`` walk their tiers.
``sum``
    Scores add up (node order).
``each``
    Call every function for its side effect (job enqueued).
``first``
    The first function that answers (not None) decides (HyperNode gradients).
``filter``
    Every function that answers (not None) filters the candidates, whatever its tier:
    what they all allow. None answering allows nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pumice.conf.config import Tier

T = TypeVar("T")
#: What :meth:`HookTable.derived` finds when nothing is kept (None is an answer).
_NONE: Any = object()


@dataclass(frozen=True, slots=True)
class Hook:
    name: str
    rule: str
    doc: str


HOOKS: dict[str, Hook] = {
    h.name: h
    for h in (
        Hook("queue_order", "order", "(q1, q2) -> int: which queue is served first"),
        Hook("job_order", "order", "(j1, j2) -> int: which job is served first"),
        Hook("task_order", "order", "(t1, t2) -> int: which task of a job goes first"),
        Hook("namespace_order", "order", "(ns1, ns2) -> int"),
        Hook("predicate", "all", "(task) -> [(reason, failing node mask)]"),
        Hook("node_order", "sum", "(task, candidate node indices) -> scores"),
        Hook("overused", "any", "(queue) -> bool: the queue may take no more"),
        Hook("allocatable", "all", "(queue, task) -> bool: the queue may take this task"),
        Hook("job_ready", "all", "(job) -> bool: enough tasks placed to start the gang"),
        Hook("job_pipelined", "vote", "(job) -> -1/0/1: ready once releasing pods go"),
        Hook("job_valid", "all", "(job) -> str | None: why the job cannot be scheduled"),
        Hook("job_enqueueable", "vote", "(job) -> -1/0/1: may the job leave Pending"),
        Hook("job_enqueued", "each", "(job) -> None: the job was admitted"),
        Hook("job_starving", "all", "(job) -> bool: the job wants more resources"),
        Hook("preemptable", "victims", "(preemptor, candidates) -> allowed | None"),
        Hook("reclaimable", "victims", "(reclaimer, candidates) -> allowed | None"),
        Hook("preemptive", "all", "(queue, task) -> bool: the queue may reclaim for task"),
        Hook(
            "gang_evictable",
            "filter",
            "(eviction context, candidates) -> allowed | None: what gangpreempt and "
            "gangreclaim may evict",
        ),
        Hook(
            "victim_tasks",
            "each",
            "(running tasks) -> the tasks to evict (shuffle), each a task or (task, "
            "strategy, rule); a tier's answers are joined, the first tier naming any decides",
        ),
        Hook(
            "hypernode_gradient",
            "first",
            "(limit, allocated, min request, start, purpose) -> HyperNode names by tier, "
            "or None to abstain: where a constrained gang is tried, nearest tier first",
        ),
        Hook("hypernode_order", "sum", "(sub-job, HyperNode names) -> {name: score}"),
        Hook("subjob_ready", "all", "(sub-job) -> bool: enough of its tasks are placed"),
        Hook("subjob_pipelined", "vote", "(sub-job) -> -1/0/1"),
        Hook("subjob_order", "order", "(s1, s2) -> int: which sub-job of a job goes first"),
        Hook(
            "victim_queue_order",
            "order",
            "(q1, q2, preemptor queue) -> int: whose tasks are evicted first",
        ),
    )
}


class HookTable:
    """The functions registered for one session, grouped by hook, tier and plugin."""

    __slots__ = ("_chains", "_derived", "_facets", "_flat", "_flat_facets", "_fns", "_tiers")

    def __init__(self, tiers: Sequence[Tier]) -> None:
        self._tiers = tiers
        self._fns: dict[str, dict[str, Callable]] = {name: {} for name in HOOKS}
        self._chains: dict[str, list[list[tuple[str, Callable]]]] | None = None
        #: hook -> its functions in walking order (the order rules ask on every
        #: comparison of a heap, so the list is built once per registration change).
        self._flat: dict[str, tuple[Callable, ...]] = {}
        #: (hook, function) -> what the plugin said of the function when it registered it.
        self._facets: dict[tuple[str, Callable], dict[str, Any]] = {}
        #: (hook, facet name) -> :meth:`facets`, built once per registration change.
        self._flat_facets: dict[tuple[str, str], tuple[Any, ...]] = {}
        #: (hook, facet name, builder) -> :meth:`derived`, built once per registration
        #: change.
        self._derived: dict[tuple[str, str, Callable], Any] = {}

    def register(
        self, hook: str, plugin: str, fn: Callable, facets: Mapping[str, Any] | None = None
    ) -> None:
        """Register ``fn`` for ``hook``. ``facets`` are what else the plugin can say of
        it, by name, for the actions that can use it: a sort ``key`` equivalent to an
        order function, how many placements a gang is ``short`` of a yes, a ``run`` of
        allocatable answers, and so on (each reader names the facet it asks for and
        what it means); an action asks with :meth:`facet` and does without when the
        function has none."""
        if hook not in HOOKS:
            raise KeyError(f"plugin {plugin!r} registered unknown hook {hook!r}")
        if plugin in self._fns[hook]:
            raise KeyError(f"plugin {plugin!r} registered hook {hook!r} twice")
        self._fns[hook][plugin] = fn
        if facets:
            self._facets[(hook, fn)] = dict(facets)
        self._changed(hook)

    def _changed(self, hook: str) -> None:
        """Forget what was built from ``hook``'s registrations (only its own: a living
        session re-registers a few hooks in a cycle and keeps the rest)."""
        if self._chains is not None:
            self._chains.pop(hook, None)
        self._flat.pop(hook, None)
        for key in [k for k in self._flat_facets if k[0] == hook]:
            del self._flat_facets[key]
        for derived in [k for k in self._derived if k[0] == hook]:
            del self._derived[derived]

    def drop(self, plugin: str, hooks: Iterable[str] | None = None) -> None:
        """Forget every function ``plugin`` registered (or those for ``hooks``), with
        what it said of them, so that it can register afresh: a plugin rebuilt for a
        new cycle of a living session, or one whose functions are a cycle's own (see
        :func:`pumice.framework.session.renew_session`)."""
        for hook in self._fns if hooks is None else hooks:
            fns = self._fns[hook]
            fn = fns.pop(plugin, None)
            if fn is not None:
                if not any(other is fn for other in fns.values()):  # (a shared function)
                    self._facets.pop((hook, fn), None)
                self._changed(hook)

    def facet(self, hook: str, fn: Callable, name: str, default: Any = None) -> Any:
        """What the plugin that registered ``fn`` for ``hook`` said of it as ``name``,
        or ``default``."""
        said = self._facets.get((hook, fn))
        return default if said is None else said.get(name, default)

    def facets(self, hook: str, name: str) -> tuple[Any, ...]:
        """Facet ``name`` of each function of :meth:`flat`, in that order (None where a
        function has none)."""
        got = self._flat_facets.get((hook, name))
        if got is None:
            got = tuple(self.facet(hook, fn, name) for fn in self.flat(hook))
            self._flat_facets[(hook, name)] = got
        return got

    def derived(self, hook: str, name: str, build: Callable[[tuple[Any, ...]], T]) -> T:
        """``build(self.facets(hook, name))``, kept until ``hook``'s registrations
        change: the sort keys made from the order functions' ``key`` facets are asked
        for every job of a backlog, every cycle. ``build`` must be a pure function of
        the facets (a module-level function, so that it names the answer)."""
        key = (hook, name, build)
        got = self._derived.get(key, _NONE)
        if got is _NONE:
            got = self._derived[key] = build(self.facets(hook, name))
        return got

    def registered(self, hook: str) -> tuple[str, ...]:
        """The plugins that registered a function for ``hook``, whatever their flags."""
        return tuple(self._fns[hook])

    def chain(self, hook: str) -> list[list[tuple[str, Callable]]]:
        """Per tier, the enabled (plugin, function) pairs for ``hook``, in config order."""
        if self._chains is None:
            self._chains = {}
        c = self._chains.get(hook)
        if c is None:
            fns = self._fns[hook]
            c = [
                [(p.name, fns[p.name]) for p in tier.plugins if p.name in fns and p.enabled(hook)]
                for tier in self._tiers
            ]
            c = [t for t in c if t]
            self._chains[hook] = c
        return c

    def flat(self, hook: str) -> tuple[Callable, ...]:
        """The functions of ``hook`` in walking order (built once, shared: a tuple)."""
        fl = self._flat.get(hook)
        if fl is None:
            fl = self._flat[hook] = tuple(fn for tier in self.chain(hook) for _, fn in tier)
        return fl

    # -- combination rules --------------------------------------------------------------

    def order(self, hook: str, a: Any, b: Any) -> int:
        for fn in self.flat(hook):
            r = fn(a, b)
            if r:
                return r
        return 0

    # ``all`` and ``any`` are asked per task and per job turn: plain loops (the same
    # short-circuit walk as the builtins over a generator, without the generator).

    def all(self, hook: str, *args: Any) -> bool:
        for fn in self.flat(hook):  # noqa: SIM110 - no generator on the hot path
            if not fn(*args):
                return False
        return True

    def any(self, hook: str, *args: Any) -> bool:
        for fn in self.flat(hook):  # noqa: SIM110 - no generator on the hot path
            if fn(*args):
                return True
        return False

    def vote(self, hook: str, *args: Any) -> bool:
        for tier in self.chain(hook):
            permitted = False
            for _, fn in tier:
                r = fn(*args)
                if r < 0:
                    return False
                if r > 0:
                    permitted = True
            if permitted:
                return True
        return True

    def vote_detail(self, hook: str, *args: Any) -> tuple[bool, str | None]:
        """Like :meth:`vote`, and also the plugin that rejected (for explanations)."""
        for tier in self.chain(hook):
            permitted = False
            for name, fn in tier:
                r = fn(*args)
                if r < 0:
                    return False, name
                if r > 0:
                    permitted = True
            if permitted:
                return True, None
        return True, None

    def victims(self, hook: str, actor: Any, candidates: list) -> tuple[list, list[str]]:
        """The victims the deciding tier allows, and the plugins that decided (see
        :meth:`victims_detail`)."""
        chosen, deciders, _alone = self.victims_detail(hook, actor, candidates)
        return chosen, deciders

    def victims_detail(
        self, hook: str, actor: Any, candidates: list
    ) -> tuple[list, list[str], list[str]]:
        """The victims the deciding tier allows, the plugins that decided, and, when no
        tier allowed any, which of those plugins allowed none by itself (the others
        only narrowed the choice): what an explanation of the refusal names.

        Volcano's walk: within a tier, a plugin that allows nothing ends the tier
        undecided, and the first tier that ends with victims decides. One deliberate
        difference: when the intersection becomes empty, pumice ends the tier too,
        where Volcano (its intersection is then a nil slice) lets the next plugin of the
        tier start afresh, which can undo a veto such as conformance's. ``deciders``
        names the plugins of the deciding tier (or, when no tier decides, of the last
        tier that refused everything). A tier ends at the first plugin that allows
        nothing, so that plugin alone refused, and the ones before it each allowed
        some; a tier ended by an empty intersection has none that refused alone.
        """
        refused: list[str] = []
        alone: list[str] = []
        for tier in self.chain(hook):
            chosen: list | None = None
            deciders: list[str] = []
            empty: list[str] = []
            for name, fn in tier:
                allowed = fn(actor, candidates)
                if allowed is None:
                    continue
                deciders.append(name)
                if not allowed:
                    chosen = None
                    empty = [name]
                    break
                if chosen is None:
                    chosen = list(allowed)
                else:
                    keep = {id(t) for t in allowed}
                    chosen = [t for t in chosen if id(t) in keep] or None
                    if chosen is None:
                        break
            if chosen:
                return chosen, deciders, []
            if deciders:
                refused, alone = deciders, empty
        return [], refused, alone

    def filter(self, hook: str, actor: Any, candidates: list) -> tuple[list, list[str]]:
        """What every answering function allows of ``candidates`` (in their order), and
        the plugins that answered; nothing when none answers."""
        chosen: list | None = None
        deciders: list[str] = []
        for tier in self.chain(hook):
            for name, fn in tier:
                allowed = fn(actor, candidates if chosen is None else chosen)
                if allowed is None:
                    continue
                deciders.append(name)
                keep = {id(t) for t in allowed}
                chosen = [t for t in (candidates if chosen is None else chosen) if id(t) in keep]
                if not chosen:
                    return [], deciders
        return chosen or [], deciders

    def first(self, hook: str, *args: Any) -> Any:
        for fn in self.flat(hook):
            r = fn(*args)
            if r is not None:
                return r
        return None

    def each(self, hook: str, *args: Any) -> None:
        for fn in self.flat(hook):
            fn(*args)
