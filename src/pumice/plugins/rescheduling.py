"""rescheduling: name running pods to evict so that over-used nodes are relieved.

Follows Volcano's ``rescheduling`` plugin, whose victims the ``shuffle`` action evicts
(their controllers recreate the pods, and the next cycles place them elsewhere). One
strategy exists, as in Volcano: ``lowNodeUtilization``. A node is *under-utilized* when
it is schedulable and every resource the thresholds name is used below its
``thresholds`` value; *over-utilized* when it is not under-utilized and some resource is
used above its ``targetThresholds`` value (a value not given is 100%). When some node,
but not every node, is under-utilized and some node is over-utilized, pods are taken
from the over-utilized nodes, the most used first (cpu % + memory %), each node's pods
lowest priority first (best-effort first among equals, then the newest), while the node
is still at or above a target in some resource and the under-utilized nodes together
still have room below their targets in every resource named.

Utilization is what the pods on a node request (running, bound and pipelined pods;
terminating pods not counted), as a percentage of the node's allocatable. Volcano reads
measured cpu and memory load from its metrics source instead; pumice reads no metrics.

Which pods may be evicted (:func:`forbidding_rule`): Running pods of jobs pumice
schedules, never a pod at or above the threshold priority (``system-cluster-critical``
by default) or of a system-critical class, a pod of ``kube-system``, a DaemonSet pod
(pinned to its node by a ``metadata.name`` field selector), a static pod's mirror, or a
pod marked ``volcano.sh/preemptable: "false"``. With ``nodeFit`` (the default) a pod is
chosen only if some under-utilized node could take it now (the predicates allow it and
its requests fit the node's idle resources).

The strategies run when ``shuffle`` asks, at most once per ``interval`` (5m by default)
counted on the session's clock (``Session.now``: the snapshot's time in ``pumice cycle``,
the virtual clock in ``pumice simulate``); the first time a scheduler asks, they run.
Plugin instances are built afresh for every session, so the last run is kept with what
the snapshot's owner carries from cycle to cycle (``Snapshot.carried``: the scheduler
cache of ``simulate`` and ``run``), not on the instance.

Arguments are read when the plugin is built, all of them before anything is kept: a bad
one is an InputError naming its field, and nothing runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pumice.api.quantity import CPU, MEMORY, PODS
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.conf.arguments import go_duration as parse_go_duration
from pumice.conf.catalog import did_you_mean
from pumice.errors import InputError, shown
from pumice.framework.fit import fits, predicate_filter
from pumice.framework.session import Session
from pumice.plugins.conformance import CRITICAL_CLASSES, SYSTEM_NAMESPACE

PLUGIN = "rescheduling"
LOW_NODE_UTILIZATION = "lowNodeUtilization"
#: Volcano's default interval between two runs of the strategies, in seconds.
DEFAULT_INTERVAL = 300.0
#: Strategies Volcano's design names but neither Volcano nor pumice implements: a
#: configuration naming them loads, and they choose nothing (Volcano skips them too).
UNIMPLEMENTED = frozenset(
    {"offlineOnly", "lowPriorityFirst", "shortLifeTimeFirst", "bigObjectFirst",
     "moreReplicasFirst"}
)  # fmt: skip
#: Volcano's defaults for both threshold maps: 100% of every resource.
DEFAULT_THRESHOLDS: Mapping[str, float] = {CPU: 100.0, MEMORY: 100.0, PODS: 100.0}
#: The priority values of Kubernetes' built-in classes.
BUILT_IN_CLASSES: Mapping[str, int] = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
DEFAULT_THRESHOLD_CLASS = "system-cluster-critical"
#: The keys of a ``lowNodeUtilization`` strategy's ``params``.
LNU_PARAMS = (
    "thresholds", "targetThresholds", "thresholdPriority", "thresholdPriorityClassName",
    "nodeFit", "numberOfNodes",
)  # fmt: skip
#: The annotation the kubelet puts on the API's copy of a static pod.
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
OBJ = f"plugin {PLUGIN}"


# -- arguments ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LowNodeUtilization:
    """The ``lowNodeUtilization`` strategy's parameters (percentages per resource)."""

    thresholds: Mapping[str, float]
    targets: Mapping[str, float]
    #: Pods at or above this priority are never evicted (None: from ``threshold_class``).
    threshold_priority: int | None = None
    threshold_class: str = DEFAULT_THRESHOLD_CLASS
    node_fit: bool = True
    #: The strategy acts only when more than this many nodes are under-utilized.
    number_of_nodes: int = 0
    name: str = LOW_NODE_UTILIZATION


