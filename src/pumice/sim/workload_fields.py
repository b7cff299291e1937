"""Field readers both forms of a workload file share (compact documents and manifests).

What :mod:`pumice.sim.fields` does not know because it knows nothing of workloads: an
object's ``metadata``, the optional strings and resource maps of queues and jobs, a job's
simulated ``outcome`` and ``endFraction``. Each reader returns the value in the form the
workload model holds or raises :class:`~pumice.errors.InputError` naming the field (and,
for ``metadata``, the file and kind); the caller adds the rest of the location.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pumice.errors import InputError, shown
from pumice.sim.fields import is_dns_label, parse_resources, require_str
from pumice.sim.workload import DEFAULT_NAMESPACE, OUTCOMES, Outcome


def object_metadata(obj: Mapping[str, Any], file: str, kind: str) -> Mapping[str, Any]:
    """An object's ``metadata``, which must be a map with a name (the error names
    ``file`` and ``kind``, since the object has no name to be known by)."""
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise InputError(
            f"expected a map, got {shown(meta)}", file=file, obj=kind, field="metadata"
        )
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise InputError("missing metadata.name", file=file, obj=kind, field="metadata.name")
    return meta


def object_namespace(meta: Mapping[str, Any], file: str, kind: str, name: str) -> str:
    """The namespace in an object's ``metadata`` (:data:`DEFAULT_NAMESPACE` when absent
    or empty), which must be a DNS label, as Kubernetes requires: it becomes part of the
    keys jobs, pods and claims are known by, so anything else (a list, a number) is
    refused here, naming the file and object."""
    namespace = meta.get("namespace")
    if namespace is None or namespace == "":
        return DEFAULT_NAMESPACE
    if not isinstance(namespace, str) or not is_dns_label(namespace):
        raise InputError(
            f"invalid namespace {shown(namespace)}: expected a DNS label",
            file=file,
            obj=f"{kind} {name}",
            field="metadata.namespace",
        )
    return namespace


def require_bool(value: object, *, field: str) -> bool:
    """``value`` if it is a YAML boolean (not a string such as ``"yes"``)."""
    if not isinstance(value, bool):
        raise InputError(f"expected true or false, got {shown(value)}", field=field)
    return value


def optional_str(value: object, *, field: str) -> str | None:
    """A string, or None when the field is absent or empty."""
    if value is None or value == "":
        return None
    return require_str(value, field=field)


def optional_resources(d: Mapping[str, Any], key: str, field: str) -> dict[str, float] | None:
    """``d[key]`` as a resource map in canonical units, or None when it is absent."""
    if d.get(key) is None:
        return None
    return parse_resources(d[key], field=field)


def parse_outcome(value: object, *, field: str) -> Outcome:
    """A job's simulated outcome: one of :data:`~pumice.sim.workload.OUTCOMES`."""
    if value not in OUTCOMES:
        raise InputError(f"expected one of {', '.join(OUTCOMES)}, got {shown(value)}", field=field)
    return value  # type: ignore[return-value]


def parse_end_fraction(value: object, outcome: str, *, field: str) -> float:
    """The share of its duration after which a job of ``outcome`` ends, in (0, 1]
    (absent: 1); only a job that fails or is cancelled may end early."""
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"expected a number in (0, 1], got {shown(value)}", field=field)
    try:
        fraction = float(value)
    except (ValueError, OverflowError):
        raise InputError(f"expected a number in (0, 1], got {shown(value)}", field=field) from None
    if not 0 < fraction <= 1:
        raise InputError(f"expected a number in (0, 1], got {shown(value)}", field=field)
    if outcome == "succeed" and fraction != 1:
        raise InputError("only a job that fails or is cancelled ends early", field=field)
    return fraction
