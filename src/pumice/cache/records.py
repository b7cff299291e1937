"""The scheduler cache's records: every object it watches, parsed once, as last seen.

What the cache reads of the cluster, and nothing it decides: which kinds it lists and
watches, how each kind is parsed (:data:`PARSERS`), and the tables of parsed records by
key that the base model is built from (:mod:`pumice.cache.base`) and snapshots lend.

An update of an object the cache holds re-reads only what may change: a pod's node,
phase, deletion mark, annotations and device claims (:meth:`Records.update_pod`); a
PodGroup whose spec and annotations stand as they were only its status
(:meth:`Records.take_podgroup`), and not even that when it is what the scheduler last
wrote (:meth:`Records.wrote`): most PodGroup events are the scheduler's own status write
coming back.

Gangs of other dialects come under kinds of their own
(:data:`~pumice.cluster.protocol.GANG_KINDS`), so that PodGroups of one name in one
namespace but of different API groups are two objects; their records are kept by their
job's uid, which cannot collide across dialects. Their status is pumice's own writing in
their vocabulary (:mod:`pumice.cluster.gang_status`): kept as last seen, to compare the
next write with, never read.

Contract: a method that parses raises :class:`~pumice.errors.InputError` located at the
object (``Kind key``) and leaves the tables as they were for that object.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from pumice.api import gang_apis, parse
from pumice.api.hypernode import HyperNodeRecord, parse_hypernode
from pumice.api.node import NodeSpec
from pumice.api.parse import copy_tree
from pumice.api.pdb import PdbRecord, parse_pdb
from pumice.api.side_objects import SIDE_PARSERS
from pumice.cluster.protocol import DELETED, KINDS, WatchEvent, condition_key
from pumice.errors import InputError

#: Called with (kind, key, object, error) for an object that does not parse, when the
#: cache is asked to skip bad objects instead of failing (``pumice run``).
BadObject = Callable[[str, str, Mapping[str, Any], InputError], None]

#: How each kind is parsed: (object) -> record.
PARSERS: dict[str, Callable[..., Any]] = {
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


def pod_state(obj: Mapping[str, Any]) -> tuple[str, str, bool, float]:
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


def pod_device_claims(key: str, obj: Mapping[str, Any]) -> tuple[Any, ...]:
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


#: A PodGroup status as a status write compares it: (phase, (running, succeeded,
#: failed), :func:`~pumice.cluster.protocol.condition_key` of the conditions).
StatusKey = tuple[str, tuple[int, int, int], tuple]


def status_key(phase: str, counts: tuple[int, int, int], conditions: Any) -> StatusKey:
    """A PodGroup status without its per-cycle fields (see :data:`StatusKey`)."""
    return (phase, counts, condition_key(conditions))


class Records:
    """Parsed objects by kind and key, as the watch last said them.

    ``latest`` is the latest creation time seen (of pods, PodGroups and Workloads): the
    "now" of a snapshot when the cache has no clock, as ``build_snapshot`` takes it.
    """

    def __init__(self, default_queue: str = parse.DEFAULT_QUEUE) -> None:
        self.parsers: dict[str, Callable[..., Any]] = dict(PARSERS)
        if default_queue != parse.DEFAULT_QUEUE:
            for kind in PODGROUP_KINDS:
                self.parsers[kind] = functools.partial(PARSERS[kind], default_queue=default_queue)
        self.latest = 0.0
        self.nodes_r: dict[str, NodeSpec] = {}
        self.queues_r: dict[str, parse.QueueRecord] = {}
        self.pcs_r: dict[str, parse.PriorityClassRecord] = {}
        #: PodGroup records of every dialect, by job uid.
        self.pgs_r: dict[str, parse.PodGroupRecord] = {}
        #: (kind, key) of each PodGroup object -> its job uid, and back.
        self.pg_uids: dict[tuple[str, str], str] = {}
        self.pg_objects: dict[str, tuple[str, str]] = {}
        #: The status of other dialects' PodGroups as last seen, by job uid (what a
        #: status write is compared with).
        self.gang_seen: dict[str, dict[str, Any]] = {}
        #: The status of Volcano PodGroups as last seen, by job uid, in the form a status
        #: write is compared with (see :func:`status_key`): kept as the status is read,
        #: so that comparing a cycle's status with it costs no walk of the conditions.
        self.pg_status: dict[str, StatusKey] = {}
        #: The status the scheduler last wrote to each Volcano PodGroup, by job uid:
        #: (phase, conditions, counts) as handed to the cluster (see :meth:`wrote`).
        self.pg_written: dict[str, tuple[str, list[dict[str, Any]], tuple[int, int, int]]] = {}
        #: Each PodGroup's spec and annotations as last parsed: a write that changes
        #: neither (a status update) only re-reads the status.
        self.pg_seen: dict[tuple[str, str], tuple] = {}
        #: Workload key -> the kind its record came from (a server serving both versions
        #: shows each Workload twice: the v1alpha1 copy is the one read).
        self.workload_kinds: dict[str, str] = {}
        self.pods_r: dict[str, parse.PodRecord] = {}
        self.pdbs_r: dict[str, PdbRecord] = {}
        self.hypernodes_r: dict[str, HyperNodeRecord] = {}
        self.workloads_r: dict[str, gang_apis.WorkloadRecord] = {}
        #: Side objects (storage...) by kind and key, lent to every snapshot as they are.
        self.side_r: dict[str, dict[str, Any]] = {k: {} for k in SIDE_PARSERS}

    def record(self, kind: str, key: str, obj: Mapping[str, Any]) -> Any:
        """Parse ``obj`` and keep its record in its kind's table; return the record."""
        try:
            rec = self.parsers[kind](obj)
        except InputError as err:
            raise err.located(obj=f"{kind} {key}") from None
        if kind == "Node":
            self.nodes_r[key] = rec
        elif kind == "Queue":
            self.queues_r[key] = rec
        elif kind == "PriorityClass":
            self.pcs_r[key] = rec
        elif kind in PODGROUP_KINDS:
            prev = self.pg_uids.get((kind, key))
            if prev is not None and prev != rec.uid:  # (now of another API group)
                self.pgs_r.pop(prev, None)
                self.pg_objects.pop(prev, None)
                self.gang_seen.pop(prev, None)
                self.pg_status.pop(prev, None)
                self.pg_written.pop(prev, None)
            self.pgs_r[rec.uid] = rec
            self.pg_uids[(kind, key)] = rec.uid
            self.pg_objects[rec.uid] = (kind, key)
            if rec.api != "volcano":
                self.gang_seen[rec.uid] = copy_tree(dict(obj.get("status") or {}))
                self.pg_status.pop(rec.uid, None)
            else:
                self.pg_status[rec.uid] = status_key(rec.phase, rec.counts, rec.conditions)
            self.latest = max(self.latest, rec.creation)
        elif kind == "PodDisruptionBudget":
            self.pdbs_r[key] = rec
        elif kind == "HyperNode":
            self.hypernodes_r[key] = rec
        elif kind in SIDE_PARSERS:
            self.side_r[kind][key] = rec
        elif kind in WORKLOAD_KINDS:  # (keyed namespace/name, whatever the store's key)
            wkey = f"{rec.namespace}/{rec.name}"
            if kind != "Workload" and self.workload_kinds.get(wkey) == "Workload":
                return self.workloads_r[wkey]  # (the v1alpha1 copy is read)
            self.workloads_r[wkey] = rec
            self.workload_kinds[wkey] = kind
            self.latest = max(self.latest, rec.creation)
        else:
            self.pods_r[key] = rec
            self.latest = max(self.latest, rec.creation)
        return rec

    def update_pod(self, key: str, obj: Mapping[str, Any]) -> tuple[parse.PodRecord, bool]:
        """A pod the cache holds was updated: re-read what a pod may change after its
        creation into its record. Returns the record, and whether its annotations or
        device claims changed (what a bind wrote before it: the cards a device agent
        reads; the claims the resource-claim controller made, in the status)."""
        rec = self.pods_r[key]
        node, phase, terminating, scheduled_at = pod_state(obj)
        rec.node_name, rec.phase, rec.terminating = node, phase, terminating
        rec.scheduled_at = scheduled_at
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        noted = notes != rec.annotations
        if noted:
            rec.annotations = parse.as_labels(notes, "metadata.annotations")
        claimed = any(r.waiting for r in rec.device_claims)
        if claimed:
            claims = pod_device_claims(key, obj)
            claimed = claims != rec.device_claims
            rec.device_claims = claims
        return rec, noted or claimed

    def forget_podgroup(self, kind: str, key: str) -> str | None:
        """The PodGroup object ``kind key`` was deleted: its job uid (None: not held)."""
        uid = self.pg_uids.pop((kind, key), None)
        self.pg_seen.pop((kind, key), None)
        if uid is None:
            return None
        self.pgs_r.pop(uid, None)
        self.pg_objects.pop(uid, None)
        self.gang_seen.pop(uid, None)
        self.pg_status.pop(uid, None)
        self.pg_written.pop(uid, None)
        return uid

    def wrote(self, uid: str, phase: str, conditions: Any, counts: tuple[int, int, int]) -> None:
        """The scheduler wrote this status to Volcano PodGroup ``uid``: kept so that its
        echo on the watch is recognised without parsing it (:meth:`take_podgroup`).
        Only what parsing would take as it is is kept (a phase of a PodGroup, a list
        of conditions, int32 counts of at least 0): anything else is parsed."""
        running, succeeded, failed = counts
        if (
            phase in parse.PODGROUP_PHASES
            and type(conditions) is list
            and type(running) is int
            and type(succeeded) is int
            and type(failed) is int
            and 0 <= running <= parse.INT32_MAX
            and 0 <= succeeded <= parse.INT32_MAX
            and 0 <= failed <= parse.INT32_MAX
        ):
            for c in conditions:  # (one or two, as a rule: no generator for them)
                if type(c) is not dict:
                    break
            else:
                self.pg_written[uid] = (phase, conditions, counts)
                return
        self.pg_written.pop(uid, None)

    def take_podgroup(
        self, kind: str, key: str, obj: Mapping[str, Any]
    ) -> tuple[parse.PodGroupRecord | None, parse.PodGroupRecord | None]:
        """A PodGroup object was added or updated: (its record before, its record now).

        A write that leaves its spec and annotations as they were re-reads only the
        status (in place: no model object keeps the record, these tables only); for
        another dialect's PodGroup, whose status is pumice's own writing, it is kept to
        compare the next write with and nothing is read: the record now is None."""
        prev = self.pg_uids.get((kind, key))
        old = self.pgs_r.get(prev) if prev is not None else None
        spec = obj.get("spec")
        annotations = (obj.get("metadata") or {}).get("annotations")
        now_seen = (obj.get("apiVersion"), spec, annotations)
        seen = self.pg_seen.get((kind, key))
        if old is not None and prev is not None and seen is not None and seen == now_seen:
            if old.api != "volcano":
                self.gang_seen[prev] = copy_tree(dict(obj.get("status") or {}))
                return old, None
            # Only the status moved (the scheduler's own writes, mostly): read that.
            echo = self._echo(prev, obj.get("status"))
            if echo is not None:
                phase, conditions, counts = echo
            else:
                try:
                    phase, conditions, counts = parse.podgroup_status(obj)
                except InputError as err:
                    raise err.located(obj=f"PodGroup {key}") from None
            old.phase, old.conditions, old.counts = phase, conditions, counts
            self.pg_status[prev] = status_key(phase, counts, conditions)
            return old, old
        rec = self.record(kind, key, obj)
        self.pg_seen[(kind, key)] = copy_tree(now_seen)
        return old, rec

    def _echo(
        self, uid: str, status: Any
    ) -> tuple[str, list[dict[str, Any]], tuple[int, int, int]] | None:
        """What :func:`~pumice.api.parse.podgroup_status` reads of ``status`` when it
        says what the scheduler last wrote to ``uid`` (:meth:`wrote`), else None.

        Why: most PodGroup events are the scheduler's own status write coming back,
        and comparing it with the write costs a fraction of validating it field by
        field. The comparison is by value (a real cluster's event is a fresh object,
        the server's times added to the conditions: it is then parsed), and only
        what parsing would take unchanged passes: the same phase, counts of the same
        ints (absent as 0), the same list of conditions (a copy of each is kept, as
        parsing keeps)."""
        written = self.pg_written.get(uid)
        if written is None or type(status) is not dict:
            return None
        phase, conditions, counts = written
        if status.get("phase") != phase:
            return None
        for k, n in zip(("running", "succeeded", "failed"), counts, strict=True):
            got = status.get(k)
            if (got if got is not None else 0) != n or (got is not None and type(got) is not int):
                return None
        seen = status.get("conditions")
        if type(seen) is not list or seen != conditions:
            return None
        return phase, [dict(c) for c in seen], counts

    def take_workload(self, ev: WatchEvent) -> str | None:
        """A Workload's event: the Workload's key (``namespace/name``) when what the
        scheduler reads of it changed, else None (another API group's Workload, the
        v1alpha2 copy of a v1alpha1 one, a write of the same spec)."""
        if not gang_apis.is_kubernetes_workload(ev.obj):
            return None
        meta = ev.obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        if ev.kind != "Workload" and self.workload_kinds.get(key, ev.kind) != ev.kind:
            return None
        if ev.type == DELETED:
            self.workload_kinds.pop(key, None)
            if self.workloads_r.pop(key, None) is None:
                return None
        else:
            old = self.workloads_r.get(key)
            if self.record(ev.kind, ev.key, ev.obj) == old:
                return None
        return key


__all__ = [
    "CACHE_KINDS",
    "PARSERS",
    "PODGROUP_KINDS",
    "WORKLOAD_KINDS",
    "BadObject",
    "Records",
    "StatusKey",
    "pod_device_claims",
    "pod_state",
    "status_key",
]
