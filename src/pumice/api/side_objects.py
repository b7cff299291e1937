"""Objects a cycle reads as records, with no model built from them: what pods attach
(storage, devices, nodes' measured load) and what plugins look up (nodes'
NUMA topology, namespaces' ResourceQuotas).

One table serves every mode: snapshot files (:mod:`pumice.cache.build`), the
scheduler cache (:mod:`pumice.cache.cache`) and the cluster's list of kinds, so a kind
added here is read everywhere alike. A cycle finds them in ``Snapshot.objects``, by kind
and then by key (``namespace/name`` or ``name``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pumice.api.dra import (
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from pumice.api.node_metrics import KIND as NODE_METRICS
from pumice.api.node_metrics import parse_node_metrics
from pumice.api.numa import NUMA_PARSERS
from pumice.api.quota import QUOTA_PARSERS
from pumice.api.volumes import STORAGE_PARSERS

#: Dynamic resource allocation's kinds (``resource.k8s.io``).
DRA_PARSERS = {
    "ResourceSlice": parse_resource_slice,
    "DeviceClass": parse_device_class,
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
}
#: Kind -> parser (a Kubernetes object dict -> a record, or an InputError naming the
#: field).
SIDE_PARSERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    **STORAGE_PARSERS,
    **DRA_PARSERS,
    # Nodes' measured load (metrics.k8s.io), read by the usage plugin.
    NODE_METRICS: parse_node_metrics,
    **NUMA_PARSERS,  # nodes' NUMA topology (the numa-aware plugin)
    **QUOTA_PARSERS,  # namespaces' ResourceQuotas (the resourcequota plugin)
}
#: The namespaced ones among them (keyed ``namespace/name``).
SIDE_NAMESPACED = frozenset(
    {"PersistentVolumeClaim", "ResourceClaim", "ResourceClaimTemplate", "ResourceQuota"}
)


def side_key(rec: Any) -> str:
    """A record's key: ``namespace/name`` for namespaced kinds, else ``name``."""
    namespace = getattr(rec, "namespace", None)
    return f"{namespace}/{rec.name}" if namespace is not None else rec.name


__all__ = ["SIDE_NAMESPACED", "SIDE_PARSERS", "side_key"]
