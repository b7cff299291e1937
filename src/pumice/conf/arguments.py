"""Typed access to a plugin's or action's ``arguments``.

Volcano reads arguments leniently; pumice reads them the same way (a key that is absent
keeps the default) but refuses a value of the wrong type, naming the key, because a
silently ignored weight is the kind of mistake nobody finds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pumice.errors import InputError, shown

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def go_duration(text: str) -> float | None:
    """Go's ``time.ParseDuration`` in seconds; None when it would fail."""
    s = text.strip()
    sign = 1.0
    if s[:1] and s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        return None
    pos, total = 0, 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


class Arguments:
    """A read-only view of an ``arguments`` mapping for one plugin or action."""

    __slots__ = ("_owner", "_values")

    def __init__(self, values: Mapping[str, Any] | None, owner: str) -> None:
        self._values = dict(values or {})
        self._owner = owner

    def __contains__(self, key: str) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def raw(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def _bad(self, key: str, expected: str) -> InputError:
        return InputError(
            f"expected {expected}, got {shown(self._values[key])}",
            obj=self._owner,
            field=f"arguments.{key}",
        )

    def get_int(self, key: str, default: int) -> int:
        if key not in self._values:
            return default
        v = self._values[key]
        if isinstance(v, bool):
            raise self._bad(key, "an integer")
        written = isinstance(v, str) and v.strip().lstrip("-").isdigit() and len(v.strip()) <= 20
        if written or (isinstance(v, float) and v.is_integer()):
            v = int(v)
        if isinstance(v, int) and -(2**63) <= v < 2**63:
            return v
        raise self._bad(key, "an integer (Go's int64)")

    def get_float(self, key: str, default: float) -> float:
        if key not in self._values:
            return default
        v = self._values[key]
        if isinstance(v, bool):
            raise self._bad(key, "a number")
        try:
            return float(v)
        except (TypeError, ValueError, OverflowError):
            raise self._bad(key, "a number") from None

    def get_bool(self, key: str, default: bool) -> bool:
        if key not in self._values:
            return default
        v = self._values[key]
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        raise self._bad(key, "true or false")

    def get_str(self, key: str, default: str) -> str:
        if key not in self._values:
            return default
        v = self._values[key]
        if isinstance(v, str | int | float) and not isinstance(v, bool):
            return str(v)
        raise self._bad(key, "a string")
