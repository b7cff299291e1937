"""Generic ephemeral volumes: the claim of each ``ephemeral`` volume of a pod.

A pod volume ``{name: scratch, ephemeral: {volumeClaimTemplate: {metadata, spec}}}``
needs the PersistentVolumeClaim ``<pod>-<volume>`` (here ``<pod>-scratch``), made from
the template and owned by the pod (a controller ownerReference), so that it goes when
the pod is deleted. Kubernetes' kube-controller-manager runs this controller; a cluster
without one (``pumice sandbox``, ``pumice simulate``) gets it from pumice. Running both
is harmless: whichever creates the claim first, the other finds it there.

A claim of that name that the pod does not own is left alone (Kubernetes does the
same): the scheduler then refuses the pod, since the claim is not the pod's.

The controller reconciles a pod (key ``namespace/name``) when it is created or
changes, creates the claims it lacks, and does nothing for a pod being deleted or on a
node already (its claims were needed before it could be bound).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pumice.api.parse import copy_tree
from pumice.cluster.protocol import DELETED, WatchEvent
from pumice.controllers.store import Store, controller_of

log = logging.getLogger("pumice.controllers.ephemeral")


def ephemeral_claims(pod: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(claim name, volumeClaimTemplate)`` of each ephemeral volume of ``pod``."""
    name = (pod.get("metadata") or {}).get("name") or ""
    out = []
    for v in (pod.get("spec") or {}).get("volumes") or ():
        if not isinstance(v, Mapping):
            continue
        eph = v.get("ephemeral")
        if isinstance(eph, Mapping) and isinstance(eph.get("volumeClaimTemplate"), Mapping):
            out.append((f"{name}-{v.get('name')}", eph["volumeClaimTemplate"]))
    return out


def claim_object(pod: Mapping[str, Any], claim: str, template: Mapping[str, Any]) -> dict:
    """The claim for one ephemeral volume of ``pod``: the template's labels,
    annotations and spec, the pod as its controller."""
    meta = pod.get("metadata") or {}
    tmeta = template.get("metadata") or {}
    out_meta: dict[str, Any] = {
        "name": claim,
        "namespace": meta.get("namespace") or "default",
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta.get("name"),
                "uid": meta.get("uid", ""),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    for k in ("labels", "annotations"):
        if tmeta.get(k):
            out_meta[k] = dict(tmeta[k])
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": out_meta,
        "spec": copy_tree(dict(template.get("spec") or {})),
    }


class EphemeralClaimController:
    """Creates the claims of pods' generic ephemeral volumes (module docstring)."""

    name = "ephemeral"
    kinds = ("Pod",)
    reads = ("PersistentVolumeClaim",)

    def __init__(self, store: Store) -> None:
        self.store = store

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        if event.type == DELETED or not ephemeral_claims(event.obj):
            return ()
        return (event.key,)

    def resync(self) -> Iterable[str]:
        return [
            f"{(p.get('metadata') or {}).get('namespace') or 'default'}/{p['metadata']['name']}"
            for p in self.store.list("Pod")
            if ephemeral_claims(p)
        ]

    def reconcile(self, key: str) -> float | None:
        pod = self.store.get("Pod", key)
        if pod is None:
            return None
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") is not None or (pod.get("spec") or {}).get("nodeName"):
            return None
        namespace = meta.get("namespace") or "default"
        for claim, template in ephemeral_claims(pod):
            have = self.store.get("PersistentVolumeClaim", f"{namespace}/{claim}")
            if have is None:
                self.store.create(claim_object(pod, claim, template))
                continue
            ref = controller_of(have)
            if ref is None or ref.get("uid") != meta.get("uid"):
                log.warning("pod %s: claim %s/%s exists and is not the pod's", key, namespace,
                            claim)  # fmt: skip
        return None


__all__ = ["EphemeralClaimController", "claim_object", "ephemeral_claims"]
