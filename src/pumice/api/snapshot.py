"""A snapshot: everything one scheduling cycle reads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.api.hypernode import Topology
from pumice.api.job import JobInfo
from pumice.api.ledger import Ledger
from pumice.api.node import NodeTable
from pumice.api.pdb import PdbRecord
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace
from pumice.api.verdicts import Verdicts


@dataclass(slots=True)
class Snapshot:
    """The cluster state one cycle schedules against.

    ``jobs`` holds only the jobs pumice may schedule; jobs it must leave alone (their
    queue does not exist, their PodGroup is missing) are in ``blocked`` with the reason,
    so that they can still be explained.

    ``active`` names the jobs a cycle has to look at (``None``: all of them). Every job
    outside it is :meth:`settled <pumice.api.job.JobInfo.settled>` and unchanged since
    the cycle that last looked at it, so no action has work for it and its podgroup
    status is already what a cycle would write; plugins still see it in ``jobs`` (a
    victim, a share), and in :meth:`job_ledger`'s sums. The scheduler cache fills
    ``active`` and ``ledger``; a snapshot built from objects leaves both to be derived.
    """

    space: ResourceSpace
    nodes: NodeTable
    jobs: dict[str, JobInfo]
    queues: dict[str, QueueInfo]
    priority_classes: dict[str, int]
    default_priority: int = 0
    #: The time "now" for this cycle (seconds since the epoch): the latest object
    #: timestamp by default, so a snapshot replays the same way whenever it is run.
    now: float = 0.0
    blocked: dict[str, str] = field(default_factory=dict)
    #: The queue each job of ``blocked`` names, where it names one (a Queue that does
    #: not exist, or that pumice leaves out): the line of waiting jobs lists it there.
    blocked_queues: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Objects left out because pumice cannot read them (``Kind namespace/name`` ->
    #: what is wrong), as a running scheduler skips them.
    skipped: dict[str, str] = field(default_factory=dict)
    #: PodDisruptionBudgets (policy/v1), read by the pdb plugin.
    pdbs: list[PdbRecord] = field(default_factory=list)
    active: set[str] | None = None
    ledger: Ledger | None = None
    #: Jobs a cycle changed through a statement (filled by the session): the owner of a
    #: snapshot whose jobs it shares (the scheduler cache) repairs them afterwards.
    touched: set[str] = field(default_factory=set)
    #: The same for tasks of no job (pods of other schedulers), by pod key.
    touched_pods: set[str] = field(default_factory=set)
    #: Per-shape node results kept from cycle to cycle by the snapshot's owner (a
    #: :class:`pumice.framework.slots.SlotMemory`); None: each session keeps its own.
    slot_memory: Any = None
    #: What plugins keep from cycle to cycle of one cluster, by key (``rescheduling``'s
    #: last run): the snapshot's owner hands the same dict to every snapshot it makes
    #: (the scheduler cache); a snapshot built from files starts empty.
    carried: dict[str, Any] = field(default_factory=dict)
    #: The HyperNode tree (None: the cluster has no HyperNodes).
    topology: Topology | None = None
    #: Records of the kinds in :data:`pumice.api.side_objects.SIDE_PARSERS` (storage,
    #: devices), by kind, then by key; read-only (the scheduler cache lends its own).
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Answers kept from cycle to cycle of one cluster, with what they depend on
    #: (:class:`~pumice.framework.verdicts.Verdicts`): the snapshot's owner hands the same
    #: store to every snapshot it makes; a snapshot built from files starts empty.
    verdicts: Verdicts = field(default_factory=Verdicts)
    #: The owner's count of the cluster changes it has taken in when it made this
    #: snapshot: two snapshots of one owner with the same stamp hold the same cluster
    #: state, only their clocks may differ. None: unknown (a snapshot built from files).
    stamp: int | None = None
    #: Called by the session that opens on this snapshot, before anything writes into
    #: it, with the jobs it parked (see :mod:`pumice.framework.parking`; it writes
    #: into them only to admit one, and takes that one out of the mapping then): the
    #: owner of shared jobs records what it will restore (see
    #: ``SchedulerCache.settle``). None: nothing to tell.
    lend: Callable[[Mapping[str, Any]], None] | None = None
    #: The jobs that changed since the last snapshot a session opened on, by uid, as
    #: its owner counts them (every job a cluster event or a repair rebuilt). None:
    #: unknown (a snapshot built from files).
    changed: set[str] | None = None

    def records(self, kind: str) -> Mapping[str, Any]:
        """The records of side-object ``kind`` by key (empty when there are none)."""
        return self.objects.get(kind) or {}

    def job_ledger(self) -> Ledger:
        """Per-queue sums over ``jobs`` as they were when the cycle began."""
        if self.ledger is None:
            self.ledger = Ledger.of(self.space, self.jobs.values())
        return self.ledger

    def affinity_about(self) -> bool:
        """Some job or node holds a task with required inter-pod (anti-)affinity terms,
        so where one pod may go depends on the others."""
        return self.job_ledger().affinity_jobs > 0 or self.nodes.affinity > 0

    def active_jobs(self, parked: Mapping[str, object] | None = None) -> dict[str, JobInfo]:
        """The jobs a cycle must look at (see the class docstring), in uid order, less
        those ``parked`` (see :mod:`pumice.framework.parking`)."""
        jobs = self.jobs
        uids = jobs.keys() if self.active is None else self.active
        if parked:
            uids = uids - parked.keys()
        return {uid: jobs[uid] for uid in sorted(uids) if uid in jobs}
