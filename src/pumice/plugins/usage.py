"""usage: keep pods off nodes whose measured load is high, and prefer the idle ones.

Volcano's usage plugin, on nodes' measured CPU and memory load in percent:

- *filter*: a node whose CPU load is over ``thresholds.cpu`` (default 80), or whose
  memory load is over ``thresholds.mem`` (80), takes no new pod ("the CPU load of the
  node exceeds the upper limit");
- *score*: ``((100% - cpu) × cpu.weight + (100% - memory) × memory.weight) /
  (cpu.weight + memory.weight) × 100 × usage.weight`` (weights 1, 1 and 5), where each
  load also counts an estimate of the pods placed on the node that its measurement
  cannot show yet (the *shadow* load: pods allocated or bound, or running for less than
  the metrics ``interval``, and every pod this cycle places there). A pod's estimate is
  its request times ``estimator.request_ratio`` (0.7), times ``estimator.risk_factor``
  (1.2) on a node whose weighted load has reached ``estimator.risk_threshold`` (0.6);
  a best-effort pod counts ``estimator.be_cpu`` (250m) and ``estimator.be_mem``
  (200Mi; a bare number is Mi).

A node's load counts only while its measurement is at most five minutes old; a node
without one passes the filter and scores 0. The load comes from the snapshot's
NodeMetrics records (:mod:`pumice.api.node_metrics`): ``metrics.k8s.io`` NodeMetrics
objects (usage over the node's allocatable amount) in every mode, and in ``pumice run``
the Prometheus source the configuration's ``metrics`` section names (Volcano's 10-minute
averages), which is preferred for a node both describe.

Differences from Volcano: pumice reads no pod limits, so ``estimator.burst_ratio``
(what a pod may use above its request) adds nothing; the load is a share of the node's
allocatable resources, not of its capacity; and a weight, threshold or estimator value
out of range is refused where Volcano keeps its default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pumice.api.node_metrics import KIND as NODE_METRICS
from pumice.api.node_metrics import NodeMetricsRecord
from pumice.api.quantity import CPU, MEMORY, to_canonical
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.conf.config import metrics_interval
from pumice.errors import InputError, shown
from pumice.framework.scoring import SeparableScore
from pumice.framework.session import EventHandler, Session

MAX_SCORE = 100.0
#: How old a measurement may be and still count (Volcano's ``MetricsActiveTime``).
METRICS_ACTIVE = 300.0
#: The metrics interval when the configuration names none (Volcano's 30s).
DEFAULT_INTERVAL = 30.0
CPU_OVER = "the CPU load of the node exceeds the upper limit"
MEMORY_OVER = "the memory load of the node exceeds the upper limit"
_SHADOW_STATUSES = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND})
_OWNER = "plugin usage"


@dataclass(frozen=True, slots=True)
class Estimator:
    """How the load of a pod not yet measured is estimated."""

    request_ratio: float = 0.7
    burst_ratio: float = 0.0
    risk_threshold: float = 0.6
    risk_factor: float = 1.2
    be_cpu: float = 250.0  # millicores
    be_memory: float = 200.0 * 1024 * 1024  # bytes


def _section(arguments: Arguments, key: str) -> Mapping[str, Any]:
    raw = arguments.raw(key)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError("expected a mapping", obj=_OWNER, field=f"arguments.{key}")
    return raw


def _number(section: Mapping[str, Any], name: str, where: str, default: float) -> float:
    value = section.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        raise InputError(f"expected a number, got {shown(value)}", obj=_OWNER, field=where)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):  # (an int beyond any float too)
        raise InputError(
            f"expected a number, got {shown(value)}", obj=_OWNER, field=where
        ) from None


def _in(value: float, low: float, high: float, where: str) -> float:
    if not low <= value <= high:
        raise InputError(
            f"must be from {low:g} to {high:g}, got {value:g}", obj=_OWNER, field=where
        )
    return value


def _best_effort(value: Any, resource: str, where: str, default: float) -> float:
    """``be_cpu`` / ``be_mem``: a quantity, or a bare number (millicores; Mi)."""
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise InputError(f"must not be negative, got {shown(value)}", obj=_OWNER, field=where)
        try:
            return float(value) * (1024 * 1024 if resource == MEMORY else 1.0)
        except OverflowError:
            raise InputError(
                f"expected a quantity or a number, got {shown(value)}", obj=_OWNER, field=where
            ) from None
    try:
        return to_canonical(resource, value, field=where)
    except InputError as err:
        raise err.located(obj=_OWNER) from None


def parse_estimator(arguments: Arguments) -> Estimator:
    section = _section(arguments, "estimator")
    base = Estimator()
    path = "arguments.estimator."
    ratio = _in(_number(section, "request_ratio", path + "request_ratio", base.request_ratio),
                0, 1, path + "request_ratio")  # fmt: skip
    burst = _in(_number(section, "burst_ratio", path + "burst_ratio", base.burst_ratio),
                0, 1, path + "burst_ratio")  # fmt: skip
    risk_threshold = _in(
        _number(section, "risk_threshold", path + "risk_threshold", base.risk_threshold),
        0, 1, path + "risk_threshold",
    )  # fmt: skip
    risk_factor = _number(section, "risk_factor", path + "risk_factor", base.risk_factor)
    if risk_factor < 1:
        raise InputError(
            f"must be at least 1, got {risk_factor:g}", obj=_OWNER, field=path + "risk_factor"
        )
    for key in section:
        if key not in ("request_ratio", "burst_ratio", "risk_threshold", "risk_factor",
                       "be_cpu", "be_mem"):  # fmt: skip
            raise InputError("unknown estimator key", obj=_OWNER, field=path + str(key))
    return Estimator(
        ratio,
        burst,
        risk_threshold,
        risk_factor,
        _best_effort(section.get("be_cpu"), CPU, path + "be_cpu", base.be_cpu),
        _best_effort(section.get("be_mem"), MEMORY, path + "be_mem", base.be_memory),
    )


def node_loads(
    records: Mapping[str, NodeMetricsRecord], names: list[str], allocatable: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node of ``names``: the time of its measurement (-inf: none), its CPU and its
    memory load in percent. A record in percent (a query source) is preferred to one
    in amounts (NodeMetrics) for the same node, the latest of each kind; an amount is a
    share of ``allocatable`` (node × (cpu, memory))."""
    index = {n: i for i, n in enumerate(names)}
    chosen: dict[int, NodeMetricsRecord] = {}
    for rec in records.values():
        i = index.get(rec.name)
        if i is None:
            continue
        have = chosen.get(i)
        if have is None:
            chosen[i] = rec
            continue
        new_pct, old_pct = rec.cpu_percent is not None, have.cpu_percent is not None
        if (new_pct, rec.time) > (old_pct, have.time):
            chosen[i] = rec
    n = len(names)
    when = np.full(n, -np.inf)
    cpu = np.zeros(n)
    memory = np.zeros(n)
    for i, rec in chosen.items():
        when[i] = rec.time
        for out, pct, amount, d in (
            (cpu, rec.cpu_percent, rec.cpu, 0),
            (memory, rec.memory_percent, rec.memory, 1),
        ):
            if pct is not None:
                out[i] = pct
            elif amount is not None and allocatable[i, d] > 0:
                out[i] = amount / allocatable[i, d] * 100.0
    return when, cpu, memory


