"""SchedulerCache: cluster watch events in, a snapshot per cycle out, decisions applied.

Why incremental: a simulation runs thousands of cycles over tens of thousands of pods,
and rebuilding the snapshot from objects every cycle (parsing every pod again) costs
more than the cycle itself. So the cache parses each object once, when it arrives, and
keeps a *base* model up to date event by event: a :class:`NodeTable` with every bound
pod accounted, a :class:`JobInfo` per PodGroup (or bare pod) with its tasks, the queues.
A pod update only re-reads what a pod may change (node, phase, deletion mark).

:meth:`SchedulerCache.snapshot` hands the base to a cycle: the node table copied (its
task rows on first write), the jobs and tasks *shared*, with the jobs the cycle must look
at named (``Snapshot.active``: not settled, or changed since the last cycle) and the
per-queue sums kept job by job (:mod:`pumice.api.ledger`), so that a cycle's cost follows
its active jobs, not the cluster's size. A cycle writes into the jobs it works on;
:meth:`SchedulerCache.settle` undoes that before anything else happens. The result
decides as the snapshot :func:`pumice.cache.build.build_snapshot` would build from the
same objects (``tests/cache/test_cache.py`` checks it); a change of nodes, queues or
priority classes rebuilds the base from the parsed records (rare: they are set-up
objects).

The HyperNode tree (``Snapshot.topology``) is built from the HyperNode records and the
nodes' names and labels, and kept from snapshot to snapshot: it is built again only
when a HyperNode changes or a node is added, removed or relabelled (a status write of
a HyperNode, or a node's heartbeat, keeps it). A tree that would lie (a cycle of
members, a HyperNode with two parents) raises, or with ``on_bad`` is reported there
and repaired (see :func:`pumice.api.hypernode.build_topology`).

:meth:`SchedulerCache.apply` carries out a cycle's decisions through the
:class:`~pumice.cluster.protocol.Cluster` protocol: evictions, binds, podgroup status.
Nothing here knows whether the cluster is simulated.

Gangs of other dialects come under kinds of their own
(:data:`~pumice.cluster.protocol.GANG_KINDS`), so that PodGroups of one name in one
namespace but of different API groups are two objects; the cache keeps every PodGroup
record by its job's uid, which cannot collide across dialects. Their status is written
in their own vocabulary (:mod:`pumice.cluster.gang_status`), never read: a gang's phase
is derived from its pods (see ``derived_phase``).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.api import gang_apis, parse
from pumice.api.hypernode import (
    HyperNodeRecord,
    NodeFacts,
    Topology,
    build_topology,
    parse_hypernode,
)
from pumice.api.job import INQUEUE, PENDING, JobInfo
from pumice.api.ledger import Ledger
from pumice.api.node import NodeSpec, NodeTable
from pumice.api.node_metrics import KIND as NODE_METRICS
from pumice.api.parse import copy_tree
from pumice.api.pdb import PdbRecord, parse_pdb
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace
from pumice.api.selectors import NodeIndex
from pumice.api.side_objects import SIDE_PARSERS
from pumice.api.snapshot import Snapshot
from pumice.api.task import TERMINATED_STATUSES, TaskInfo, TaskStatus, status_of_pod
from pumice.api.verdicts import Verdicts
from pumice.cache.build import (
    DEFAULT_SCHEDULER,
    check_queue_tree,
    invalid_group_reason,
    skipped_why,
)
from pumice.cache.model import (
    ModelBuilder,
    bare_phase,
    derived_phase,
    queue_fix,
    resource_space,
)
from pumice.cluster.gang_status import (
    GangFacts,
    coscheduling_status,
    workload_podgroup_status,
)
from pumice.cluster.protocol import (
    DELETED,
    KINDS,
    Cluster,
    WatchEvent,
    object_key,
)
from pumice.errors import InputError
from pumice.framework.decisions import Decisions
from pumice.framework.slots import SlotMemory

#: Called with (kind, key, object, error) for an object that does not parse, when the
#: cache is asked to skip bad objects instead of failing (``pumice run``).
BadObject = Callable[[str, str, Mapping[str, Any], InputError], None]

#: The node table's change log is started afresh beyond this length (views kept on it
#: by :class:`~pumice.framework.slots.SlotMemory` are then rebuilt once).
MAX_NODE_LOG = 1_000_000

_PARSERS = {
    "Node": parse.parse_node,
    "Pod": parse.parse_pod,
    "PodGroup": gang_apis.parse_any_podgroup,  # (every dialect: see gang_apis)
    "CoschedulingPodGroup": gang_apis.parse_coscheduling_podgroup,
    "WorkloadPodGroup": gang_apis.parse_k8s_podgroup,
    "Queue": parse.parse_queue,
    "PriorityClass": parse.parse_priority_class,
    "PodDisruptionBudget": parse_pdb,
    "HyperNode": parse_hypernode,
    "Workload": gang_apis.parse_workload,
    "WorkloadV1alpha2": gang_apis.parse_workload,
    **SIDE_PARSERS,
}
#: The kinds of PodGroup records (Volcano's, and other dialects' under their own names).
PODGROUP_KINDS = ("PodGroup", "CoschedulingPodGroup", "WorkloadPodGroup")
WORKLOAD_KINDS = ("Workload", "WorkloadV1alpha2")
#: The kinds the cache lists and watches: the protocol's (a cluster that serves some of
#: them not lists none of those).
CACHE_KINDS = KINDS

HYPERNODE_API_VERSION = "topology.volcano.sh/v1alpha1"


def _rfc3339(wall: float | None) -> str:
    """A time as the API writes one (UTC, whole seconds; None: now)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


