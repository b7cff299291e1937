"""resource-strategy-fit: per resource, prefer emptier or fuller nodes; keep scarce
nodes for the pods that need them.

Three policies, as Volcano's plugin (``pkg/scheduler/plugins/resource-strategy-fit``):

- **Strategy score** (``resourceStrategyFitWeight``, 10; ``resources``). Each requested
  resource with a configured strategy scores ``LeastAllocated`` ``(allocatable - used -
  request) / allocatable`` or ``MostAllocated`` ``(used + request) / allocatable``, times
  its weight; the sum divided by the summed weights, times 100 and the plugin weight.
  A resource name may end in ``*`` (``nvidia.com/*``): an exact name wins, then the
  longest prefix. Without ``resources``, cpu and memory are ``LeastAllocated`` with
  weight 1. A pod may choose its own strategy: the annotation
  ``volcano.sh/resource-strategy-scoring-type`` with the weights in
  ``volcano.sh/resource-strategy-weight`` (JSON ``{"cpu": 2}``; missing or not JSON:
  the pod scores 0). A node the request would overflow in a scored resource scores 0.
- **SRA** (``sra``: ``enable``, ``resources`` comma-separated, ``weight``,
  ``resourceWeight``): a node that lacks a resource the pod requests scores 0; else
  ``(1 - the summed weights of the listed scarce resources the node has / their
  total) * 100 * weight``: pods that do not need a GPU go to nodes without one.
- **Proportional** (``proportional``: ``enable``, ``resources``,
  ``resourceProportion`` with ``<resource>.cpu`` and ``<resource>.memory`` rates): a
  pod that requests none of the listed resources may use a node only if the node keeps,
  after it, ``rate`` cpus and ``rate`` GB of memory per idle unit of each listed
  resource it offers ("proportional of resource nvidia.com/gpu check failed").

The scores are separable (``context`` / ``rows`` / ``one``; a pod's own strategy is part
of the context). The proportional filter reads the nodes' idle resources, which change
with every placement, so it is not ``by_placement``; it is registered only when
enabled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pumice.api.quantity import CPU, MEMORY
from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.documents import load_json
from pumice.errors import InputError, shown
from pumice.framework.scoring import SeparableScore
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless

NAME = "resource-strategy-fit"
MAX_NODE_SCORE = 100.0
DEFAULT_WEIGHT = 10
LEAST, MOST = "LeastAllocated", "MostAllocated"
STRATEGY_ANNOTATION = "volcano.sh/resource-strategy-scoring-type"
WEIGHT_ANNOTATION = "volcano.sh/resource-strategy-weight"
#: Volcano's smallest amount that counts as requested (``api.GetMinResource``).
MIN_RESOURCE = 0.1

Reasons = list[tuple[str, np.ndarray]]


def _bad(key: str, message: str) -> InputError:
    return InputError(message, obj=f"plugin {NAME}", field=f"arguments.{key}")


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(key, f"expected a mapping, got {shown(value)}")
    return value


def _int(value: Any, key: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not (
        isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    ):
        raise _bad(key, f"expected an integer, got {shown(value)}")
    return int(value)


def _number(value: Any, key: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(key, f"expected a number, got {shown(value)}")
    try:
        return float(value)
    except OverflowError:  # (an int beyond any float)
        raise _bad(key, f"expected a number, got {shown(value)}") from None


def _bool(value: Any, key: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _bad(key, f"expected true or false, got {shown(value)}")
    return value


def _names(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, str):
        raise _bad(key, f"expected a comma-separated string, got {shown(value)}")
    out = []
    for name in (n.strip() for n in value.split(",")):
        if name and name not in out:
            out.append(name)
    return out


def valid_pattern(name: str) -> bool:
    """A resource name, or a prefix followed by one ``*`` (``nvidia.com/*``)."""
    return "*" not in name or (name != "*" and name.endswith("*") and name.count("*") == 1)


@dataclass(frozen=True, slots=True)
class Strategy:
    kind: str  # LEAST or MOST (a pod's own annotation may name anything: it scores 0)
    weight: int


def strategy_for(name: str, strategies: Mapping[str, Strategy]) -> Strategy | None:
    """The configured strategy of resource ``name``: its own, else the longest
    matching ``prefix*``."""
    got = strategies.get(name)
    if got is not None:
        return got
    best, best_len = None, -1
    for pattern, strategy in strategies.items():
        if pattern.endswith("*"):
            prefix = pattern[:-1]
            if name.startswith(prefix) and len(prefix) > best_len:
                best, best_len = strategy, len(prefix)
    return best


def parse_strategies(value: Any) -> dict[str, Strategy]:
    """``resources``: name -> {type, weight}. An empty or absent map means cpu and
    memory, LeastAllocated, weight 1. A weight of 0 (or none) counts as 1 and no type
    as LeastAllocated, as in Volcano; a pattern other than ``prefix*``, another type
    or a negative weight is refused."""
    spec = _mapping(value, "resources")
    if not spec:
        return {CPU: Strategy(LEAST, 1), MEMORY: Strategy(LEAST, 1)}
    out = {}
    for name, conf in spec.items():
        key = f"resources.{name}"
        if not valid_pattern(str(name)):
            raise _bad(key, "a resource name may only end in one '*' after a prefix")
        conf = _mapping(conf, key)
        kind = conf.get("type") or LEAST
        if kind not in (LEAST, MOST):
            raise _bad(f"{key}.type", f"expected {LEAST} or {MOST}, got {shown(kind)}")
        weight = _int(conf.get("weight"), f"{key}.weight", 1)
        if weight < 0:
            raise _bad(f"{key}.weight", f"must not be negative, got {weight}")
        out[str(name)] = Strategy(kind, weight or 1)
    return out


class ResourceStrategyFitPlugin:
    name = NAME
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ("resourceStrategyFitWeight", "resources", "sra", "proportional")

    def __init__(self, arguments: Arguments) -> None:
        self.weight = arguments.get_int("resourceStrategyFitWeight", DEFAULT_WEIGHT)
        if self.weight < 0:
            raise _bad("resourceStrategyFitWeight", f"must not be negative, got {self.weight}")
        self.strategies = parse_strategies(arguments.raw("resources"))
        sra = _mapping(arguments.raw("sra"), "sra")
        #: Scarce resource -> weight, and the SRA weight (0: off).
        self.sra: dict[str, int] = {}
        self.sra_weight = 0
        if _bool(sra.get("enable"), "sra.enable"):
            self.sra_weight = _int(sra.get("weight"), "sra.weight", 0)
            if self.sra_weight < 0:
                raise _bad("sra.weight", f"must not be negative, got {self.sra_weight}")
            weights = _mapping(sra.get("resourceWeight"), "sra.resourceWeight")
            for name in _names(sra.get("resources"), "sra.resources"):
                w = _int(weights.get(name), f"sra.resourceWeight.{name}", 1)
                if w < 0:
                    raise _bad(f"sra.resourceWeight.{name}", f"must not be negative, got {w}")
                self.sra[name] = w
        prop = _mapping(arguments.raw("proportional"), "proportional")
        #: Resource -> (cpus, GB of memory) kept per idle unit; None: the filter is off.
        self.proportional: dict[str, tuple[float, float]] | None = None
        if _bool(prop.get("enable"), "proportional.enable"):
            rates = _mapping(prop.get("resourceProportion"), "proportional.resourceProportion")
            self.proportional = {}
            for name in _names(prop.get("resources"), "proportional.resources"):
                pair = []
                for part in ("cpu", "memory"):
                    key = f"proportional.resourceProportion.{name}.{part}"
                    rate = _number(rates.get(f"{name}.{part}"), key, 1.0)
                    if rate < 0:
                        raise _bad(key, f"must not be negative, got {rate}")
                    pair.append(rate)
                self.proportional[name] = (pair[0], pair[1])
        self.ssn: Session | None = None

    def on_session_open(self, ssn: Session) -> None:
        if self.proportional is not None:
            ssn.on("predicate", self.name, self.predicate)
        if self.weight > 0 or self.sra_weight > 0:
            ssn.on("node_order", self.name, StrategyScore(self))

    def on_cycle_open(self, ssn: Session) -> None:
        """The functions read the cycle's nodes when called."""
        self.ssn = ssn

    def predicate(self, task: TaskInfo) -> tuple[np.ndarray | None, Reasons]:
        """The proportional filter."""
        ssn = self.ssn
        assert ssn is not None and self.proportional is not None
        index = ssn.space.index
        offered = [(r, index[r], rates) for r, rates in self.proportional.items() if r in index]
        req = task.resreq
        if not offered or any(req[d] > 0 for _, d, _ in offered):
            return None, []
        nodes = ssn.nodes
        idle = nodes.idle
        cpu_left = idle[:, index[CPU]] - req[index[CPU]]
        mem_left = idle[:, index[MEMORY]] - req[index[MEMORY]]
        decided = np.zeros(len(nodes), dtype=bool)
        reasons: Reasons = []
        for name, d, (cpu_rate, mem_rate) in offered:
            has = (nodes.allocatable[:, d] > 0) & ~decided
            units = idle[:, d]
            short = has & (
                (cpu_left < units * cpu_rate * 1000.0) | (mem_left < units * mem_rate * 1e9)
            )
            if short.any():
                why = (
                    f"proportional of resource {name} check failed (the node keeps cpu and "
                    f"memory for its idle {name})"
                )
                reasons.append((why, short))
                decided |= short
        return (decided if reasons else None), reasons


@dataclass(frozen=True, slots=True)
class _Context:
    """What a task's score reads beyond its requests: per scored dimension (in order)
    its strategy and weight, and the SRA terms; ``zero``: the task scores 0 everywhere
    (a pod strategy without readable weights)."""

    dims: tuple[tuple[int, str, int], ...]
    wsum: int
    requested: tuple[int, ...]
    zero: bool = False


class StrategyScore(SeparableScore):
    """The ``node_order`` function: each node is scored on its own."""

    __slots__ = ("_pod_weights", "plugin")

    def __init__(self, plugin: ResourceStrategyFitPlugin) -> None:
        self.plugin = plugin
        self._pod_weights: dict[str, dict[str, Any] | None] = {}

    def _weights(self, raw: str) -> dict[str, Any] | None:
        """A pod's weight annotation, parsed once per distinct text."""
        if raw not in self._pod_weights:
            try:
                got = load_json(raw.encode(), source="") if raw else None
            except ValueError:
                got = None
            self._pod_weights[raw] = got if isinstance(got, dict) else None
        return self._pod_weights[raw]

    def context(self, task: TaskInfo, cand: np.ndarray) -> _Context:
        plugin = self.plugin
        ssn = plugin.ssn
        assert ssn is not None
        names = ssn.space.names
        req = task.resreq
        requested = tuple(d for d in np.flatnonzero(req >= MIN_RESOURCE).tolist())
        own = task.annotations.get(STRATEGY_ANNOTATION, "")
        pod_weights = None
        if own:
            pod_weights = self._weights(task.annotations.get(WEIGHT_ANNOTATION, ""))
            if pod_weights is None:
                return _Context((), 0, requested, zero=True)
        dims = []
        wsum = 0
        if plugin.weight > 0:
            for d in requested:
                name = names[d]
                if pod_weights is not None:
                    w = pod_weights.get(name)
                    if not isinstance(w, int) or isinstance(w, bool):
                        continue
                    kind = own
                else:
                    strategy = strategy_for(name, plugin.strategies)
                    if strategy is None:
                        continue
                    kind, w = strategy.kind, strategy.weight
                dims.append((d, kind, w))
                wsum += w
        return _Context(tuple(dims), wsum, requested)

    def rows(self, task: TaskInfo, rows: np.ndarray, ctx: _Context) -> np.ndarray:
        plugin = self.plugin
        ssn = plugin.ssn
        assert ssn is not None
        nodes = ssn.nodes
        out = np.zeros(rows.size)
        if ctx.zero:
            return out
        req = task.resreq
        if ctx.dims:
            alloc = nodes.allocatable[rows]
            used = nodes.used[rows]
            total = np.zeros(rows.size)
            over = np.zeros(rows.size, dtype=bool)
            for d, kind, w in ctx.dims:
                cap = alloc[:, d]
                final = float(req[d]) + used[:, d]
                active = (cap != 0) & (w != 0)
                over |= active & (final > cap)
                with np.errstate(divide="ignore", invalid="ignore"):
                    if kind == MOST:
                        part = final * float(w) / cap
                    elif kind == LEAST:
                        part = (cap - final) * float(w) / cap
                    else:
                        part = np.zeros(rows.size)
                total = total + np.where(active, part, 0.0)
            if ctx.wsum > 0:
                total = total / float(ctx.wsum)
            total = total * (MAX_NODE_SCORE * plugin.weight)
            out = out + np.where(over, 0.0, total)
        if plugin.sra_weight > 0:
            out = out + self._sra(rows, ctx)
        return out

    def _sra(self, rows: np.ndarray, ctx: _Context) -> np.ndarray:
        plugin = self.plugin
        ssn = plugin.ssn
        assert ssn is not None
        alloc = ssn.nodes.allocatable[rows]
        index = ssn.space.index
        lacking = np.zeros(rows.size, dtype=bool)
        for d in ctx.requested:
            lacking |= alloc[:, d] == 0
        held = np.zeros(rows.size)
        wsum = 0
        for name, w in plugin.sra.items():
            wsum += w
            if name in index:
                held = held + np.where(alloc[:, index[name]] > 0, float(w), 0.0)
        if wsum > 0:
            held = 1.0 - held / float(wsum)
        score = held * (MAX_NODE_SCORE * plugin.sra_weight)
        return np.where(lacking, 0.0, score)

    def one(self, task: TaskInfo, i: int, ctx: _Context) -> float:
        """:meth:`rows` for node ``i`` alone (the same float operations)."""
        return float(self.rows(task, np.array([i], dtype=np.intp), ctx)[0])
