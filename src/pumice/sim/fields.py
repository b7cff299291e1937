"""Checks for the fields of hand-written input: durations, names, resource maps, integers.

Workload files and cluster files are written by people, and a mistake should be reported
the same way whichever file it is in. Each helper returns the value in canonical form or
raises :class:`~pumice.errors.InputError` naming the field; the caller adds the file and
the object. The helpers know nothing about workloads or clusters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from typing import Any

from pumice.api.limits import MAX_SIM_SECONDS
from pumice.api.quantity import to_canonical
from pumice.errors import InputError, shown

_DURATION = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h|d))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def parse_seconds(value: object, *, field: str | None = None) -> float:
    """Parse a time span to seconds: a number (``90``, ``"12.5"``) or a Go-style duration
    (``"30s"``, ``"5m"``, ``"1h30m"``, ``"250ms"``; ``"2d"`` for days is accepted too).

    Raises :class:`InputError` naming ``field`` for anything else, and for negative or
    non-finite values.
    """
    if isinstance(value, bool):
        raise InputError(f"invalid duration {shown(value)}", field=field)
    seconds: float
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # (an int beyond any float: refused below, by its sign)
            seconds = math.inf if value > 0 else -math.inf
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            if not _DURATION.fullmatch(text):
                raise InputError(
                    f"invalid duration {shown(value)}: expected seconds or e.g. 30s, 5m, 1h30m",
                    field=field,
                ) from None
            seconds = sum(
                float(m.group(1)) * _UNIT_SECONDS[m.group(2)] for m in _DURATION_PART.finditer(text)
            )
    else:
        raise InputError(f"invalid duration {shown(value)}", field=field)
    if math.isnan(seconds) or seconds < 0:
        raise InputError(f"invalid duration {shown(value)}: must be finite and >= 0", field=field)
    if seconds > MAX_SIM_SECONDS:  # (infinity too)
        raise InputError(
            f"{shown(value)} is more than {MAX_SIM_SECONDS // (365 * 24 * 3600)} years of "
            "simulated time",
            field=field,
        )
    return seconds


def is_dns_label(name: str) -> bool:
    """True when ``name`` is a valid Kubernetes DNS label (task, queue and namespace names)."""
    return len(name) <= 63 and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    """True when ``name`` is a valid Kubernetes object name (DNS subdomain)."""
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


def parse_resources(value: object, *, field: str) -> dict[str, float]:
    """A ``{resource: quantity}`` map in canonical units; :class:`InputError` names the
    entry's field (``field.cpu``) when a quantity is bad."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected a map of resource quantities, got {shown(value)}", field=field)
    out: dict[str, float] = {}
    for name, quantity in value.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"invalid resource name {shown(name)}", field=field)
        out[name] = to_canonical(name, quantity, field=f"{field}.{name}")
    return out


#: The largest count a file may write where nothing smaller bounds it: Kubernetes'
#: counts (replicas, minAvailable, weights) are 32-bit.
INT32_MAX = 2**31 - 1


def require_int(value: object, *, field: str, minimum: int, maximum: int = INT32_MAX) -> int:
    """``value`` as a whole number from ``minimum`` to ``maximum``, or an InputError
    naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InputError(f"expected an integer, got {shown(value)}", field=field)
    if value < minimum:
        raise InputError(f"must be >= {minimum}, got {shown(value)}", field=field)
    if value > maximum:
        raise InputError(f"must be at most {maximum:,}, got {shown(value)}", field=field)
    return value


def require_str(value: object, *, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"expected a non-empty string, got {shown(value)}", field=field)
    return value


def check_keys(d: Mapping[str, Any], allowed: Collection[str], *, field: str | None) -> None:
    unknown = sorted(str(k) for k in d if k not in allowed)
    if unknown:
        where = f"{field}." if field else ""
        raise InputError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(allowed))})",
            field=f"{where}{unknown[0]}",
        )