def _pod_state(obj: Mapping[str, Any]) -> tuple[str, str, bool, float]:
    """The part of a pod that changes after creation: node, phase, deletion mark, and
    when it was scheduled."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    meta = obj.get("metadata") or {}
    return (
        spec.get("nodeName") or "",
        status.get("phase") or "Pending",
        meta.get("deletionTimestamp") is not None,
        parse.pod_scheduled_at(status) if status.get("conditions") else 0.0,
    )


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
        self.latest = 0.0
        names = (scheduler_name,) if isinstance(scheduler_name, str) else tuple(scheduler_name)
        self.scheduler_name = names[0]
        self._ours = frozenset(("", *names))
        self.on_bad = on_bad
        self.default_queue = default_queue
        self._parsers = dict(_PARSERS)
        if default_queue != parse.DEFAULT_QUEUE:
            for kind in PODGROUP_KINDS:
                self._parsers[kind] = functools.partial(_PARSERS[kind], default_queue=default_queue)
        #: Queues left out of the model because of their parents: name -> reason.
        self.bad_queues: dict[str, str] = {}
        #: Objects left out because they cannot be read (``Kind key`` -> what is wrong),
        #: until they are fixed or deleted: ``Snapshot.skipped``, and the explanation of
        #: the pods of a skipped PodGroup.
        self.invalid: dict[str, str] = {}
        #: HyperNodes the tree was repaired around (not their parse): said per build.
        self._bad_tree: set[str] = set()
        #: Node specs changed in place since the label columns were last rebuilt.
        self._relabel = False
        self.watch = cluster.watch(CACHE_KINDS)
        self.nodes_r: dict[str, NodeSpec] = {}
        self.queues_r: dict[str, parse.QueueRecord] = {}
        self.pcs_r: dict[str, parse.PriorityClassRecord] = {}
        #: PodGroup records of every dialect, by job uid.
        self.pgs_r: dict[str, parse.PodGroupRecord] = {}
        #: (kind, key) of each PodGroup object -> its job uid, and back.
        self._pg_uids: dict[tuple[str, str], str] = {}
        self._pg_objects: dict[str, tuple[str, str]] = {}
        #: The status of other dialects' PodGroups as last seen, by job uid (what a
        #: status write is compared with).
        self._gang_seen: dict[str, dict[str, Any]] = {}
        #: Workload key -> the kind its record came from (a server serving both versions
        #: shows each Workload twice: the v1alpha1 copy is the one read).
        self._workload_kinds: dict[str, str] = {}
        self.pods_r: dict[str, parse.PodRecord] = {}
        self.pdbs_r: dict[str, PdbRecord] = {}
        self.hypernodes_r: dict[str, HyperNodeRecord] = {}
        self.workloads_r: dict[str, gang_apis.WorkloadRecord] = {}
        #: Side objects (storage...) by kind and key, lent to every snapshot as they are.
        self.side_r: dict[str, dict[str, Any]] = {k: {} for k in SIDE_PARSERS}
        #: job uid -> (namespace, reference) of the pods that join a gang of another
        #: dialect by it: what makes a Workload's pod group a job, and what a pod whose
        #: group is missing waits for.
        self._refs: dict[str, tuple[str, parse.GangRef]] = {}
        #: Jobs of other dialects a cycle admitted (Inqueue): their status is not
        #: written, so the cache remembers it (see ``derived_phase``).
        self._admitted: set[str] = set()
        #: The HyperNode tree handed to every snapshot (None: no HyperNodes), built
        #: again only when ``_topology_stale`` (see the module docstring).
        self.topology: Topology | None = None
        self._topology_stale = True
        #: Each PodGroup's spec and annotations as last parsed: a write that changes
        #: neither (a status update) only re-reads the status.
        self._pg_seen: dict[tuple[str, str], tuple] = {}
        #: Base model, kept up to date by events (see the module docstring).
        self.space = ResourceSpace(())
        self.nodes = NodeTable([], self.space)
        #: What allocate keeps per task shape across cycles (see framework.slots).
        self.slot_memory = SlotMemory()
        #: What plugins keep from cycle to cycle (``Snapshot.carried``).
        self.carried: dict[str, Any] = {}
        #: Answers kept from cycle to cycle with what they depend on
        #: (``Snapshot.verdicts``; ``changes`` stamps the cluster state).
        self.verdicts = Verdicts()
        #: ``changes`` when the last apply wrote nothing to the cluster (else None).
        self._quiet: int | None = None
        self.queues: dict[str, QueueInfo] = {}
        self.jobs: dict[str, JobInfo] = {}
        self.tasks: dict[str, TaskInfo] = {}  # pod key -> task
        self.others: dict[str, TaskInfo] = {}  # pods of other schedulers (occupy nodes)
        self.orphans: dict[str, dict[str, TaskInfo]] = {}  # missing podgroup -> tasks
        self.model = ModelBuilder(self.space, (), default_queue)
        self._stale = True
        #: Per-queue sums over the jobs, kept job by job (see :mod:`pumice.api.ledger`).
        self.ledger = Ledger(self.space)
        #: Jobs that are not settled: a cycle has work or status to write for them.
        self.unsettled: set[str] = set()
        #: Jobs changed since the last snapshot (their status is due to be written).
        self.dirty: set[str] = set()
        #: Hand cycles only the active jobs (False: every job, for checking that the
        #: difference changes no decision).
        self.track_active = True
        #: Jobs whose queue does not exist (left out of snapshots, explained instead).
        self.queueless: set[str] = set()
        #: The last snapshot handed out, whose jobs are the base's own (see snapshot()),
        #: and, for its active jobs, (job, version, phase) as handed out.
        self._lent: Snapshot | None = None
        self._lent_jobs: list[tuple[JobInfo, int, str]] = []
        #: Jobs changed by the events of the :meth:`sync` under way (None: outside one).
        self._batch: dict[str, JobInfo] | None = None
        #: Count of changes taken in since the last :meth:`mark_clean` (engine's skip test).
        self.changes = 0
        for kind in CACHE_KINDS:
            for obj in cluster.list(kind):
                if kind in WORKLOAD_KINDS and not gang_apis.is_kubernetes_workload(obj):
                    continue
                key = object_key(kind, obj)
                if on_bad is None:
                    self._record(kind, key, obj)
                    continue
                try:
                    self._record(kind, key, obj)
                except InputError as err:
                    self._bad(kind, key, obj, err)
        self._rebuild()
        self._build_topology()

    # -- events -------------------------------------------------------------------------

    def sync(self) -> int:
        """Take in the events that arrived since the last call; return how many.

        The jobs the events change are brought up to date in the ledger and the active
        sets once each, at the end (a gang's pods bound together, or a pod created and
        its podgroup's status written at one instant, change one job several times)."""
        events = self.watch.drain()
        on_bad = self.on_bad
        batch: dict[str, JobInfo] = {}
        self._batch = batch
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
            self._batch = None
            if not self._stale:
                jobs = self.jobs
                for uid, job in batch.items():
                    if jobs.get(uid) is job:  # (not dropped or replaced since)
                        self._touch(job)
        if self._stale:
            self._rebuild()
        elif self._relabel:
            self._relabel = False
            self.nodes.labels = NodeIndex(self.nodes.specs)
            self.nodes.changes = []  # (fit masks kept per shape depend on labels)
        if self._topology_stale:
            self._build_topology()
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

    def _record(self, kind: str, key: str, obj: Mapping[str, Any]) -> Any:
        try:
            rec = self._parsers[kind](obj)
        except InputError as err:
            raise err.located(obj=f"{kind} {key}") from None
        if kind == "Node":
            self.nodes_r[key] = rec
        elif kind == "Queue":
            self.queues_r[key] = rec
        elif kind == "PriorityClass":
            self.pcs_r[key] = rec
        elif kind in PODGROUP_KINDS:
            prev = self._pg_uids.get((kind, key))
            if prev is not None and prev != rec.uid:  # (now of another API group)
                self.pgs_r.pop(prev, None)
                self._pg_objects.pop(prev, None)
                self._gang_seen.pop(prev, None)
            self.pgs_r[rec.uid] = rec
            self._pg_uids[(kind, key)] = rec.uid
            self._pg_objects[rec.uid] = (kind, key)
            if rec.api != "volcano":
                self._gang_seen[rec.uid] = copy_tree(dict(obj.get("status") or {}))
            self.latest = max(self.latest, rec.creation)
        elif kind == "PodDisruptionBudget":
            self.pdbs_r[key] = rec
        elif kind == "HyperNode":
            self.hypernodes_r[key] = rec
        elif kind in SIDE_PARSERS:
            self.side_r[kind][key] = rec
        elif kind in WORKLOAD_KINDS:  # (keyed namespace/name, whatever the store's key)
            wkey = f"{rec.namespace}/{rec.name}"
            if kind != "Workload" and self._workload_kinds.get(wkey) == "Workload":
                return self.workloads_r[wkey]  # (the v1alpha1 copy is read)
            self.workloads_r[wkey] = rec
            self._workload_kinds[wkey] = kind
            self.latest = max(self.latest, rec.creation)
        else:
            self.pods_r[key] = rec
            self.latest = max(self.latest, rec.creation)
        return rec

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
                self._record(kind, key, ev.obj)
        elif kind == "HyperNode":
            self._handle_hypernode(ev)
        elif kind in SIDE_PARSERS:  # read at snapshot time: no model to update
            table = self.side_r[kind]
            if ev.type == DELETED:
                table.pop(key, None)
                return
            old = table.get(key)
            if self._record(kind, key, ev.obj) == old:
                self.changes -= 1  # (a write of nothing the scheduler reads)
        elif kind in WORKLOAD_KINDS:
            self._handle_workload(ev)
        elif kind == "Node" and ev.type != DELETED and key in self.nodes_r and not self._stale:
            self._handle_node_update(key, ev.obj)
        else:  # nodes, queues, priority classes: set-up objects, rebuild the base
            if kind == "Node":
                self._topology_stale = True  # (a node came or went: members change)
            if ev.type == DELETED:
                {"Node": self.nodes_r, "Queue": self.queues_r, "PriorityClass": self.pcs_r}[
                    kind
                ].pop(key, None)
            else:
                table = self.queues_r if kind == "Queue" else self.pcs_r
                old = table.get(key) if kind != "Node" else None
                if old is not None and self._record(kind, key, ev.obj) == old:
                    self.changes -= 1  # a status write (the queue's own counts): no change
                    return
                if old is None:
                    self._record(kind, key, ev.obj)
            self._stale = True

    def _handle_node_update(self, key: str, obj: Mapping[str, Any]) -> None:
        """A node's update, in place: kubelets rewrite their status every few minutes
        and autoscalers move labels and taints, so an update must cost next to nothing
        and never rebuild the model. One that changes nothing the scheduler reads
        (heartbeats, images, addresses) is dropped after parsing."""
        old = self.nodes_r[key]
        spec = self._record("Node", key, obj)
        if spec == old:
            self.changes -= 1  # (nothing a decision reads moved)
            return
        if spec.labels != old.labels:
            self._topology_stale = True  # (labelMatch members may gain or lose it)
        i = self.nodes.index.get(key)
        if i is None or not set(spec.allocatable) <= set(self.space.index):
            self._stale = True  # a new resource name: new columns
            return
        self.nodes.respec(i, spec)
        if (spec.labels, spec.taints, spec.unschedulable, spec.ready) != (
            old.labels, old.taints, old.unschedulable, old.ready
        ):  # fmt: skip
            self._relabel = True

    def _handle_hypernode(self, ev: WatchEvent) -> None:
        """A HyperNode's change: the tree is built again at the end of the sync, unless
        only its status moved (Volcano's controller writes ``status.nodeCount``)."""
        if ev.type == DELETED:
            if self.hypernodes_r.pop(ev.key, None) is None:
                self.changes -= 1
                return
        else:
            old = self.hypernodes_r.get(ev.key)
            if self._record("HyperNode", ev.key, ev.obj) == old:
                self.changes -= 1  # (the same spec)
                return
        self._topology_stale = True

    def _build_topology(self) -> None:
        """The HyperNode tree over the nodes as they are now; with ``on_bad``, a
        HyperNode that would make it lie is reported there and repaired around."""
        self._topology_stale = False
        if not self.hypernodes_r:  # (most clusters: no need to look at the nodes)
            self.topology = None
            return
        records = [self.hypernodes_r[k] for k in sorted(self.hypernodes_r)]
        facts = [NodeFacts(name, spec.labels) for name, spec in sorted(self.nodes_r.items())]
        on_bad = self._bad_hypernode if self.on_bad is not None else None
        for name in self._bad_tree:
            self.invalid.pop(f"HyperNode {name}", None)  # (said again below if still)
        self._bad_tree = set()
        try:
            self.topology = build_topology(records, facts, on_bad=on_bad)
        except InputError:
            self._topology_stale = True  # (raised again by the next sync until fixed)
            raise

    def _bad_hypernode(self, what: str, message: str) -> None:
        """build_topology's report (``what`` is "HyperNode <name>") as a bad object."""
        assert self.on_bad is not None
        name = what.removeprefix("HyperNode ")
        obj = {"apiVersion": HYPERNODE_API_VERSION, "kind": "HyperNode", "metadata": {"name": name}}
        self._bad_tree.add(name)
        self._bad("HyperNode", name, obj, InputError(message, obj=what))

    def _handle_pod(self, ev: WatchEvent) -> None:
        key = ev.key
        if ev.type == DELETED:
            self.pods_r.pop(key, None)
            if not self._stale:
                self._remove_pod(key)
            return
        if key not in self.pods_r:
            rec = self._record("Pod", key, ev.obj)
            if not self._stale:
                if not set(rec.resreq) <= set(self.space.index) or not set(rec.init_resreq) <= set(
                    self.space.index
                ):
                    self._stale = True  # a new resource name: new columns
                else:
                    self._add_pod(key, rec)
            return
        rec = self.pods_r[key]
        node, phase, terminating, scheduled_at = _pod_state(ev.obj)
        rec.node_name, rec.phase, rec.terminating = node, phase, terminating
        rec.scheduled_at = scheduled_at
        notes = (ev.obj.get("metadata") or {}).get("annotations") or {}
        noted = notes != rec.annotations
        if noted:  # (what a bind wrote before it: the cards a device agent reads)
            rec.annotations = parse.as_labels(notes, "metadata.annotations")
        claimed = any(r.waiting for r in rec.device_claims)
        if claimed:  # (the claims the resource-claim controller made, in the status)
            claims = self._device_claims(key, ev.obj)
            claimed = claims != rec.device_claims
            rec.device_claims = claims
        if self._stale:
            return
        task = self.tasks.get(key) or self.others.get(key)
        if task is None:
            return
        job = self.jobs.get(task.job) if task.job else None
        if noted or claimed:
            task.annotations = rec.annotations
            task.device_claims = rec.device_claims
            if job is not None:
                self._touch(job)
        if task.scheduled_at != scheduled_at:
            task.scheduled_at = scheduled_at
            if job is not None:
                self._touch(job)
        status = status_of_pod(phase, node, terminating)
        new_node = node or None
        if status == task.status and new_node == task.node:
            return
        self._place(task, None)
        if job is not None:
            job.update_status(task, status)
            if job.bare:
                job.phase = bare_phase(job)
            elif job.api != "volcano":
                job.phase = derived_phase(job)
            self._touch(job)
        else:
            task.status = status
        self._place(task, new_node)

    @staticmethod
    def _device_claims(key: str, obj: Mapping[str, Any]) -> tuple[Any, ...]:
        """A pod's DRA claims as its spec and status name them now."""
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        try:
            return parse.pod_device_claims(
                parse.as_mapping(obj.get("spec"), "spec"),
                parse.as_mapping(obj.get("status"), "status"),
                namespace,
            )
        except InputError as err:
            raise err.located(obj=f"Pod {key}") from None

    def _handle_podgroup(self, ev: WatchEvent) -> None:
        kind, key = ev.kind, ev.key
        if ev.type == DELETED:
            uid = self._pg_uids.pop((kind, key), None)
            self._pg_seen.pop((kind, key), None)
            if uid is None:
                return
            self.pgs_r.pop(uid, None)
            self._pg_objects.pop(uid, None)
            self._gang_seen.pop(uid, None)
            if not self._stale:
                self._drop_job(uid)
            return
        prev = self._pg_uids.get((kind, key))
        old = self.pgs_r.get(prev) if prev is not None else None
        spec = ev.obj.get("spec")
        annotations = (ev.obj.get("metadata") or {}).get("annotations")
        now_seen = (ev.obj.get("apiVersion"), spec, annotations)
        seen = self._pg_seen.get((kind, key))
        if old is not None and seen is not None and seen == now_seen:
            if old.api != "volcano":
                # Its status is pumice's own writing in another vocabulary: kept to
                # compare the next write with, and not read.
                self._gang_seen[old.uid] = copy_tree(dict(ev.obj.get("status") or {}))
                self.changes -= 1
                return
            # Only the status moved (the scheduler's own writes, mostly): read that.
            try:
                phase, conditions, counts = parse.podgroup_status(ev.obj)
            except InputError as err:
                raise err.located(obj=f"PodGroup {key}") from None
            # (in place: no model object keeps the record, the cache's tables only)
            old.phase, old.conditions, old.counts = phase, conditions, counts
            rec = old
        else:
            rec = self._record(kind, key, ev.obj)
            self._pg_seen[(kind, key)] = copy_tree(now_seen)
        if self._stale:
            return
        if old is not None and old.uid != rec.uid:
            self._drop_job(old.uid)  # (now a PodGroup of another API group)
            old = None
        uid = rec.uid
        job = self.jobs.get(uid)
        if old is None or job is None:
            self._add_job(rec)
            return
        if (
            old.min_member,
            old.min_task_member,
            old.min_resources,
            old.min_quota,
            old.queue,
            old.priority_class,
        ) != (
            rec.min_member,
            rec.min_task_member,
            rec.min_resources,
            rec.min_quota,
            rec.queue,
            rec.priority_class,
        ):
            tasks = list(job.tasks.values())
            del self.jobs[uid]
            self._add_job(rec, tasks=tasks)
            return
        if rec.api == "volcano":
            job.phase = rec.phase
            job.conditions = rec.conditions
        job.annotations = rec.annotations
        self._touch(job)

    def _drop_job(self, uid: str) -> None:
        """The object of job ``uid`` is gone: its pods wait for it (see ``orphans``)."""
        job = self.jobs.pop(uid, None)
        self._forget(uid)
        if job is not None and job.tasks:
            self.orphans[uid] = dict(job.tasks)

    def _handle_workload(self, ev: WatchEvent) -> None:
        """A Workload's change: the jobs of its pod groups (v1alpha1), made from the
        pods that name them, are dropped and made again from the new spec."""
        if not gang_apis.is_kubernetes_workload(ev.obj):
            self.changes -= 1  # (another group's Workload: not a scheduling object)
            return
        meta = ev.obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        if ev.kind != "Workload" and self._workload_kinds.get(key, ev.kind) != ev.kind:
            self.changes -= 1  # (the v1alpha2 copy of a v1alpha1 Workload: not read)
            return
        if ev.type == DELETED:
            self._workload_kinds.pop(key, None)
            if self.workloads_r.pop(key, None) is None:
                self.changes -= 1
                return
        else:
            old = self.workloads_r.get(key)
            if self._record(ev.kind, ev.key, ev.obj) == old:
                self.changes -= 1  # (the same spec)
                return
        if self._stale:
            return
        prefix = gang_apis.workload_prefix(key)
        for uid in [u for u in self.jobs if u.startswith(prefix)]:
            self._drop_job(uid)
        for uid in sorted(u for u in self.orphans if u.startswith(prefix)):
            namespace, ref = self._refs[uid]
            g = gang_apis.workload_gang(ref, namespace, self.workloads_r, self.default_queue)
            if g is not None:
                self._add_job(g, uid)

    # -- the base model -----------------------------------------------------------------

    def _rebuild(self) -> None:
        """Build the base model from the parsed records (start, or a set-up change)."""
        self._stale = self._relabel = False
        queues_r = self._valid_queues([self.queues_r[k] for k in sorted(self.queues_r)])
        space = self.space = resource_space(
            self.nodes_r.values(), self.pods_r.values(), self.pgs_r.values(), queues_r
        )
        self.model = ModelBuilder(
            space, (self.pcs_r[k] for k in sorted(self.pcs_r)), self.default_queue
        )
        self.nodes = NodeTable(list(self.nodes_r.values()), space)
        self.queues = {q.name: self.model.queue(q) for q in queues_r}
        self.jobs, self.tasks, self.others, self.orphans = {}, {}, {}, {}
        self.ledger = Ledger(space)
        self.unsettled, self.dirty, self.queueless = set(), set(), set()
        for key in sorted(self.pgs_r):
            self._add_job(self.pgs_r[key])
        for key in sorted(self.pods_r):
            self._add_pod(key, self.pods_r[key])

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

    def _add_job(
        self, g: parse.PodGroupRecord, uid: str | None = None, tasks: list[TaskInfo] | None = None
    ) -> JobInfo:
        """The job of ``g`` (``uid``: see ``ModelBuilder.job``), with ``tasks`` and the
        pods that waited for it."""
        job = self.model.job(g, uid)
        uid = job.uid
        implicit = self.jobs.get(uid)
        self.jobs[uid] = job
        tasks = list(tasks or ())
        tasks.extend(self.orphans.pop(uid, {}).values())
        if implicit is not None and implicit.bare:
            # The PodGroup the controller made for pods held as an implicit job of the
            # same name: they are its tasks now.
            tasks.extend(implicit.tasks.values())
        for task in tasks:
            task.job = uid
            job.add_task(task)
            self.model.join(job, task)
        if job.api != "volcano":
            if uid in self._admitted:
                job.phase = INQUEUE
            job.phase = derived_phase(job)
        self._touch(job)
        return job

    def _add_pod(self, key: str, p: parse.PodRecord) -> None:
        ours = p.scheduler_name in self._ours
        status = status_of_pod(p.phase, p.node_name, p.terminating)
        job_uid: str | None = None
        if ours and p.group:
            job_uid = f"{p.namespace}/{p.group}"
        elif ours and p.gang is not None:
            job_uid = p.gang.uid(p.namespace)
            self._refs[job_uid] = (p.namespace, p.gang)
            if job_uid not in self.jobs:  # (a Workload's pod group: made by its pods)
                g = gang_apis.workload_gang(
                    p.gang, p.namespace, self.workloads_r, self.default_queue
                )
                if g is not None:
                    self._add_job(g, job_uid)
        elif ours:
            job_uid = self.model.bare_job_for(self.jobs, p, status).uid
        task = self.model.task(p, job_uid, status, None)
        if job_uid is None:
            self.others[key] = task
        else:
            self.tasks[key] = task
            job = self.jobs.get(job_uid)
            if job is None:
                self.orphans.setdefault(job_uid, {})[task.uid] = task
            else:
                job.add_task(task)
                self.model.join(job, p)
                if job.bare:
                    job.phase = bare_phase(job)
                elif job.api != "volcano":
                    job.phase = derived_phase(job)
                self._touch(job)
        self._place(task, p.node_name or None)

    def _place(self, task: TaskInfo, node: str | None) -> None:
        """Take ``task`` off its node (``node`` None) or account it on ``node``."""
        if node is None:
            if task.node is not None:
                i = self.nodes.index.get(task.node)
                if i is not None:
                    self.nodes.remove_task(i, task)
            task.node = None
            return
        task.node = node
        i = self.nodes.index.get(node)
        if i is not None:
            self.nodes.add_task(i, task)

    def _remove_pod(self, key: str) -> None:
        task = self.tasks.pop(key, None) or self.others.pop(key, None)
        if task is None:
            return
        self._place(task, None)
        if task.job is None:
            return
        job = self.jobs.get(task.job)
        if job is None:
            orphans = self.orphans.get(task.job)
            if orphans is not None:
                orphans.pop(task.uid, None)
                if not orphans:
                    del self.orphans[task.job]
                    self._refs.pop(task.job, None)
            return
        job.update_status(task, TaskStatus.UNKNOWN)  # leaves `allocated` in step
        job.by_status[TaskStatus.UNKNOWN].pop(task.uid, None)
        del job.tasks[task.uid]
        if not job.tasks:
            self._refs.pop(job.uid, None)
        if (job.bare or gang_apis.is_workload_gang(job.uid)) and not job.tasks:
            del self.jobs[job.uid]
            self._forget(job.uid)
        else:
            if job.bare:
                job.phase = bare_phase(job)
            elif job.api != "volcano":
                job.phase = derived_phase(job)
            self._touch(job)

    def _touch(self, job: JobInfo) -> None:
        """``job`` changed: its ledger part, whether it is settled, and its status is due
        (during :meth:`sync`, once at its end)."""
        uid = job.uid
        if self._batch is not None:
            self._batch[uid] = job
            return
        self.ledger.update(job)
        self.dirty.add(uid)
        if job.queue in self.queues:
            self.queueless.discard(uid)
        else:
            self.queueless.add(uid)
        if job.settled():
            self.unsettled.discard(uid)
        else:
            self.unsettled.add(uid)

    def _forget(self, uid: str) -> None:
        self.ledger.remove(uid)
        self.dirty.discard(uid)
        self.unsettled.discard(uid)
        self.queueless.discard(uid)
        self._admitted.discard(uid)

    # -- what the engine asks -----------------------------------------------------------

    def has_pending_work(self) -> bool:
        """True when some job has a task waiting for a node or is not admitted yet: only
        then can a cycle decide anything (every action starts from pending work)."""
        jobs = self.jobs
        for uid in self.unsettled:  # a settled job has neither
            job = jobs.get(uid)
            if job is not None and (job.phase == PENDING or job.by_status.get(TaskStatus.PENDING)):
                return True
        return False

    # -- snapshot -----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The current state as a snapshot (syncs first).

        The snapshot shares the base's jobs and tasks instead of copying them, so that a
        cycle costs what it looks at (its active jobs: see ``Snapshot.active``), not the
        size of the cluster; the node table is copied (its task rows on first write).
        Whatever the cycle writes into shared jobs is undone by :meth:`settle`, which
        :meth:`apply` runs first (and the next snapshot, if no apply came between).
        """
        self.settle()
        self.sync()
        blocked: dict[str, str] = {}
        for uid, orphans in self.orphans.items():
            if all(t.status in TERMINATED_STATUSES for t in orphans.values()):
                continue  # (finished pods wait for nothing: not a pending job)
            ref = self._refs.get(uid)
            why = self.invalid.get(f"PodGroup {uid}") if ref is None else None
            if ref is not None:
                blocked[uid] = gang_apis.missing_reason(ref[1], ref[0], self.workloads_r)
            elif why is not None:
                blocked[uid] = invalid_group_reason(uid, why)
            else:
                blocked[uid] = (
                    f"PodGroup {uid} does not exist; create it or fix the "
                    f"{parse.GROUP_ANNOTATION} annotation of its pods"
                )
        jobs = dict(self.jobs)
        if len(self.nodes.changes) > MAX_NODE_LOG:
            self.nodes.changes = []  # (the views kept on the old log start afresh)
        for uid in sorted(self.queueless):
            job = jobs.pop(uid)
            bad = self.bad_queues.get(job.queue)
            blocked[uid] = (
                f"queue {job.queue!r} is left out because {bad}; fix its spec.parent"
                if bad is not None
                else f"queue {job.queue!r} does not exist; create the Queue or {queue_fix(job)}"
            )
        active = (self.unsettled | self.dirty) - self.queueless
        self.dirty = set()
        self._lent_jobs = []

        def lend() -> None:
            # What settle restores, taken when a session opens (before it writes): a
            # cycle that repeats the last one opens none, and costs none of this.
            self._lent_jobs = [(jobs[uid], jobs[uid].version, jobs[uid].phase) for uid in active]

        queues = dict(self.queues)  # (read-only specs: see ModelBuilder.queue)
        snap = self._lent = Snapshot(
            now=self.clock() if self.clock is not None else self.latest,
            space=self.space,
            nodes=self.nodes.copy(),
            jobs=jobs,
            queues=queues,
            priority_classes=dict(self.model.priority_classes),
            default_priority=self.model.default_priority,
            blocked=blocked,
            pdbs=[self.pdbs_r[k] for k in sorted(self.pdbs_r)],
            active=active if self.track_active else None,
            ledger=self.ledger,
            slot_memory=self.slot_memory,
            carried=self.carried,
            verdicts=self.verdicts,
            stamp=self.changes,
            lend=lend,
            topology=self.topology,
            notes=list(self.topology.notes) if self.topology is not None else [],
            skipped=dict(self.invalid),
            objects=self.side_r,
        )
        return snap

    def settle(self) -> None:
        """Undo what the last cycle wrote into the base's jobs and tasks.

        A cycle writes session notes and phases into its active jobs, and moves tasks
        through statements (allocations, evictions, whether committed or rolled back);
        every such job is in ``Snapshot.touched`` or changed its ``JobInfo.version``.
        Those jobs are rebuilt from the cache's records, which a cycle never sees, and
        the decisions reach the base the way every change does: as cluster events.
        """
        snap, self._lent = self._lent, None
        if snap is None:
            return
        lent, self._lent_jobs = self._lent_jobs, []
        jobs = self.jobs
        rebuild: set[str] = set(snap.touched)
        for job, version, phase in lent:
            job.phase = phase
            if job.fit_errors:
                job.fit_errors = {}
            job.note, job.tentative, job.tentative_at_most = "", 0, False
            if job.version != version:
                rebuild.add(job.uid)
        for uid in sorted(rebuild):
            job = jobs.get(uid)
            if job is not None:
                job.fit_errors, job.note, job.tentative = {}, "", 0
                job.tentative_at_most = False
                self._reindex(job)
        for key in sorted(snap.touched_pods):  # pods of no job a statement moved
            task, rec = self.others.get(key), self.pods_r.get(key)
            if task is not None and rec is not None:
                task.status = status_of_pod(rec.phase, rec.node_name, rec.terminating)
                task.node = rec.node_name or None

    def _reindex(self, job: JobInfo) -> None:
        """Rebuild ``job`` with its tasks' status and node as the cluster last said."""
        tasks = list(job.tasks.values())
        new = _respec(job, allocated=self.space.zeros(), tasks={}, by_status={})
        for t in tasks:
            rec = self.pods_r.get(f"{t.namespace}/{t.name}")
            if rec is not None:
                t.status = status_of_pod(rec.phase, rec.node_name, rec.terminating)
                t.node = rec.node_name or None
            new.add_task(t)
        self.jobs[job.uid] = new
        self._touch(new)

    # -- decisions ----------------------------------------------------------------------

    def apply(self, decisions: Decisions) -> ApplyResult:
        """Carry out ``decisions``: evictions, then binds, then podgroup status.

        Decisions that repeat the last cycle's on the same cluster state
        (``Decisions.repeat_of`` is this state's stamp) after an apply that wrote
        nothing would write nothing again: they are not walked."""
        self.settle()
        if decisions.repeat_of is not None and decisions.repeat_of == self._quiet == self.changes:
            return ApplyResult()
        self._quiet = None
        out = ApplyResult()
        wrote = bool(decisions.evictions or decisions.binds)
        reasons = {a.get("task"): str(a.get("reason", "")) for a in decisions.audit if "task" in a}
        for pod in decisions.evictions:
            if self.cluster.evict(pod, reasons.get(pod, "")):
                out.evicted.append(pod)
            else:
                out.refused.append(pod)
        prebind = decisions.prebind
        for pod, node in decisions.binds.items():
            if self.cluster.bind(pod, node, prebind.get(pod)):
                out.bound.append((pod, node))
            else:
                out.refused.append(pod)
        bound_now: dict[str, int] = {}
        for pod, _ in out.bound:
            task = self.tasks.get(pod)
            if task is not None and task.job is not None:
                bound_now[task.job] = bound_now.get(task.job, 0) + 1
        for uid, upd in decisions.podgroups.items():
            rec = self.pgs_r.get(uid)
            if rec is None or rec.api != "volcano":
                wrote = wrote or rec is not None  # (its status carries the time)
                if upd.phase:
                    self._remember_admission(uid, upd.phase, out)
                if rec is not None:
                    self._write_gang_status(rec, upd, bound_now.get(uid, 0))
                continue
            if not upd.phase:
                continue
            if rec.phase != upd.phase:
                out.phases.append(uid)
            elif rec.counts == (upd.running, upd.succeeded, upd.failed) and _same_conditions(
                rec.conditions, upd.conditions
            ):
                continue  # what the cluster already says (as far as the cache has seen)
            wrote = True
            self.cluster.update_podgroup_status(
                uid,
                upd.phase,
                upd.conditions,
                running=upd.running,
                succeeded=upd.succeeded,
                failed=upd.failed,
            )
        if not wrote and not out.phases:
            self._quiet = self.changes
        return out

    def _write_gang_status(self, rec: parse.PodGroupRecord, upd: Any, bound_now: int) -> None:
        """Write the status of another dialect's PodGroup, in its vocabulary, when it
        differs from what the object says (``bound_now``: this cycle's binds of its
        pods, not seen on the watch yet)."""
        uid = rec.uid
        job, where = self.jobs.get(uid), self._pg_objects.get(uid)
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
        seen = self._gang_seen.get(uid) or {}
        now = _rfc3339(self.clock() if self.clock is not None else None)
        kind = where[0]
        if kind == "CoschedulingPodGroup":
            status: dict[str, Any] | None = coscheduling_status(facts, seen, now)
        else:
            status = workload_podgroup_status(facts, seen, now)
        if status is None or all(seen.get(k) == v for k, v in status.items()):
            return  # (what the object already says)
        self.cluster.update_gang_status(kind, where[1], status)

    def _remember_admission(self, uid: str, phase: str, out: ApplyResult) -> None:
        """A cycle admitted (or gave back) a gang of another dialect, whose status pumice
        does not write: the cache keeps its Inqueue phase itself, as Volcano keeps it in
        the PodGroup, so that later cycles see it admitted."""
        job = self.jobs.get(uid)
        if job is None or job.api == "volcano" or phase not in (INQUEUE, PENDING):
            return
        if (phase == INQUEUE) == (uid in self._admitted):
            return
        if phase == INQUEUE:
            self._admitted.add(uid)
        else:
            self._admitted.discard(uid)
        before = job.phase
        job.phase = phase
        job.phase = derived_phase(job)
        if job.phase != before:
            out.phases.append(uid)
            self.changes += 1
            self._touch(job)


def _same_conditions(seen: list[dict[str, Any]], new: list[dict[str, Any]]) -> bool:
    """``condition_key(seen) == condition_key(new)`` without building either key: every
    cycle compares the status of each job it looked at with what the cluster says, and
    most say the same again."""
    n = len(new)
    if len(seen) != n:
        return False
    for i in range(n):  # (indexing, not zip: the hot path of a cycle's apply)
        a, b = seen[i], new[i]
        if a.get("message") != b.get("message"):
            return False
        if a.get("type") != b.get("type"):
            return False
        if a.get("reason") != b.get("reason"):
            return False
        if a.get("status") != b.get("status"):
            return False
    return True


def _respec(job: JobInfo, **state: Any) -> JobInfo:
    """A job with ``job``'s spec and the given task state; session notes start empty."""
    return dataclasses.replace(
        job, fit_errors={}, note="", tentative=0, tentative_at_most=False, **state
    )


__all__ = ["ApplyResult", "SchedulerCache"]
