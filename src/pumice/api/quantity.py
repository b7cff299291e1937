"""Kubernetes resource quantities.

Quantities are parsed exactly (``decimal.Decimal``) and returned as floats in pumice's
canonical units: CPU in millicores, every other resource in its base unit (bytes for
memory and storage, a count for ``pods`` and extended resources such as
``nvidia.com/gpu``). Floats are exact for integers below 2**53, far beyond any real
cluster's bytes, so comparisons stay exact in practice.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from pumice.errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"


def parse_quantity(value: object, *, field: str | None = None) -> Decimal:
    """Parse a Kubernetes quantity (``"500m"``, ``"4Gi"``, ``2``, ``"1e3"``) exactly.

    Raises :class:`InputError` naming ``field`` for anything Kubernetes would reject,
    and for negative values, which no request, capacity or share may have.
    """
    if isinstance(value, bool):
        raise InputError(f"invalid quantity {value!r}", field=field)
    if isinstance(value, int | float):
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise InputError(f"invalid quantity {value!r}: expected a string or number", field=field)
    m = _QUANTITY.match(text)
    if not m:
        raise InputError(f"invalid quantity {value!r}", field=field)
    try:
        number = Decimal(m.group("num"))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise InputError(f"invalid quantity {value!r}", field=field) from exc
    if m.group("exp"):
        number = number.scaleb(int(m.group("exp")[1:]))
    suffix = m.group("suffix") or ""
    number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    if number < 0:
        raise InputError(f"negative quantity {value!r}", field=field)
    return number


def to_canonical(name: str, value: object, *, field: str | None = None) -> float:
    """Parse ``value`` for resource ``name`` into pumice's canonical float unit.

    Rounded up as Kubernetes does (``MilliValue`` for cpu, ``Value`` for bytes), so that
    cpu and memory amounts are whole numbers: sums of them are then exact in float64
    whatever the order of addition, and running totals equal fresh sums. Other
    resources keep milli precision (half a GPU stays 0.5)."""
    q = parse_quantity(value, field=field)
    if name == CPU:
        return float(math.ceil(q * 1000))
    if name == MEMORY or name.endswith("storage") or name.startswith("hugepages-"):
        return float(math.ceil(q))
    return math.ceil(q * 1000) / 1000


def format_amount(name: str, amount: float) -> str:
    """Render a canonical amount for people: ``1500m`` cpu, ``4Gi`` memory, ``8`` gpus."""
    if name == CPU:
        if amount % 1000 == 0:
            return str(int(amount // 1000))
        return f"{amount:g}m"
    if name == MEMORY or name.endswith("storage"):
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= factor and amount % factor == 0:
                return f"{int(amount // factor)}{suffix}"
        if amount >= 2**30:
            return f"{amount / 2**30:.1f}Gi"
        return f"{amount:g}"
    if amount == int(amount):
        return str(int(amount))
    return f"{amount:g}"
