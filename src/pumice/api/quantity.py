"""Kubernetes resource quantities.

Quantities are parsed exactly (``decimal.Decimal``) and returned as floats in pumice's
canonical units: CPU in millicores, every other resource in its base unit (bytes for
memory and storage, a count for ``pods`` and extended resources such as
``nvidia.com/gpu``).

**Exact fit checks.** Floats hold every integer up to 2**53 exactly. pumice refuses any
single amount above :data:`EXACT_LIMIT` (2**52 bytes or millis: 4 PiB of memory, about
4.5 million million cores), and any pod whose containers and overhead add up to more
(:func:`check_total`). Then a node's ``used + request`` of amounts that fit under its
allocatable (at most 2**52) never passes 2**53: every sum a fit check compares is
computed exactly, so no placement can leave a node over its allocatable. A node that is
already over (pods bound by someone else) stays over in float arithmetic too: the first
partial sum to pass the allocatable is exact, and adding non-negative amounts to it
never rounds below it. Fractions of extended resources (half a GPU) are kept to the
milli in binary floats and are not exact: a share that fits to the last milli may be
refused, which errs on the safe side.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from pumice.errors import InputError, shown

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
#: A quantity's text. The number's digits split one way only (``\d+(?:\.\d*)?``, not
#: ``\d+\.?\d*``, which matches the same strings): an ambiguous split makes a long run of
#: digits followed by a stray character cost time quadratic in its length to refuse.
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
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
    if isinstance(value, int) and abs(value) > 2**128:  # (str() refuses 4,300 digits)
        size = shown(value)
        text = f"negative quantity {size}" if value < 0 else f"quantity {size} is too large"
        raise InputError(text, field=field)
    if isinstance(value, int | float):
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise InputError(
            f"invalid quantity {shown(value)}: expected a string or number", field=field
        )
    m = _QUANTITY.match(text)
    if not m:
        raise InputError(f"invalid quantity {shown(value)}", field=field)
    try:
        number = Decimal(m.group("num"))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise InputError(f"invalid quantity {value!r}", field=field) from exc
    if m.group("exp"):
        # Beyond +-1000 the exponent changes nothing that follows (the value is too
        # large either way, or rounds up to the smallest unit), and Decimal's own
        # exponent range ends not far beyond.
        number = number.scaleb(max(min(int(m.group("exp")[1:]), 1000), -1000))
    suffix = m.group("suffix") or ""
    number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    if number < 0:
        raise InputError(f"negative quantity {shown(value)}", field=field)
    return number


#: The largest amount accepted, in bytes (memory, storage, hugepages) or millis (cpu and
#: every other resource): half of 2**53, so that the sum of two admissible amounts is
#: still an exact float (see the module's docstring). 4 PiB of memory on one node, or
#: 4.5 million million cores, is far beyond any real machine; anything larger is a typo.
EXACT_LIMIT = 2**52


def to_canonical(name: str, value: object, *, field: str | None = None) -> float:
    """Parse ``value`` for resource ``name`` into pumice's canonical float unit.

    Rounded up as Kubernetes does (``MilliValue`` for cpu, ``Value`` for bytes), so that
    cpu and memory amounts are whole numbers: sums of them are then exact in float64
    whatever the order of addition, and running totals equal fresh sums. Other
    resources keep milli precision (half a GPU stays 0.5). An amount beyond
    :data:`EXACT_LIMIT` (``memory: 4Ei``, ``cpu: 1e30``) is an :class:`InputError`."""
    q = parse_quantity(value, field=field)
    in_bytes = is_bytes(name)
    scaled = q if in_bytes else q * 1000  # bytes, or millis
    if scaled > EXACT_LIMIT:
        raise InputError(f"quantity {shown(value)} is too large ({too_large(name)})", field=field)
    if name == CPU or in_bytes:
        return float(math.ceil(scaled))
    return math.ceil(scaled) / 1000


def largest(name: str) -> float:
    """The largest canonical amount of resource ``name`` pumice accepts."""
    if name == CPU or is_bytes(name):
        return float(EXACT_LIMIT)
    return EXACT_LIMIT / 1000


def too_large(name: str) -> str:
    """The limit on amounts of ``name``, for an error message that refuses one."""
    if name == CPU:
        shown = f"{EXACT_LIMIT}m"
    elif is_bytes(name):
        shown = format_amount(name, EXACT_LIMIT)
    else:
        shown = str(Decimal(EXACT_LIMIT) / 1000)
    return f"at most {shown}"


def check_total(amounts: Mapping[str, float], *, what: str, field: str) -> None:
    """Refuse a sum of admissible amounts (a pod's containers, init containers and
    overhead) that passes :func:`largest`, as :func:`to_canonical` refuses one amount.

    The float sum is trusted here: while the exact sum is at most 2**52 it is computed
    exactly, and the first partial sum to pass 2**52 is itself exact (two terms of at
    most 2**52), so the float total passes the limit exactly when the true one does."""
    for name, amount in amounts.items():
        if amount > largest(name):
            shown = format_amount(name, amount)
            raise InputError(f"{what} {name} {shown} in total ({too_large(name)})", field=field)


def is_bytes(name: str) -> bool:
    """Resources counted in bytes: memory, storage, hugepages."""
    return name == MEMORY or name.endswith("storage") or name.startswith("hugepages-")


_BINARY_UNITS = tuple(reversed(list(_BINARY.items())))  # Ei first
_DECIMAL_UNITS = tuple(
    (suffix, int(factor)) for suffix, factor in reversed(_DECIMAL.items()) if factor >= 1000
)


def _number(x: float) -> str:
    """A plain number for people: whole numbers as integers, others with the fewest
    decimals (up to 3) that do not round them to a whole number."""
    if x == int(x):
        return str(int(x))
    for decimals in (1, 2, 3):
        text = f"{x:.{decimals}f}".rstrip("0").rstrip(".")
        if "." in text:
            return text
    return f"{x:.3f}"


def _in_unit(amount: float, units: tuple[tuple[str, int], ...]) -> tuple[float, str]:
    """``amount`` in the largest of ``units`` it reaches (or in itself, with no suffix)."""
    for suffix, factor in units:
        if amount >= factor:
            return amount / factor, suffix
    return amount, ""


def format_amount(name: str, amount: float) -> str:
    """Render a canonical amount for people, as Kubernetes writes quantities: cpu in
    cores (``2``; ``236.6`` from ten cores up) or millicores (``1500m``); bytes in the
    largest binary unit they reach (``4Gi``, ``1.5Gi``), or the largest decimal one
    where that is exact (``1G``), else rounded (``5.1Ti``, not ``5485988160Ki``); counts
    as numbers (``8``, ``0.5``). A rounded amount never looks whole."""
    amount = float(amount)
    if not math.isfinite(amount):
        return "unlimited" if amount > 0 else str(amount)
    if name == CPU:
        if amount % 1000 == 0:
            return str(int(amount // 1000))
        cores = round(amount / 1000, 1)
        if abs(amount) >= 10_000 and not cores.is_integer():
            return _number(cores)  # (a share of many cores: 236.6, not 236571.4m)
        return f"{_number(amount)}m"
    if is_bytes(name):
        binary, suffix = _in_unit(amount, _BINARY_UNITS)
        if (binary * 100).is_integer():  # (at most two decimals, exactly)
            return f"{_number(binary)}{suffix}"
        decimal, dsuffix = _in_unit(amount, _DECIMAL_UNITS)
        if (decimal * 100).is_integer():
            return f"{_number(decimal)}{dsuffix}"
        return f"{_number(binary)}{suffix}"
    return _number(amount)


def plural(n: int, noun: str, nouns: str = "") -> str:
    """``1 task``, ``2 tasks`` (``nouns`` for an irregular plural)."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"


def render_quantity(name: str, amount: float) -> str:
    """Render a canonical amount as a Kubernetes quantity string.

    cpu is always millicores (``"1500m"``); memory and storage are ``Gi``/``Mi`` when exact,
    else bytes; counts are integers. Fractions below the unit are rounded up, so what is
    rendered never asks for less than the model holds.
    """
    if name == CPU:
        return f"{math.ceil(round(amount, 6))}m"
    if name == MEMORY or name.endswith("storage"):
        b = math.ceil(round(amount, 3))
        for suffix, factor in (("Gi", 2**30), ("Mi", 2**20)):
            if b >= factor and b % factor == 0:
                return f"{b // factor}{suffix}"
        return str(b)
    if float(amount).is_integer():
        return str(int(amount))
    return repr(float(amount))


def render_resources(resources: Mapping[str, float]) -> dict[str, str]:
    """A canonical resource map as a Kubernetes ``ResourceList`` (names sorted)."""
    return {name: render_quantity(name, resources[name]) for name in sorted(resources)}
