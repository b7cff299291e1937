"""Jobs parked while they wait for admission: their status stands from the last cycle.

A Volcano Job's pods are created once its PodGroup is admitted, so a busy cluster
carries a backlog of Pending PodGroups without pods that enqueue refuses cycle after
cycle: on a 100,000-job run nine in ten of the jobs a cycle looks at (and, where pods
come first, Pending PodGroups with their pods). Such a job's status is a function of
the job alone: not a valid gang (too few pods), so gang's ``NotEnoughTasks`` condition
with the same reason; or a valid gang none of whose tasks holds a node, so gang's
count of them; and its phase, Pending. Only why enqueue refuses it moves with the
cluster, and that is said anew every cycle.

So a living session (see :func:`~pumice.framework.session.renew_session`) *parks*
every such job at the end of a cycle: ``job_valid``'s answer for it and the podgroup
status the closers wrote for it. A parked job stays parked from cycle to cycle while
it does not change (the snapshot's owner names the jobs that changed since the last
session opened, ``Snapshot.changed``; without that, each is compared with what it
was when parked), until enqueue admits it, or it is gone. The parked jobs are
``Session.parked`` and not among the session's active jobs: no action but enqueue,
no closer and no plugin walking the active jobs looks at them, and ``job_valid`` is
not asked again (its answer is the parked one). enqueue still decides on each of
them in every cycle, and says why it refuses it; where the first voting function can
vote on all of them at once (``job_enqueueable``'s ``refuses`` facet, with the rows
of :meth:`Parking.rows`), one vote covers the backlog. The parked status is put back
in the decisions as it stood, by reference, after every other update
(``Decisions.carried`` says which: the cache's apply need not compare them again),
and a parked job enqueue admits rejoins the active jobs for the rest of the cycle. A
session opened afresh parks nothing, so every cycle decides and explains as a new
session would: the status carried is the one a new session writes, but for the
session that decided it (``transitionID``), as a repeated cycle keeps it.

Parking is on only where that holds of every part of the configuration: actions
among enqueue (first), allocate and backfill; every ``job_valid`` function and every
plugin with an ``on_session_close`` of a plugin that declares ``parks = True`` (its
answers for such a job depend on the job alone, and its close writes nothing for a
job in ``Session.parked``); and only jobs of Volcano's API without sub-groups (no
gang timeouts, no per-cycle sub-group rules).
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pumice.api.job import PENDING, JobInfo
from pumice.api.resources import ResourceSpace
from pumice.framework.decisions import Carried, PodGroupUpdate

if TYPE_CHECKING:
    from pumice.api.snapshot import Snapshot
    from pumice.framework.session import Session

#: The actions a configuration may list for jobs to be parked (enqueue first).
PARKING_ACTIONS = frozenset({"enqueue", "allocate", "backfill"})


@dataclass(slots=True)
class Parked:
    """A job parked at the end of a cycle, with what stands for it while unchanged."""

    job: JobInfo
    version: int
    min_available: int
    #: Why it is not a valid gang (``job_valid``'s answer); None for a valid one.
    reason: str | None
    #: The podgroup status the closers wrote for it (read-only).
    update: PodGroupUpdate


class Rows:
    """The parked jobs as :meth:`Parking.rows` hands them over: read-only, made again
    (not changed) when the jobs parked are others."""

    __slots__ = (
        "all_invalid", "at", "every", "index", "invalid", "jobs", "keys", "matrix", "parked",
        "uids",
    )  # fmt: skip

    def __init__(self, uids: list[str], parked: tuple[Parked, ...], space: ResourceSpace) -> None:
        self.parked = parked
        #: The uid of each parked job, in parking order.
        self.keys = uids
        #: Every parked job, in parking order.
        self.every = list(map(_JOB, parked))
        wants = list(map(_WANTS, self.every))
        asks_none = list(map(operator.is_, wants, itertools.repeat(None)))
        if True in asks_none:  # (some ask no minResources)
            at = [k for k, none in enumerate(asks_none) if not none]
            self.jobs = [self.every[k] for k in at]
            self.uids = [uids[k] for k in at]
            wants = [wants[k] for k in at]
            self.at = np.array(at, dtype=np.intp)
        else:
            self.jobs, self.uids, self.at = self.every, uids, np.arange(len(uids))
        #: The parked jobs that ask minResources (``jobs``, with their ``uids``), and
        #: their place in ``every``; their minResources as the rows of one matrix (in
        #: ``space``'s dimensions).
        self.matrix = (
            np.concatenate(wants).reshape(len(wants), space.size)
            if wants
            else np.zeros((0, space.size))
        )
        #: The row of each uid of ``uids``.
        self.index = dict(zip(self.uids, range(len(self.uids)), strict=True))
        #: Per row: not a valid gang (parked with ``job_valid``'s reason).
        reasons = list(map(_REASON, parked))
        self.invalid = np.array(
            [reasons[k] is not None for k in self.at.tolist()] if len(self.at) < len(parked)
            else [r is not None for r in reasons],
            dtype=bool,
        )  # fmt: skip
        #: Every row is not a valid gang (the usual backlog: no pods yet).
        self.all_invalid = bool(self.invalid.all())

    @classmethod
    def after(cls, last: Rows, kept: dict[str, Parked], space: ResourceSpace) -> Rows:
        """``Rows(list(kept), tuple(kept.values()), space)``, made from ``last`` where
        ``kept`` is what ``last`` parked less some jobs, then more (as
        :attr:`Parking.kept` changes from cycle to cycle: a job unparked leaves its
        place, one parked comes last): the rows that stay are taken as they are, only
        the new ones are worked out."""
        uids, parked = list(kept), tuple(kept.values())
        old = last.parked
        alive = list(map(operator.is_, old, map(kept.get, last.keys)))
        stay = alive.count(True)
        if stay == len(old) and all(map(operator.is_, old, parked)):
            return cls._appended(last, uids, parked)  # (only more parked: the usual change)
        if not all(map(operator.is_, itertools.compress(old, alive), parked[:stay])):
            return cls(uids, parked, space)  # (not in that order)
        new = cls(uids[stay:], parked[stay:], space)
        rows = cls.__new__(cls)
        rows.parked, rows.keys = parked, uids
        rows.every = [*itertools.compress(last.every, alive), *new.every]
        stays = np.array(alive, dtype=bool)
        if last.jobs is last.every and new.jobs is new.every:  # (all ask minResources)
            rows.jobs, rows.uids, rows.at = rows.every, uids, np.arange(len(uids))
            rows.matrix = np.concatenate([last.matrix[stays], new.matrix])
            rows.invalid = np.concatenate([last.invalid[stays], new.invalid])
        else:
            row_stays = stays[last.at]
            place = np.cumsum(stays) - 1  # (the new place of a job that stays)
            rows.at = np.concatenate([place[last.at[row_stays]], new.at + stay])
            kept_rows = row_stays.tolist()
            rows.jobs = [*itertools.compress(last.jobs, kept_rows), *new.jobs]
            rows.uids = [*itertools.compress(last.uids, kept_rows), *new.uids]
            rows.matrix = np.concatenate([last.matrix[row_stays], new.matrix])
            rows.invalid = np.concatenate([last.invalid[row_stays], new.invalid])
        rows.index = dict(zip(rows.uids, range(len(rows.uids)), strict=True))
        rows.all_invalid = bool(rows.invalid.all())
        return rows

    @classmethod
    def _appended(cls, last: Rows, uids: list[str], parked: tuple[Parked, ...]) -> Rows:
        """:meth:`after` where ``parked`` is ``last.parked`` and more: the new rows
        are put after the last ones, in plain lists until the one matrix."""
        n = len(last.parked)
        added = parked[n:]
        jobs = list(map(_JOB, added))
        wants = list(map(_WANTS, jobs))
        asks = [w is not None for w in wants]
        rows = cls.__new__(cls)
        rows.parked, rows.keys = parked, uids
        rows.every = [*last.every, *jobs]
        if False in asks:
            at = [n + k for k, a in enumerate(asks) if a]
            jobs = [j for j, a in zip(jobs, asks, strict=True) if a]
            wants = [w for w, a in zip(wants, asks, strict=True) if a]
            added = tuple(p for p, a in zip(added, asks, strict=True) if a)
            new_uids = [uids[k] for k in at]
        else:
            at = list(range(n, len(uids)))
            new_uids = uids[n:]
        if last.jobs is last.every and len(at) == len(parked) - n:  # (all ask minResources)
            rows.jobs, rows.uids, rows.at = rows.every, uids, np.arange(len(uids))
        else:
            rows.jobs = [*last.jobs, *jobs]
            rows.uids = [*last.uids, *new_uids]
            rows.at = np.concatenate([last.at, np.array(at, dtype=np.intp)])
        invalid = [p.reason is not None for p in added]
        if wants:
            rows.matrix = np.vstack([last.matrix, *wants])
            rows.invalid = np.concatenate([last.invalid, np.array(invalid, dtype=bool)])
        else:
            rows.matrix, rows.invalid = last.matrix, last.invalid
        index = rows.index = dict(last.index)
        m = len(last.uids)
        index.update(zip(new_uids, range(m, m + len(new_uids)), strict=True))
        rows.all_invalid = last.all_invalid and False not in invalid
        return rows


_JOB = operator.attrgetter("job")
_WANTS = operator.attrgetter("min_resources")
_REASON = operator.attrgetter("reason")


class Parking:
    """What a living session parks from one cycle to the next."""

    __slots__ = ("_rows", "kept", "last")

    def __init__(self) -> None:
        self.kept: dict[str, Parked] = {}
        #: The session whose cycle parked last (``Carried.after``).
        self.last: str | None = None
        #: :meth:`rows`' answer.
        self._rows: Rows | None = None

    def rows(self, space: ResourceSpace) -> Rows:
        """The parked jobs as rows (see :class:`Rows`): those that ask minResources as
        the rows of one matrix, so that a plugin can vote on all of them at once (see
        ``job_enqueueable``'s ``refuses`` facet in :mod:`pumice.actions.enqueue`). Made
        again only when the jobs parked are others than last time."""
        now = tuple(self.kept.values())
        rows = self._rows
        if (
            rows is None
            or len(rows.parked) != len(now)
            or not all(map(operator.is_, rows.parked, now))
        ):
            rows = self._rows = (
                Rows(list(self.kept), now, space)
                if rows is None or rows.matrix.shape[1] != space.size
                else Rows.after(rows, self.kept, space)
            )
        return rows


def parking_for(ssn: Session) -> Parking | None:
    """A parking for ``ssn``'s configuration, or None where parking does not hold (see
    the module's docstring). Asked when a session opens, with its plugins in place."""
    actions = list(ssn.config.actions)
    if not actions or actions[0] != "enqueue" or not set(actions) <= PARKING_ACTIONS:
        return None
    parks = {p.name for p in ssn.plugins if getattr(p, "parks", False)}
    for name, _fn in (pair for tier in ssn.hooks.chain("job_valid") for pair in tier):
        if name not in parks:
            return None
    for plugin in ssn.plugins:
        if getattr(plugin, "on_session_close", None) is not None and plugin.name not in parks:
            return None
    return Parking()


def unpark_changed(parking: Parking, snapshot: Snapshot) -> dict[str, Parked]:
    """The jobs parked by the last cycle that are still active and unchanged on
    ``snapshot`` (``Session.parked``): ``parking.kept`` itself, less the others. Called
    when a session opens, before ``job_valid`` is asked.

    Where the snapshot's owner says which jobs changed since the last session opened
    (``Snapshot.changed``), the parked jobs are not looked at one by one: a backlog
    that waits costs nothing here."""
    kept = parking.kept
    if not kept:
        return kept
    changed, active = snapshot.changed, snapshot.active
    if changed is None or active is None:
        jobs = snapshot.jobs
        for uid in [
            uid for uid, p in kept.items()
            if not _unchanged(jobs.get(uid), p) or (active is not None and uid not in active)
        ]:  # fmt: skip
            del kept[uid]
        return kept
    for uid in kept.keys() & changed:
        del kept[uid]
    for uid in kept.keys() - active:  # (gone, or its queue is)
        del kept[uid]
    return kept


def _unchanged(job: JobInfo | None, p: Parked) -> bool:
    return (
        job is p.job
        and job.version == p.version
        and job.min_available == p.min_available
        and job.phase == PENDING
    )


_UPDATE = operator.attrgetter("update")


def park(ssn: Session) -> None:
    """A closer, after the podgroup phases and the explanations: put the parked jobs'
    status back in the decisions, and park for the next cycle every job that enqueue
    refused and that is still Pending: not a valid gang, or a valid one that is not
    ready (gang's condition then counts its own tasks alone)."""
    parking = ssn.parking
    if parking is None:
        return
    decisions = ssn.decisions
    podgroups = decisions.podgroups
    parked = ssn.parked  # (``parking.kept``: what stays parked stays in it)
    start = len(podgroups)
    podgroups.update(zip(parked.keys(), map(_UPDATE, parked.values()), strict=True))
    stamp = ssn.snapshot.stamp
    if stamp is not None and len(podgroups) == start + len(parked):  # (at the end)
        decisions.carried = Carried(start, len(podgroups), stamp, ssn.uid, parking.last)
    parking.last = ssn.uid
    invalid, jobs = ssn.invalid, ssn.jobs
    for uid in [uid for uid in ssn.not_enqueued if uid not in parked]:
        job = jobs.get(uid)
        if job is None or job.phase != PENDING or job.api != "volcano" or job.sub_groups:
            continue
        said = invalid.get(uid)
        if said is None and job.is_ready():
            continue  # (ready only by best-effort tasks: its condition reads the room)
        update = podgroups.get(uid)
        if update is not None:
            reason = said[1] if said is not None else None
            parked[uid] = Parked(job, job.version, job.min_available, reason, update)


__all__ = ["PARKING_ACTIONS", "Parked", "Parking", "park", "parking_for", "unpark_changed"]
