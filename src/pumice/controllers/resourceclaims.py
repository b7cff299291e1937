"""ResourceClaims made from templates, and given back when their pods are done: what
Kubernetes' resource-claim controller (part of kube-controller-manager) does for
dynamic resource allocation.

**Claims for pods.** A pod entry ``{name: gpu, resourceClaimTemplateName: one-gpu}``
of ``spec.resourceClaims`` needs its own ResourceClaim, made from the template and
owned by the pod (a controller ownerReference, so that it goes with the pod), and
recorded in the pod's ``status.resourceClaimStatuses`` as ``{name: gpu,
resourceClaimName: <claim>}``, where the scheduler looks it up. Kubernetes names the
claim with ``generateName`` ``<pod>-<entry>-`` and a random suffix; pumice derives the
suffix from the pod's uid (:func:`~pumice.api.dra.generated_claim_name`), so a replay
or a simulation makes the same names every time. A claim of that name the pod does not
own is left alone with a log line (the pod then keeps waiting, as the scheduler says).
A claim recorded in the status and since deleted is made again while the pod is not on
a node. Nothing is made for a pod that is done or being deleted, and a template that
does not exist yet is waited for (the pod is looked at again when it appears).

**Claims given back.** A claim's ``status.reservedFor`` lists the pods using it (the
scheduler adds each pod at its bind). An entry for a pod that is gone (or replaced by
another of the same name) or done (``Succeeded``, ``Failed``, or deleted before it got
a node) is removed; when the last entry goes, the claim's ``status.allocation`` is
cleared too, so that its devices are free for other claims (the kubelet stops using
them when the pod ends; Kubernetes clears the allocation of a claim the scheduler
allocated once it is no longer reserved). A claim made for a pod that is done, or
whose pod the controller saw deleted, is then deleted (Kubernetes' controller deletes
the first, its garbage collector the second; a cluster where pods are removed without
a cascade, as the simulated kubelet removes them, relies on this). A claim whose pod
was deleted before the controller started is left to the garbage collector.

``on_release`` is told whenever devices may have come free (an allocation cleared, an
allocated claim deleted): a simulator schedules a cycle on it.

Keys: ``pod/<namespace>/<name>`` (make the pod's claims) and
``claim/<namespace>/<name>`` (check the claim's users).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pumice.api.dra import (
    PodClaimRef,
    claim_from_template,
    generated_claim_name,
    pod_claim_names,
)
from pumice.cluster.protocol import DELETED, WatchEvent
from pumice.controllers.store import Store, controller_of
from pumice.errors import InputError

log = logging.getLogger("pumice.controllers.resourceclaims")

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
#: How many deleted pods are remembered (the claims they owned are deleted; a pod the
#: controller never saw deleted is left to the garbage collector).
_REMEMBERED = 65536


def pod_done(pod: Mapping[str, Any]) -> bool:
    """The pod will never run again: it ended, or it was deleted before it got a node
    (as Kubernetes' resource-claim controller judges it)."""
    meta = pod.get("metadata") or {}
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return True
    return meta.get("deletionTimestamp") is not None and not (pod.get("spec") or {}).get("nodeName")


def _namespace(obj: Mapping[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("namespace") or "default"


def _claim_name(pod: Mapping[str, Any], ref: PodClaimRef) -> str:
    """The name of the claim made for template entry ``ref`` of ``pod``."""
    meta = pod.get("metadata") or {}
    name = str(meta.get("name"))
    return generated_claim_name(name, str(meta.get("uid") or f"{ref.namespace}/{name}"), ref.name)


def _refs(pod: Mapping[str, Any]) -> list[PodClaimRef]:
    """The pod's claim entries; a malformed pod has none (logged: the scheduler and
    the API server refuse it, and the controller cannot act on it)."""
    if not (pod.get("spec") or {}).get("resourceClaims"):
        return []
    try:
        return pod_claim_names(pod)
    except InputError as err:
        name = (pod.get("metadata") or {}).get("name")
        log.warning("pod %s/%s: %s", _namespace(pod), name, err.render())
        return []


class ResourceClaimController:
    """Makes the claims of pods' template entries and gives back the claims of pods
    that are done (module docstring)."""

    name = "resourceclaim"
    kinds = ("Pod", "ResourceClaim", "ResourceClaimTemplate")

    def __init__(self, store: Store, on_release: Callable[[], None] | None = None) -> None:
        self.store = store
        self.on_release = on_release
        #: Claims made and claims given back (allocation cleared or claim deleted), for
        #: tests and reports.
        self.made = 0
        self.released = 0
        #: The uids of pods seen deleted, oldest first.
        self._gone: OrderedDict[str, None] = OrderedDict()

    # -- events -------------------------------------------------------------------------

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        obj = event.obj
        if event.kind == "Pod":
            refs = _refs(obj)
            if not refs:
                return ()
            namespace = _namespace(obj)
            if event.type == DELETED or pod_done(obj):
                if event.type == DELETED:
                    self._forget_pod(obj)
                return [f"claim/{namespace}/{name}" for name in self._claims_of(obj, refs)]
            if (
                any(r.template for r in refs)
                and (obj.get("metadata") or {}).get("deletionTimestamp") is None
            ):
                return (f"pod/{event.key}",)
            return ()
        if event.kind == "ResourceClaim":
            if event.type == DELETED:  # (a pod not on a node yet gets it made again)
                owner = controller_of(obj)
                if owner is not None and owner.get("kind") == "Pod":
                    return (f"pod/{_namespace(obj)}/{owner.get('name')}",)
                return ()
            if (obj.get("status") or {}).get("reservedFor") or controller_of(obj):
                return (f"claim/{event.key}",)
            return ()
        # a template appeared or changed: the pods waiting for it
        if event.type == DELETED:
            return ()
        namespace, template = _namespace(obj), (obj.get("metadata") or {}).get("name")
        return [
            f"pod/{namespace}/{p['metadata']['name']}"
            for p in self.store.list("Pod")
            if _namespace(p) == namespace
            and any(r.waiting and r.template == template for r in _refs(p))
        ]

    def _forget_pod(self, pod: Mapping[str, Any]) -> None:
        uid = (pod.get("metadata") or {}).get("uid")
        if uid:
            self._gone[str(uid)] = None
            if len(self._gone) > _REMEMBERED:
                self._gone.popitem(last=False)

    @staticmethod
    def _claims_of(pod: Mapping[str, Any], refs: list[PodClaimRef]) -> list[str]:
        """The claims a pod uses or may own: those it names or its status records, and
        for a template entry not recorded yet, the name its claim would have."""
        names = []
        for r in refs:
            if r.claim_name:
                names.append(r.claim_name)
            elif r.template:
                names.append(_claim_name(pod, r))
        return list(dict.fromkeys(names))

    def resync(self) -> Iterable[str]:
        keys = []
        for pod in self.store.list("Pod"):
            refs = _refs(pod)
            if any(r.template for r in refs) and not pod_done(pod):
                keys.append(f"pod/{_namespace(pod)}/{pod['metadata']['name']}")
        for claim in self.store.list("ResourceClaim"):
            if (claim.get("status") or {}).get("reservedFor") or controller_of(claim):
                keys.append(f"claim/{_namespace(claim)}/{claim['metadata']['name']}")
        return keys

    def reconcile(self, key: str) -> float | None:
        what, _, rest = key.partition("/")
        if what == "pod":
            self._sync_pod(rest)
        elif what == "claim":
            self._sync_claim(rest)
        return None

    # -- claims for pods ----------------------------------------------------------------

    def _sync_pod(self, key: str) -> None:
        pod = self.store.get("Pod", key)
        if pod is None:
            return
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") is not None or pod_done(pod):
            return
        namespace, uid = _namespace(pod), str(meta.get("uid") or "")
        on_node = bool((pod.get("spec") or {}).get("nodeName"))
        recorded = {
            s.get("name"): s
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
            if isinstance(s, Mapping)
        }
        new: dict[str, str] = {}
        for ref in _refs(pod):
            if not ref.template:
                continue
            if ref.name in recorded:
                name = ref.claim_name
                if not name or on_node:
                    continue  # (none needed; or too late to make it again)
                claim = self.store.get("ResourceClaim", f"{namespace}/{name}")
                if claim is not None:
                    self._check_owner(key, claim, uid)
                    continue
                self._create(pod, ref, key, name)
                continue
            if on_node:
                continue  # (bound without its claim: nothing to make now)
            name = _claim_name(pod, ref)
            claim = self.store.get("ResourceClaim", f"{namespace}/{name}")
            if claim is not None:
                if self._check_owner(key, claim, uid):
                    new[ref.name] = name
                continue
            if self._create(pod, ref, key, name):
                new[ref.name] = name
        if new:
            statuses = [dict(s) for s in recorded.values()]
            statuses += [{"name": n, "resourceClaimName": c} for n, c in new.items()]
            self.store.patch("Pod", key, {"status": {"resourceClaimStatuses": statuses}},
                             subresource="status")  # fmt: skip

    def _check_owner(self, pod_key: str, claim: Mapping[str, Any], uid: str) -> bool:
        ref = controller_of(claim)
        if ref is not None and ref.get("kind") == "Pod" and ref.get("uid") == uid:
            return True
        log.warning(
            "pod %s: ResourceClaim %s/%s exists and is not the pod's; leaving it alone",
            pod_key, _namespace(claim), (claim.get("metadata") or {}).get("name"),
        )  # fmt: skip
        return False

    def _create(self, pod: Mapping[str, Any], ref: PodClaimRef, key: str, name: str) -> bool:
        template = self.store.get("ResourceClaimTemplate", f"{ref.namespace}/{ref.template}")
        if template is None:
            log.info("pod %s: waiting for ResourceClaimTemplate %s/%s", key, ref.namespace,
                     ref.template)  # fmt: skip
            return False
        try:
            claim = claim_from_template(pod, ref, template)
        except InputError as err:
            log.warning("pod %s: ResourceClaimTemplate %s/%s: %s", key, ref.namespace,
                        ref.template, err.render())  # fmt: skip
            return False
        claim["metadata"]["name"] = name
        made = self.store.create(claim)
        if made is not None:
            self.made += 1
            return True
        # (made meanwhile by someone else: ours if the pod owns it)
        have = self.store.get("ResourceClaim", f"{ref.namespace}/{name}")
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        return have is not None and self._check_owner(key, have, uid)

    # -- claims given back ---------------------------------------------------------------

    def _live(self, namespace: str, name: str, uid: str) -> Mapping[str, Any] | None:
        """The pod ``namespace/name`` if it is the incarnation ``uid`` (None: gone)."""
        pod = self.store.get("Pod", f"{namespace}/{name}")
        if pod is None or (uid and (pod.get("metadata") or {}).get("uid") != uid):
            return None
        return pod

    def _sync_claim(self, key: str) -> None:
        claim = self.store.get("ResourceClaim", key)
        if claim is None:
            return
        namespace = key.split("/", 1)[0]
        status = claim.get("status") or {}
        reserved = [r for r in status.get("reservedFor") or () if isinstance(r, Mapping)]
        valid = []
        for r in reserved:
            if r.get("apiGroup") or r.get("resource") != "pods":
                valid.append(r)  # (a consumer of another kind: not ours to judge)
                continue
            pod = self._live(namespace, str(r.get("name")), str(r.get("uid") or ""))
            if pod is not None and not pod_done(pod):
                valid.append(r)
        allocated = status.get("allocation") is not None
        if len(valid) < len(reserved):
            patch: dict[str, Any] = {"reservedFor": valid or None}
            if not valid:
                patch["allocation"] = None  # (the last user went: the devices are free)
            self.store.patch("ResourceClaim", key, {"status": patch}, subresource="status")
            if not valid and allocated:
                allocated = False
                self._released()
        if valid:
            return
        owner = controller_of(claim)
        if owner is None or owner.get("kind") != "Pod":
            return
        uid = str(owner.get("uid") or "")
        pod = self._live(namespace, str(owner.get("name")), uid)
        if (pod is None and uid in self._gone) or (pod is not None and pod_done(pod)):
            self.store.delete("ResourceClaim", key)
            if allocated:
                self._released()

    def _released(self) -> None:
        self.released += 1
        if self.on_release is not None:
            self.on_release()


__all__ = ["ResourceClaimController", "pod_done"]
