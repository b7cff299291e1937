"""The benchmark's checks of what pods attach: shared GPU cards, NUMA-pinned CPUs and
DRA devices, each re-read from the objects and the decisions, independently of the
plugins that chose them.

- **Cards** (deviceshare, GPU share by memory): the pods on each card, those already
  there (their ``volcano.sh/gpu-index`` annotation) and those bound this cycle (the
  annotation their bind writes), ask no more memory than the card has; a pod asking
  card memory is not bound without a card.
- **NUMA** (numa-aware, on nodes whose Numatopology says ``static`` CPU manager and
  ``single-numa-node`` policy): the pods bound to a node, taken in bind order as its
  kubelet admits them, each get every container's whole CPUs from one NUMA node, the
  lowest-numbered with enough left (the kubelet's choice), out of the CPUs the
  Numatopology lists as free.
- **Devices** (DRA): no device is allocated to two claims (admin access aside), a
  node-local device only to a pod bound to its node, and a pod needing claims is not
  bound without them.

Each check costs nothing when the objects hold none of what it checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pumice.api import parse
from pumice.api.dra_objects import parse_resource_claim, parse_resource_slice
from pumice.api.gpus import gpu_indices, share_cards
from pumice.api.node import NodeSpec
from pumice.api.numa import parse_numatopology
from pumice.framework.decisions import Decisions

Pods = Mapping[str, parse.PodRecord]


def _on_node(pods: Pods, decisions: Decisions) -> Iterable[tuple[str, parse.PodRecord, str, bool]]:
    """Each pod on a node after the binds: (key, pod, node, bound this cycle); those
    already there first, then the binds in order."""
    for key, p in pods.items():
        if p.node_name and p.phase in ("Running", "Pending"):
            yield key, p, p.node_name, False
    for key, node_name in decisions.binds.items():
        got = pods.get(key)
        if got is not None and not got.node_name:
            yield key, got, node_name, True


def card_problems(nodes: Mapping[str, NodeSpec], pods: Pods, decisions: Decisions) -> list[str]:
    """Cards over their memory, and pods asking card memory bound without a card."""
    cards = {
        n: on_node
        for n, spec in nodes.items()
        if (on_node := share_cards(spec.capacity, spec.annotations))
    }
    if not cards:
        return []
    problems: list[str] = []
    used: dict[tuple[str, int], int] = {}
    for key, p, node_name, bound in _on_node(pods, decisions):
        if p.devices is None or not p.devices.gpu_memory or node_name not in cards:
            continue
        notes = decisions.prebind[key].annotations if key in decisions.prebind else {}
        index = gpu_indices(notes if bound else p.annotations)
        if bound and not index:
            problems.append(
                f"pod {key} asks GPU memory and was bound to {node_name} without a card"
            )
        for c in index:
            if c not in cards[node_name]:
                problems.append(f"pod {key} holds card {c}, which node {node_name} has not")
                continue
            used[node_name, c] = used.get((node_name, c), 0) + p.devices.gpu_memory
    for (node_name, c), mib in sorted(used.items()):
        if mib > cards[node_name][c]:
            problems.append(
                f"node {node_name} card {c} over its memory: {mib} > {cards[node_name][c]} MiB"
            )
    return problems


def numa_problems(
    topologies: list[Mapping[str, Any]], pods: Pods, decisions: Decisions
) -> list[str]:
    """Containers whose whole CPUs no single NUMA node of their node has left."""
    free: dict[str, dict[int, int]] = {}  # node -> NUMA node -> free CPUs
    for obj in topologies:
        rec = parse_numatopology(obj)
        cpu = rec.resource("cpu")
        if rec.cpu_policy != "static" or rec.topology_policy != "single-numa-node" or cpu is None:
            continue
        per_numa = {info.numa: 0 for _, info in rec.cpus}
        for c, info in rec.cpus:
            if c in cpu.allocatable:
                per_numa[info.numa] += 1
        free[rec.name] = per_numa
    problems: list[str] = []
    for key, node_name in decisions.binds.items():
        p = pods.get(key)
        counts = free.get(node_name)
        if p is None or p.numa is None or counts is None:
            continue
        for container, k in p.numa.cpus:
            if not k:
                continue
            numa = next((n for n in sorted(counts) if counts[n] >= k), None)
            if numa is None:
                left = ", ".join(f"numa{n}: {v}" for n, v in sorted(counts.items()))
                problems.append(
                    f"pod {key} container {container} needs {k} CPUs of one NUMA node, "
                    f"node {node_name} has {left} left"
                )
                continue
            counts[numa] -= k
    return problems


def device_problems(
    slices: list[Mapping[str, Any]],
    claims: list[Mapping[str, Any]],
    pods: Pods,
    decisions: Decisions,
) -> list[str]:
    """Devices allocated twice or away from their pod's node, pods bound without their
    claims."""
    if not slices and not claims and not any(p.device_claims for p in pods.values()):
        return []
    local: dict[tuple[str, str, str], str] = {}
    for obj in slices:
        s = parse_resource_slice(obj)
        if s.node_name:
            for d in s.devices:
                local[s.driver, s.pool, d.name] = s.node_name
    problems: list[str] = []
    holder: dict[tuple[str, str, str], str] = {}

    def hold(claim: str, key: tuple[str, str, str], node_name: str | None) -> None:
        if key in holder:
            problems.append(f"device {'/'.join(key)} given to {holder[key]} and {claim}")
        holder[key] = claim
        if node_name is not None and local.get(key, node_name) != node_name:
            problems.append(f"claim {claim} got device {'/'.join(key)} of node {local[key]}, "
                            f"its pod is bound to {node_name}")  # fmt: skip

    for obj in claims:
        c = parse_resource_claim(obj)
        for r in c.allocation.results if c.allocation is not None else ():
            if not r.admin_access:
                hold(c.key, r.key, None)
    for key, node_name in decisions.binds.items():
        p = pods.get(key)
        if p is None or not p.device_claims:
            continue
        writes = decisions.prebind[key].claims if key in decisions.prebind else {}
        if len(writes) < len({r.claim_name or f"{r.name} (template)" for r in p.device_claims}):
            problems.append(f"pod {key} was bound without all its ResourceClaims allocated")
        for claim, allocation in writes.items():
            for r in (allocation.get("devices") or {}).get("results", ()):
                if not r.get("adminAccess"):
                    hold(claim, (r["driver"], r["pool"], r["device"]), node_name)
    return problems


__all__ = ["card_problems", "device_problems", "numa_problems"]
