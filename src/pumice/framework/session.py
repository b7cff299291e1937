"""Session: one cycle's snapshot plus what the plugins registered.

Open a session on a snapshot (plugins register their hook functions), let the actions
run, close it (plugins record conditions, podgroup phases are derived). The session
owns its snapshot: callers that want to keep theirs pass a copy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from pumice.api.job import JobInfo
from pumice.api.numa import NUMATOPOLOGY
from pumice.api.queue import QueueInfo
from pumice.api.snapshot import Snapshot
from pumice.api.task import TaskInfo, default_task_order
from pumice.conf.config import SchedulerConfig
from pumice.framework.decisions import Decisions
from pumice.framework.hooks import HookTable
from pumice.framework.parking import parking_for, unpark_changed
from pumice.framework.plugin import LivingPlugin, Plugin, Registry
from pumice.framework.said import Layer, Text

if TYPE_CHECKING:
    from pumice.framework.fastpath import FastPath
    from pumice.framework.parking import Parked, Parking
    from pumice.framework.statement import Statement
    from pumice.framework.topology import SessionTopology

_session_ids = itertools.count(1)


def next_session_uid() -> str:
    """A new session's uid (``session-N``, counted in this process): a cycle that
    repeats the last one's decisions without opening a session still takes its turn in
    the count, so that later sessions are numbered as if it had opened one."""
    return f"session-{next(_session_ids)}"


@dataclass(slots=True)
class EventHandler:
    """Called when a task starts (allocate) or stops (deallocate) holding resources in
    the session, so plugins can keep shares up to date incrementally."""

    allocate: Callable[[TaskInfo], None] | None = None
    deallocate: Callable[[TaskInfo], None] | None = None


class CycleObserver(Protocol):
    """What a caller that reports on cycles (``pumice run``'s metrics) is told of one.

    Passed to :meth:`pumice.scheduler.Scheduler.cycle`, which hands it on to
    :func:`open_session` and :func:`close_session`. Every other caller passes None, and
    then nothing is timed: the cost is one ``is None`` test per plugin and per action,
    so the simulator's and the benchmark's cycles are unchanged.

    Durations are seconds of :func:`time.perf_counter`. The calls come in this order:
    ``plugin_opened`` for each configured plugin, ``session_opened``, ``action_done``
    for each action, ``plugin_closed`` for each plugin, ``session_closing``, and
    ``cycle_done`` (from ``Scheduler.cycle`` only). An observer must not change the
    session it is shown."""

    def plugin_opened(self, plugin: str, seconds: float) -> None:
        """``plugin``'s ``on_session_open`` took ``seconds``."""

    def session_opened(self, seconds: float) -> None:
        """The whole of :func:`open_session` took ``seconds``."""

    def action_done(self, action: str, seconds: float) -> None:
        """``action``'s ``execute`` took ``seconds``."""

    def plugin_closed(self, plugin: str, seconds: float) -> None:
        """``plugin``'s ``on_session_close`` took ``seconds`` (about 0 without one)."""

    def session_closing(self, ssn: Session) -> None:
        """The decisions are complete (podgroup status, pending reasons) and the
        plugins' state and hook functions are still in place: the moment to read what
        only the session knows (proportion's deserved shares, a queue's overuse)."""

    def cycle_done(self, seconds: float) -> None:
        """The whole cycle, open to close, took ``seconds``."""

    # Optional: ``cycle_repeated(last)``: the cycle opened no session because nothing it
    # depends on changed since the cycle ``last`` (this observer's predecessor) observed;
    # it decided the same. Only ``cycle_done`` follows. An observer without it makes
    # every cycle open a session.


class Session:
    """The state of one scheduling cycle and the functions plugins registered for it.

    A session may live from cycle to cycle (see :func:`renew_session`): what plugins
    registered stays, and :meth:`renew` puts the next cycle's snapshot in place of the
    last one's, with every per-cycle field afresh."""

    def __init__(self, snapshot: Snapshot, config: SchedulerConfig) -> None:
        self.config = config
        self.hooks = HookTable(config.tiers)
        self.handlers: list[EventHandler] = []
        self.plugins: list[Plugin] = []
        #: The event handlers each plugin of ``plugins`` added, in the same order (a
        #: plugin rebuilt for a new cycle takes its own out with it).
        self.handlers_of: list[list[EventHandler]] = []
        #: What a living session parks from cycle to cycle (None: parking does not
        #: hold for the configuration; see :mod:`pumice.framework.parking`).
        self.parking: Parking | None = None
        #: What a living session's cycles call when every plugin lives (see
        #: :class:`Renewal`): worked out at the first renewal, None until then.
        self.renewal: Renewal | None = None
        self._begin(snapshot)

    def renew(self, snapshot: Snapshot) -> None:
        """Start the next cycle on ``snapshot``: the registrations stay, everything the
        last cycle knew or decided goes (including what actions hung on the session)."""
        if len(self.__dict__) != len(_LIVING):  # (else closed with keep: nothing left)
            self.forget_cycle()
        self._begin(snapshot)

    def forget_cycle(self) -> None:
        """Drop everything but the registrations: between two cycles a living session
        holds no snapshot, no decisions and nothing an action hung on it."""
        kept = {k: self.__dict__[k] for k in _LIVING}
        self.__dict__.clear()
        self.__dict__.update(kept)

    def _begin(self, snapshot: Snapshot) -> None:
        self.uid = next_session_uid()
        self.snapshot = snapshot
        self.space = snapshot.space
        self.nodes = snapshot.nodes
        self.jobs: dict[str, JobInfo] = snapshot.jobs
        #: Jobs parked since the last cycle whose status stands (see
        #: :mod:`pumice.framework.parking`): only enqueue looks at them; the session's
        #: parking keeps them from cycle to cycle.
        parking = self.parking
        self.parked: dict[str, Parked] = (
            unpark_changed(parking, snapshot) if parking is not None else {}
        )
        if snapshot.lend is not None:
            snapshot.lend(self.parked)
        #: The jobs this cycle must look at, in uid order (see ``Snapshot.active``),
        #: less the parked ones: actions that only serve pending work and the closers
        #: walk these, not ``jobs``.
        self.active: dict[str, JobInfo] = snapshot.active_jobs(self.parked)
        self.queues: dict[str, QueueInfo] = snapshot.queues
        self.decisions = Decisions()
        self.total = snapshot.nodes.total()
        self.now = snapshot.now
        #: Jobs a job_valid function refused at open (too few pods for their gang).
        #: They stay in ``jobs``: enqueue may admit them (a job controller creates the
        #: pods of an admitted job), but no action places or preempts for them.
        self.invalid: dict[str, tuple[JobInfo, str]] = {}
        #: Pending jobs the enqueue action refused this cycle: uid -> why, as the job's
        #: explanation begins ("not enqueued: overcommit: ...").
        self.not_enqueued: dict[str, Text] = {}
        #: The parked jobs, not valid gangs, that enqueue refused all at once, and why
        #: (one layer for all of them, by reference: see :mod:`pumice.framework.said`):
        #: not in ``not_enqueued``. None when there are none or they were said one by one.
        self.refused_parked: Layer | None = None
        #: Queues allocate skipped because they had used their share.
        self.overused_queues: set[str] = set()
        #: The jobs allocate gave a turn, in the order it gave them (a job that yields
        #: and comes back is listed again): the line of waiting jobs starts with them.
        self.turns: list[str] = []
        #: Waiting job uid -> the stage that stopped it this cycle (written with the
        #: pending explanations, see :mod:`pumice.framework.status`).
        self.stages: dict[str, str] = {}
        #: Why preempt or reclaim, run for a job this cycle, could not help it: job uid ->
        #: one sentence per action (the pending explanation ends with them).
        self.eviction_notes: dict[str, list[str]] = {}
        #: Gangs allocate placed but left uncommitted because they are ready only by
        #: counting best-effort tasks backfill has yet to place: job uid -> statement
        #: (see :mod:`pumice.actions.allocate`). Empty once backfill has concluded them.
        self.held: dict[str, Statement] = {}
        #: The network as this session sees it (HyperNode rows, sub-jobs), made when
        #: first asked (:func:`pumice.framework.topology.session_topology`).
        self.topology: SessionTopology | None = None
        #: The allocate fast path of this cycle, made when first asked
        #: (:func:`pumice.framework.fastpath.for_session`).
        self.fastpath: FastPath | None = None
        #: Some node's NUMA topology is known (a Numatopology object): Guaranteed pods
        #: with whole CPUs may then be pinned to NUMA nodes (see :meth:`attaching`).
        self.numa_known = bool(snapshot.objects.get(NUMATOPOLOGY))

    def attaching(self, task: TaskInfo) -> bool:
        """Whether a node suits ``task`` for more than its shape (placement and
        requests): it attaches volumes or devices (``TaskInfo.attaches``), or the
        numa-aware plugin may pin its CPUs to NUMA nodes, which depends on the CPUs
        still free on each NUMA node. Such a task shares no fit answer with another
        and takes none of the per-shape shortcuts.

        A pod asking for a topology policy by annotation always counts (every node is
        refused to it when no Numatopology describes the node); a Guaranteed pod with
        whole CPUs only when some node's NUMA topology is known: a cluster without
        Numatopology objects keeps the shortcuts for every pod."""
        if task.attaches:
            return True
        numa = task.numa
        return numa is not None and (self.numa_known or bool(numa.policy))

    # -- registration -------------------------------------------------------------------

    def on(self, hook: str, plugin: str, fn: Callable, **facets: Any) -> None:
        """Register ``fn`` for ``hook``, with what else the plugin can say of it
        (``facets``: see :meth:`HookTable.register`)."""
        self.hooks.register(hook, plugin, fn, facets)

    def add_event_handler(self, handler: EventHandler) -> None:
        self.handlers.append(handler)

    def fire_allocate(self, task: TaskInfo) -> None:
        for h in self.handlers:
            if h.allocate is not None:
                h.allocate(task)

    def fire_deallocate(self, task: TaskInfo) -> None:
        for h in self.handlers:
            if h.deallocate is not None:
                h.deallocate(task)

    # -- orders, with Volcano's fallbacks -----------------------------------------------

    # The order functions are asked on every heap comparison (a few per pop, tens of
    # thousands per cycle), so they walk the hook's function tuple inline.

    def job_less(self, a: JobInfo, b: JobInfo) -> bool:
        for fn in self.hooks.flat("job_order"):
            r = fn(a, b)
            if r:
                return r < 0
        if a.creation != b.creation:
            return a.creation < b.creation
        return a.uid < b.uid

    def queue_less(self, a: QueueInfo, b: QueueInfo) -> bool:
        for fn in self.hooks.flat("queue_order"):
            r = fn(a, b)
            if r:
                return r < 0
        if a.creation != b.creation:
            return a.creation < b.creation
        return a.name < b.name

    def task_less(self, a: TaskInfo, b: TaskInfo) -> bool:
        for fn in self.hooks.flat("task_order"):
            r = fn(a, b)
            if r:
                return r < 0
        return default_task_order(a, b) < 0

    # -- the common questions -----------------------------------------------------------

    def job_ready(self, job: JobInfo) -> bool:
        return self.hooks.all("job_ready", job)

    def job_pipelined(self, job: JobInfo) -> bool:
        return self.hooks.vote("job_pipelined", job)

    def job_starving(self, job: JobInfo) -> bool:
        """Volcano's rule: the first tier with a job_starving function decides (all of
        its functions must agree); no function at all means not starving."""
        for tier in self.hooks.chain("job_starving"):
            return all(fn(job) for _, fn in tier)
        return False

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """May ``queue`` reclaim resources from other queues for ``task``?"""
        return self.hooks.all("preemptive", queue, task)

    def victim_less(self, a: TaskInfo, b: TaskInfo, preemptor: TaskInfo) -> bool:
        """Which of two victims goes first (Volcano's ``BuildVictimsPriorityQueue``):
        within a job the task that the task order puts *last*; across queues the
        victim queue order (by default, the queue the queue order puts last); else the
        job that the job order puts last."""
        if a.job == b.job:
            return not self.task_less(a, b)
        ja, jb = self.jobs.get(a.job or ""), self.jobs.get(b.job or "")
        jp = self.jobs.get(preemptor.job or "")
        if ja is not None and jb is not None and jp is not None and ja.queue != jb.queue:
            qa, qb = self.queues[ja.queue], self.queues[jb.queue]
            for fn in self.hooks.flat("victim_queue_order"):
                r = fn(qa, qb, self.queues[jp.queue])
                if r:
                    return r < 0
            return not self.queue_less(qa, qb)
        if ja is None or jb is None:
            return False
        return not self.job_less(ja, jb)

    def overused(self, queue: QueueInfo) -> bool:
        return self.hooks.any("overused", queue)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self.hooks.all("allocatable", queue, task)

    def job_valid(self, job: JobInfo) -> str | None:
        for fn in self.hooks.flat("job_valid"):
            reason = fn(job)
            if reason:
                return reason
        return None


def open_session(
    snapshot: Snapshot,
    config: SchedulerConfig,
    plugins: Registry,
    observer: CycleObserver | None = None,
) -> Session:
    """Create the session, let every configured plugin register, mark invalid jobs.
    ``observer`` (see :class:`CycleObserver`) is told how long each plugin took."""
    start = perf_counter() if observer is not None else 0.0
    ssn = Session(snapshot, config)
    for opt in config.instances():  # a plugin listed twice is built once, as it acts
        plugin = plugins.create(opt.name, opt.arguments)
        ssn.plugins.append(plugin)
        ssn.handlers_of.append(_open(ssn, plugin, opt.name, observer))
    ssn.parking = parking_for(ssn)
    _mark_invalid(ssn)
    if observer is not None:
        observer.session_opened(perf_counter() - start)
    return ssn


def living(plugin: object) -> TypeGuard[LivingPlugin]:
    """Does ``plugin`` keep its registrations from cycle to cycle? It does when it
    declares ``on_cycle_open(session)``: its hook functions read the cycle's state when
    they are called (from the session, or from what ``on_cycle_open`` refreshes), never
    from what one cycle's open captured. Any other plugin is built and opened afresh
    for every cycle."""
    return getattr(plugin, "on_cycle_open", None) is not None


def renew_session(
    ssn: Session,
    snapshot: Snapshot,
    plugins: Registry,
    observer: CycleObserver | None = None,
) -> Session:
    """The next cycle of a living session (one :func:`open_session` made for the same
    configuration, closed by :func:`close_session` with ``keep=True``): the same as
    opening a new session on ``snapshot``, without building the living plugins and
    their registrations again.

    Living plugins (see :func:`living`) keep their registrations and refresh their
    per-cycle state in ``on_cycle_open``; each of the others is built anew and opens as
    it would in a new session, in place of its last cycle's self. The hook table and
    the event handlers stay in configuration order either way."""
    if observer is None:
        renewal = ssn.renewal
        if renewal is None:
            renewal = ssn.renewal = Renewal(ssn)
        if renewal.lives:
            ssn.renew(snapshot)
            ssn.handlers = renewal.handlers.copy()
            for open_cycle in renewal.opens:
                open_cycle(ssn)
            _mark_invalid(ssn)
            return ssn
    start = perf_counter() if observer is not None else 0.0
    ssn.renew(snapshot)
    ssn.handlers = []
    handlers = ssn.handlers
    for k, opt in enumerate(ssn.config.instances()):
        cycle_open = getattr(ssn.plugins[k], "on_cycle_open", None)
        if cycle_open is not None:  # (the plugin lives: see living)
            handlers.extend(ssn.handlers_of[k])
            if observer is None:
                cycle_open(ssn)
            else:
                t = perf_counter()
                cycle_open(ssn)
                observer.plugin_opened(opt.name, perf_counter() - t)
            continue
        plugin = ssn.plugins[k] = plugins.create(opt.name, opt.arguments)
        ssn.handlers_of[k] = _open(ssn, plugin, opt.name, observer)
    _mark_invalid(ssn)
    if observer is not None:
        observer.session_opened(perf_counter() - start)
    return ssn


class Renewal:
    """What the cycles of a living session call when every configured plugin lives:
    each plugin's ``on_cycle_open`` and ``on_session_close`` (those it has), and the
    event handlers of them all, in configuration order. The plugins, their
    registrations and their handlers stay from cycle to cycle, so this is worked out
    once. ``lives`` is False (and the lists empty) when some plugin is built anew for
    each cycle: then every cycle looks the plugins up."""

    __slots__ = ("closes", "handlers", "lives", "opens")

    def __init__(self, ssn: Session) -> None:
        self.opens: list[Callable[[Session], None]] = []
        self.closes: list[Callable[[Session], None]] = []
        self.handlers: list[EventHandler] = []
        self.lives = len(ssn.plugins) == len(ssn.config.instances())
        for k, plugin in enumerate(ssn.plugins):
            cycle_open = getattr(plugin, "on_cycle_open", None)
            if cycle_open is None or not self.lives:
                self.lives = False
                break
            self.opens.append(cycle_open)
            close = getattr(plugin, "on_session_close", None)
            if close is not None:
                self.closes.append(close)
            self.handlers.extend(ssn.handlers_of[k])
        if not self.lives:
            self.opens, self.closes, self.handlers = [], [], []


def _open(
    ssn: Session, plugin: Plugin, name: str, observer: CycleObserver | None
) -> list[EventHandler]:
    """Let ``plugin`` register (and, when it lives, refresh for this cycle); the event
    handlers it added."""
    first = len(ssn.handlers)
    t = perf_counter() if observer is not None else 0.0
    plugin.on_session_open(ssn)
    cycle_open = getattr(plugin, "on_cycle_open", None)
    if cycle_open is not None:
        cycle_open(ssn)
    if observer is not None:
        observer.plugin_opened(name, perf_counter() - t)
    return ssn.handlers[first:]


def _mark_invalid(ssn: Session) -> None:
    """:meth:`Session.job_valid` of every active job (a settled job is a valid gang),
    with the functions looked up once: a waiting backlog is asked in every cycle."""
    fns = ssn.hooks.flat("job_valid")
    if not fns:
        return
    invalid = ssn.invalid
    for uid, job in ssn.active.items():
        for fn in fns:
            reason = fn(job)
            if reason:
                invalid[uid] = (job, reason)
                break


def close_session(
    ssn: Session,
    closers: Sequence[Callable[[Session], None]] = (),
    observer: CycleObserver | None = None,
    *,
    keep: bool = False,
) -> Decisions:
    """Let plugins conclude, then run the given closers (status, explanations).

    Jobs that a statement changed during the cycle (a victim evicted) join the active
    set first, so the closers write their status too. ``observer`` (see
    :class:`CycleObserver`) is told how long each plugin's close took, then shown the
    session, before what the plugins registered is dropped: all of it, or with
    ``keep`` (a living session, see :func:`renew_session`) what the plugins that are
    built anew for each cycle registered, and the cycle's state."""
    extra = [uid for uid in ssn.snapshot.touched if uid in ssn.jobs and uid not in ssn.active]
    if extra:
        ssn.active.update((uid, ssn.jobs[uid]) for uid in extra)
        ssn.active = dict(sorted(ssn.active.items()))
    renewal = ssn.renewal
    if observer is None and renewal is not None and renewal.lives:
        for close_cycle in renewal.closes:
            close_cycle(ssn)
    elif observer is None:
        for plugin in ssn.plugins:
            close = getattr(plugin, "on_session_close", None)
            if close is not None:
                close(ssn)
    else:
        for plugin in ssn.plugins:
            t = perf_counter()
            close = getattr(plugin, "on_session_close", None)
            if close is not None:
                close(ssn)
            name = getattr(plugin, "name", type(plugin).__name__)
            observer.plugin_closed(name, perf_counter() - t)
    for fn in closers:
        fn(ssn)
    if observer is not None:
        observer.session_closing(ssn)
    decisions = ssn.decisions
    if keep:
        _retire(ssn)
    else:
        _release(ssn)
    return decisions


def _release(ssn: Session) -> None:
    """Drop what plugins registered. Their closures refer back to the session, and the
    session to its snapshot: without this, every closed session of a long run waits for
    a full garbage collection to be freed."""
    ssn.hooks = HookTable(())
    ssn.handlers = []
    ssn.handlers_of = []
    ssn.plugins = []
    ssn.renewal = None
    ssn.fastpath = None


def _retire(ssn: Session) -> None:
    """Between two cycles of a living session: what the plugins built for one cycle
    registered is dropped (its closures hold the cycle's snapshot), and so is the
    cycle's own state. Living plugins keep their last figures until the next cycle's
    ``on_cycle_open`` replaces them."""
    if ssn.renewal is not None and ssn.renewal.lives:  # (nothing to drop)
        ssn.handlers = []
        ssn.forget_cycle()
        return
    for k, plugin in enumerate(ssn.plugins):
        if not living(plugin):
            ssn.hooks.drop(plugin.name)
            ssn.handlers_of[k] = []
    ssn.handlers = []
    ssn.forget_cycle()


#: What a session keeps from cycle to cycle when it lives (see :func:`renew_session`).
_LIVING = ("config", "hooks", "handlers", "plugins", "handlers_of", "parking", "renewal")


__all__ = [
    "CycleObserver",
    "EventHandler",
    "Renewal",
    "Session",
    "close_session",
    "living",
    "open_session",
    "renew_session",
]
