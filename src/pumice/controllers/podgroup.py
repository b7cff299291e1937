"""The PodGroup controller: a PodGroup for every plain pod of ours, as Volcano makes it.

The scheduler works on PodGroups; a Deployment, a StatefulSet, a batch/v1 Job or a bare
pod knows nothing of them. Volcano's ``pg-controller`` bridges the two, and so does this
controller: a pod whose ``schedulerName`` is one of ours (a pod with none counts as
ours, as it does for pumice's scheduler) and that has no
``scheduling.k8s.io/group-name`` annotation gets a PodGroup, and is then annotated with
its name. What the PodGroup holds (Volcano's ``buildPodGroupFromPod``):

- name ``podgroup-<uid>``, the uid of the pod's controlling owner (a ReplicaSet, a
  StatefulSet, a Job...) when it has one, else the pod's own: the pods of one owner
  share one PodGroup. ``pumice cycle`` groups unannotated pods the same way
  (:func:`pumice.cache.model.bare_job_name`), so both give the same names;
- ``ownerReferences``: the pod's own when one of them is a controller (the PodGroup
  goes when the owner goes), else a controller reference to the pod;
- ``minMember`` 1, or the owner's ``scheduling.volcano.sh/group-min-member``
  annotation when ``inherit_owner_annotations`` (Volcano's
  ``--inherit-owner-annotations``, on by default) and it is a whole number >= 0;
- ``minResources``: the pod's effective requests (the larger of its containers' sum
  and each init container, plus overhead, and ``pods: 1``) times ``minMember``. Volcano
  writes the pod's quota usage, which adds the quota-only keys (``count/pods``,
  ``requests.*``, ``limits.*``) that no scheduler reads; they are left out here;
- ``queue`` from the pod's ``scheduling.volcano.sh/queue-name`` annotation, else the
  default queue; ``priorityClassName`` from the pod's spec;
- annotations: the owners' ``volcano.sh/*`` annotations (when inheriting), then the
  pod's ``volcano.sh/preemptable``, ``volcano.sh/cooldown-time``,
  ``volcano.sh/revocable-zone``, and ``volcano.sh/jdb-min-available`` (else
  ``volcano.sh/jdb-max-unavailable``); labels: the pod's ``volcano.sh/preemptable`` and
  ``volcano.sh/cooldown-time``; ``spec.networkTopology`` from the pod's
  ``volcano.sh/network-topology-mode`` / ``-highest-tier`` annotations.

A pod that already names a group is left alone, whoever wrote the name. A ReplicaSet
or StatefulSet scaled to zero replicas loses its PodGroup, as in Volcano (its next pods
make a new one).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pumice.api import parse
from pumice.api.quantity import render_resources
from pumice.cluster.protocol import DELETED, WatchEvent
from pumice.controllers.store import Store, controller_of
from pumice.errors import InputError

log = logging.getLogger("pumice.controllers.podgroup")

PREFIX = "podgroup-"
MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
#: Owner annotations with this prefix are copied onto the PodGroup.
INHERITED_PREFIX = "volcano.sh/"
#: Pod annotations (and, for the first two, labels) copied onto the PodGroup.
PREEMPTABLE = "volcano.sh/preemptable"
COOLDOWN_TIME = "volcano.sh/cooldown-time"
REVOCABLE_ZONE = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
TOPOLOGY_MODE = "volcano.sh/network-topology-mode"
TOPOLOGY_TIER = "volcano.sh/network-topology-highest-tier"

#: Owner kinds whose annotations the PodGroup inherits: (ownerReference apiVersion
#: group, kind) -> the store's kind name (a batch/v1 Job is ``BatchJob`` in pumice).
#: Volcano reads DaemonSets too; pumice's stores do not carry them.
OWNER_KINDS = {
    ("apps", "ReplicaSet"): "ReplicaSet",
    ("apps", "StatefulSet"): "StatefulSet",
    ("batch", "Job"): "BatchJob",
}
#: Workloads whose scaling to zero removes their PodGroup.
_SCALED = ("ReplicaSet", "StatefulSet")


def podgroup_name(pod: Mapping[str, Any]) -> str:
    """``podgroup-<uid>``: the uid of the pod's controlling owner, else the pod's (its
    name for a pod without a uid, which only a hand-written snapshot has)."""
    owner = controller_of(pod)
    if owner is not None and owner.get("uid"):
        return PREFIX + str(owner["uid"])
    meta = pod.get("metadata") or {}
    return PREFIX + str(meta.get("uid") or meta.get("name") or "")


def _group(api_version: Any) -> str:
    text = str(api_version or "")
    return text.split("/")[0] if "/" in text else ""


def min_member_of(annotations: Mapping[str, str], where: str = "") -> int:
    """``minMember`` from the owners' annotations: the annotated whole number when it is
    one and not negative, else 1 (logged, as Volcano does)."""
    raw = annotations.get(MIN_MEMBER_ANNOTATION)
    if raw is None:
        return 1
    text = str(raw).strip()
    value = int(text) if text.lstrip("+-").isdigit() else -1
    if not 0 <= value <= 2**31 - 1:
        log.warning("%s: %s=%r is not a whole number >= 0; minMember stays 1", where,
                    MIN_MEMBER_ANNOTATION, raw)  # fmt: skip
        return 1
    return value


def _network_topology(annotations: Mapping[str, str]) -> dict[str, Any] | None:
    if TOPOLOGY_MODE not in annotations and TOPOLOGY_TIER not in annotations:
        return None
    mode = str(annotations.get(TOPOLOGY_MODE, "hard")).lower()
    spec: dict[str, Any] = {"mode": mode if mode in ("hard", "soft") else "hard"}
    tier = str(annotations.get(TOPOLOGY_TIER, "")).strip()
    if tier.lstrip("+-").isdigit():
        spec["highestTierAllowed"] = int(tier)
    return spec


class PodGroupController:
    """See the module docstring. ``scheduler_names``: the pods this controller serves
    (Volcano's ``--scheduler-name``); ``default_queue``: the queue of a pod that names
    none."""

    name = "podgroup"

    def __init__(
        self,
        store: Store,
        *,
        scheduler_names: Sequence[str] = ("volcano",),
        default_queue: str = parse.DEFAULT_QUEUE,
        inherit_owner_annotations: bool = True,
    ) -> None:
        self.store = store
        self.scheduler_names = frozenset(("", *scheduler_names))
        self.default_queue = default_queue
        self.inherit_owner_annotations = inherit_owner_annotations
        owners = ("BatchJob",) if inherit_owner_annotations else ()
        # PodGroup is read (does the group exist?), not reacted to; the owners are read
        # for their annotations, and ReplicaSets and StatefulSets for scaling to zero.
        self.kinds: tuple[str, ...] = ("Pod", "PodGroup", *_SCALED, *owners)

    # -- the Controller protocol ----------------------------------------------------

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        if event.kind == "Pod":
            if event.type != DELETED and self._wants(event.obj):
                return (event.key,)
            return ()
        if event.kind in _SCALED and event.type != DELETED:
            return (f"{event.kind}:{event.key}",)
        return ()

    def resync(self) -> Iterable[str]:
        keys = [_key(p) for p in self.store.list("Pod") if self._wants(p)]
        for kind in _SCALED:
            keys.extend(f"{kind}:{_key(o)}" for o in self.store.list(kind))
        return keys

    def reconcile(self, key: str) -> float | None:
        kind, sep, rest = key.partition(":")
        if sep:
            self._scaled(kind, rest)
            return None
        pod = self.store.get("Pod", key)
        if pod is None or not self._wants(pod):
            return None
        name = podgroup_name(pod)
        namespace = key.partition("/")[0]
        if self.store.get("PodGroup", f"{namespace}/{name}") is None:
            group = self.podgroup_for(pod)
            if group is None:
                return None
            if self.store.create(group) is not None:
                log.info("PodGroup %s/%s created for pod %s", namespace, name, key)
        self.store.patch("Pod", key, {"metadata": {"annotations": {parse.GROUP_ANNOTATION: name}}})
        return None

    # -- building the PodGroup ------------------------------------------------------

    def podgroup_for(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        """The PodGroup Volcano's controller makes for ``pod`` (None for a pod whose
        spec cannot be read: logged)."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        where = f"Pod {namespace}/{meta.get('name', '')}"
        try:
            record = parse.parse_pod(pod)
        except InputError as err:
            log.warning("no PodGroup for %s", err.located(obj=where).render())
            return None
        owner_annotations = self._owner_annotations(pod) if self.inherit_owner_annotations else {}
        min_member = min_member_of(owner_annotations, where)
        requests = {k: v * min_member for k, v in record.init_resreq.items()} if min_member else {}
        annotations: dict[str, str] = {
            k: v for k, v in owner_annotations.items() if k.startswith(INHERITED_PREFIX)
        }
        pod_annotations = meta.get("annotations") or {}
        pod_labels = meta.get("labels") or {}
        for k in (PREEMPTABLE, COOLDOWN_TIME, REVOCABLE_ZONE):
            if k in pod_annotations:
                annotations[k] = pod_annotations[k]
        if JDB_MIN_AVAILABLE in pod_annotations:
            annotations[JDB_MIN_AVAILABLE] = pod_annotations[JDB_MIN_AVAILABLE]
        elif JDB_MAX_UNAVAILABLE in pod_annotations:
            annotations[JDB_MAX_UNAVAILABLE] = pod_annotations[JDB_MAX_UNAVAILABLE]
        labels = {k: pod_labels[k] for k in (PREEMPTABLE, COOLDOWN_TIME) if k in pod_labels}
        spec: dict[str, Any] = {
            "minMember": min_member,
            "minResources": render_resources(requests),
            "queue": pod_annotations.get(parse.QUEUE_ANNOTATION) or self.default_queue,
        }
        priority_class = (pod.get("spec") or {}).get("priorityClassName")
        if priority_class:
            spec["priorityClassName"] = priority_class
        topology = _network_topology(pod_annotations)
        if topology is not None:
            spec["networkTopology"] = topology
        group_meta: dict[str, Any] = {
            "name": podgroup_name(pod),
            "namespace": namespace,
            "ownerReferences": self._owner_references(pod),
        }
        if annotations:
            group_meta["annotations"] = annotations
        if labels:
            group_meta["labels"] = labels
        return {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": group_meta,
            "spec": spec,
            "status": {"phase": "Pending"},
        }

    @staticmethod
    def _owner_references(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        meta = pod.get("metadata") or {}
        refs = meta.get("ownerReferences") or []
        if controller_of(pod) is not None:
            return [dict(r) for r in refs]
        return [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": str(meta.get("name") or ""),
                "uid": str(meta.get("uid") or ""),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]

    def _owner_annotations(self, pod: Mapping[str, Any]) -> dict[str, str]:
        """The annotations of the pod's owners that the store knows, the first owner's
        value winning for a key more than one has."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        out: dict[str, str] = {}
        for ref in meta.get("ownerReferences") or ():
            kind = OWNER_KINDS.get((_group(ref.get("apiVersion")), str(ref.get("kind"))))
            if kind is None or not ref.get("name"):
                continue
            owner = self.store.get(kind, f"{namespace}/{ref['name']}")
            if owner is None:
                continue
            for k, v in ((owner.get("metadata") or {}).get("annotations") or {}).items():
                out.setdefault(str(k), str(v))
        return out

    # -- helpers --------------------------------------------------------------------

    def _wants(self, pod: Mapping[str, Any]) -> bool:
        """A pod of ours that names no group."""
        spec = pod.get("spec") or {}
        if (spec.get("schedulerName") or "") not in self.scheduler_names:
            return False
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        return not annotations.get(parse.GROUP_ANNOTATION)

    def _scaled(self, kind: str, key: str) -> None:
        """A ReplicaSet or StatefulSet at zero replicas loses its PodGroup."""
        owner = self.store.get(kind, key)
        if owner is None or (owner.get("spec") or {}).get("replicas", 1) != 0:
            return
        uid = (owner.get("metadata") or {}).get("uid")
        if not uid:
            return
        namespace = key.partition("/")[0]
        if self.store.delete("PodGroup", f"{namespace}/{PREFIX}{uid}"):
            log.info("PodGroup %s/%s%s deleted: %s %s has no replicas", namespace, PREFIX,
                     uid, kind, key)  # fmt: skip


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


__all__ = ["PodGroupController", "min_member_of", "podgroup_name"]
