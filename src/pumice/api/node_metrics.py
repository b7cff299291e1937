"""Nodes' measured load, as the usage plugin reads it.

Two kinds of source give it, and both end as :class:`NodeMetricsRecord` in a snapshot's
``objects["NodeMetrics"]``:

- ``metrics.k8s.io/v1beta1`` NodeMetrics objects (metrics-server; ``kubectl get
  nodemetrics -o yaml`` prints them): a node's CPU and memory in use, as quantities,
  measured over a short window ending at ``timestamp``. The load in percent is that
  usage over the node's allocatable amount, worked out by the plugin;
- a query source (Prometheus, for ``pumice run`` when the configuration's ``metrics``
  section names one): the load in percent directly, averaged over a period.

:func:`synthetic_node_metrics` makes NodeMetrics objects from a model of the load (the
requests of the pods on each node times a factor), for the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pumice.api.node import NodeTable
from pumice.api.parse import as_mapping, as_str, timestamp
from pumice.api.quantity import CPU, MEMORY, to_canonical
from pumice.errors import InputError

KIND = "NodeMetrics"
API_VERSION = "metrics.k8s.io/v1beta1"


@dataclass(frozen=True, slots=True)
class NodeMetricsRecord:
    """One node's measured load at ``time`` (seconds since the epoch).

    Either absolute usage (``cpu`` in millicores, ``memory`` in bytes: a NodeMetrics
    object) or percentages of the node (``cpu_percent``, ``memory_percent``: a query
    source); None for what the source did not say."""

    name: str
    time: float
    cpu: float | None = None
    memory: float | None = None
    cpu_percent: float | None = None
    memory_percent: float | None = None
    #: Where it came from: ``metrics.k8s.io`` or the query source's type.
    source: str = "metrics.k8s.io"


def parse_node_metrics(obj: Mapping[str, Any]) -> NodeMetricsRecord:
    """A ``metrics.k8s.io`` NodeMetrics object; an InputError names a bad field."""
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    usage = as_mapping(obj.get("usage"), "usage")
    amounts: dict[str, float | None] = {}
    for resource in (CPU, MEMORY):
        value = usage.get(resource)
        amounts[resource] = (
            None if value is None else to_canonical(resource, value, field=f"usage.{resource}")
        )
    when = timestamp(obj.get("timestamp"), "timestamp")
    if when == 0.0:
        when = timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    if when == 0.0:
        raise InputError("is required: when the usage was measured", field="timestamp")
    return NodeMetricsRecord(name, when, amounts[CPU], amounts[MEMORY])


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def synthetic_node_metrics(nodes: NodeTable, factor: float, now: float) -> list[dict[str, Any]]:
    """NodeMetrics objects for ``nodes`` at ``now``: each node's usage is the requests
    of the pods holding its resources (``used``) times ``factor`` (0.6: pods use 60% of
    what they ask), never more than the node has. What the simulator puts in its
    cluster in place of metrics-server's measurements, so that the usage plugin sees a
    load that follows the placements."""
    if factor < 0:
        raise InputError(f"must not be negative, got {factor}", field="usage factor")
    space = nodes.space
    cpu, memory = space.index.get(CPU), space.index.get(MEMORY)
    out: list[dict[str, Any]] = []
    for i, name in enumerate(nodes.names):
        usage: dict[str, str] = {}
        for resource, d in ((CPU, cpu), (MEMORY, memory)):
            if d is None:
                continue
            amount = min(float(nodes.used[i, d]) * factor, float(nodes.allocatable[i, d]))
            usage[resource] = f"{round(amount)}m" if resource == CPU else str(round(amount))
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": {"name": name, "creationTimestamp": _rfc3339(now)},
                "timestamp": _rfc3339(now),
                "window": "30s",
                "usage": usage,
            }
        )
    return out


__all__ = [
    "API_VERSION",
    "KIND",
    "NodeMetricsRecord",
    "parse_node_metrics",
    "synthetic_node_metrics",
]
