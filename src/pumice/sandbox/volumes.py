"""Local volumes for the sandbox's fake nodes: a StorageClass, a few static PVs per node,
and a provisioner that also binds, since the sandbox runs no kube-controller-manager.

The class ``pumice-local`` (provisioner ``sandbox.pumice.dev/local``,
``WaitForFirstConsumer``, reclaim policy ``Delete``) is served two ways, as a cluster
with the local static provisioner and a dynamic one would be:

- **static PVs** (:func:`static_pvs`): ``per_node`` PVs of ``size`` on each fake node,
  ``<node>-local-<i>``, a ``local`` volume reaching that node only. The scheduler picks
  the smallest that fits on the node it chooses and writes the PV's ``claimRef``;
- **provisioning** (:class:`LocalProvisioner`): a claim of the class with the
  scheduler's ``volume.kubernetes.io/selected-node`` annotation (no static PV fitted on
  the chosen node), on a node the sandbox owns, gets a new PV ``pvc-<claim uid>`` of
  the size and access modes it asks for, reaching that node, with the claim in its
  ``claimRef``.

**Binding.** On a cluster, kube-controller-manager's PV controller completes both
bindings (it sets the claim's ``spec.volumeName`` and both objects' phase ``Bound``),
and pumice's bind waits for that. The sandbox runs that controller when it finds
kube-controller-manager and passes ``bind`` False; without it the provisioner does it
itself when ``bind`` is set (the default): for every
claim of any class with no ``volumeName`` that a PV's ``claimRef`` names (the
scheduler's choice, or the provisioner's new PV), it writes the claim's
``spec.volumeName`` and ``pv.kubernetes.io/bind-completed``, the PV's phase ``Bound``
and then the claim's phase ``Bound``, access modes and capacity. With ``bind`` False it
only creates PVs, and a PV controller (kube-controller-manager, when one runs) binds.
Claims of an ``Immediate`` class are not bound by it (the PV controller's job).

Either way it also reclaims, as the local static provisioner and an external
provisioner would (the PV controller cannot delete local volumes): a PV of the class
whose claim is gone is deleted if it was provisioned, and made ``Available`` again (its
``claimRef`` removed) if it is static.
And it lets deletions finish that the API server holds for kube-controller-manager's
protection controllers: a claim being deleted loses its ``kubernetes.io/pvc-protection``
finalizer once no pod that has not ended uses it, and a PV it deletes its
``kubernetes.io/pv-protection``.

One thread takes the claim and PV informers' events and does the writes; a write that
fails is logged and tried again at the next event or resync (every ``resync`` seconds).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pumice.api.volumes import SELECTED_NODE, WAIT_FOR_FIRST_CONSUMER
from pumice.cluster.informer import Informer
from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient, status_message
from pumice.cluster.protocol import DELETED

log = logging.getLogger("pumice.sandbox.volumes")

CLASS = "pumice-local"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
PROVISIONER = "sandbox.pumice.dev/local"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
HOSTNAME = "kubernetes.io/hostname"
#: Static PVs per node, and their size, unless told otherwise.
PER_NODE = 2
SIZE = "100Gi"
#: Seconds between two looks at every claim and PV (a missed or failed write).
RESYNC = 5.0


def storage_class(name: str = CLASS) -> dict[str, Any]:
    """The sandbox's local StorageClass."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": PROVISIONER,
        "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER,
        "reclaimPolicy": "Delete",
    }


def _affinity(node: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
    return {"required": {"nodeSelectorTerms": [term]}}


def static_pvs(
    nodes: Iterable[str], per_node: int = PER_NODE, size: str = SIZE, cls: str = CLASS
) -> list[dict[str, Any]]:
    """``per_node`` local PVs of ``size`` on each of ``nodes``."""
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{node}-local-{i}", "labels": {HOSTNAME: node}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": cls,
                "persistentVolumeReclaimPolicy": "Delete",
                "local": {"path": f"/mnt/pumice-local/{i}"},
                "nodeAffinity": _affinity(node),
            },
        }
        for node in nodes
        for i in range(per_node)
    ]


def create_storage(
    client: KubeClient, nodes: Iterable[str], per_node: int = PER_NODE, size: str = SIZE
) -> int:
    """Create the class and the static PVs (those already there are kept); how many
    objects were created."""
    made = 0
    for obj in [storage_class(), *static_pvs(nodes, per_node, size)]:
        res = RESOURCES[obj["kind"]]
        status, answer = client.request("POST", res.path(), body=obj)
        if status == 201:
            made += 1
        elif status != 409:
            raise RuntimeError(f"creating {obj['kind']} {obj['metadata']['name']}: HTTP "
                               f"{status}: {status_message(answer)}")  # fmt: skip
    return made


