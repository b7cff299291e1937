"""PodDisruptionBudgets (policy/v1): the record, its parser and its budget arithmetic.

Volcano's pdb plugin reads ``status.disruptionsAllowed``, which the disruption controller
keeps up to date. A snapshot taken by hand often has no status, so when it is absent
pumice derives the budget the way the controller does: ``minAvailable`` or
``maxUnavailable`` (an integer or a percentage of the matching pods) against the
matching pods that are running.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.errors import InputError, shown

_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


@dataclass(slots=True, frozen=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: every label and every expression must match."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        for key, op, values in self.expressions:
            present = key in labels
            if op == "In" and not (present and labels[key] in values):
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True


@dataclass(slots=True)
class PdbRecord:
    namespace: str
    name: str
    selector: LabelSelector | None
    min_available: int | str | None = None  # an int or "N%"
    max_unavailable: int | str | None = None
    disruptions_allowed: int | None = None  # status, when the snapshot has it
    disrupted_pods: frozenset[str] = field(default_factory=frozenset)


_INT32_MAX = 2**31 - 1


def _text(value: Any, path: str) -> str:
    """A name, label or value: a string (YAML may give a number; not a huge one)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(f"expected a string, got {type(value).__name__}", field=path)
    if isinstance(value, int) and abs(value) > _INT32_MAX:
        raise InputError("expected a string, got a large number", field=path)
    return str(value)


def _int_or_percent(value: Any, path: str) -> int | str | None:
    if value is None:
        return None
    bad = InputError("expected an integer or a percentage (int32)", field=path)
    if isinstance(value, bool):
        raise bad
    if isinstance(value, int):
        if value < 0:
            raise InputError("must not be negative", field=path)
        if value > _INT32_MAX:
            raise bad
        return value
    if isinstance(value, str):
        v = value.strip()
        if v.endswith("%") and v[:-1].isdigit() and len(v) <= 4:
            return v
        if v.isdigit() and int(v[:11]) <= _INT32_MAX:
            return int(v)
    raise bad


def parse_label_selector(value: Any, path: str) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` dict (None when absent)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError("expected a label selector", field=path)
    labels = value.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise InputError("expected a mapping", field=f"{path}.matchLabels")
    exprs = []
    for i, e in enumerate(value.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(e, Mapping) or not isinstance(e.get("key"), str):
            raise InputError("expected a mapping with a key", field=p)
        op = e.get("operator")
        if op not in _SELECTOR_OPS:
            raise InputError(f"unknown operator {shown(op)}", field=f"{p}.operator")
        values = tuple(_text(v, f"{p}.values") for v in (e.get("values") or []))
        if op in ("In", "NotIn") and not values:
            raise InputError(f"operator {op} needs values", field=f"{p}.values")
        exprs.append((e["key"], op, values))
    where = f"{path}.matchLabels"
    pairs = ((_text(k, where), _text(v, where)) for k, v in labels.items())
    return LabelSelector(tuple(sorted(pairs)), tuple(exprs))


def parse_pdb(obj: Mapping[str, Any]) -> PdbRecord:
    """A PodDisruptionBudget dict -> record (policy/v1 and policy/v1beta1 shapes)."""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise InputError("is required", field="metadata.name")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        raise InputError("expected mappings", field="spec/status")
    min_av = _int_or_percent(spec.get("minAvailable"), "spec.minAvailable")
    max_un = _int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable")
    if min_av is not None and max_un is not None:
        raise InputError("minAvailable and maxUnavailable are mutually exclusive", field="spec")
    allowed = status.get("disruptionsAllowed")
    if allowed is not None and (isinstance(allowed, bool) or not isinstance(allowed, int)):
        raise InputError("expected an integer", field="status.disruptionsAllowed")
    disrupted = status.get("disruptedPods") or {}
    if not isinstance(disrupted, Mapping):
        raise InputError("expected a mapping", field="status.disruptedPods")
    return PdbRecord(
        namespace=_text(meta.get("namespace") or "default", "metadata.namespace"),
        name=_text(meta["name"], "metadata.name"),
        selector=parse_label_selector(spec.get("selector"), "spec.selector"),
        min_available=min_av,
        max_unavailable=max_un,
        disruptions_allowed=allowed,
        disrupted_pods=frozenset(_text(k, "status.disruptedPods") for k in disrupted),
    )


def _scaled(value: int | str, expected: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    frac = int(value[:-1]) * expected / 100.0
    return math.ceil(frac) if round_up else math.floor(frac)


def disruptions_allowed(pdb: PdbRecord, expected: int, healthy: int) -> int:
    """The budget: the status value when known, else what the disruption controller
    computes from ``expected`` matching pods of which ``healthy`` are running."""
    if pdb.disruptions_allowed is not None:
        return pdb.disruptions_allowed
    if pdb.min_available is not None:
        desired = _scaled(pdb.min_available, expected, round_up=True)
    elif pdb.max_unavailable is not None:
        desired = expected - _scaled(pdb.max_unavailable, expected, round_up=True)
    else:  # neither set: the API server defaults minAvailable to 1
        desired = 1
    return max(healthy - max(desired, 0), 0)
