"""CEL device selectors, evaluated with cel-python (``celpy``).

A selector sees one variable, ``device``, as Kubernetes defines it:

- ``device.driver``: the driver's name (a string);
- ``device.attributes["<domain>"].<name>``: the device's attributes grouped by domain
  (an unqualified attribute name belongs to the driver's domain); values are ints,
  bools, strings, or ``semver`` values for ``version`` attributes;
- ``device.capacity["<domain>"].<name>``: capacities, as ``quantity`` values.

An unknown domain gives an empty map (so ``has(device.attributes["x"].y)`` is false);
an unknown name inside a domain is an evaluation error.

Kubernetes' CEL libraries are reproduced in this subset, as functions (methods are
functions whose first argument is the receiver):

- quantities: ``quantity("1Gi")``, ``isQuantity(s)``, ``q.compareTo(q2)`` (-1, 0, 1),
  ``q.isGreaterThan(q2)``, ``q.isLessThan(q2)``, ``q.add(q2 | int)``,
  ``q.sub(q2 | int)``, ``q.isInteger()``, ``q.asInteger()``, ``q.asApproximateFloat()``,
  ``q.sign()``, and ``==`` / ``!=`` between quantities;
- versions: ``semver("1.2.3")``, ``isSemver(s)``, ``v.compareTo(v2)``,
  ``v.isGreaterThan(v2)``, ``v.isLessThan(v2)``, ``v.major()``, ``v.minor()``,
  ``v.patch()``, and ``==`` / ``!=`` between versions (and, more leniently than
  Kubernetes, between a version and a string holding one);
- everything cel-python offers of standard CEL (``has``, ``in``, ``startsWith``,
  ``matches``, ``size``, macros...). Not offered: optional syntax (``.?x``,
  ``orValue``), ``cel.bind``, list-valued attributes, cost limits.

A selector that fails to compile, fails to evaluate, or gives anything but a boolean
does not match the device; the error text is kept so that explanations can show it
(Kubernetes would report the error and refuse the claim).
"""

from __future__ import annotations

import sys
import threading
from decimal import Decimal
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from pumice.api.dra_objects import SEMVER_PATTERN, Device, Version
from pumice.api.quantity import parse_quantity
from pumice.errors import InputError


class CelQuantity:
    """A Kubernetes quantity inside CEL (exact, a Decimal)."""

    __slots__ = ("value",)

    def __init__(self, value: Decimal) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelQuantity) and self.value == other.value

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"quantity({self.value})"


class CelSemver:
    """A ``version`` attribute inside CEL."""

    __slots__ = ("version",)

    def __init__(self, version: Version) -> None:
        self.version = version

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):  # (celtypes.StringType is a str)
            return bool(SEMVER_PATTERN.match(other)) and self.version == Version(str(other))
        return isinstance(other, CelSemver) and self.version == other.version

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.version)

    def __repr__(self) -> str:
        return f"semver({self.version.text})"


def _error(message: str) -> CELEvalError:
    return CELEvalError(message)


_CEL_TYPES = {
    celtypes.BoolType: "bool",
    celtypes.IntType: "int",
    celtypes.UintType: "uint",
    celtypes.DoubleType: "double",
    celtypes.StringType: "string",
    celtypes.BytesType: "bytes",
    celtypes.ListType: "list",
    celtypes.MapType: "map",
    CelQuantity: "quantity",
    CelSemver: "semver",
}


def _type(value: Any) -> str:
    """A value's CEL type name, for messages."""
    for kind, name in _CEL_TYPES.items():
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def _quantity(text: Any) -> Any:
    if not isinstance(text, str):
        return _error(f"quantity() needs a string, got {_type(text)}")
    try:
        return CelQuantity(parse_quantity(str(text)))
    except InputError as exc:
        return _error(exc.message)


def _is_quantity(text: Any) -> Any:
    return celtypes.BoolType(not isinstance(_quantity(text), CELEvalError))