@dataclass(frozen=True, slots=True)
class Settings:
    """The plugin's arguments, read and checked."""

    interval: float = DEFAULT_INTERVAL
    strategies: tuple[LowNodeUtilization, ...] = (
        LowNodeUtilization(DEFAULT_THRESHOLDS, DEFAULT_THRESHOLDS),
    )
    #: Strategies of :data:`UNIMPLEMENTED` the configuration names (they choose nothing).
    ignored: tuple[str, ...] = ()


def _bad(message: str, field: str) -> InputError:
    return InputError(message, obj=OBJ, field=f"arguments.{field}")


def parse_settings(arguments: Arguments) -> Settings:
    """Read ``interval`` and ``strategies``; InputError naming the first bad field."""
    interval = DEFAULT_INTERVAL
    raw = arguments.raw("interval")
    if raw is not None:
        seconds = parse_go_duration(raw) if isinstance(raw, str) else None
        if seconds is None or seconds < 0:
            raise _bad(f"expected a duration such as 5m or 1h30m, got {shown(raw)}", "interval")
        interval = seconds
    raw = arguments.raw("strategies")
    if raw is None:
        return Settings(interval)
    if not isinstance(raw, list):
        raise _bad(f"expected a list of strategies, got {shown(raw)}", "strategies")
    if not raw:  # Volcano keeps its default strategy for an empty list
        return Settings(interval)
    chosen: dict[str, LowNodeUtilization] = {}
    ignored: list[str] = []
    for k, item in enumerate(raw):
        where = f"strategies[{k}]"
        if not isinstance(item, Mapping):
            raise _bad(f"expected a mapping with a name, got {shown(item)}", where)
        for key in item:
            if key not in ("name", "params"):
                hint = did_you_mean(str(key), ("name", "params"))
                raise _bad(f"unknown key {shown(key)}{hint}", f"{where}.{key}")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"expected a strategy name, got {shown(name)}", f"{where}.name")
        if name in UNIMPLEMENTED:
            ignored.append(name)
            continue
        if name != LOW_NODE_UTILIZATION:
            hint = did_you_mean(name, (LOW_NODE_UTILIZATION, *sorted(UNIMPLEMENTED)))
            raise _bad(
                f"unknown strategy {shown(name)}{hint} (implemented: {LOW_NODE_UTILIZATION})",
                f"{where}.name",
            )
        # As in Volcano, a strategy listed twice runs once, with the last entry's params.
        chosen[name] = _low_node_utilization(item.get("params"), f"{where}.params")
    return Settings(interval, tuple(chosen.values()), tuple(ignored))


