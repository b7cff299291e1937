"""Fake nodes in a real API server: what the sandbox, the e2e tests and the e2e
benchmark schedule onto.

A Node object is created, then its status written through the ``status`` subresource
(capacity, allocatable, a ``Ready`` condition), as a kubelet would. The API server's
``TaintNodesByCondition`` admission puts ``node.kubernetes.io/not-ready:NoSchedule`` on
every new node, and with no node controller running nothing takes it off again: so the
taint is removed here, once the node reports Ready, as the node lifecycle controller
would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient, status_message

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class NodeShape:
    """Capacity and labels of a kind of node."""

    name: str
    capacity: Mapping[str, str]
    labels: Mapping[str, str] = field(default_factory=dict)


#: Realistic shapes: a general-purpose node and an 8-GPU training node.
CPU_NODE = NodeShape("cpu", {"cpu": "32", "memory": "128Gi", "pods": "110"})
GPU_NODE = NodeShape(
    "gpu",
    {"cpu": "96", "memory": "768Gi", "pods": "110", GPU: "8"},
    {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
)
#: A GPU node whose 8 cards of 80 GiB are shared by memory, as Volcano's GPU-share
#: device plugin advertises them (the deviceshare plugin's GPUSharingEnable mode).
SHARED_GPU_NODE = NodeShape(
    "shared-gpu",
    {"cpu": "96", "memory": "768Gi", "pods": "110", "volcano.sh/gpu-memory": str(8 * 81920),
     "volcano.sh/gpu-number": "8"},
    {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
)  # fmt: skip
SHAPES = {s.name: s for s in (CPU_NODE, GPU_NODE, SHARED_GPU_NODE)}


def node_object(name: str, shape: NodeShape) -> dict:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **shape.labels}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
    }


def node_status(shape: NodeShape) -> dict:
    return {
        "status": {
            "capacity": dict(shape.capacity),
            "allocatable": dict(shape.capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "fake node of pumice's sandbox",
                },
            ],
        }
    }


class NodeError(RuntimeError):
    pass


def create_node(client: KubeClient, name: str, shape: NodeShape) -> None:
    """One fake node, Ready and untainted; an existing node of that name is reused."""
    res = RESOURCES["Node"]
    status, body = client.request("POST", res.path(), body=node_object(name, shape))
    if status not in (200, 201, 409):
        raise NodeError(f"Node {name}: create: HTTP {status}: {status_message(body)}")
    for path, patch in (
        (res.path("", name, "status"), node_status(shape)),
        (res.path("", name), {"spec": {"taints": None}}),
    ):
        status, body = client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        if status != 200:
            raise NodeError(f"Node {name}: HTTP {status}: {status_message(body)}")


def create_nodes(
    client: KubeClient,
    count: int,
    shape: NodeShape = CPU_NODE,
    *,
    prefix: str = "node-",
    start: int = 0,
    workers: int = 16,
) -> list[str]:
    """``count`` nodes named ``<prefix><i>`` (zero-padded), made by ``workers`` clients
    at once; returns their names."""
    width = max(3, len(str(start + count - 1)))
    names = [f"{prefix}{i:0{width}d}" for i in range(start, start + count)]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        list(pool.map(lambda n: create_node(client, n, shape), names))
    return names


def create_mixed(client: KubeClient, counts: Sequence[tuple[NodeShape, int]]) -> list[str]:
    """Several shapes, each with its own name prefix (``cpu-000``, ``gpu-000``...)."""
    names: list[str] = []
    for shape, n in counts:
        names += create_nodes(client, n, shape, prefix=f"{shape.name}-")
    return names


__all__ = [
    "CPU_NODE",
    "GPU_NODE",
    "SHAPES",
    "SHARED_GPU_NODE",
    "NodeShape",
    "create_mixed",
    "create_node",
    "create_nodes",
]