class UsagePlugin:
    name = "usage"
    argument_keys = ("usage.weight", "cpu.weight", "memory.weight", "thresholds", "estimator")

    def __init__(self, arguments: Arguments) -> None:
        self.usage_weight = arguments.get_int("usage.weight", 5)
        self.cpu_weight = arguments.get_int("cpu.weight", 1)
        self.memory_weight = arguments.get_int("memory.weight", 1)
        for key, value in (
            ("usage.weight", self.usage_weight),
            ("cpu.weight", self.cpu_weight),
            ("memory.weight", self.memory_weight),
        ):
            if value < 0:
                raise InputError(
                    f"must not be negative, got {value}", obj=_OWNER, field=f"arguments.{key}"
                )
        thresholds = _section(arguments, "thresholds")
        for key in thresholds:
            if key not in ("cpu", "mem"):
                raise InputError(
                    "unknown threshold (cpu and mem are read)",
                    obj=_OWNER,
                    field=f"arguments.thresholds.{key}",
                )
        self.cpu_threshold = _in(
            _number(thresholds, "cpu", "arguments.thresholds.cpu", 80.0),
            0, 100, "arguments.thresholds.cpu",
        )  # fmt: skip
        self.memory_threshold = _in(
            _number(thresholds, "mem", "arguments.thresholds.mem", 80.0),
            0, 100, "arguments.thresholds.mem",
        )  # fmt: skip
        self.estimator = parse_estimator(arguments)
        self.interval = DEFAULT_INTERVAL
        # The cycle's view (see on_cycle_open).
        self._fresh = np.zeros(0, dtype=bool)
        self._cpu = np.zeros(0)
        self._memory = np.zeros(0)
        self._capacity = np.zeros((0, 2))
        #: Shadow load per node (millicores, bytes), and what each task added.
        self._shadow = np.zeros((0, 2))
        self._added: dict[str, tuple[int, float, float]] = {}
        self._blocked: np.ndarray | None = None
        self._reasons: list[tuple[str, np.ndarray]] = []
        self._until = math.inf
        self._last: tuple | None = None
        self._index: dict[str, int] = {}
        self._dims: tuple[int | None, int | None] = (None, None)

    # -- the cycle ----------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        ssn.on("predicate", self.name, self._predicate, by_placement=True)
        if self.usage_weight:
            ssn.on("node_order", self.name, UsageScore(self))
        ssn.add_event_handler(EventHandler(allocate=self._allocated, deallocate=self._gone))

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's measurements and shadow load. When the nodes' answers differ
        from the last cycle's without any node changing (new measurements, one
        growing old, a pod leaving the shadow), what allocate kept per task shape is
        forgotten."""
        self.interval = metrics_interval(ssn.config, DEFAULT_INTERVAL)
        nodes = ssn.nodes
        space = nodes.space
        dims = (space.index.get(CPU), space.index.get(MEMORY))
        self._dims = dims
        capacity = np.zeros((len(nodes), 2))
        for k, d in enumerate(dims):
            if d is not None:
                capacity[:, k] = nodes.allocatable[:, d]
        self._capacity = capacity
        self._index = nodes.index
        when, cpu, memory = node_loads(ssn.snapshot.records(NODE_METRICS), nodes.names, capacity)
        now = ssn.now
        self._fresh = now - when <= METRICS_ACTIVE
        self._cpu, self._memory = cpu, memory
        until = math.inf
        if self._fresh.any():
            until = math.nextafter(float(when[self._fresh].min()) + METRICS_ACTIVE, math.inf)
        cpu_over = self._fresh & (cpu > self.cpu_threshold)
        mem_over = self._fresh & ~cpu_over & (memory > self.memory_threshold)
        self._reasons = []
        if cpu_over.any():
            why = f"were over the CPU load threshold ({self.cpu_threshold:g}%): {CPU_OVER}"
            self._reasons.append((why, cpu_over))
        if mem_over.any():
            why = f"were over the memory load threshold ({self.memory_threshold:g}%): {MEMORY_OVER}"
            self._reasons.append((why, mem_over))
        blocked = cpu_over | mem_over
        self._blocked = blocked if blocked.any() else None
        self._shadow = np.zeros((len(nodes), 2))
        self._added = {}
        for i in np.flatnonzero(self._fresh).tolist():
            for task in nodes.tasks[i].values():
                if task.status in _SHADOW_STATUSES:
                    self._add(i, task)
                elif task.status == TaskStatus.RUNNING:
                    started = task.scheduled_at
                    if not started or now - started < self.interval:
                        self._add(i, task)
                        if started:
                            until = min(until, started + self.interval)
        self._until = until
        seen = (
            tuple(nodes.names),
            self._fresh.tobytes(),
            cpu.tobytes(),
            memory.tobytes(),
            self._shadow.tobytes(),
        )
        if self._last is not None and self._last != seen:
            memory_kept = ssn.snapshot.slot_memory
            if memory_kept is not None:
                memory_kept.forget()
        self._last = seen

    def valid_until(self, _ssn: Session) -> float:
        """When a measurement grows too old to count, or a running pod leaves the
        shadow load: the first time an answer would differ."""
        return self._until

    # -- the shadow load ----------------------------------------------------------------

    def composite(self, i: int) -> tuple[float, float]:
        """Node ``i``'s CPU and memory load, 0 to 1, the shadow load included."""
        out = []
        for k, pct in ((0, self._cpu[i]), (1, self._memory[i])):
            cap = self._capacity[i, k]
            if cap <= 0:
                out.append(0.0)
                continue
            value = (pct / 100.0 * cap + self._shadow[i, k]) / cap
            out.append(min(1.0, max(0.0, value)))
        return out[0], out[1]

    def _risk(self, i: int) -> float:
        cpu, memory = self.composite(i)
        total = self.cpu_weight + self.memory_weight
        load = 0.0 if total == 0 else (cpu * self.cpu_weight + memory * self.memory_weight) / total
        est = self.estimator
        return est.risk_factor if load >= est.risk_threshold else 1.0

    def estimate(self, task: TaskInfo, risk: float) -> tuple[float, float]:
        """What ``task`` is expected to use before it is measured (millicores, bytes)."""
        est = self.estimator
        if task.best_effort:
            return est.be_cpu * risk, est.be_memory * risk
        out = []
        for d in self._dims:
            request = float(task.resreq[d]) if d is not None else 0.0
            # Without limits the request is the limit: nothing to burst into.
            out.append(min(max(request * est.request_ratio * risk, 0.0), request))
        return out[0], out[1]

    def _add(self, i: int, task: TaskInfo) -> None:
        old = self._added.pop(task.uid, None)
        if old is not None:
            self._shadow[old[0]] -= (old[1], old[2])
            np.maximum(self._shadow[old[0]], 0.0, out=self._shadow[old[0]])
        cpu, memory = self.estimate(task, self._risk(i))
        self._shadow[i] += (cpu, memory)
        self._added[task.uid] = (i, cpu, memory)

    def _allocated(self, task: TaskInfo) -> None:
        i = self._index.get(task.node or "")
        if i is not None:
            self._add(i, task)

    def _gone(self, task: TaskInfo) -> None:
        old = self._added.pop(task.uid, None)
        if old is not None:
            self._shadow[old[0]] -= (old[1], old[2])
            np.maximum(self._shadow[old[0]], 0.0, out=self._shadow[old[0]])

    # -- the hooks ----------------------------------------------------------------------

    def _predicate(self, _task: TaskInfo) -> tuple[np.ndarray | None, list]:
        return self._blocked, self._reasons

    def score(self, i: int) -> float:
        """Node ``i``'s score (0 without a fresh measurement)."""
        if not self._fresh[i]:
            return 0.0
        total = self.cpu_weight + self.memory_weight
        if total == 0:
            return 0.0
        cpu, memory = self.composite(i)
        part = ((1.0 - cpu) * self.cpu_weight + (1.0 - memory) * self.memory_weight) / total
        return part * MAX_SCORE * self.usage_weight


class UsageScore(SeparableScore):
    """The ``node_order`` function: each node scored on its own load (the separable
    form of :class:`pumice.plugins.nodeorder.NodeOrderScore`). A node's shadow load
    changes only when a pod is placed on it or leaves it, which the node table logs."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: UsagePlugin) -> None:
        self.plugin = plugin

    def rows(self, task: TaskInfo, rows: np.ndarray, _ctx: None) -> np.ndarray:
        score = self.plugin.score
        return np.array([score(i) for i in rows.tolist()], dtype=np.float64)

    def one(self, task: TaskInfo, i: int, _ctx: None) -> float:
        return self.plugin.score(i)


__all__ = ["Estimator", "UsagePlugin", "node_loads", "parse_estimator"]
