"""What a PodGroup asks of the network: ``spec.networkTopology`` and
``spec.subGroupPolicy`` (Volcano's ``scheduling.volcano.sh/v1beta1``).

``networkTopology`` bounds the tier of the HyperNode a gang may span: ``hard`` places
the gang within one HyperNode of tier at most ``highestTierAllowed`` (or the tier named
``highestTierName``) or not at all; ``soft`` prefers the lowest tier that holds it and
places it anyway. ``subGroupPolicy`` cuts a job's pods into sub-groups (pods selected by
``labelSelector``, grouped by the values of ``matchLabelKeys``), each a gang of
``subGroupSize`` pods with its own network topology, and the job needs at least
``minSubGroups`` of a policy's sub-groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pumice.api.pdb import LabelSelector, parse_label_selector
from pumice.errors import InputError, shown

HARD = "hard"
SOFT = "soft"


@dataclass(slots=True, frozen=True)
class NetworkTopology:
    mode: str  # HARD or SOFT
    highest_tier: int | None = None
    highest_tier_name: str = ""

    def to_object(self) -> dict[str, Any]:
        """As a PodGroup (or a Volcano Job) carries it: the mode and one tier limit,
        ``highestTierAllowed`` when given, else ``highestTierName``."""
        out: dict[str, Any] = {"mode": self.mode}
        if self.highest_tier is not None:
            out["highestTierAllowed"] = self.highest_tier
        elif self.highest_tier_name:
            out["highestTierName"] = self.highest_tier_name
        return out

    def describe(self) -> str:
        if self.mode == SOFT:
            return "soft network topology (the lowest tier that holds it)"
        limit = (
            f"tier {self.highest_tier}"
            if self.highest_tier is not None
            else f"tier {self.highest_tier_name!r}"
        )
        return f"hard network topology (within one HyperNode of {limit} or lower)"


@dataclass(slots=True, frozen=True)
class SubGroupPolicy:
    name: str
    size: int = 1
    min_groups: int = 0
    selector: LabelSelector | None = None
    match_keys: tuple[str, ...] = ()
    topology: NetworkTopology | None = None


def _int(value: Any, path: str, default: int, minimum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {shown(value)}", field=path)
    if value < minimum:
        raise InputError(f"must be at least {minimum}", field=path)
    return value


def parse_network_topology(value: Any, path: str) -> NetworkTopology | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError("expected a mapping", field=path)
    mode = value.get("mode") or HARD
    if mode not in (HARD, SOFT):
        raise InputError(f"expected hard or soft, got {shown(mode)}", field=f"{path}.mode")
    tier = value.get("highestTierAllowed")
    name = value.get("highestTierName") or ""
    if not isinstance(name, str):
        raise InputError("expected a string", field=f"{path}.highestTierName")
    if tier is not None and name:
        raise InputError(
            "highestTierAllowed and highestTierName cannot be set together", field=path
        )
    if tier is not None:
        tier = _int(tier, f"{path}.highestTierAllowed", 0, 0)
    return NetworkTopology(mode, tier, name)


def parse_sub_group_policies(value: Any, path: str) -> tuple[SubGroupPolicy, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InputError("expected a list", field=path)
    out = []
    names: set[str] = set()
    for i, item in enumerate(value):
        p = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise InputError("expected a mapping", field=p)
        name = item.get("name") or ""
        if not isinstance(name, str):
            raise InputError("expected a string", field=f"{p}.name")
        if name in names:
            raise InputError(f"sub-group policy {shown(name)} appears twice", field=f"{p}.name")
        names.add(name)
        keys = item.get("matchLabelKeys") or []
        if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
            raise InputError("expected a list of label keys", field=f"{p}.matchLabelKeys")
        out.append(
            SubGroupPolicy(
                name=name,
                size=_int(item.get("subGroupSize"), f"{p}.subGroupSize", 1, 1),
                min_groups=_int(item.get("minSubGroups"), f"{p}.minSubGroups", 0, 0),
                selector=parse_label_selector(item.get("labelSelector"), f"{p}.labelSelector"),
                match_keys=tuple(keys),
                topology=parse_network_topology(
                    item.get("networkTopology"), f"{p}.networkTopology"
                ),
            )
        )
    return tuple(out)


def sub_group_of(
    policies: tuple[SubGroupPolicy, ...], labels: Mapping[str, str]
) -> tuple[SubGroupPolicy, tuple[str, ...]] | None:
    """The first policy that takes a pod with ``labels``, and the pod's values of its
    ``matchLabelKeys`` (which name the sub-group); None: the job's default group.

    As in Volcano, a policy takes a pod its selector matches only when the pod has a
    non-empty value for every match key, and a policy without match keys takes none."""
    for policy in policies:
        if policy.selector is not None and not policy.selector.matches(labels):
            continue
        if not policy.match_keys:
            continue
        values = tuple(labels.get(k, "") for k in policy.match_keys)
        if all(values):
            return policy, values
    return None


__all__ = [
    "HARD",
    "SOFT",
    "NetworkTopology",
    "SubGroupPolicy",
    "parse_network_topology",
    "parse_sub_group_policies",
    "sub_group_of",
]
