"""SchedulerCache: cluster watch events in, a snapshot per cycle out, decisions applied.

Why incremental: a simulation runs thousands of cycles over tens of thousands of pods,
and rebuilding the snapshot from objects every cycle (parsing every pod again) costs
more than the cycle itself. So the cache parses each object once, when it arrives
(:mod:`pumice.cache.records`), and keeps a *base* model up to date event by event
(:mod:`pumice.cache.base`): a :class:`NodeTable` with every bound pod accounted, a
:class:`JobInfo` per PodGroup (or bare pod) with its tasks, the queues. A pod update
only re-reads what a pod may change (node, phase, deletion mark).

This module takes the events in (deciding, per event, whether the base changes in
place or is rebuilt) and hands the base out. :meth:`SchedulerCache.snapshot` hands the
base to a cycle: the node table copied on write (its matrices and task rows are the
base's until the cycle changes them), the jobs and tasks *shared*, with the jobs the
cycle must look at named (``Snapshot.active``: not settled, or changed since the last
cycle) and the per-queue sums kept job by job
(:mod:`pumice.api.ledger`), so that a cycle's cost follows its active jobs, not the
cluster's size. A cycle writes into the jobs it works on; :meth:`SchedulerCache.settle`
undoes that before anything else happens. The result decides as the snapshot
:func:`pumice.cache.build.build_snapshot` would build from the same objects
(``tests/cache/test_cache.py`` checks it); a change of nodes, queues or priority
classes rebuilds the base from the parsed records (rare: they are set-up objects).

The HyperNode tree (``Snapshot.topology``) is kept from snapshot to snapshot and built
again only when HyperNodes or nodes change (:mod:`pumice.cache.tree`).

:meth:`SchedulerCache.apply` carries out a cycle's decisions through the
:class:`~pumice.cluster.protocol.Cluster` protocol (:mod:`pumice.cache.apply`):
evictions, binds, podgroup status. Nothing here knows whether the cluster is simulated.

Gangs of other dialects come under kinds of their own
(:data:`~pumice.cluster.protocol.GANG_KINDS`); their status is written in their own
vocabulary (:mod:`pumice.cluster.gang_status`), never read: a gang's phase is derived
from its pods (see ``derived_phase``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from pumice.api import gang_apis, parse
from pumice.api.hypernode import Topology
from pumice.api.job import PENDING, JobInfo
from pumice.api.ledger import Ledger
from pumice.api.node import NodeTable
from pumice.api.node_metrics import KIND as NODE_METRICS
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace
from pumice.api.selectors import NodeIndex
from pumice.api.side_objects import SIDE_PARSERS
from pumice.api.snapshot import Snapshot
from pumice.api.task import TaskInfo
from pumice.api.verdicts import Verdicts
from pumice.cache.apply import ApplyResult, DecisionApplier
from pumice.cache.base import BaseModel
from pumice.cache.build import DEFAULT_SCHEDULER, check_queue_tree, skipped_why
from pumice.cache.model import ModelBuilder
from pumice.cache.records import (
    CACHE_KINDS,
    PODGROUP_KINDS,
    WORKLOAD_KINDS,
    BadObject,
    Records,
)
from pumice.cache.tree import HyperNodeTree
from pumice.cluster.protocol import DELETED, Cluster, WatchEvent, object_key
from pumice.errors import InputError
from pumice.framework.decisions import Decisions
from pumice.framework.slots import SlotMemory

if TYPE_CHECKING:
    from pumice.framework.parking import Parked

#: The node table's change log is started afresh beyond this length (views kept on it
#: by :class:`~pumice.framework.slots.SlotMemory` are then rebuilt once).
MAX_NODE_LOG = 1_000_000


class SchedulerCache:
    """Objects from a :class:`Cluster`, kept as a scheduling model.

    Contract: call :meth:`sync` (or :meth:`snapshot`, which syncs) to take in the events
    that arrived since; a snapshot is good for one cycle, until :meth:`apply` (or the
    next :meth:`snapshot`) settles it: its jobs are the cache's own; :meth:`apply` never
    raises for a stale decision (it is reported as refused).
    Malformed objects raise :class:`InputError` naming the object, unless ``on_bad`` is
    given: then a bad object is reported to it and treated as absent (a bad update of
    an object the cache holds removes it), and everything else is still scheduled; a
    Queue whose parents form a cycle or name no queue is left out the same way.

    ``scheduler_name`` may be several names: pods with any of them (or none) are ours.

    The parsed records are :attr:`records` (their tables also under the cache's own
    names: ``nodes_r``, ``pods_r``...), the model :attr:`base` (its parts also as the
    cache's read-only attributes: ``jobs``, ``tasks``, ``nodes``...).
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        scheduler_name: str | Collection[str] = DEFAULT_SCHEDULER,
        clock: Callable[[], float] | None = None,
        on_bad: BadObject | None = None,
        default_queue: str = parse.DEFAULT_QUEUE,
    ) -> None:
        self.cluster = cluster
        #: "Now" of each snapshot (the simulator's virtual clock); by default the latest
        #: creation time seen, as ``build_snapshot`` does.
        self.clock = clock
        names = (scheduler_name,) if isinstance(scheduler_name, str) else tuple(scheduler_name)
        self.scheduler_name = names[0]
        self.on_bad = on_bad
        self.default_queue = default_queue
        #: Queues left out of the model because of their parents: name -> reason.
        self.bad_queues: dict[str, str] = {}
        #: Objects left out because they cannot be read (``Kind key`` -> what is wrong),
        #: until they are fixed or deleted: ``Snapshot.skipped``, and the explanation of
        #: the pods of a skipped PodGroup.
        self.invalid: dict[str, str] = {}
        #: Node specs changed in place since the label columns were last rebuilt.
        self._relabel = False
        self.watch = cluster.watch(CACHE_KINDS)
        records = self.records = Records(default_queue)
        # (the records' tables, under the names the cache's callers know them by)
        self.nodes_r, self.queues_r, self.pcs_r = records.nodes_r, records.queues_r, records.pcs_r
        self.pgs_r, self.pods_r, self.pdbs_r = records.pgs_r, records.pods_r, records.pdbs_r
        self.hypernodes_r, self.workloads_r = records.hypernodes_r, records.workloads_r
        self.side_r = records.side_r
        #: The HyperNode tree handed to every snapshot (see :mod:`pumice.cache.tree`).
        self.tree = HyperNodeTree(records, self._bad if on_bad is not None else None, self.invalid)
        #: Base model, kept up to date by events (see the module docstring).
        self.base = BaseModel(records, ("", *names), default_queue)
        self._applier = DecisionApplier(cluster, records, self.base, self._admit, clock)
        #: What allocate keeps per task shape across cycles (see framework.slots).
        self.slot_memory = SlotMemory()
        #: What plugins keep from cycle to cycle (``Snapshot.carried``).
        self.carried: dict[str, Any] = {}
        #: Answers kept from cycle to cycle with what they depend on
        #: (``Snapshot.verdicts``; ``changes`` stamps the cluster state).
        self.verdicts = Verdicts()
        self._stale = True
        #: Hand cycles only the active jobs (False: every job, for checking that the
        #: difference changes no decision).
        self.track_active = True
        #: The last snapshot handed out, whose jobs are the base's own (see snapshot()),
        #: and, for its active jobs, (job, version, phase) as handed out.
        self._lent: Snapshot | None = None
        self._lent_jobs: list[tuple[JobInfo, int, str]] = []
        #: The parked jobs a session did not borrow (see ``lend``) and the session's
        #: own parked jobs, which enqueue may unpark during the cycle.
        self._parked: tuple[dict[str, Parked], Mapping[str, Parked]] | None = None
        #: The jobs changed since the last snapshot a session opened on
        #: (``Snapshot.changed``): the base's dirty jobs of every snapshot since.
        self._unlent: set[str] = set()
        #: Count of changes taken in since the last :meth:`mark_clean` (engine's skip test).
        self.changes = 0
        for kind in CACHE_KINDS:
            for obj in cluster.list(kind):
                if kind in WORKLOAD_KINDS and not gang_apis.is_kubernetes_workload(obj):
                    continue
                key = object_key(kind, obj)
                # (a PodGroup's spec is kept as seen, so that its first status write
                # re-reads only the status: see Records.take_podgroup)
                take = records.take_podgroup if kind in PODGROUP_KINDS else records.record
                if on_bad is None:
                    take(kind, key, obj)
                    continue
                try:
                    take(kind, key, obj)
                except InputError as err:
                    self._bad(kind, key, obj, err)
        self._rebuild()
        self.tree.build()

    # -- the base model's parts, as callers know them -----------------------------------

    @property
    def topology(self) -> Topology | None:
        """The HyperNode tree every snapshot is handed (None: no HyperNodes)."""
        return self.tree.topology

    @property
    def latest(self) -> float:
        """The latest creation time seen (see :class:`~pumice.cache.records.Records`)."""
        return self.records.latest

    @property
    def space(self) -> ResourceSpace:
        return self.base.space

    @property
    def nodes(self) -> NodeTable:
        return self.base.nodes

    @property
    def model(self) -> ModelBuilder:
        return self.base.model

    @property
    def queues(self) -> dict[str, QueueInfo]:
        return self.base.queues

    @property
    def jobs(self) -> dict[str, JobInfo]:
        return self.base.jobs

    @property
    def tasks(self) -> dict[str, TaskInfo]:
        """Pod key -> task, for the pods of this scheduler."""
        return self.base.tasks

    @property
    def others(self) -> dict[str, TaskInfo]:
        """Pods of other schedulers (they occupy nodes)."""
        return self.base.others

    @property
    def orphans(self) -> dict[str, dict[str, TaskInfo]]:
        """Missing PodGroup -> the tasks that wait for it."""
        return self.base.orphans

    @property
    def ledger(self) -> Ledger:
        return self.base.ledger

    @property
    def unsettled(self) -> set[str]:
        return self.base.unsettled

    @property
    def dirty(self) -> set[str]:
        return self.base.dirty

    @property
    def queueless(self) -> set[str]:
        return self.base.queueless

    # -- events -------------------------------------------------------------------------

    def sync(self) -> int:
        """Take in the events that arrived since the last call; return how many.

        The jobs the events change are brought up to date in the ledger and the active
        sets once each, at the end (a gang's pods bound together, or a pod created and
        its podgroup's status written at one instant, change one job several times)."""
        events = self.watch.drain()
        on_bad = self.on_bad
        self.base.begin_batch()
        try:
            for ev in events:
                if on_bad is None:
                    self._handle(ev)
                    continue
                try:
                    self._handle(ev)
                except InputError as err:
                    self._bad(ev.kind, ev.key, ev.obj, err)
                    self._handle(WatchEvent(DELETED, ev.kind, ev.key, ev.obj))
                    continue
                if self.invalid:  # (fixed, or deleted)
                    self.invalid.pop(f"{ev.kind} {ev.key}", None)
        finally:
            self.base.end_batch(touch=not self._stale)
        if self._stale:
            self._rebuild()
        elif self._relabel:
            self._relabel = False
            nodes = self.base.nodes
            nodes.labels = NodeIndex(nodes.specs)
            nodes.changes = []  # (fit masks kept per shape depend on labels)
        if self.tree.stale:
            self.tree.build()
        return len(events)

    def _bad(self, kind: str, key: str, obj: Mapping[str, Any], err: InputError) -> None:
        """``obj`` is left out: remembered as invalid, and told to ``on_bad``."""
        assert self.on_bad is not None
        self.invalid[f"{kind} {key}"] = skipped_why(err)
        self.on_bad(kind, key, obj, err)

    def take_node_metrics(self, records: Mapping[str, Any], source: str) -> bool:
        """Nodes' load measured by a query source (``pumice run``'s Prometheus source:
        :class:`~pumice.api.node_metrics.NodeMetricsRecord` by node name), in place of
        what that source said before. They join the NodeMetrics records every snapshot
        lends (keyed ``<source>/<node>``, apart from the cluster's own NodeMetrics
        objects), and count as one change of the cluster when they differ from the last
        ones: a cycle repeated while nothing changed never reads stale load. True when
        they differed."""
        table = self.side_r[NODE_METRICS]
        prefix = f"{source}/"
        new = {f"{prefix}{name}": rec for name, rec in records.items()}
        old = {k: v for k, v in table.items() if k.startswith(prefix)}
        if new == old:
            return False
        for key in old.keys() - new.keys():
            del table[key]
        table.update(new)
        self.changes += 1
        return True

    def _handle(self, ev: WatchEvent) -> None:
        kind, key = ev.kind, ev.key
        self.changes += 1
        if kind == "Pod":
            self._handle_pod(ev)
        elif kind in PODGROUP_KINDS:
            self._handle_podgroup(ev)
        elif kind == "PodDisruptionBudget":  # read at snapshot time: no model to update
            if ev.type == DELETED:
                self.pdbs_r.pop(key, None)
            else:
                self.records.record(kind, key, ev.obj)
        elif kind == "HyperNode":
            if not self.tree.take(ev):
                self.changes -= 1  # (not held, or the same spec)
        elif kind in SIDE_PARSERS:  # read at snapshot time: no model to update
            table = self.side_r[kind]
            if ev.type == DELETED:
                table.pop(key, None)
                return
            old = table.get(key)
            if self.records.record(kind, key, ev.obj) == old:
                self.changes -= 1  # (a write of nothing the scheduler reads)
        elif kind in WORKLOAD_KINDS:
            changed = self.records.take_workload(ev)
            if changed is None:
                self.changes -= 1  # (not a scheduling object, or the same spec)
            elif not self._stale:
                self.base.workload_changed(changed)
        elif kind == "Node" and ev.type != DELETED and key in self.nodes_r and not self._stale:
            self._handle_node_update(key, ev.obj)
        else:  # nodes, queues, priority classes: set-up objects, rebuild the base
            if kind == "Node":
                self.tree.stale = True  # (a node came or went: members change)
            if ev.type == DELETED:
                tables: dict[str, dict[str, Any]] = {
                    "Node": self.nodes_r, "Queue": self.queues_r, "PriorityClass": self.pcs_r
                }  # fmt: skip
                tables[kind].pop(key, None)
            else:
                table = self.queues_r if kind == "Queue" else self.pcs_r
                old = table.get(key) if kind != "Node" else None
                if old is not None and self.records.record(kind, key, ev.obj) == old:
                    self.changes -= 1  # a status write (the queue's own counts): no change
                    return
                if old is None:
                    self.records.record(kind, key, ev.obj)
            self._stale = True

    def _handle_node_update(self, key: str, obj: Mapping[str, Any]) -> None:
        """A node's update, in place: kubelets rewrite their status every few minutes
        and autoscalers move labels and taints, so an update must cost next to nothing
        and never rebuild the model. One that changes nothing the scheduler reads
        (heartbeats, images, addresses) is dropped after parsing."""
        old = self.nodes_r[key]
        spec = self.records.record("Node", key, obj)
        if spec == old:
            self.changes -= 1  # (nothing a decision reads moved)
            return
        if spec.labels != old.labels:
            self.tree.stale = True  # (labelMatch members may gain or lose it)
        nodes = self.base.nodes
        i = nodes.index.get(key)
        if i is None or not set(spec.allocatable) <= set(self.base.space.index):
            self._stale = True  # a new resource name: new columns
            return
        nodes.respec(i, spec)
        if (spec.labels, spec.taints, spec.unschedulable, spec.ready) != (
            old.labels, old.taints, old.unschedulable, old.ready
        ):  # fmt: skip
            self._relabel = True

    def _handle_pod(self, ev: WatchEvent) -> None:
        key = ev.key
        if ev.type == DELETED:
            self.pods_r.pop(key, None)
            if not self._stale:
                self.base.remove_pod(key)
            return
        if key not in self.pods_r:
            rec = self.records.record("Pod", key, ev.obj)
            if not self._stale:
                index = self.base.space.index
                if not set(rec.resreq) <= set(index) or not set(rec.init_resreq) <= set(index):
                    self._stale = True  # a new resource name: new columns
                else:
                    self.base.add_pod(key, rec)
            return
        rec, noted = self.records.update_pod(key, ev.obj)
        if not self._stale:
            self.base.pod_changed(key, rec, noted)

    def _handle_podgroup(self, ev: WatchEvent) -> None:
        kind, key = ev.kind, ev.key
        if ev.type == DELETED:
            uid = self.records.forget_podgroup(kind, key)
            if uid is not None and not self._stale:
                self.base.drop_job(uid)
            return
        old, rec = self.records.take_podgroup(kind, key, ev.obj)
        if rec is None:
            self.changes -= 1  # (another dialect's status: pumice's own writing)
            return
        if not self._stale:
            self.base.podgroup_changed(old, rec)

    def _rebuild(self) -> None:
        """Build the base model from the parsed records (start, or a set-up change)."""
        self._stale = self._relabel = False
        self.base.rebuild(self._valid_queues([self.queues_r[k] for k in sorted(self.queues_r)]))

    def _valid_queues(self, queues_r: list[parse.QueueRecord]) -> list[parse.QueueRecord]:
        """The queues whose tree is sound; without ``on_bad``, a bad tree raises."""
        for name in self.bad_queues:
            self.invalid.pop(f"Queue {name}", None)  # (said again below if still wrong)
        self.bad_queues = {}
        while True:
            try:
                check_queue_tree(queues_r)
                return queues_r
            except InputError as err:
                name = (err.obj or "").removeprefix("Queue ")
                if self.on_bad is None or not any(q.name == name for q in queues_r):
                    raise
                self.bad_queues[name] = err.message
                self._bad("Queue", name, {"kind": "Queue", "metadata": {"name": name}}, err)
                queues_r = [q for q in queues_r if q.name != name]

    # -- what the engine asks -----------------------------------------------------------

    def has_pending_work(self) -> bool:
        """True when some job has a task waiting for a node or is not admitted yet: only
        then can a cycle decide anything (every action starts from pending work)."""
        return self.base.has_pending_work()

    # -- snapshot -----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The current state as a snapshot (syncs first).

        The snapshot shares the base's jobs and tasks instead of copying them (the job
        table too, while no job is left out: see
        :meth:`BaseModel.lend_jobs <pumice.cache.base.BaseModel.lend_jobs>`), so that a
        cycle costs what it looks at (its active jobs: see ``Snapshot.active``), not the
        size of the cluster; the node table is copied on write (see
        :meth:`NodeTable.copy <pumice.api.node.NodeTable.copy>`: its matrices and task
        rows are the base's until the cycle changes them).
        Whatever the cycle writes into shared jobs is undone by :meth:`settle`, which
        :meth:`apply` runs first (and the next snapshot, if no apply came between).
        """
        self.settle()
        self.sync()
        base = self.base
        blocked = base.blocked(self.invalid)
        # (the table itself when no job is left out: see BaseModel.lend_jobs)
        jobs = dict(base.jobs) if base.queueless else base.lend_jobs()
        nodes = base.nodes
        if len(nodes.changes) > MAX_NODE_LOG:
            nodes.changes = []  # (the views kept on the old log start afresh)
        blocked_queues: dict[str, str] = {}
        active = base.unsettled | base.dirty
        if base.queueless:
            for uid in sorted(base.queueless):
                job = jobs.pop(uid)
                blocked[uid] = base.queueless_reason(job, self.bad_queues)
                blocked_queues[uid] = job.queue
            active -= base.queueless
        self._unlent |= base.dirty
        base.dirty = set()
        self._lent_jobs = []

        def lend(parked: Mapping[str, Parked] | None = None) -> None:
            # What settle restores, taken when a session opens (before it writes): a
            # cycle that repeats the last one opens none, and costs none of this. The
            # session's parked jobs are not written unless enqueue admits one (settle
            # finds those).
            lent = active
            if parked:
                lent = active - parked.keys()
                self._parked = (dict(parked), parked)
            self._lent_jobs = [(job, job.version, job.phase) for job in map(jobs.__getitem__, lent)]
            self._unlent = set()

        queues = dict(base.queues)  # (read-only specs: see ModelBuilder.queue)
        topology = self.tree.topology
        self._parked = None
        snap = self._lent = Snapshot(
            now=self.clock() if self.clock is not None else self.records.latest,
            space=base.space,
            nodes=nodes.copy(),
            jobs=jobs,
            queues=queues,
            priority_classes=dict(base.model.priority_classes),
            default_priority=base.model.default_priority,
            blocked=blocked,
            blocked_queues=blocked_queues,
            pdbs=[self.pdbs_r[k] for k in sorted(self.pdbs_r)] if self.pdbs_r else [],
            active=active if self.track_active else None,
            ledger=base.ledger,
            slot_memory=self.slot_memory,
            carried=self.carried,
            verdicts=self.verdicts,
            stamp=self.changes,
            lend=lend,
            changed=self._unlent,
            topology=topology,
            notes=list(topology.notes) if topology is not None else [],
            skipped=dict(self.invalid),
            objects=self.side_r,
        )
        return snap

    def settle(self) -> None:
        """Undo what the last cycle wrote into the base's jobs and tasks (see
        :meth:`BaseModel.restore <pumice.cache.base.BaseModel.restore>`)."""
        snap, self._lent = self._lent, None
        if snap is None:
            return
        lent, self._lent_jobs = self._lent_jobs, []
        parked, self._parked = self._parked, None
        if parked is not None:  # (those the session unparked: enqueue admitted them)
            held, live = parked
            lent.extend(
                (p.job, p.version, PENDING)  # (as parked: Pending, unchanged)
                for p in map(held.__getitem__, held.keys() - live.keys())
            )
        self.base.restore(snap.touched, snap.touched_pods, lent)

    # -- decisions ----------------------------------------------------------------------

    def apply(self, decisions: Decisions) -> ApplyResult:
        """Carry out ``decisions``: evictions, then binds, then podgroup status (see
        :mod:`pumice.cache.apply`).

        Decisions that repeat the last cycle's on the same cluster state
        (``Decisions.repeat_of`` is this state's stamp) after an apply that wrote
        nothing would write nothing again: they are not walked."""
        self.settle()
        return self._applier.apply(decisions, self.changes)

    def _admit(self, uid: str, phase: str) -> bool:
        """A cycle admitted (or gave back) a gang of another dialect: kept in the base
        (see :meth:`BaseModel.admit <pumice.cache.base.BaseModel.admit>`), a change of
        the cluster state when its phase moved."""
        if not self.base.admit(uid, phase):
            return False
        self.changes += 1
        return True


__all__ = ["MAX_NODE_LOG", "SchedulerCache"]