def _semver(text: Any) -> Any:
    if not isinstance(text, str) or not SEMVER_PATTERN.match(text):
        return _error(f"invalid semantic version {str(text)!r}")
    return CelSemver(Version(str(text)))


def _is_semver(text: Any) -> Any:
    return celtypes.BoolType(isinstance(text, str) and bool(SEMVER_PATTERN.match(text)))


def _order(a: Any, b: Any, what: str) -> int | CELEvalError:
    if isinstance(a, CelQuantity) and isinstance(b, CelQuantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, CelSemver) and isinstance(b, CelSemver):
        pa, pb = a.version.precedence, b.version.precedence
        return (pa > pb) - (pa < pb)
    return _error(
        f"{what}() compares two quantities or two versions, not {_type(a)} and {_type(b)}"
    )


def _compare_to(a: Any, b: Any) -> Any:
    got = _order(a, b, "compareTo")
    return got if isinstance(got, CELEvalError) else celtypes.IntType(got)


def _greater(a: Any, b: Any) -> Any:
    got = _order(a, b, "isGreaterThan")
    return got if isinstance(got, CELEvalError) else celtypes.BoolType(got > 0)


def _less(a: Any, b: Any) -> Any:
    got = _order(a, b, "isLessThan")
    return got if isinstance(got, CELEvalError) else celtypes.BoolType(got < 0)


def _amount(x: Any) -> Decimal | None:
    if isinstance(x, CelQuantity):
        return x.value
    if isinstance(x, int) and not isinstance(x, bool):
        return Decimal(int(x))
    return None


def _arith(a: Any, b: Any, sign: int, what: str) -> Any:
    x, y = _amount(a), _amount(b)
    if not isinstance(a, CelQuantity) or y is None or x is None:
        return _error(f"{what}() needs a quantity and a quantity or an integer")
    return CelQuantity(x + sign * y)


def _add(a: Any, b: Any) -> Any:
    return _arith(a, b, 1, "add")


def _sub(a: Any, b: Any) -> Any:
    return _arith(a, b, -1, "sub")


def _needs_quantity(q: Any, what: str) -> CELEvalError | None:
    return None if isinstance(q, CelQuantity) else _error(f"{what}() needs a quantity")


def _is_integer(q: Any) -> Any:
    return _needs_quantity(q, "isInteger") or celtypes.BoolType(
        q.value == q.value.to_integral_value() and abs(q.value) < 2**63
    )


def _as_integer(q: Any) -> Any:
    bad = _needs_quantity(q, "asInteger")
    if bad is not None:
        return bad
    if q.value != q.value.to_integral_value() or abs(q.value) >= 2**63:
        return _error(f"quantity {q.value} is not an integer within int64")
    return celtypes.IntType(int(q.value))


def _as_float(q: Any) -> Any:
    return _needs_quantity(q, "asApproximateFloat") or celtypes.DoubleType(float(q.value))


def _sign(q: Any) -> Any:
    return _needs_quantity(q, "sign") or celtypes.IntType((q.value > 0) - (q.value < 0))


def _part(index: int, what: str) -> Any:
    def part(v: Any) -> Any:
        if not isinstance(v, CelSemver):
            return _error(f"{what}() needs a version")
        return celtypes.IntType(v.version.precedence[0][index])

    return part


FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare_to,
    "isGreaterThan": _greater,
    "isLessThan": _less,
    "add": _add,
    "sub": _sub,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_float,
    "sign": _sign,
    "major": _part(0, "major"),
    "minor": _part(1, "minor"),
    "patch": _part(2, "patch"),
}


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain is an empty map,
    as in Kubernetes."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType()


def _cel_value(value: Any) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, Version):
        return CelSemver(value)
    if isinstance(value, Decimal):
        return CelQuantity(value)
    return celtypes.StringType(value)


def _grouped(pairs: tuple[tuple[str, Any], ...]) -> _Domains:
    domains: dict[str, dict[Any, Any]] = {}
    for qualified, value in pairs:
        domain, _, name = qualified.rpartition("/")
        domains.setdefault(domain, {})[celtypes.StringType(name)] = _cel_value(value)
    return _Domains(
        {celtypes.StringType(d): celtypes.MapType(names) for d, names in domains.items()}
    )


