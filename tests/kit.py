"""A test kit: fluent builders of Kubernetes objects and a one-call cycle runner.

Builders return plain dicts shaped like the API server's objects, so tests exercise the
same parsing path as ``pumice cycle``.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.framework.decisions import Decisions
from pumice.scheduler import Scheduler


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    *,
    pods: str = "110",
    labels: dict | None = None,
    taints: list | None = None,
    unschedulable: bool = False,
    **extra: str,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    alloc.update(
        {k.replace("_", "/").replace("nvidia/gpu", "nvidia.com/gpu"): v for k, v in extra.items()}
    )
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": alloc},
    }


def pod(
    name: str,
    *,
    ns: str = "default",
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    gpu: str | None = None,
    group: str | None = None,
    node: str | None = None,
    phase: str | None = None,
    priority: int | None = None,
    priority_class: str = "",
    terminating: bool = False,
    role: str | None = None,
    created: str | None = None,
    scheduler: str = "volcano",
    **spec_extra: Any,
) -> dict[str, Any]:
    req: dict[str, str] = {}
    if cpu:
        req["cpu"] = cpu
    if memory:
        req["memory"] = memory
    if gpu:
        req["nvidia.com/gpu"] = gpu
    meta: dict[str, Any] = {"name": name, "namespace": ns, "annotations": {}}
    if group:
        meta["annotations"]["scheduling.k8s.io/group-name"] = group
    if role:
        meta["annotations"]["volcano.sh/task-spec"] = role
    if created:
        meta["creationTimestamp"] = created
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": req}}],
    }
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    spec.update(spec_extra)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Running" if node else "Pending")},
    }


def podgroup(
    name: str,
    *,
    ns: str = "default",
    min_member: int = 1,
    queue: str = "default",
    phase: str = "Inqueue",
    min_resources: dict | None = None,
    min_task_member: dict | None = None,
    priority_class: str = "",
    created: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if min_resources is not None:
        spec["minResources"] = min_resources
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if created:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def queue(
    name: str = "default",
    *,
    weight: int = 1,
    capability: dict | None = None,
    guarantee: dict | None = None,
    state: str = "Open",
    parent: str | None = None,
    reclaimable: bool = True,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": reclaimable}
    if capability is not None:
        spec["capability"] = capability
    if guarantee is not None:
        spec["guarantee"] = {"resource": guarantee}
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": state},
    }


def hypernode(
    name: str, tier: int, kind: str, members: list[str], tier_name: str = ""
) -> dict[str, Any]:
    """A ``topology.volcano.sh/v1alpha1`` HyperNode whose members (``kind``: Node or
    HyperNode) are named by ``exactMatch``."""
    spec: dict[str, Any] = {
        "tier": tier,
        "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
    }
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def priority_class(name: str, value: int, *, default: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }


def run(objects: list[dict], config: str | None = None) -> Decisions:
    """One cycle over ``objects`` with ``config`` (YAML text) or Volcano's default."""
    if config is None:
        sched = Scheduler.from_file(None)
    else:
        sched = Scheduler.create(parse_config(yaml.safe_load(config)))
    snap = build_snapshot([SourcedObject(o, "test") for o in objects])
    return sched.cycle(snap)


def conf(actions: str, *tiers: list[str | dict]) -> str:
    """A config YAML with the given actions and tiers of plugin names (or dicts)."""
    doc = {
        "actions": actions,
        "tiers": [
            {"plugins": [p if isinstance(p, dict) else {"name": p} for p in t]} for t in tiers
        ],
    }
    return yaml.safe_dump(doc)


# (after a "can never fit" clause, when there is one)
_COULD = re.compile(r"(?:^|; )gang short: needs (\d+) tasks, (at most )?(\d+) could be placed")


def assert_same_but_bounded(proven: dict, tried: dict) -> None:
    """Two cycles' JSON decisions agree, one with allocate's hopeless-turn proofs and one
    with every turn tried: everything equal, except that a gang of several task shapes
    proven hopeless may say "at most N could be placed" where the try counted fewer (or
    as many) and then named another task's fit error."""
    proven, tried = dict(proven), dict(tried)
    says, said = proven.pop("pending"), tried.pop("pending")
    assert proven == tried  # binds, evictions, pipelined tasks, podgroup status
    assert says.keys() == said.keys()
    for uid, reason in says.items():
        if reason == said[uid]:
            continue
        bound, count = _COULD.search(reason), _COULD.search(said[uid])
        assert bound is not None and count is not None, (reason, said[uid])
        assert bound[2] and not count[2], (reason, said[uid])
        assert bound[1] == count[1]  # the same gang minimum
        assert int(bound[3]) >= int(count[3]), (reason, said[uid])


# -- storage ---------------------------------------------------------------------------


def storage_class(
    name: str,
    *,
    provisioner: str = "kubernetes.io/no-provisioner",
    mode: str = "WaitForFirstConsumer",
    zones: list[str] | None = None,
    default: bool = False,
) -> dict[str, Any]:
    """A ``storage.k8s.io/v1`` StorageClass (``zones``: its allowedTopologies by zone)."""
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if default:
        obj["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    if zones:
        obj["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": zones}]}
        ]
    return obj


def pv(
    name: str,
    size: str = "10Gi",
    *,
    cls: str = "local",
    node: str | None = None,
    zone: str | None = None,
    modes: list[str] | None = None,
    claim: str | None = None,
    driver: str = "",
    labels: dict | None = None,
) -> dict[str, Any]:
    """A PersistentVolume: local to ``node`` (by hostname), or in ``zone`` (a label and
    a node affinity), bound to ``claim`` (``ns/name``) when given."""
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": modes or ["ReadWriteOnce"],
        "storageClassName": cls,
    }
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if node:
        expr = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
        spec["local"] = {"path": f"/mnt/{name}"}
    if zone:
        meta["labels"]["topology.kubernetes.io/zone"] = zone
        expr = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
    if driver:
        spec["csi"] = {"driver": driver, "volumeHandle": name}
    status = {"phase": "Available"}
    if claim:
        ns, _, cname = claim.partition("/")
        spec["claimRef"] = {"namespace": ns, "name": cname}
        status = {"phase": "Bound"}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
            "status": status}  # fmt: skip


def pvc(
    name: str,
    size: str = "5Gi",
    *,
    ns: str = "default",
    cls: str | None = "local",
    volume: str = "",
    modes: list[str] | None = None,
) -> dict[str, Any]:
    """A PersistentVolumeClaim, bound to ``volume`` when given."""
    spec: dict[str, Any] = {
        "accessModes": modes or ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if cls is not None:
        spec["storageClassName"] = cls
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}"},
        "spec": spec,
        "status": {"phase": "Bound" if volume else "Pending"},
    }


def mounts(*claims: str) -> dict[str, Any]:
    """Pod spec keywords mounting ``claims`` (for :func:`pod`)."""
    return {
        "volumes": [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ]
    }


def csinode(name: str, driver: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": driver, "nodeID": name, "allocatable": {"count": count}}]},
    }
