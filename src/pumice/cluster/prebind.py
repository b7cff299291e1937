"""What a bind writes before ``pods/binding`` on a real cluster, as kube-scheduler's
PreBind plugins do (see :class:`~pumice.cluster.protocol.BindWrites`).

In order: the pod's annotations (a device agent reads them when the pod starts); each
ResourceClaim's ``status.allocation``, with the pod added to ``reservedFor`` (the
kubelet refuses a pod whose claims are not reserved for it), the claim first given
kube-scheduler's ``resource.kubernetes.io/delete-protection`` finalizer; each chosen PV's
``claimRef`` (with ``pv.kubernetes.io/bound-by-controller``), and for a claim to
provision, ``volume.kubernetes.io/selected-node``. Then the bind waits, up to the
timeout, until the PV controller (and the provisioner) has bound every claim: a pod
bound to a node before its volumes are could not start. A write refused, or a wait
that runs out, fails the bind; what was written stays (the PV controller finishes a
binding it has begun, as it does after kube-scheduler's), and the next cycle decides
again with what the cluster then says.

The same writes are shown to the scheduler's cache at once (:func:`overlays`), so the
next cycle does not offer the same PV or device to another pod while they are under
way.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from pumice.api.volumes import BOUND_BY_CONTROLLER, SELECTED_NODE
from pumice.cluster.kube_client import (
    MERGE_PATCH,
    RESOURCES,
    KubeClient,
    Resource,
    status_message,
)
from pumice.cluster.protocol import BindWrites

#: The finalizer an allocated ResourceClaim carries until its devices are given back.
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
#: How often a bind looks whether its claims are bound yet (in the watched objects:
#: no request is made).
POLL_SECONDS = 0.05

#: An overlay: the server's object -> the object to show (None: the server shows it).
Overlay = Callable[[dict[str, Any]], dict[str, Any] | None]
Truth = Callable[[str, str], dict[str, Any] | None]


def _claim_ref(pvc: Mapping[str, Any]) -> dict[str, Any]:
    meta = pvc.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": meta.get("namespace") or "default",
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }


def _with(obj: dict[str, Any], part: str, key: str, value: Any) -> dict[str, Any]:
    out = copy.copy(obj)
    out[part] = {**(obj.get(part) or {}), key: value}
    return out


def _annotated(obj: dict[str, Any], notes: Mapping[str, str]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out = copy.copy(obj)
    out["metadata"] = {**meta, "annotations": {**(meta.get("annotations") or {}), **notes}}
    return out


def overlays(pod_key: str, node: str, writes: BindWrites, truth: Truth) -> dict[tuple, Overlay]:
    """What the cache is shown of ``writes`` until the server shows it, by (kind, key)."""
    out: dict[tuple, Overlay] = {}
    notes = dict(writes.annotations)
    if notes:

        def pod(obj: dict[str, Any]) -> dict[str, Any] | None:
            have = (obj.get("metadata") or {}).get("annotations") or {}
            if all(have.get(k) == v for k, v in notes.items()):
                return None
            return _annotated(obj, notes)

        out[("Pod", pod_key)] = pod
    for claim, pv_name in writes.volumes.items():
        pvc_obj = truth("PersistentVolumeClaim", claim)
        if pvc_obj is None:
            continue
        ref = _claim_ref(pvc_obj)

        def pv(obj: dict[str, Any], ref: dict[str, Any] = ref) -> dict[str, Any] | None:
            if (obj.get("spec") or {}).get("claimRef"):
                return None
            return _with(obj, "spec", "claimRef", ref)

        out[("PersistentVolume", pv_name)] = pv
    for claim in writes.provision:

        def pvc(obj: dict[str, Any]) -> dict[str, Any] | None:
            if ((obj.get("metadata") or {}).get("annotations") or {}).get(SELECTED_NODE):
                return None
            return _annotated(obj, {SELECTED_NODE: node})

        out[("PersistentVolumeClaim", claim)] = pvc
    for claim, allocation in writes.claims.items():
        if not allocation:
            continue

        def rc(obj: dict[str, Any], allocation: Any = allocation) -> dict[str, Any] | None:
            if (obj.get("status") or {}).get("allocation"):
                return None
            return _with(obj, "status", "allocation", dict(allocation))

        out[("ResourceClaim", claim)] = rc
    return out


class PreBinder:
    """Carries out one bind's writes and waits for its volumes (on a bind worker)."""

    def __init__(
        self,
        client: KubeClient,
        truth: Truth,
        stop: threading.Event,
        resource_of: Callable[[str], Resource] = RESOURCES.__getitem__,
    ) -> None:
        self.client = client
        self.truth = truth
        self.stop = stop
        #: Where each kind is served (its informer's API version).
        self.resource_of = resource_of

    def run(self, pod_key: str, node: str, uid: str, writes: BindWrites) -> tuple[bool, str]:
        """Write, then wait; ``(done, why not)``."""
        name = pod_key.partition("/")[2]
        if writes.annotations:
            body: dict[str, Any] = {"metadata": {"annotations": dict(writes.annotations)}}
            err = self._patch("Pod", pod_key, body)
            if err:
                return False, f"annotations of the pod: {err}"
        user = {"resource": "pods", "name": name, "uid": uid}
        for claim, allocation in writes.claims.items():
            current = self.truth("ResourceClaim", claim) or {}
            held = list((current.get("metadata") or {}).get("finalizers") or [])
            if allocation and DELETE_PROTECTION not in held:
                # (as kube-scheduler does: an allocated claim is not deleted before the
                # resource-claim controller has given its devices back)
                body = {"metadata": {"finalizers": [*held, DELETE_PROTECTION]}}
                err = self._patch("ResourceClaim", claim, body)
                if err:
                    return False, f"protecting ResourceClaim {claim}: {err}"
            reserved = list((current.get("status") or {}).get("reservedFor") or [])
            if user not in reserved:
                reserved.append(user)
            status: dict[str, Any] = {"reservedFor": reserved}
            if allocation:  # (empty: allocated before, the pod only joins its users)
                status["allocation"] = dict(allocation)
            body = {"status": status}
            err = self._patch("ResourceClaim", claim, body, sub="status")
            if err:
                return False, f"allocation of ResourceClaim {claim}: {err}"
        for claim, pv_name in writes.volumes.items():
            pvc = self.truth("PersistentVolumeClaim", claim)
            if pvc is None:
                return False, f"PersistentVolumeClaim {claim} is gone"
            body = {
                "metadata": {"annotations": {BOUND_BY_CONTROLLER: "yes"}},
                "spec": {"claimRef": _claim_ref(pvc)},
            }
            err = self._patch("PersistentVolume", pv_name, body)
            if err:
                return False, f"binding PersistentVolume {pv_name} to {claim}: {err}"
        for claim in writes.provision:
            body = {"metadata": {"annotations": {SELECTED_NODE: node}}}
            err = self._patch("PersistentVolumeClaim", claim, body)
            if err:
                return False, f"asking for a volume for {claim} on {node}: {err}"
        waiting = [*writes.volumes, *writes.provision]
        if waiting:
            return self._wait_bound(waiting, writes.timeout)
        return True, ""

    def _patch(self, kind: str, key: str, body: Any, sub: str = "") -> str:
        """A merge patch; "" when done, else why not."""
        status, answer = self.client.request(
            "PATCH", self.resource_of(kind).key_path(key, sub), body=body, content_type=MERGE_PATCH
        )
        return "" if status == 200 else f"HTTP {status}: {status_message(answer)}"

    def _wait_bound(self, claims: list[str], timeout: float) -> tuple[bool, str]:
        deadline = time.monotonic() + timeout
        while True:
            left = [c for c in claims if not _bound(self.truth("PersistentVolumeClaim", c))]
            if not left:
                return True, ""
            if time.monotonic() >= deadline:
                return False, (
                    f"volume binding timed out after {timeout:g}s waiting for "
                    f"PersistentVolumeClaim {', '.join(left)} to be bound"
                )
            if self.stop.wait(POLL_SECONDS):
                return False, "scheduler stopping"


def _bound(pvc: Mapping[str, Any] | None) -> bool:
    if pvc is None:
        return False
    return bool((pvc.get("spec") or {}).get("volumeName")) and (
        (pvc.get("status") or {}).get("phase") == "Bound"
    )


__all__ = ["PreBinder", "overlays"]
