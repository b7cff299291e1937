"""The Kubernetes-shaped objects benchmark clusters are built of: Nodes, Pods, PodGroups
and Queues as dicts, as ``kubectl get -o yaml`` would show them.

Every benchmark scenario (:mod:`pumice.bench.scenarios`, :mod:`pumice.bench.quiet`,
:mod:`pumice.bench.visibility`) builds its cluster from these, so that a pod means the
same thing in each. Deterministic: the same arguments give the same object.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def node(
    name: str,
    cpu: str,
    memory: str,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> Obj:
    spec: Obj = {}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods)}},
    }


def pod(
    name: str,
    cpu: str,
    memory: str,
    *,
    namespace: str = "bench",
    group: str | None = None,
    node_name: str | None = None,
    created: int = 0,
    extra_spec: Obj | None = None,
) -> Obj:
    """A pod of one container; running on ``node_name`` when given, else pending."""
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": f"{namespace}-{name}",
        "creationTimestamp": created,
    }
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: Obj = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if extra_spec:
        spec.update(extra_spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def podgroup(name: str, min_member: int, *, namespace: str = "bench", created: int = 0) -> Obj:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": {"minMember": min_member, "queue": "default"},
        "status": {"phase": "Inqueue"},
    }


def queue(name: str = "default", weight: int = 1) -> Obj:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": True},
    }


__all__ = ["Obj", "node", "pod", "podgroup", "queue"]
