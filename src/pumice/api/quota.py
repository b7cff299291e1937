"""Namespace ResourceQuotas as the resourcequota plugin reads them
(:mod:`pumice.plugins.resourcequota`).

A quota's limits are the quota controller's copy in ``status.hard`` (what Volcano
reads, in step with ``status.used``); a quota the controller has not counted yet
(no ``status.hard``: just created, or no controller, as in the simulator or a snapshot
file) is read by its ``spec.hard``. ``status.used`` is what the controller last counted
of the namespace's pods (nothing, when absent). Every amount is kept in the canonical
unit of the resource it counts (``requests.cpu`` in millicores, ``limits.memory`` in
bytes: see :func:`pumice.api.parse.quota_amounts`). Quota scopes are not read, as in
Volcano: a scoped quota counts for every job of its namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pumice.api.parse import as_mapping, as_str, quota_amounts

RESOURCE_QUOTA = "ResourceQuota"


@dataclass(slots=True, frozen=True)
class ResourceQuotaRecord:
    namespace: str
    name: str
    #: Resource name (as the quota writes it) -> limit, sorted by name.
    hard: tuple[tuple[str, float], ...]
    #: Resource name -> what the quota controller counted as used.
    used: tuple[tuple[str, float], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_resource_quota(obj: Mapping[str, Any]) -> ResourceQuotaRecord:
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    namespace = as_str(meta.get("namespace"), "metadata.namespace") or "default"
    spec = as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    hard = quota_amounts(spec.get("hard"), "spec.hard")
    counted = quota_amounts(status.get("hard"), "status.hard")
    used = quota_amounts(status.get("used"), "status.used")
    return ResourceQuotaRecord(
        namespace=namespace,
        name=name,
        hard=tuple(sorted((counted or hard).items())),
        used=tuple(sorted(used.items())),
    )


#: Kind -> parser, for :data:`pumice.api.side_objects.SIDE_PARSERS`.
QUOTA_PARSERS = {RESOURCE_QUOTA: parse_resource_quota}

__all__ = ["QUOTA_PARSERS", "RESOURCE_QUOTA", "ResourceQuotaRecord", "parse_resource_quota"]
