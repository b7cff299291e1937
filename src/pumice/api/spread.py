"""Pod topology spread constraints (``spec.topologySpreadConstraints``).

A constraint asks that the pods its label selector matches (in the pod's namespace) be
spread over the domains of a node label (``topologyKey``): hard ones
(``whenUnsatisfiable: DoNotSchedule``) filter nodes, soft ones (``ScheduleAnyway``) are
scored by nodeorder, as Kubernetes' PodTopologySpread plugin does inside Volcano's
nodeorder. The fields Volcano 1.7 leaves to disabled feature gates (``minDomains``,
``matchLabelKeys``, ``nodeAffinityPolicy``, ``nodeTaintsPolicy``) are checked for shape
and otherwise not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pumice.api.pdb import LabelSelector, parse_label_selector
from pumice.errors import InputError

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
_POLICIES = ("Honor", "Ignore")


@dataclass(slots=True, frozen=True)
class SpreadConstraint:
    """One topology spread constraint; ``selector`` None matches no pod (Kubernetes'
    ``LabelSelectorAsSelector(nil)``), an empty one every pod."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None

    @property
    def soft(self) -> bool:
        return self.when_unsatisfiable == SCHEDULE_ANYWAY


def _positive_int(value: Any, path: str, *, required: bool) -> int | None:
    if value is None:
        if required:
            raise InputError("is required", field=path)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {value!r}", field=path)
    if value < 1:
        raise InputError(f"must be greater than zero, got {value}", field=path)
    return value


def parse_spread(spec: Mapping[str, Any]) -> tuple[SpreadConstraint, ...]:
    """The pod's ``spec.topologySpreadConstraints``, checked as the API server checks
    them (a positive ``maxSkew``, a ``topologyKey``, a known ``whenUnsatisfiable``, one
    constraint per key and action)."""
    path = "spec.topologySpreadConstraints"
    items = spec.get("topologySpreadConstraints")
    if items is None:
        return ()
    if not isinstance(items, list):
        raise InputError(f"expected a list, got {type(items).__name__}", field=path)
    out: list[SpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise InputError(f"expected a mapping, got {type(item).__name__}", field=p)
        skew = _positive_int(item.get("maxSkew"), f"{p}.maxSkew", required=True)
        key = item.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise InputError("is required (a node label key)", field=f"{p}.topologyKey")
        action = item.get("whenUnsatisfiable")
        if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise InputError(
                f"must be {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}, got {action!r}",
                field=f"{p}.whenUnsatisfiable",
            )
        if (key, action) in seen:
            raise InputError(
                f"duplicate constraint for topologyKey {key!r} and {action}",
                field=f"{p}.topologyKey",
            )
        seen.add((key, action))
        domains = _positive_int(item.get("minDomains"), f"{p}.minDomains", required=False)
        if domains is not None and action != DO_NOT_SCHEDULE:
            raise InputError(
                f"can only be set with whenUnsatisfiable {DO_NOT_SCHEDULE}",
                field=f"{p}.minDomains",
            )
        for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = item.get(name)
            if policy is not None and policy not in _POLICIES:
                raise InputError(f"must be Honor or Ignore, got {policy!r}", field=f"{p}.{name}")
        keys = item.get("matchLabelKeys")
        if keys is not None and not (
            isinstance(keys, list) and all(isinstance(k, str) for k in keys)
        ):
            raise InputError("expected a list of label keys", field=f"{p}.matchLabelKeys")
        selector = parse_label_selector(item.get("labelSelector"), f"{p}.labelSelector")
        assert skew is not None
        out.append(SpreadConstraint(skew, key, str(action), selector))
    return tuple(out)


__all__ = ["DO_NOT_SCHEDULE", "SCHEDULE_ANYWAY", "SpreadConstraint", "parse_spread"]
