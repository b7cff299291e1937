"""Carrying out a cycle's decisions through the cluster: evictions, binds, gang status.

:class:`DecisionApplier` writes what a cycle decided through the
:class:`~pumice.cluster.protocol.Cluster` protocol, in that order: evictions, then
binds, then each PodGroup's status. Nothing here knows whether the cluster is
simulated, and nothing here changes the cache's model: the writes come back to it as
watch events, like every change. The one exception is admission of another dialect's
gang, whose status pumice does not write: the model keeps it (the ``admit`` callback).

A Volcano PodGroup's status is written when the cycle's differs from what the cache
last saw (the records keep it as a comparison key, :data:`~pumice.cache.records.StatusKey`,
taken when the status is read: a cycle's comparison walks only the cycle's side), and
not even that for the updates a living session carried from a cycle this applier
compared whole (``Decisions.carried``: a parked backlog's status costs nothing here).
What is written is told to the records, which then know its echo on the watch without
parsing it (:meth:`~pumice.cache.records.Records.wrote`). Another dialect's gang status
is written in its own vocabulary (:mod:`pumice.cluster.gang_status`), when it differs
from what the object says.

Contract: :meth:`DecisionApplier.apply` never raises for a stale decision (the pod went
away in between): the cluster refuses it and it is reported as refused.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from pumice.api import parse
from pumice.cache.base import BaseModel
from pumice.cache.records import Records, status_key
from pumice.cluster.gang_status import (
    GangFacts,
    coscheduling_status,
    workload_podgroup_status,
)
from pumice.cluster.protocol import Cluster, condition_key
from pumice.framework.decisions import Decisions, PodGroupUpdate

#: What a status comparison reads of a condition, in the order of
#: :func:`~pumice.cluster.protocol.condition_key`'s entries (a condition without one
#: of them raises KeyError: :func:`same_conditions` then compares by ``get``).
_COMPARED = itemgetter("type", "status", "reason", "message")


@dataclass(slots=True)
class ApplyResult:
    """What :meth:`SchedulerCache.apply` did: binds and evictions the cluster took, and
    the ones it refused (stale decisions: the pod went away in between)."""

    bound: list[tuple[str, str]] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    #: Podgroups whose phase the cycle changed (e.g. Pending -> Inqueue).
    phases: list[str] = field(default_factory=list)

    def changed(self) -> bool:
        """True when the cluster now differs in something a cycle reads."""
        return bool(self.bound or self.evicted or self.phases)


class DecisionApplier:
    """Writes decisions to ``cluster``, reading the cache's ``records`` and ``base``.

    ``admit(uid, phase)`` keeps the admission of another dialect's gang in the model
    and says whether its phase changed; ``clock`` gives the time status writes carry
    (None: now)."""

    def __init__(
        self,
        cluster: Cluster,
        records: Records,
        base: BaseModel,
        admit: Callable[[str, str], bool],
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.cluster = cluster
        self.records = records
        self.base = base
        self.admit = admit
        self.clock = clock
        #: The cache's ``changes`` when the last apply wrote nothing to the cluster
        #: (else None).
        self.quiet: int | None = None
        #: The Volcano PodGroup updates an apply found the cluster already says, with
        #: the status they were compared with (uid -> (update, status key)): the same
        #: update object against the same key agrees without a comparison. Both are
        #: read-only once made (a cycle's updates once it closed, status keys always),
        #: so an entry stays true for as long as it is kept: it is kept from apply to
        #: apply, and the table is cut back to the uids of the last decisions when it
        #: grows beyond twice their number.
        self._agreed: dict[str, tuple[PodGroupUpdate, Any]] = {}
        #: The session of the last decisions applied whose every podgroup update was
        #: compared with the cluster's (or known to agree: see :meth:`_to_compare`).
        self._whole: str | None = None
        #: Podgroups whose status write the cluster refused (compared again, carried
        #: or not).
        self._unsure: dict[str, None] = {}

    def apply(self, decisions: Decisions, changes: int) -> ApplyResult:
        """Carry out ``decisions`` on the cluster state stamped ``changes``.

        Decisions that repeat the last cycle's on the same cluster state
        (``Decisions.repeat_of`` is this state's stamp) after an apply that wrote
        nothing would write nothing again: they are not walked."""
        if decisions.repeat_of is not None and decisions.repeat_of == self.quiet == changes:
            return ApplyResult()
        self.quiet = None
        cluster = self.cluster
        out = ApplyResult()
        wrote = bool(decisions.evictions or decisions.binds)
        reasons = (
            {a.get("task"): str(a.get("reason", "")) for a in decisions.audit if "task" in a}
            if decisions.evictions
            else {}
        )
        for pod in decisions.evictions:
            if cluster.evict(pod, reasons.get(pod, "")):
                out.evicted.append(pod)
            else:
                out.refused.append(pod)
        prebind = decisions.prebind
        for pod, node in decisions.binds.items():
            if cluster.bind(pod, node, prebind.get(pod)):
                out.bound.append((pod, node))
            else:
                out.refused.append(pod)
        bound_now: dict[str, int] = {}
        tasks = self.base.tasks
        for pod, _ in out.bound:
            task = tasks.get(pod)
            if task is not None and task.job is not None:
                bound_now[task.job] = bound_now.get(task.job, 0) + 1
        pgs_r, said = self.records.pgs_r, self.records.pg_status
        agreed = self._agreed
        podgroups = decisions.podgroups
        compare = self._to_compare(decisions, changes)
        self.base.status_moved.clear()
        agreed_get, said_get = agreed.get, said.get
        for uid, upd in compare:
            seen = said_get(uid)
            last = agreed_get(uid)
            if last is not None and last[0] is upd and last[1] is seen:
                # The same update (a parked job's status, carried from the last cycle)
                # against the same status the cluster had: it agrees again. The hot
                # path of a busy cycle's apply, once per waiting job.
                continue
            if seen is None:  # (not a Volcano PodGroup the cache holds, as a rule)
                rec = pgs_r.get(uid)
                if rec is None or rec.api != "volcano":
                    wrote = wrote or rec is not None  # (its status carries the time)
                    if upd.phase and self.admit(uid, upd.phase):
                        out.phases.append(uid)
                    if rec is not None:
                        self._write_gang_status(rec, upd, bound_now.get(uid, 0))
                    continue
                seen = said[uid] = status_key(rec.phase, rec.counts, rec.conditions)
            phase = upd.phase
            if not phase:
                continue
            if seen[0] != phase:
                out.phases.append(uid)
            elif seen[1] == (upd.running, upd.succeeded, upd.failed):
                # What the cluster already says (as far as the cache has seen)? Most
                # waiting jobs have one condition, compared here without a call.
                conditions, key = upd.conditions, seen[2]
                if len(conditions) == 1 == len(key):
                    try:
                        same = key[0] == _COMPARED(conditions[0])
                    except KeyError:
                        same = same_conditions(key, conditions)
                else:
                    same = same_conditions(key, conditions)
                if same:
                    agreed[uid] = (upd, seen)
                    if self._unsure:
                        self._unsure.pop(uid, None)
                    continue
            agreed.pop(uid, None)
            wrote = True
            if cluster.update_podgroup_status(
                uid,
                phase,
                upd.conditions,
                running=upd.running,
                succeeded=upd.succeeded,
                failed=upd.failed,
            ):
                self.records.wrote(
                    uid, phase, upd.conditions, (upd.running, upd.succeeded, upd.failed)
                )
                self._unsure.pop(uid, None)
            else:
                self._unsure[uid] = None
        if len(agreed) > 2 * len(podgroups) + 1024:
            self._agreed = {uid: v for uid, v in agreed.items() if uid in podgroups}
        if not wrote and not out.phases:
            self.quiet = changes
        return out

    def _to_compare(
        self, decisions: Decisions, changes: int
    ) -> Iterable[tuple[str, PodGroupUpdate]]:
        """The podgroup updates of ``decisions`` to compare with the cluster's status:
        all of them, but the ones carried from the last cycle (``Decisions.carried``)
        when this applier compared all of that cycle's and nothing changed since the
        snapshot these were decided on (``changes`` is its stamp).

        Why those agree: each is an update the last cycle reported (compared then) for
        a job that has not changed since: a status the cluster took then comes back as
        a change of the job, and so does a status someone else wrote since (the job
        is then not carried: its update is made anew and compared), but for a status
        whose conditions or counts alone moved (the model does not mark the job
        changed for those: ``BaseModel.status_moved``), compared again here, as are
        the ones whose write the cluster refused."""
        podgroups = decisions.podgroups
        carried = decisions.carried
        whole, self._whole = self._whole, None
        if carried is None:
            return podgroups.items()
        self._whole = carried.session
        if not (
            carried.after is not None
            and carried.after == whole
            and carried.stamp == changes
            and carried.end == len(podgroups)
        ):
            return podgroups.items()
        head = list(itertools.islice(podgroups.items(), carried.start))
        moved = self.base.status_moved
        if self._unsure or moved:
            fresh = dict(head)
            for again in (self._unsure, moved):
                head.extend(
                    (uid, podgroups[uid]) for uid in again
                    if uid in podgroups and uid not in fresh
                )  # fmt: skip
                fresh.update(head)
        return head

    def _write_gang_status(self, rec: parse.PodGroupRecord, upd: Any, bound_now: int) -> None:
        """Write the status of another dialect's PodGroup, in its vocabulary, when it
        differs from what the object says (``bound_now``: this cycle's binds of its
        pods, not seen on the watch yet)."""
        uid = rec.uid
        job, where = self.base.jobs.get(uid), self.records.pg_objects.get(uid)
        if job is None or where is None:
            return
        unschedulable = next(
            (str(c.get("message") or "") for c in upd.conditions
             if c.get("type") == "Unschedulable" and c.get("status") == "True"),
            "",
        )  # fmt: skip
        facts = GangFacts(
            min_member=job.min_available,
            pods=len(job.tasks),
            scheduled=bound_now + sum(1 for t in job.tasks.values() if t.node is not None),
            running=upd.running,
            succeeded=upd.succeeded,
            failed=upd.failed,
            unschedulable="" if bound_now else unschedulable,
        )
        seen = self.records.gang_seen.get(uid) or {}
        now = _rfc3339(self.clock() if self.clock is not None else None)
        kind = where[0]
        if kind == "CoschedulingPodGroup":
            status: dict[str, Any] | None = coscheduling_status(facts, seen, now)
        else:
            status = workload_podgroup_status(facts, seen, now)
        if status is None or all(seen.get(k) == v for k, v in status.items()):
            return  # (what the object already says)
        self.cluster.update_gang_status(kind, where[1], status)


def same_conditions(seen: tuple, new: list[dict[str, Any]]) -> bool:
    """``seen == condition_key(new)`` (``seen``: the key of the conditions the cluster
    has, kept by the records) without building ``new``'s key: every cycle compares the
    status of each job it looked at with what the cluster says, and most say the same
    again. A condition without one of the fields compares as
    :func:`~pumice.cluster.protocol.condition_key` says (None)."""
    n = len(new)
    if len(seen) != n:
        return False
    try:
        return all(seen[i] == _COMPARED(new[i]) for i in range(n))
    except KeyError:
        return bool(seen == condition_key(new))


def _rfc3339(wall: float | None) -> str:
    """A time as the API writes one (UTC, whole seconds; None: now)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


__all__ = ["ApplyResult", "DecisionApplier", "same_conditions"]