class LocalProvisioner:
    """Provisions, reclaims (and, with ``bind``, binds) local volumes of ``classes``
    on the nodes ``owns`` accepts (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        owns: Callable[[str], bool],
        *,
        bind: bool = True,
        classes: Iterable[str] = (CLASS,),
        resync: float = RESYNC,
    ) -> None:
        self.client = client
        self.owns = owns
        self.bind = bind
        self.classes = frozenset(classes)
        self.resync = resync
        #: Counters, for tests: PVs made, claims bound, PVs reclaimed, writes failed.
        self.provisioned = self.bound = self.reclaimed = self.errors = 0
        self._stop = threading.Event()
        self._work: queue.Queue[str] = queue.Queue()
        self._watch_client = KubeClient(client.configuration, pool_size=2)
        self._claims = Informer(self._watch_client, "PersistentVolumeClaim", self._event,
                                stop=self._stop)  # fmt: skip
        self._pvs = Informer(self._watch_client, "PersistentVolume", self._event, stop=self._stop)
        self._thread = threading.Thread(target=self._run, name="sandbox-provisioner",
                                        daemon=True)  # fmt: skip

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        self._claims.start()
        self._pvs.start()
        self._thread.start()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._claims.synced.wait(timeout) and self._pvs.synced.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._work.put("")
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._watch_client.close()
        self._claims.join(min(timeout, 1.0))
        self._pvs.join(min(timeout, 1.0))

    def __enter__(self) -> LocalProvisioner:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- events -------------------------------------------------------------------------

    def _event(self, type_: str, kind: str, key: str, obj: dict[str, Any]) -> None:
        if kind == "PersistentVolumeClaim":
            if type_ == DELETED:
                pv = (obj.get("spec") or {}).get("volumeName")
                if pv:
                    self._work.put(f"pv/{pv}")
            else:
                self._work.put(f"pvc/{key}")
        elif type_ != DELETED:
            ref = (obj.get("spec") or {}).get("claimRef") or {}
            self._work.put(f"pv/{key}")
            if ref.get("name"):
                self._work.put(f"pvc/{ref.get('namespace') or 'default'}/{ref['name']}")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._work.get(timeout=self.resync)
            except queue.Empty:
                self._resync()
                continue
            if not item:
                continue
            what, _, key = item.partition("/")
            try:
                if what == "pvc":
                    self._claim(key)
                else:
                    self._release(key)
            except Exception:  # a bug or an odd object: logged, the next event retries
                self.errors += 1
                log.exception("sandbox provisioner: %s", item)

    def _resync(self) -> None:
        for key in list(self._claims.store):
            self._work.put(f"pvc/{key}")
        for key in list(self._pvs.store):
            self._work.put(f"pv/{key}")

    # -- the work -----------------------------------------------------------------------

    def _claim(self, key: str) -> None:
        pvc = self._claims.store.get(key)
        if pvc is None:
            return
        if (pvc.get("metadata") or {}).get("deletionTimestamp"):
            self._unprotect(key, pvc)
            return
        spec = pvc.get("spec") or {}
        if spec.get("volumeName"):
            return
        pv = self._pv_for(pvc)
        if pv is None:
            node = ((pvc.get("metadata") or {}).get("annotations") or {}).get(SELECTED_NODE)
            if not node or not self.owns(node) or spec.get("storageClassName") not in self.classes:
                return
            pv = self._provision(pvc, node)
            if pv is None:
                return
        if self.bind:
            self._bind(pvc, pv)

    def _unprotect(self, key: str, pvc: Mapping[str, Any]) -> None:
        """Let a claim's deletion finish once no pod that has not ended mounts it (the
        pvc-protection controller's part)."""
        finalizers = list((pvc.get("metadata") or {}).get("finalizers") or ())
        if PVC_PROTECTION not in finalizers:
            return
        namespace, _, name = key.partition("/")
        status, answer = self.client.request("GET", RESOURCES["Pod"].path(namespace))
        if status != 200:
            return
        for pod in answer.get("items") or ():
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for v in (pod.get("spec") or {}).get("volumes") or ():
                if (v.get("persistentVolumeClaim") or {}).get("claimName") == name:
                    return  # (in use: the next resync looks again)
        left = [f for f in finalizers if f != PVC_PROTECTION]
        self._patch("PersistentVolumeClaim", key, {"metadata": {"finalizers": left or None}})

    def _pv_for(self, pvc: Mapping[str, Any]) -> dict[str, Any] | None:
        """The PV whose ``claimRef`` names ``pvc`` (uid too, when the ref has one)."""
        meta = pvc.get("metadata") or {}
        for pv in self._pvs.store.values():
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if (
                ref.get("name") == meta.get("name")
                and (ref.get("namespace") or "default") == (meta.get("namespace") or "default")
                and (not ref.get("uid") or ref.get("uid") == meta.get("uid"))
            ):
                return pv
        return None

    def _provision(self, pvc: Mapping[str, Any], node: str) -> dict[str, Any] | None:
        meta, spec = pvc.get("metadata") or {}, pvc.get("spec") or {}
        name = f"pvc-{meta.get('uid')}"
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                "storageClassName": spec.get("storageClassName"),
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "persistentVolumeReclaimPolicy": "Delete",
                "local": {"path": f"/mnt/pumice-local/{name}"},
                "nodeAffinity": _affinity(node),
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta.get("namespace") or "default",
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                },
            },
        }
        status, answer = self.client.request(
            "POST", RESOURCES["PersistentVolume"].path(), body=body
        )
        if status == 201:
            self.provisioned += 1
            return answer
        if status == 409:  # made before (the informer has not shown it yet)
            return None
        self.errors += 1
        log.warning("sandbox provisioner: PV for %s/%s: HTTP %s: %s", meta.get("namespace"),
                    meta.get("name"), status, status_message(answer))  # fmt: skip
        return None

    def _patch(self, kind: str, key: str, body: Any, sub: str = "") -> bool:
        status, answer = self.client.request(
            "PATCH", RESOURCES[kind].key_path(key, sub), body=body, content_type=MERGE_PATCH
        )
        if status == 200:
            return True
        if status != 404:
            self.errors += 1
            log.warning("sandbox provisioner: %s %s: HTTP %s: %s", kind, key, status,
                        status_message(answer))  # fmt: skip
        return False

    def _bind(self, pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> None:
        """What the PV controller writes to complete a binding the PV's claimRef began."""
        meta = pvc.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        pv_name = pv["metadata"]["name"]
        body = {
            "metadata": {"annotations": {BIND_COMPLETED: "yes"}},
            "spec": {"volumeName": pv_name},
        }
        if not self._patch("PersistentVolumeClaim", key, body):
            return
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if not ref.get("uid"):  # (a claimRef without uid is made whole, as the controller does)
            self._patch(
                "PersistentVolume", pv_name, {"spec": {"claimRef": {"uid": meta.get("uid")}}}
            )
        self._patch("PersistentVolume", pv_name, {"status": {"phase": "Bound"}}, "status")
        pv_spec = pv.get("spec") or {}
        status = {
            "phase": "Bound",
            "accessModes": list(pv_spec.get("accessModes") or []),
            "capacity": dict(pv_spec.get("capacity") or {}),
        }
        if self._patch("PersistentVolumeClaim", key, {"status": status}, "status"):
            self.bound += 1

    def _release(self, name: str) -> None:
        """A PV of the class whose claim is gone: deleted (provisioned) or made
        Available again (static)."""
        pv = self._pvs.store.get(name)
        if pv is None:
            return
        spec = pv.get("spec") or {}
        ref = spec.get("claimRef") or {}
        if not ref.get("name") or spec.get("storageClassName") not in self.classes:
            return
        key = f"{ref.get('namespace') or 'default'}/{ref['name']}"
        claim = self._claims.store.get(key)
        if claim is not None and (
            not ref.get("uid") or (claim.get("metadata") or {}).get("uid") == ref.get("uid")
        ):
            return
        if not ref.get("uid"):
            return  # (pre-bound to a claim not created yet: left to wait for it)
        notes = (pv.get("metadata") or {}).get("annotations") or {}
        if notes.get(PROVISIONED_BY) == PROVISIONER:
            finalizers = (pv.get("metadata") or {}).get("finalizers") or ()
            if PV_PROTECTION in finalizers:
                left = [f for f in finalizers if f != PV_PROTECTION]
                self._patch("PersistentVolume", name, {"metadata": {"finalizers": left or None}})
            status, _ = self.client.request("DELETE", RESOURCES["PersistentVolume"].key_path(name))
            if status in (200, 202):
                self.reclaimed += 1
            return
        body = {"metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": None}},
                "spec": {"claimRef": None}}  # fmt: skip
        if self._patch("PersistentVolume", name, body):
            self._patch("PersistentVolume", name, {"status": {"phase": "Available"}}, "status")
            self.reclaimed += 1


__all__ = [
    "CLASS",
    "PROVISIONER",
    "LocalProvisioner",
    "create_storage",
    "static_pvs",
    "storage_class",
]