def _low_node_utilization(params: Any, where: str) -> LowNodeUtilization:
    if params is None:
        return LowNodeUtilization(DEFAULT_THRESHOLDS, DEFAULT_THRESHOLDS)
    if not isinstance(params, Mapping):
        raise _bad(f"expected a mapping, got {shown(params)}", where)
    for key in params:
        if key not in LNU_PARAMS:
            raise _bad(f"unknown parameter {shown(key)}{did_you_mean(str(key), LNU_PARAMS)}",
                       f"{where}.{key}")  # fmt: skip
    low = _thresholds(params.get("thresholds"), f"{where}.thresholds")
    high = _thresholds(params.get("targetThresholds"), f"{where}.targetThresholds")
    for name in dict.fromkeys([*low, *high]):
        value, target = low.get(name, 100.0), high.get(name, 100.0)
        if value > target:
            given = "" if name in low else " (not given: 100)"
            raise _bad(
                f"{value:g}{given} is above the target threshold {target:g} of {name}",
                f"{where}.thresholds.{name}",
            )
    priority = params.get("thresholdPriority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise _bad(f"expected an integer, got {shown(priority)}", f"{where}.thresholdPriority")
    cls = params.get("thresholdPriorityClassName")
    if cls is not None and (not isinstance(cls, str) or not cls):
        raise _bad(
            f"expected a class name, got {shown(cls)}", f"{where}.thresholdPriorityClassName"
        )
    if priority is not None and cls is not None:
        raise _bad(
            "give thresholdPriority or thresholdPriorityClassName, not both",
            f"{where}.thresholdPriority",
        )
    fit = params.get("nodeFit", True)
    if not isinstance(fit, bool):
        raise _bad(f"expected true or false, got {shown(fit)}", f"{where}.nodeFit")
    count = params.get("numberOfNodes", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise _bad(f"expected a count >= 0, got {shown(count)}", f"{where}.numberOfNodes")
    return LowNodeUtilization(low, high, priority, cls or DEFAULT_THRESHOLD_CLASS, fit, count)


def _thresholds(raw: Any, where: str) -> Mapping[str, float]:
    """Volcano's threshold map: the given percentages over the defaults (100 each)."""
    out = dict(DEFAULT_THRESHOLDS)
    if raw is None:
        return out
    if not isinstance(raw, Mapping):
        raise _bad(f"expected percentages per resource, got {shown(raw)}", where)
    for name, value in raw.items():
        if not isinstance(name, str) or not name:
            raise _bad(f"expected a resource name, got {shown(name)}", f"{where}.{name}")
        if name == "pod":
            raise _bad("unknown resource 'pod' (did you mean pods?)", f"{where}.{name}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _bad(f"expected a percentage, got {shown(value)}", f"{where}.{name}")
        if not 0 <= value <= 100:
            raise _bad(
                f"expected a percentage from 0 to 100, got {shown(value)}", f"{where}.{name}"
            )
        out[name] = float(value)
    return out


# -- which pods may be evicted ----------------------------------------------------------


def pinned(task: TaskInfo) -> bool:
    """The pod may run on its own node only (a ``metadata.name`` field selector naming
    just that node in every required term): how the DaemonSet controller makes its pods.
    Evicting it frees nothing anywhere else."""
    terms = task.placement.required_terms
    if not terms or task.node is None:
        return False
    for term in terms:
        names = [
            set(r.values)
            for r in term.requirements
            if r.field and r.key == "metadata.name" and r.operator == "In"
        ]
        if not names or not set.intersection(*names) <= {task.node}:
            return False
    return True


def forbidding_rule(task: TaskInfo, threshold_priority: int) -> str | None:
    """The rule that forbids evicting ``task``, or None when it may be evicted."""
    if task.status != TaskStatus.RUNNING or task.job is None or task.node is None:
        return "only running pods of scheduled jobs"
    if task.priority >= threshold_priority or task.priority_class in CRITICAL_CLASSES:
        return "critical (priority at or above the threshold)"
    if task.namespace == SYSTEM_NAMESPACE:
        return "kube-system pod"
    if pinned(task):
        return "DaemonSet pod (pinned to its node)"
    if MIRROR_ANNOTATION in task.annotations:
        return "mirror of a static pod"
    if not task.preemptable:
        return "volcano.sh/preemptable is false"
    return None


def threshold_priority(ssn: Session, strategy: LowNodeUtilization) -> int:
    """The priority at and above which pods are protected; an unknown class name falls
    back to ``system-cluster-critical`` (with a note)."""
    if strategy.threshold_priority is not None:
        return strategy.threshold_priority
    name = strategy.threshold_class
    value = ssn.snapshot.priority_classes.get(name, BUILT_IN_CLASSES.get(name))
    if value is None:
        ssn.decisions.notes.append(
            f"rescheduling: thresholdPriorityClassName {name!r} names no PriorityClass; "
            f"pods of priority {BUILT_IN_CLASSES[DEFAULT_THRESHOLD_CLASS]} "
            f"({DEFAULT_THRESHOLD_CLASS}) and above are protected"
        )
        return BUILT_IN_CLASSES[DEFAULT_THRESHOLD_CLASS]
    return value


# -- when the strategies last ran ---------------------------------------------------------


#: The key of this plugin's entry in ``Snapshot.carried``.
CARRY_KEY = "rescheduling.last-run"


def due(carried: dict, now: float, interval: float) -> bool:
    """Whether the strategies run at ``now`` (then ``now`` is their last run): the
    first time, or once more than ``interval`` has passed since the last run (as
    Volcano's ``timeToRun``). ``carried`` is what the snapshot's owner keeps from cycle
    to cycle (``Snapshot.carried``): a scheduler cache's lives as long as the cluster
    it follows; a snapshot built from files starts with nothing, so ``pumice cycle``
    always runs the strategies. A clock behind the last run starts afresh."""
    last = carried.get(CARRY_KEY)
    if last is not None and last <= now <= last + interval:
        return False
    carried[CARRY_KEY] = now
    return True


# -- the plugin ---------------------------------------------------------------------------


class ReschedulingPlugin:
    name = PLUGIN
    argument_keys = ("interval", "strategies")

    def __init__(self, arguments: Arguments) -> None:
        self.settings = parse_settings(arguments)

    def on_cycle_open(self, ssn: Session) -> None:
        """Nothing to refresh: the registered function reads the cycle's clock, nodes
        and carried state from the session when it is called."""

    def on_session_open(self, ssn: Session) -> None:
        settings = self.settings

        def victims(tasks: Sequence[TaskInfo]) -> list[tuple[TaskInfo, str, str]]:
            if not due(ssn.snapshot.carried, ssn.now, settings.interval):
                return []
            out: list[tuple[TaskInfo, str, str]] = []
            for strategy in settings.strategies:
                out.extend(low_node_utilization(ssn, strategy, tasks))
            if settings.ignored:
                ssn.decisions.notes.append(
                    f"rescheduling: strategies {', '.join(settings.ignored)} are not "
                    f"implemented (by Volcano either) and chose nothing"
                )
            return out

        ssn.on("victim_tasks", self.name, victims)

    def valid_until(self, ssn: Session) -> float:
        """Just after the interval since the strategies' last run has passed: they run
        again then. A session in which they ran (or that never asked) stands for no
        later cycle: the next one would not run them."""
        last = ssn.snapshot.carried.get(CARRY_KEY)
        if last is None or last == ssn.now:
            return -math.inf
        return math.nextafter(last + self.settings.interval, math.inf)


# -- lowNodeUtilization -------------------------------------------------------------------


def _percent(name: str, value: float) -> str:
    return f"{name} {value:.0f}%"


def low_node_utilization(
    ssn: Session, strategy: LowNodeUtilization, tasks: Sequence[TaskInfo]
) -> list[tuple[TaskInfo, str, str]]:
    """The pods to move off over-utilized nodes: (task, strategy, rule) in the order
    chosen. Says in a note why nothing was chosen when the nodes give no reason."""
    nodes = ssn.nodes
    n = len(nodes)
    if n == 0:
        return []
    space = ssn.space
    # Every resource either map names (the other map's value 100%), if the cluster has it.
    named = dict.fromkeys([*strategy.thresholds, *strategy.targets])
    dims = [name for name in named if name in space.index]
    cols = [space.index[name] for name in dims]
    low_at = np.array([strategy.thresholds.get(d, 100.0) for d in dims])
    high_at = np.array([strategy.targets.get(d, 100.0) for d in dims])
    alloc = nodes.allocatable[:, cols]
    held = (nodes.used - nodes.releasing + nodes.pipelined)[:, cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(alloc > 0, held * 100.0 / alloc, np.nan)
    # A resource a node does not have is not compared for it (nan compares false).
    under = ~np.any(util >= low_at, axis=1) & ~nodes.labels.unschedulable
    over = ~under & np.any(util > high_at, axis=1)
    note = ssn.decisions.notes.append
    what = f"rescheduling: {strategy.name} chose no pod"
    if not under.any():
        note(f"{what}: no schedulable node is under every threshold ({_levels(dims, low_at)})")
        return []
    if under.all():
        note(f"{what}: every node is under its thresholds ({_levels(dims, low_at)})")
        return []
    if not over.any():
        note(f"{what}: no node is above a target threshold ({_levels(dims, high_at)})")
        return []
    low_rows = np.flatnonzero(under)
    if len(low_rows) <= strategy.number_of_nodes:
        note(
            f"{what}: {len(low_rows)} under-utilized nodes, not more than "
            f"numberOfNodes ({strategy.number_of_nodes})"
        )
        return []
    # Room left on the under-utilized nodes below their targets, per resource.
    room = np.nansum((high_at - util[low_rows]) * alloc[low_rows] / 100.0, axis=0)
    protect = threshold_priority(ssn, strategy)
    by_node: dict[int, list[TaskInfo]] = {}
    for t in tasks:
        if forbidding_rule(t, protect) is None and t.node in nodes.index:
            by_node.setdefault(nodes.index[t.node], []).append(t)
    cpu_mem = [k for k, d in enumerate(dims) if d in (CPU, MEMORY)]
    rows = sorted(np.flatnonzero(over).tolist(), key=lambda i: (-np.nansum(util[i, cpu_mem]), i))
    targets = ", ".join(nodes.names[i] for i in low_rows[:3])
    if len(low_rows) > 3:
        targets += f" and {len(low_rows) - 3} more"
    fit = _FitCheck(ssn, low_rows) if strategy.node_fit else None
    chosen: list[tuple[TaskInfo, str, str]] = []
    for i in rows:
        pods = sorted(by_node.get(i, ()), key=_eviction_order)
        use = util[i].copy()
        above = ", ".join(
            f"{_percent(d, use[k])} > {high_at[k]:g}%"
            for k, d in enumerate(dims)
            if use[k] > high_at[k]
        )
        for t in pods:
            if not (np.any(use >= high_at) and np.all(room > 0)):
                break
            if fit is not None and not fit(t):
                continue
            req = t.resreq[cols]
            room = room - req
            with np.errstate(divide="ignore", invalid="ignore"):
                use = use - np.where(alloc[i] > 0, req * 100.0 / alloc[i], 0.0)
            rule = (
                f"node {nodes.names[i]} is above its target ({above}); under-utilized: "
                f"{targets}; priority {t.priority}{', best-effort' if t.best_effort else ''}, "
                f"lowest first"
            )
            chosen.append((t, strategy.name, rule))
    if not chosen:
        note(
            f"{what}: the over-utilized nodes hold no pod it may evict"
            + (" that an under-utilized node could take" if fit is not None else "")
        )
    return chosen


def _levels(dims: list[str], values: np.ndarray) -> str:
    return ", ".join(f"{d} {v:g}%" for d, v in zip(dims, values, strict=True))


def _eviction_order(t: TaskInfo) -> tuple:
    """Lowest priority first; among equals best-effort pods, then the newest."""
    return (t.priority, not t.best_effort, -t.creation, t.key)


class _FitCheck:
    """``nodeFit``: some under-utilized node could take the pod now."""

    __slots__ = ("idle", "rows", "ssn")

    def __init__(self, ssn: Session, rows: np.ndarray) -> None:
        self.ssn = ssn
        self.rows = rows
        self.idle = ssn.nodes.idle[rows]

    def __call__(self, task: TaskInfo) -> bool:
        blocked, _reasons = predicate_filter(self.ssn, task)
        ok = fits(task.resreq, self.idle)
        if blocked is not None:
            ok &= ~blocked[self.rows]
        return bool(ok.any())


__all__ = [
    "LowNodeUtilization",
    "ReschedulingPlugin",
    "Settings",
    "due",
    "forbidding_rule",
    "low_node_utilization",
    "parse_settings",
]
