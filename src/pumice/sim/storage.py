"""Storage in a simulated run: when the workload's claims appear, and what becomes of
a volume once its claim is gone.

**Claims.** A workload's PersistentVolumeClaim manifests (``Workload.claims``) are
created in the store when the first job that mounts one (by name: a pod volume's
``persistentVolumeClaim.claimName``, a Volcano Job's ``volumeClaimName``) arrives, with
that job's objects; a claim no job mounts is created at the start. The claims a Volcano
Job describes (``spec.volumes[].volumeClaim``) are made by pumice's job controller and
owned by the Job; those of generic ephemeral volumes by the ephemeral claim controller
(:mod:`pumice.controllers.ephemeral`), owned by the pod. Binding is the in-memory
cluster's (:meth:`~pumice.cluster.memory.MemoryCluster.bind`): a chosen PV is bound to
its claim at the bind, a claim to provision gets a new PV reaching the node.

**Immediate claims** (:class:`VolumeReclaimer` again, as Kubernetes' PV controller):
a claim of an ``Immediate`` class, or of no class, is bound when it appears, before
any pod using it is scheduled, to the smallest available PV that fits it (class,
size, access modes, volume mode, selector); with none, a class with a provisioner
gets a new PV with no node affinity (a network disk); else the claim stays Pending,
and so do its pods.

**Released volumes** (:class:`VolumeReclaimer`, the part of Kubernetes' PV controller
and of a local volume provisioner the simulation needs): a claim is deleted with its
owner (a Job's claims when the simulator deletes the finished Job, an ephemeral claim
with its pod); a workload's own claims are never deleted (nobody deletes a user's
claim). When a bound PV's claim is gone, the PV's reclaim policy
(``persistentVolumeReclaimPolicy``; a PV without one: ``Delete`` if a provisioner made
it, else ``Retain``, Kubernetes' defaults) says what happens:

- ``Retain``: the PV is ``Released``, and no claim gets it again in the run;
- ``Delete``: a provisioned PV is deleted (its disk is given back); a PV made
  statically (a local disk, which the local static provisioner cleans and offers
  again) is deleted and created again ``Available``, free for the next claim;
- ``Recycle``: made ``Available`` again, as above.

The same happens to a PV whose claim is gone when the run starts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pumice.api.volumes import (
    BOUND_BY_CONTROLLER,
    IMMEDIATE,
    NO_PROVISIONER,
    PersistentVolumeClaimRecord,
    StorageClassRecord,
    parse_pv,
    parse_pvc,
    parse_storage_class,
)
from pumice.cluster.memory import PROVISIONED_BY
from pumice.cluster.protocol import ADDED, DELETED, WatchEvent
from pumice.controllers.ephemeral import ephemeral_claims
from pumice.controllers.store import Store
from pumice.sim.workload import JobSpec, Workload

RETAIN, DELETE, RECYCLE = "Retain", "Delete", "Recycle"
_BOUND_NOTES = (BOUND_BY_CONTROLLER, "pv.kubernetes.io/bind-completed")


def mounted_claims(job: JobSpec) -> list[str]:
    """The claims (names, in the job's namespace) the pods of ``job`` mount by name."""
    names: list[str] = []
    volumes: list[Mapping[str, Any]] = [v for t in job.tasks for v in t.volumes]
    if job.manifest is not None:
        spec = job.manifest.get("spec") or {}
        for t in spec.get("tasks") or ():
            tspec = ((t or {}).get("template") or {}).get("spec") or {}
            volumes.extend(v for v in tspec.get("volumes") or () if isinstance(v, Mapping))
        for v in spec.get("volumes") or ():
            if isinstance(v, Mapping) and v.get("volumeClaimName"):
                names.append(str(v["volumeClaimName"]))
    for v in volumes:
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            names.append(str(claim))
    return list(dict.fromkeys(names))


def mounts_claims(workload: Workload) -> bool:
    """Whether any job of ``workload`` attaches a claim (or the workload holds some)."""
    if workload.claims:
        return True
    for job in workload.jobs:
        if any(t.volumes for t in job.tasks):
            return True
        if job.manifest is not None:
            spec = job.manifest.get("spec") or {}
            if spec.get("volumes"):
                return True
            for t in spec.get("tasks") or ():
                if (((t or {}).get("template") or {}).get("spec") or {}).get("volumes"):
                    return True
    return False


class ClaimFeeder:
    """Creates the workload's claims when they are first needed (module docstring)."""

    def __init__(self, store: Store, claims: Sequence[Mapping[str, Any]]) -> None:
        self.store = store
        self.waiting: dict[str, Mapping[str, Any]] = {}
        for c in claims:
            meta = c.get("metadata") or {}
            self.waiting[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = c

    def start(self, jobs: Iterable[JobSpec]) -> None:
        """Create now the claims no job mounts."""
        wanted = {f"{j.namespace}/{c}" for j in jobs for c in mounted_claims(j)}
        for key in [k for k in self.waiting if k not in wanted]:
            self._create(key)

    def arrive(self, job: JobSpec) -> None:
        """``job`` arrives: create the claims it mounts that are not there yet."""
        if not self.waiting:
            return
        for name in mounted_claims(job):
            key = f"{job.namespace}/{name}"
            if key in self.waiting:
                self._create(key)

    def _create(self, key: str) -> None:
        obj = copy.deepcopy(dict(self.waiting.pop(key)))
        obj.setdefault("apiVersion", "v1")
        obj.pop("status", None)
        obj["metadata"].setdefault("namespace", "default")
        self.store.create(obj)


class VolumeReclaimer:
    """Released PVs and orphaned ephemeral claims in a simulation (module docstring).

    A controller of the simulator's :class:`~pumice.controllers.manager.Manager`; keys
    are ``pv/<name>`` (a PV whose claim may be gone) and ``pvc/<namespace>/<name>`` (an
    ephemeral claim whose pod may be gone). ``on_free`` is told when a PV becomes free
    again (a pod waiting for a volume may fit now)."""

    name = "volume-reclaimer"
    kinds = ("PersistentVolumeClaim", "Pod", "PersistentVolume")

    def __init__(self, store: Store, on_free: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.on_free = on_free
        #: PVs made free again, for the metrics and tests.
        self.reclaimed = 0

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        if event.type != DELETED:
            spec = event.obj.get("spec") or {}
            if event.kind == "PersistentVolumeClaim" and not spec.get("volumeName"):
                return (f"bind/{event.key}",)
            if (
                event.kind == "PersistentVolume"
                and event.type == ADDED
                and not spec.get("claimRef")
            ):  # a free volume: a claim waiting for one may get it
                return [
                    f"bind/{c['metadata'].get('namespace') or 'default'}/{c['metadata']['name']}"
                    for c in self.store.list("PersistentVolumeClaim")
                    if not (c.get("spec") or {}).get("volumeName")
                ]
            return ()
        if event.kind == "PersistentVolume":
            return ()
        if event.kind == "PersistentVolumeClaim":
            pv = (event.obj.get("spec") or {}).get("volumeName")
            return (f"pv/{pv}",) if pv else ()
        namespace = (event.obj.get("metadata") or {}).get("namespace") or "default"
        return [f"pvc/{namespace}/{claim}" for claim, _t in ephemeral_claims(event.obj)]

    def resync(self) -> Iterable[str]:
        pvs = [
            f"pv/{pv['metadata']['name']}"
            for pv in self.store.list("PersistentVolume")
            if (pv.get("spec") or {}).get("claimRef")
        ]
        claims = [
            f"bind/{c['metadata'].get('namespace') or 'default'}/{c['metadata']['name']}"
            for c in self.store.list("PersistentVolumeClaim")
            if not (c.get("spec") or {}).get("volumeName")
        ]
        return pvs + claims

    def reconcile(self, key: str) -> float | None:
        what, _, rest = key.partition("/")
        if what == "pvc":
            self._orphan(rest)
        elif what == "bind":
            self._bind_immediate(rest)
        else:
            self._release(rest)
        return None

    def _class(self, pvc: PersistentVolumeClaimRecord) -> StorageClassRecord | None:
        classes = [parse_storage_class(c) for c in self.store.list("StorageClass")]
        if pvc.storage_class is None:
            defaults = sorted(c.name for c in classes if c.default)
            name = defaults[0] if defaults else ""
        else:
            name = pvc.storage_class
        return next((c for c in classes if c.name == name), None) if name else None

    def _bind_immediate(self, key: str) -> None:
        """Bind an unbound claim of an Immediate class (or of none), as the PV controller
        does before any pod using it can be scheduled (module docstring)."""
        obj = self.store.get("PersistentVolumeClaim", key)
        if obj is None or (obj.get("spec") or {}).get("volumeName"):
            return
        pvc = parse_pvc(obj)
        cls = self._class(pvc)
        if cls is not None and cls.binding_mode != IMMEDIATE:
            return  # (the scheduler chooses, when a pod using it is placed)
        want = "" if cls is None else cls.name
        fits = []
        for pv_obj in self.store.list("PersistentVolume"):
            pv = parse_pv(pv_obj)
            if (
                pv.available()
                and pv.claim_ref is None
                and pv.storage_class == want
                and pv.capacity >= pvc.request
                and pv.access_modes & pvc.access_modes == pvc.access_modes
                and pv.volume_mode == pvc.volume_mode
                and (pvc.selector is None or pvc.selector.matches(dict(pv.labels)))
            ):
                fits.append((pv.capacity, pv.name))
        if fits:
            name = min(fits)[1]
        elif cls is not None and cls.provisioner != NO_PROVISIONER:
            name = f"pvc-{obj['metadata'].get('uid') or pvc.name}"
            spec = obj.get("spec") or {}
            made = self.store.create({
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "annotations": {PROVISIONED_BY: cls.provisioner}},
                "spec": {
                    "capacity": {"storage": ((spec.get("resources") or {}).get("requests")
                                             or {}).get("storage", "0")},
                    "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                    "storageClassName": cls.name, "volumeMode": pvc.volume_mode,
                    "persistentVolumeReclaimPolicy": "Delete",
                    "csi": {"driver": cls.provisioner, "volumeHandle": name},
                },
                "status": {"phase": "Available"},
            })  # fmt: skip
            if made is None:
                return
        else:
            return  # (Pending until a PV appears: a reclaimed one comes back as an event)
        meta = obj["metadata"]
        ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "namespace": meta.get("namespace") or "default", "name": meta["name"],
               "uid": meta.get("uid", "")}  # fmt: skip
        self.store.patch("PersistentVolume", name, {"spec": {"claimRef": ref}})
        self.store.patch("PersistentVolume", name, {"status": {"phase": "Bound"}},
                         subresource="status")  # fmt: skip
        self.store.patch("PersistentVolumeClaim", key, {"spec": {"volumeName": name}})
        self.store.patch("PersistentVolumeClaim", key, {"status": {"phase": "Bound"}},
                         subresource="status")  # fmt: skip

    def _orphan(self, key: str) -> None:
        """Delete an ephemeral claim whose pod is gone (the garbage collector's job)."""
        claim = self.store.get("PersistentVolumeClaim", key)
        if claim is None:
            return
        namespace = key.split("/", 1)[0]
        for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
            if ref.get("kind") != "Pod":
                continue
            pod = self.store.get("Pod", f"{namespace}/{ref.get('name')}")
            if pod is None or (pod.get("metadata") or {}).get("uid") != ref.get("uid"):
                self.store.delete("PersistentVolumeClaim", key)
            return

    def _release(self, name: str) -> None:
        pv = self.store.get("PersistentVolume", name)
        if pv is None:
            return
        ref = (pv.get("spec") or {}).get("claimRef")
        if not ref:
            return
        key = f"{ref.get('namespace') or 'default'}/{ref.get('name')}"
        claim = self.store.get("PersistentVolumeClaim", key)
        if claim is not None and (
            not ref.get("uid") or (claim.get("metadata") or {}).get("uid") == ref.get("uid")
        ):
            return  # still its claim's
        meta = pv.get("metadata") or {}
        provisioned = PROVISIONED_BY in (meta.get("annotations") or {})
        policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") or (
            DELETE if provisioned else RETAIN
        )
        if policy == RETAIN:
            if (pv.get("status") or {}).get("phase") != "Released":
                self.store.patch("PersistentVolume", name, {"status": {"phase": "Released"}},
                                 subresource="status")  # fmt: skip
            return
        fresh = copy.deepcopy(dict(pv))
        self.store.delete("PersistentVolume", name)
        if policy == DELETE and provisioned:
            return
        fresh["spec"].pop("claimRef", None)
        notes = fresh["metadata"].get("annotations") or {}
        for k in _BOUND_NOTES:
            notes.pop(k, None)
        for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            fresh["metadata"].pop(k, None)
        fresh["status"] = {"phase": "Available"}
        self.store.create(fresh)
        self.reclaimed += 1
        self.on_free()


__all__ = ["ClaimFeeder", "VolumeReclaimer", "mounted_claims", "mounts_claims"]
