"""An in-memory cluster: Kubernetes-shaped objects, watch events, binding and eviction.

Used by ``pumice simulate`` (where the simulated kubelet and job controller are its
other clients) and by tests. It is deterministic: ``list`` sorts by key and every
watcher receives the changes in the order they were made.

Objects are stored as given (the store takes ownership of the dict) and changed in
place; a watch event carries a reference to the object, so a watcher reading an event
late sees the object as it is now, which is what a level-based consumer (the cache)
wants. Timestamps come from ``clock`` (simulated seconds in ``simulate``).

It holds objects of any kind; those of :data:`~pumice.cluster.protocol.KINDS` (the
scheduler's, HyperNodes and other dialects' gangs included) have a store from the start,
so listing one that was never created gives none. A ``PodGroup`` of another API group than
Volcano's is kept under its dialect's kind (:func:`~pumice.cluster.protocol.store_kind`),
so that PodGroups of one name in one namespace but of different groups do not collide.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

from pumice.api.parse import copy_tree
from pumice.api.volumes import SELECTED_NODE
from pumice.cluster.protocol import (
    ADDED,
    DELETED,
    KINDS,
    MODIFIED,
    BindWrites,
    WatchEvent,
    condition_key,
    object_key,
    store_kind,
)
from pumice.errors import InputError

DEFAULT_GRACE_SECONDS = 30.0
#: The annotation a provisioner puts on the PVs it makes.
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
#: Pod condition set on an evicted pod (as Kubernetes does for preemption).
DISRUPTION_TARGET = "DisruptionTarget"


class MemoryWatch:
    """A subscription to some kinds of a :class:`MemoryCluster`."""

    __slots__ = ("_events", "_kinds", "_store")

    def __init__(self, store: MemoryCluster, kinds: Iterable[str]) -> None:
        self._store = store
        self._kinds: Container[str] = frozenset(kinds)
        self._events: list[WatchEvent] = []

    @property
    def kinds(self) -> Container[str]:
        """The kinds whose events it gets: only ``in`` is asked of it (a store that
        watches every kind, those first created later too, puts its own here)."""
        return self._kinds

    @kinds.setter
    def kinds(self, kinds: Container[str]) -> None:
        self._kinds = kinds
        self._store._routes.clear()

    def push(self, event: WatchEvent) -> None:
        self._events.append(event)

    def pending(self) -> int:
        return len(self._events)

    def drain(self) -> list[WatchEvent]:
        events, self._events = self._events, []
        return events

    def close(self) -> None:
        self._store._unwatch(self)


def provisioned(
    pvc: Mapping[str, Any], node: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The PersistentVolume a provisioner makes for ``pvc`` on ``node``: its size, class
    and access modes, and a node affinity that reaches ``node`` by the labels the
    class's ``allowedTopologies`` name (a zonal disk), or by the node's name (a local
    volume) when it names none. It carries the ``pv.kubernetes.io/provisioned-by``
    annotation, as a provisioner's PVs do, and the class's reclaim policy (``Delete``
    by default)."""
    meta, spec = pvc["metadata"], pvc.get("spec") or {}
    cls = classes.get(spec.get("storageClassName") or "") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    keys = sorted(
        {e.get("key") for t in cls.get("allowedTopologies") or []
         for e in t.get("matchLabelExpressions") or [] if e.get("key") in labels}
    )  # fmt: skip
    if keys:
        exprs = [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys]
        term: dict[str, Any] = {"matchExpressions": exprs}
    else:
        name = node["metadata"]["name"]
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta.get('uid') or meta['name']}",
            "annotations": {PROVISIONED_BY: cls.get("provisioner", "")},
        },
        "spec": {
            "capacity": {"storage": storage},
            "persistentVolumeReclaimPolicy": cls.get("reclaimPolicy") or "Delete",
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "storageClassName": spec.get("storageClassName") or "",
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
            "csi": {"driver": cls.get("provisioner", ""), "volumeHandle": meta.get("uid", "")},
        },
        "status": {"phase": "Available"},
    }