def device_value(driver: str, device: Device) -> celtypes.MapType:
    """The ``device`` variable a selector sees."""
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): _grouped(device.attributes),
            celtypes.StringType("capacity"): _grouped(device.capacity),
        }
    )


def _error_text(exc: BaseException) -> str:
    """An evaluation error in a line: celpy's message, its detail, never the whole
    activation it likes to print."""
    args = exc.args
    text = str(args[0]) if args else type(exc).__name__
    text = text.split(" (in activation", 1)[0]
    if len(args) >= 3 and args[2] and not text.startswith("undeclared"):
        detail = ", ".join(str(a) for a in args[2])
        if detail and detail not in text:
            text = f"{text}: {detail}"
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


#: A selector's answer for a device: (matches, error text or "").
Answer = tuple[bool, str]


class SelectorEvaluator:
    """Compiles each distinct expression once and remembers answers by (expression,
    driver, device): devices are values, so an answer never goes stale. Both caches are
    bounded (cleared when full). Safe to share between threads."""

    def __init__(self, max_answers: int = 200_000) -> None:
        #: Made on the first compile: building celpy's parser is a good part of a
        #: second, which a process that meets no selector (most) need not pay.
        self._env: celpy.Environment | None = None
        self._programs: dict[str, Any] = {}  # expression -> Runner, or error text
        self._answers: dict[tuple[str, str, Device], Answer] = {}
        self._values: dict[tuple[str, Device], celtypes.MapType] = {}
        self._max = max_answers
        self._lock = threading.Lock()

    def program(self, expression: str) -> Any:
        """The compiled expression, or the text of its compile error."""
        got = self._programs.get(expression)
        if got is None:
            try:
                with self._lock:  # (the parser is not known to be thread-safe)
                    env = self._env
                    if env is None:
                        limit = sys.getrecursionlimit()
                        env = self._env = celpy.Environment()  # (sets the limit to 2500)
                        sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))  # never lower
                    got = env.program(env.compile(expression), functions=FUNCTIONS)
            except Exception as exc:  # celpy raises several kinds; all mean "no program"
                column = getattr(exc, "column", None)
                where = f" (syntax error at character {column})" if column else ""
                got = f"does not compile{where}" if where else f"does not compile: {exc}"
            if len(self._programs) >= 10_000:
                self._programs.clear()
            self._programs[expression] = got
        return got

    def matches(self, expression: str, driver: str, device: Device) -> Answer:
        """Whether ``device`` of ``driver`` satisfies ``expression``, and the error text
        when evaluating it failed (then it does not match)."""
        key = (expression, driver, device)
        got = self._answers.get(key)
        if got is not None:
            return got
        program = self.program(expression)
        if isinstance(program, str):
            got = (False, program)
        else:
            vkey = (driver, device)
            value = self._values.get(vkey)
            if value is None:
                value = device_value(driver, device)
                if len(self._values) >= self._max:
                    self._values.clear()
                self._values[vkey] = value
            try:
                result = program.evaluate({"device": value})
            except Exception as exc:  # CELEvalError, or a failure inside celpy
                got = (False, _error_text(exc))
            else:
                if isinstance(result, CELEvalError):
                    got = (False, _error_text(result))
                elif isinstance(result, celtypes.BoolType | bool):
                    got = (bool(result), "")
                else:
                    got = (False, f"gives {_type(result)}, not a boolean")
        if len(self._answers) >= self._max:
            self._answers.clear()
        self._answers[key] = got
        return got


_SHARED = SelectorEvaluator()


def evaluate_selector(expression: str, driver: str, device: Device) -> Answer:
    """:meth:`SelectorEvaluator.matches` with one evaluator shared by the process."""
    return _SHARED.matches(expression, driver, device)


def shared_evaluator() -> SelectorEvaluator:
    """The evaluator :func:`evaluate_selector` and the allocator use by default."""
    return _SHARED
