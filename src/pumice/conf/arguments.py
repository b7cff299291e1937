"""Typed access to a plugin's or action's ``arguments``.

Volcano reads arguments leniently; pumice reads them the same way (a key that is absent
keeps the default) but refuses a value of the wrong type, naming the key, because a
silently ignored weight is the kind of mistake nobody finds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pumice.errors import InputError


class Arguments:
    """A read-only view of an ``arguments`` mapping for one plugin or action."""

    __slots__ = ("_owner", "_values")

    def __init__(self, values: Mapping[str, Any] | None, owner: str) -> None:
        self._values = dict(values or {})
        self._owner = owner

    def __contains__(self, key: str) -> bool:
        return key in self._values

    def __iter__(self):
        return iter(self._values)

    def raw(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def _bad(self, key: str, expected: str) -> InputError:
        return InputError(
            f"expected {expected}, got {self._values[key]!r}",
            obj=self._owner,
            field=f"arguments.{key}",
        )

    def get_int(self, key: str, default: int) -> int:
        if key not in self._values:
            return default
        v = self._values[key]
        if isinstance(v, bool):
            raise self._bad(key, "an integer")
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            return int(v)
        raise self._bad(key, "an integer")

    def get_float(self, key: str, default: float) -> float:
        if key not in self._values:
            return default
        v = self._values[key]
        if isinstance(v, bool):
            raise self._bad(key, "a number")
        try:
            return float(v)
        except (TypeError, ValueError):
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
