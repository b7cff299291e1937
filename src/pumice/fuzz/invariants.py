"""What the decisions of one ``pumice cycle`` must respect, checked in exact arithmetic.

The snapshot is read with pumice's own loader (and its Volcano Jobs expanded as the
command does), but every amount is recomputed from the manifests with Python integers:
cpu and extended resources in millis, memory and storage in bytes, each rounded up as
Kubernetes does. The checks:

- **capacity**: every node that receives a bind ends with its pods' requests (every pod
  bound there that has not ended, plus the new binds) within its allocatable;
- **double bind**: no pod is bound that was already bound, nor both bound and
  pipelined, bound and evicted, or bound to a node the snapshot does not hold;
- **gang**: while the gang plugin's job-ready check is on (and not told to count best-
  effort tasks as Volcano does, ``gang.bestEffortReady: optimistic``, which leaves a
  gang half placed by design), a PodGroup that receives binds ends with at least
  ``minMember`` pods bound, running or done;
- **eviction**: only pods bound to a node (or running) are evicted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from pumice.api.gpus import DEVICE_RESOURCES
from pumice.api.parse import GROUP_ANNOTATION, is_scheduling_resource
from pumice.api.quantity import CPU, PODS, is_bytes, parse_quantity
from pumice.conf.config import SchedulerConfig
from pumice.plugins.gang import BEST_EFFORT_READY

Amounts = dict[str, int]
ENDED = ("Succeeded", "Failed")


def gangs_whole(config: SchedulerConfig) -> bool:
    """Whether ``config`` promises whole gangs: the gang plugin's job-ready check is on,
    and best-effort tasks count only where they can be placed (the default)."""
    return any(
        p.name == "gang"
        and p.enabled("job_ready")
        and p.arguments.raw(BEST_EFFORT_READY) != "optimistic"
        for p in config.instances()
    )


def exact(name: str, value: Any) -> int:
    """An amount in bytes (memory, storage) or millis (everything else), rounded up."""
    q: Decimal = parse_quantity(value)
    return math.ceil(q if is_bytes(name) else q * 1000)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _resources(value: Any) -> Amounts:
    return {
        str(k): exact(str(k), v)
        for k, v in _map(value).items()
        if is_scheduling_resource(str(k)) and str(k) not in DEVICE_RESOURCES
    }


def _add(into: Amounts, other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _container(c: Any) -> Amounts:
    res = _map(_map(c).get("resources"))
    req = _resources(res.get("requests"))
    for k, v in _resources(res.get("limits")).items():
        req.setdefault(k, v)
    return req


def pod_request(pod: Mapping[str, Any]) -> Amounts:
    """What a pod takes on its node: its containers, its sidecars, its overhead, and
    one pod slot (init containers run before and count only in the fit, not here)."""
    spec = _map(pod.get("spec"))
    total: Amounts = {}
    for c in _list(spec.get("containers")):
        _add(total, _container(c))
    for c in _list(spec.get("initContainers")):
        if _map(c).get("restartPolicy") == "Always":
            _add(total, _container(c))
    _add(total, _resources(spec.get("overhead")))
    total[PODS] = 1000
    return total


def node_allocatable(node: Mapping[str, Any]) -> Amounts:
    status = _map(node.get("status"))
    source = status.get("allocatable") if "allocatable" in status else status.get("capacity")
    alloc = _resources(source)
    alloc.setdefault(PODS, 110_000)
    return alloc


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` as pumice reads them: a YAML number as written (``namespace:
    0`` is namespace ``0``), only an absent or empty namespace is ``default``."""
    meta = _map(obj.get("metadata"))
    ns = meta.get("namespace")
    return f"{'default' if ns is None or ns == '' else ns}/{meta.get('name')}"


def check(
    objects: Iterable[Mapping[str, Any]], decisions: Mapping[str, Any], gang_ready: bool
) -> list[str]:
    """The violations of the invariants by ``decisions`` on ``objects`` (empty: none).
    Each is one line starting with the invariant's name."""
    nodes: dict[str, Mapping[str, Any]] = {}
    pods: dict[str, Mapping[str, Any]] = {}
    groups: dict[str, int] = {}
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node":
            nodes.setdefault(str(_map(obj.get("metadata")).get("name")), obj)
        elif kind == "Pod":
            pods.setdefault(_key(obj), obj)
        elif kind == "PodGroup":
            groups.setdefault(_key(obj), _int(_map(obj.get("spec")).get("minMember")))
    binds: Mapping[str, str] = decisions.get("binds") or {}
    pipelined: Mapping[str, str] = decisions.get("pipelined") or {}
    evictions: list[str] = list(decisions.get("evictions") or [])
    out: list[str] = []
    for pod, node in binds.items():
        snap = pods.get(pod)
        if snap is None:
            out.append(f"double bind: {pod} is bound but is not in the snapshot")
        elif _map(snap.get("spec")).get("nodeName"):
            out.append(f"double bind: {pod} is bound to {node} but already was")
        if node not in nodes:
            out.append(f"double bind: {pod} is bound to {node}, which is not a node")
        if pod in pipelined or pod in evictions:
            out.append(f"double bind: {pod} is bound and also pipelined or evicted")
    for pod in evictions:
        snap = pods.get(pod)
        if snap is None or not (
            _map(snap.get("spec")).get("nodeName")
            or _map(snap.get("status")).get("phase") == "Running"
        ):
            out.append(f"eviction: {pod} is evicted but is neither bound nor running")
    out += _capacity(nodes, pods, binds)
    if gang_ready:
        out += _gangs(pods, groups, binds)
    return out


def _capacity(
    nodes: Mapping[str, Mapping[str, Any]],
    pods: Mapping[str, Mapping[str, Any]],
    binds: Mapping[str, str],
) -> list[str]:
    touched = {n for n in binds.values() if n in nodes}
    used: dict[str, Amounts] = {n: {} for n in touched}
    for pod in pods.values():
        node = _map(pod.get("spec")).get("nodeName")
        if node in used and _map(pod.get("status")).get("phase") not in ENDED:
            _add(used[node], pod_request(pod))
    for key, node in binds.items():
        if node in used and key in pods:
            _add(used[node], pod_request(pods[key]))
    out = []
    for node in sorted(touched):
        alloc = node_allocatable(nodes[node])
        for name, amount in sorted(used[node].items()):
            if amount > alloc.get(name, 0):
                unit = "bytes" if is_bytes(name) else ("millicores" if name == CPU else "millis")
                out.append(
                    f"capacity: node {node} ends with {name} {amount} of {alloc.get(name, 0)}"
                    f" {unit} requested"
                )
    return out


def _gangs(
    pods: Mapping[str, Mapping[str, Any]], groups: Mapping[str, int], binds: Mapping[str, str]
) -> list[str]:
    ready: dict[str, int] = {}
    bound: dict[str, int] = {}
    for key, pod in pods.items():
        group = _map(_map(pod.get("metadata")).get("annotations")).get(GROUP_ANNOTATION)
        if not group:
            continue
        g = f"{key.split('/', 1)[0]}/{group}"
        phase = _map(pod.get("status")).get("phase")
        if key in binds:
            bound[g] = bound.get(g, 0) + 1
            ready[g] = ready.get(g, 0) + 1
        elif phase in ("Running", "Succeeded") or _map(pod.get("spec")).get("nodeName"):
            ready[g] = ready.get(g, 0) + 1
    return [
        f"gang: {g} gets {bound[g]} binds but ends with {ready.get(g, 0)} of its "
        f"minMember {groups[g]} ready"
        for g in sorted(bound)
        if g in groups and ready.get(g, 0) < groups[g]
    ]