class MemoryCluster:
    """Objects by kind and key, with watch subscriptions (see :class:`Cluster`)."""

    def __init__(self, clock: Callable[[], float] = lambda: 0.0) -> None:
        self.clock = clock
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KINDS}
        self._watches: list[MemoryWatch] = []
        #: Per kind, the watches that get its events (filled as kinds are first
        #: written; emptied when a watch comes, goes or changes its kinds).
        self._routes: dict[str, list[MemoryWatch]] = {}
        #: Counters of what clients asked for (binds, evictions, status writes).
        self.stats: dict[str, int] = {"binds": 0, "evictions": 0, "status_writes": 0}
        #: Last status written per podgroup (the status dict and its comparison key), so
        #: an unchanged rewrite costs one comparison.
        self._status_keys: dict[str, tuple[dict[str, Any], tuple]] = {}

    # -- reading ------------------------------------------------------------------------

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        store = self.objects.get(kind)
        return None if store is None else store.get(key)

    def list(self, kind: str) -> list[dict[str, Any]]:
        store = self.objects.get(kind, {})
        return [store[k] for k in sorted(store)]

    def watch(self, kinds: Sequence[str] = KINDS) -> MemoryWatch:
        w = MemoryWatch(self, kinds)
        self._watches.append(w)
        self._routes.clear()
        return w

    def _unwatch(self, w: MemoryWatch) -> None:
        if w in self._watches:
            self._watches.remove(w)
            self._routes.clear()

    def _emit(self, type_: str, kind: str, key: str, obj: dict[str, Any]) -> None:
        route = self._routes.get(kind)
        if route is None:
            route = self._routes[kind] = [w for w in self._watches if kind in w.kinds]
        if route:
            event = WatchEvent(type_, kind, key, obj)
            for w in route:
                w._events.append(event)  # (push, without a call per watcher and event)

    # -- writing ------------------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> str:
        """Add ``obj``; an object of the same kind and key already there is an error (a
        PodGroup's kind is its dialect's: see :func:`store_kind`)."""
        kind = store_kind(obj)
        if kind not in self.objects:
            self.objects[str(kind)] = {}
        key = object_key(str(kind), obj)
        store = self.objects[str(kind)]
        if key in store:
            raise InputError("already exists", obj=f"{kind} {key}")
        store[key] = obj
        self._emit(ADDED, str(kind), key, obj)
        return key

    def create_all(self, objects: Iterable[dict[str, Any]]) -> None:
        for obj in objects:
            self.create(obj)

    def modify(self, kind: str, key: str, change: Callable[[dict[str, Any]], object]) -> bool:
        """Apply ``change`` to the object in place and tell the watchers; False if gone."""
        store = self.objects.get(kind)
        obj = None if store is None else store.get(key)
        if obj is None:
            return False
        change(obj)
        self._emit(MODIFIED, kind, key, obj)
        return True

    def delete(self, kind: str, key: str) -> bool:
        obj = self.objects.get(kind, {}).pop(key, None)
        if obj is None:
            return False
        if kind == "PodGroup":
            self._status_keys.pop(key, None)
        self._emit(DELETED, kind, key, obj)
        return True

    def set_pod_phase(self, key: str, phase: str, reason: str = "") -> bool:
        """What a kubelet reports: the pod is now ``phase`` (Running, Succeeded, Failed)."""

        def change(pod: dict[str, Any]) -> None:
            status = pod.setdefault("status", {})
            status["phase"] = phase
            if reason:
                status["reason"] = reason

        return self.modify("Pod", key, change)

    # -- the Cluster protocol -----------------------------------------------------------

    def bind(self, pod_key: str, node: str, writes: BindWrites | None = None) -> bool:
        pod = self.objects["Pod"].get(pod_key)
        if pod is None or node not in self.objects["Node"]:
            return False
        spec = pod.setdefault("spec", {})
        if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp") is not None:
            return False
        if writes is not None:
            if not self._prebind(pod, node, writes):
                return False
            if writes.annotations:
                pod["metadata"].setdefault("annotations", {}).update(writes.annotations)
        spec["nodeName"] = node
        status = pod.setdefault("status", {})
        status.setdefault("conditions", []).append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": self.clock()}
        )
        self.stats["binds"] += 1
        self._emit(MODIFIED, "Pod", pod_key, pod)
        return True

    def _prebind(self, pod: dict[str, Any], node: str, writes: BindWrites) -> bool:
        """Carry out a bind's volume and device writes at once, as the PV controller,
        a provisioner and a DRA driver would in time: a chosen PV is bound to its claim,
        a claim to provision gets a new PV reaching ``node`` (see :func:`provisioned`),
        a ResourceClaim gets its allocation and the pod among its users. Nothing is
        written when one of them cannot be (a PV taken meanwhile, a claim gone)."""
        pvs, pvcs = (
            self.objects.get("PersistentVolume", {}),
            self.objects.get("PersistentVolumeClaim", {}),
        )
        claims = self.objects.get("ResourceClaim", {})
        plan: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for claim, pv_name in writes.volumes.items():
            pvc, pv = pvcs.get(claim), pvs.get(pv_name)
            ref = ((pv or {}).get("spec") or {}).get("claimRef") or {}
            if pvc is None or pv is None or (ref and ref.get("name") != pvc["metadata"]["name"]):
                return False
            plan.append((pvc, pv))
        for claim in writes.provision:
            if claim not in pvcs:
                return False
        if any(key not in claims for key in writes.claims):
            return False
        for claim in writes.provision:
            pvc = pvcs[claim]
            pvc["metadata"].setdefault("annotations", {})[SELECTED_NODE] = node
            pv = provisioned(pvc, self.objects["Node"][node], self.objects.get("StorageClass", {}))
            self.create(pv)
            plan.append((pvc, pv))
        for pvc, pv in plan:
            meta = pvc["metadata"]
            pv["spec"]["claimRef"] = {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": meta.get("namespace") or "default", "name": meta["name"],
                "uid": meta.get("uid", ""),
            }  # fmt: skip
            pv.setdefault("status", {})["phase"] = "Bound"
            pvc.setdefault("spec", {})["volumeName"] = pv["metadata"]["name"]
            pvc.setdefault("status", {})["phase"] = "Bound"
            self._emit(MODIFIED, "PersistentVolume", pv["metadata"]["name"], pv)
            key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            self._emit(MODIFIED, "PersistentVolumeClaim", key, pvc)
        meta = pod["metadata"]
        user = {"resource": "pods", "name": meta["name"], "uid": meta.get("uid", "")}
        for key, allocation in writes.claims.items():
            resource_claim = claims[key]
            status = resource_claim.setdefault("status", {})
            if allocation:  # (empty: allocated before, the pod only joins its users)
                status["allocation"] = copy_tree(dict(allocation))
            users = status.setdefault("reservedFor", [])
            if user not in users:
                users.append(user)
            self._emit(MODIFIED, "ResourceClaim", key, resource_claim)
        return True

    def evict(self, pod_key: str, reason: str = "") -> bool:
        """Graceful deletion: a bound pod turns terminating (the kubelet deletes it after
        its grace period); a pod on no node is deleted at once."""
        pod = self.objects["Pod"].get(pod_key)
        if pod is None or pod["metadata"].get("deletionTimestamp") is not None:
            return False
        self.stats["evictions"] += 1
        if not (pod.get("spec") or {}).get("nodeName"):
            return self.delete("Pod", pod_key)
        meta = pod["metadata"]
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        meta["deletionTimestamp"] = self.clock()
        meta["deletionGracePeriodSeconds"] = DEFAULT_GRACE_SECONDS if grace is None else grace
        status = pod.setdefault("status", {})
        status.setdefault("conditions", []).append(
            {
                "type": DISRUPTION_TARGET,
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": reason,
            }
        )
        self._emit(MODIFIED, "Pod", pod_key, pod)
        return True

    def update_podgroup_status(
        self,
        key: str,
        phase: str,
        conditions: Sequence[Mapping[str, Any]] = (),
        *,
        running: int = 0,
        succeeded: int = 0,
        failed: int = 0,
    ) -> bool:
        """Write the status; a write that changes nothing but per-cycle fields (condition
        transition ids) is dropped, so an unchanged podgroup makes no watch event."""
        pg = self.objects["PodGroup"].get(key)
        if pg is None:
            return False
        status = pg.setdefault("status", {})
        new = (phase, running, succeeded, failed, condition_key(conditions))
        old = self._status_keys.get(key)
        if old is None or old[0] is not status:  # written by someone else: compare fields
            old = (
                status,
                (
                    status.get("phase"),
                    status.get("running", 0),
                    status.get("succeeded", 0),
                    status.get("failed", 0),
                    condition_key(status.get("conditions") or ()),
                ),
            )
        if new == old[1] and status.get("phase") == phase:
            return True
        self._status_keys[key] = (status, new)
        status["phase"] = phase
        status["conditions"] = [dict(c) for c in conditions]
        status["running"], status["succeeded"], status["failed"] = running, succeeded, failed
        self.stats["status_writes"] += 1
        self._emit(MODIFIED, "PodGroup", key, pg)
        return True

    def update_gang_status(self, kind: str, key: str, status: Mapping[str, Any]) -> bool:
        """Merge ``status`` into the object's status; a merge that changes nothing is
        dropped (no watch event)."""
        obj = self.objects.get(kind, {}).get(key)
        if obj is None:
            return False
        old = obj.setdefault("status", {})
        if all(old.get(k) == v for k, v in status.items()):
            return True
        old.update({k: copy_tree(v) for k, v in status.items()})
        self.stats["status_writes"] += 1
        self._emit(MODIFIED, kind, key, obj)
        return True


__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "DISRUPTION_TARGET",
    "PROVISIONED_BY",
    "MemoryCluster",
    "MemoryWatch",
    "provisioned",
]
