"""One scheduling cycle: open a session, run the actions, close it.

This is the pure core every mode shares: ``(snapshot, config) -> decisions``. It never
touches a cluster; the caller applies the decisions.

A cycle on the same cluster state as the last one, before any answer the last one gave
expires, decides the same again: it is *repeated* instead of run (see
:meth:`Scheduler.cycle`). A backlog that waits costs nothing while nothing it waits for
changes.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from pumice.actions import default_registry as default_actions
from pumice.api.snapshot import Snapshot
from pumice.conf.check import Known
from pumice.conf.config import SchedulerConfig, load_config, parse_config
from pumice.errors import InputError, shown
from pumice.extensions import load_registries
from pumice.framework.decisions import Decisions
from pumice.framework.parking import park
from pumice.framework.plugin import Registry
from pumice.framework.session import (
    CycleObserver,
    Session,
    close_session,
    next_session_uid,
    open_session,
    renew_session,
)
from pumice.framework.status import explain_pending, update_podgroups
from pumice.framework.verdicts import valid_until
from pumice.framework.waiting import line_up
from pumice.plugins import default_registry as default_plugins

#: The key of the last cycle's record in ``Snapshot.verdicts``.
CYCLE_KEY = "scheduler.last-cycle"


@dataclass(slots=True)
class _Cycle:
    """What a cycle leaves for the next one to repeat (see :meth:`Scheduler.cycle`)."""

    scheduler: Scheduler
    now: float
    #: The session's answers stand while the clock is below this.
    until: float
    #: The decisions as the cycle returned them (read-only: callers add only notes).
    decisions: Decisions
    #: Their notes before the snapshot's were added.
    notes: list[str]
    observer: CycleObserver | None


@dataclass(slots=True)
class Scheduler:
    """A validated configuration and the registries it draws on."""

    config: SchedulerConfig
    plugins: Registry
    actions: Registry
    #: Repeat a cycle on an unchanged cluster instead of running it (see :meth:`cycle`);
    #: False runs every cycle, to check that repeating changes nothing.
    repeat: bool = True
    #: Keep one session living from cycle to cycle (see :meth:`cycle`); False opens a
    #: new one for every cycle, to check that living changes nothing.
    living: bool = True
    #: The living session between two cycles (None before the first, or while a cycle
    #: runs).
    _session: Session | None = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a sweep hands schedulers to worker processes) without its living
        session, whose plugins hold the last cycle's closures: the copy opens its own."""
        return {
            "config": self.config,
            "plugins": self.plugins,
            "actions": self.actions,
            "repeat": self.repeat,
            "living": self.living,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self._session = None

    @classmethod
    def from_file(
        cls, path: str | None, plugins_dir: str | os.PathLike[str] | None = None
    ) -> Scheduler:
        """The scheduler every mode runs: the configuration at ``path`` (the built-in
        default when None), checked against pumice's plugins and actions, those that
        installed packages register (entry points ``pumice.plugins``,
        ``pumice.actions``) and those the modules of ``plugins_dir`` list (see
        :func:`pumice.extensions.load_registries`). InputError if the
        configuration or an extension is bad; nothing has run then. What pumice does
        not implement of Volcano's is skipped, and said in ``config.warnings``."""
        plugins, actions = load_registries(plugins_dir)
        config = load_config(path, known=known(plugins, actions))
        return cls.create(config, plugins, actions)

    @classmethod
    def create(
        cls,
        config: SchedulerConfig,
        plugins: Registry | None = None,
        actions: Registry | None = None,
    ) -> Scheduler:
        """Check every plugin and action of ``config`` can be built with its arguments,
        so a bad configuration fails here and not in the middle of a cycle. A config
        parsed without a :class:`~pumice.conf.check.Known` has its names checked here,
        against these registries.

        Without registries, pumice's own plugins and actions only (no extensions: use
        :meth:`from_file` or :func:`~pumice.extensions.load_registries`)."""
        plugins = plugins or default_plugins()
        actions = actions or default_actions()
        if not config.checked and config.document is not None:
            config = parse_config(
                config.document, source=config.source, known=known(plugins, actions)
            )
        for name in dict.fromkeys(config.actions):
            if name not in actions.names():
                raise InputError(
                    f"unknown action {shown(name)}", file=config.source, field="actions"
                )
            try:
                actions.create(name, config.action_arguments(name))
            except InputError as err:
                raise err.located(file=config.source) from None
        for opt in config.instances():
            if opt.name not in plugins.names():
                raise InputError(f"unknown plugin {shown(opt.name)}", file=config.source)
            try:
                plugins.create(opt.name, opt.arguments)
            except InputError as err:
                field = err.field
                if opt.where:
                    field = f"{opt.where}.{field}" if field else opt.where
                raise InputError(
                    err.message, file=err.file or config.source, obj=err.obj, field=field
                ) from None
        return cls(config, plugins, actions)

    def open(self, snapshot: Snapshot, observer: CycleObserver | None = None) -> Session:
        return open_session(snapshot, self.config, self.plugins, observer)

    def cycle(
        self,
        snapshot: Snapshot,
        observer: CycleObserver | None = None,
        line: Callable[[int], bool] | None = None,
    ) -> Decisions:
        """Run one cycle on ``snapshot`` (which the cycle consumes: pass a copy to keep
        the original).

        ``line(n)``, when given, is asked with the number of jobs the cycle leaves
        waiting whether ``Decisions.waiting`` (the line of them, see
        :mod:`pumice.framework.waiting`) is wanted; left empty when it says no. A
        caller that reads the line of a few cycles only (the simulator keeps the line
        of its busiest) spares the others the work.

        ``observer`` (see :class:`~pumice.framework.session.CycleObserver`) is told how
        long each plugin, each action and the whole cycle took, and is shown the
        session before it closes; without one nothing is timed.

        The cyclic garbage collector is paused for the cycle (and restored after): a
        cycle allocates many small objects, and each full collection it would trigger
        walks the whole snapshot (hundreds of thousands of objects, none of which can
        be garbage while the cycle runs), some 75 ms for ``basic`` in the benchmark.
        Reference counting still frees what the cycle drops; reference cycles made
        during it are collected after.

        **Repeated cycles.** The decisions are a function of the cluster state, the
        configuration and the clock. A snapshot whose owner says it holds the same
        state as the last cycle's (``Snapshot.stamp`` and the active jobs equal), for
        the same scheduler, at a time before any answer of the last session expires
        (every plugin and action says until when its answers stand:
        :func:`~pumice.framework.verdicts.valid_until`), gets the last decisions again
        without a session: the same binds, evictions, status and explanations. The
        records inside are shared with the last decisions (callers never write them);
        the podgroup conditions keep the last session's ``transitionID``, the session
        that decided them. The observer is then told ``cycle_repeated`` and
        ``cycle_done`` only.

        **A living session.** The session of one cycle is renewed for the next (see
        :func:`~pumice.framework.session.renew_session`): the plugins that can keep
        their registrations from cycle to cycle do, and only the others are built and
        opened again. Each cycle still decides on its own snapshot alone, as a new
        session would. A cycle that fails leaves no session behind: the next opens a
        new one."""
        start = perf_counter() if observer is not None else 0.0
        again = self._repeat(snapshot, observer)
        if again is not None:
            if observer is not None:
                observer.cycle_done(perf_counter() - start)
            return again
        actions: list[Any] = []

        def keep(ssn: Session) -> None:
            self._keep(ssn, actions, observer)

        paused = gc.isenabled()
        if paused:
            gc.disable()
        ssn, self._session = self._session, None
        lined = line_up if line is None else _lines(line)
        try:
            if ssn is not None and self.living:
                renew_session(ssn, snapshot, self.plugins, observer)
            else:
                ssn = self.open(snapshot, observer)
            for name in self.config.actions:
                action = self.actions.create(name, self.config.action_arguments(name))
                actions.append(action)
                if observer is None:
                    action.execute(ssn)
                else:
                    t = perf_counter()
                    action.execute(ssn)
                    observer.action_done(name, perf_counter() - t)
            decisions = close_session(
                ssn,
                (update_podgroups, explain_pending, park, lined, keep),
                observer,
                keep=self.living,
            )
            if self.living:
                self._session = ssn
        finally:
            if paused:
                gc.enable()
        decisions.notes.extend(snapshot.notes)
        decisions.skipped.update(snapshot.skipped)
        if observer is not None:
            observer.cycle_done(perf_counter() - start)
        return decisions

    def _repeat(self, snapshot: Snapshot, observer: CycleObserver | None) -> Decisions | None:
        """The last cycle's decisions again, if this cycle would decide the same."""
        if not self.repeat or snapshot.stamp is None:
            return None
        last: _Cycle | None = snapshot.verdicts.recall(CYCLE_KEY, (snapshot.stamp, snapshot.active))
        if last is None or last.scheduler is not self:
            return None
        if not last.now <= snapshot.now < last.until:
            return None
        if observer is not None:
            told = getattr(observer, "cycle_repeated", None)
            if told is None or last.observer is None:
                return None
            told(last.observer)
        next_session_uid()  # (numbered as if it had opened one)
        decisions = last.decisions.repeated()
        decisions.notes = [*last.notes, *snapshot.notes]
        decisions.skipped = dict(snapshot.skipped)
        decisions.repeat_of = snapshot.stamp
        return decisions

    def _keep(self, ssn: Session, actions: list[Any], observer: CycleObserver | None) -> None:
        """Leave this cycle for the next one to repeat (a closer: the plugins are still
        in place to say until when their answers stand)."""
        snapshot = ssn.snapshot
        if not self.repeat or snapshot.stamp is None:
            return
        stamp = (snapshot.stamp, snapshot.active)
        until = valid_until(ssn, [*ssn.plugins, *actions])
        if until <= ssn.now:
            snapshot.verdicts.forget(CYCLE_KEY)
            return
        # Not a copy (a repeat makes one): callers only add the snapshot's notes.
        d = ssn.decisions
        kept = _Cycle(self, ssn.now, until, d, list(d.notes), observer)
        snapshot.verdicts.keep(CYCLE_KEY, stamp, kept)


def _lines(wanted: Callable[[int], bool]) -> Callable[[Session], None]:
    """The line-up closer, run when ``wanted`` says so for the cycle's waiting jobs."""

    def closer(ssn: Session) -> None:
        if wanted(len(ssn.decisions.pending)):
            line_up(ssn)

    return closer


def known(plugins: Registry, actions: Registry) -> Known:
    """What ``plugins`` and ``actions`` implement, for the configuration loader."""
    return Known(
        plugins={n: plugins.argument_keys(n) for n in plugins.names()},
        actions={n: actions.argument_keys(n) for n in actions.names()},
    )
