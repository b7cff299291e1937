"""What must hold after any fault, read back from the API server.

Each check returns the violations it found, one line each, under its name:

- ``fitting gangs bound`` (counted by :mod:`pumice.faults.scenarios`, which knows the
  workload): every gang that fits the cluster ended bound, whatever struck.

- ``gangs whole``: every PodGroup has either no pod bound or at least ``minMember``.
- ``bound once``: no pod was bound twice (the bind proxies' records show at most one
  bind the server accepted per pod), and every bound pod sits on the node of the bind
  that was accepted, or, when none was, of a bind sent whose answer never came (nothing
  moved it, nothing bound it that no proxy saw).
- ``nodes within capacity``: the requests of the pods bound to a node fit its
  allocatable cpu and memory.
- ``podgroup phases``: a PodGroup with ``minMember`` pods bound is ``Running``; one with
  none bound is not.
- ``queue status``: each Queue's ``status.allocated`` cpu and memory equal the requests
  of the pods bound in its PodGroups, and its ``pending``/``inqueue``/``running`` counts
  equal its PodGroups in those phases.

The last two are statuses pumice writes some time after the binds (queue status every
few seconds): :func:`check_cluster` is called until they hold or a deadline passes.
``leader writes only`` is the leader-partition scenario's own check
(:mod:`pumice.faults.scenarios`): named here so the report counts it with the others.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pumice.api.quantity import format_amount, to_canonical
from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.faults.proxy import BindRecord

GROUP = "scheduling.k8s.io/group-name"
CHECKS = (
    "fitting gangs bound",
    "gangs whole",
    "bound once",
    "nodes within capacity",
    "podgroup phases",
    "queue status",
    "leader writes only",
)
#: The queue status counts pumice writes, by PodGroup phase.
PHASE_FIELDS = {"Pending": "pending", "Inqueue": "inqueue", "Running": "running"}
_DIMS = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class Violation:
    check: str
    message: str


def _items(client: KubeClient, kind: str) -> list[dict[str, Any]]:
    status, body = client.request("GET", RESOURCES[kind].path())
    if status != 200:
        raise RuntimeError(f"listing {kind}: HTTP {status}")
    return list(body.get("items") or ())


def _requests(pod: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for c in (pod.get("spec") or {}).get("containers") or ():
        for name, value in ((c.get("resources") or {}).get("requests") or {}).items():
            if name in _DIMS:
                out[name] += to_canonical(name, value)
    return out


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def check_cluster(client: KubeClient, binds: Iterable[BindRecord]) -> list[Violation]:
    """Every violation of the module's checks in the cluster as it is now."""
    pods = [p for p in _items(client, "Pod") if not p["metadata"].get("deletionTimestamp")]
    groups = _items(client, "PodGroup")
    queues = _items(client, "Queue")
    nodes = {n["metadata"]["name"]: n for n in _items(client, "Node")}
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    out: list[Violation] = []
    out += _gangs(groups, bound)
    out += _bound_once(bound, binds)
    out += _capacity(nodes, bound)
    out += _phases(groups, bound)
    out += _queues(queues, groups, bound)
    return out


def _bound_in(groups: list[dict[str, Any]], bound: list[dict[str, Any]]) -> Counter[str]:
    per: Counter[str] = Counter()
    for p in bound:
        group = (p["metadata"].get("annotations") or {}).get(GROUP)
        if group:
            per[f"{p['metadata'].get('namespace', '')}/{group}"] += 1
    return per


def _gangs(groups: list[dict[str, Any]], bound: list[dict[str, Any]]) -> list[Violation]:
    per = _bound_in(groups, bound)
    out = []
    for g in groups:
        need = int((g.get("spec") or {}).get("minMember") or 0)
        n = per[_key(g)]
        if 0 < n < need:
            out.append(Violation("gangs whole", f"{_key(g)}: {n} of minMember {need} bound"))
    return out


def _bound_once(bound: list[dict[str, Any]], binds: Iterable[BindRecord]) -> list[Violation]:
    accepted: dict[str, list[str]] = defaultdict(list)
    maybe: dict[str, list[str]] = defaultdict(list)  # sent, no answer: may have landed
    for b in binds:
        if b.status in (200, 201):
            accepted[b.pod].append(b.node)
        elif b.status == 0:
            maybe[b.pod].append(b.node)
    out = []
    for pod, nodes in sorted(accepted.items()):
        if len(nodes) > 1:
            out.append(Violation("bound once", f"{pod}: bound {len(nodes)} times ({nodes})"))
    for p in bound:
        key, node = _key(p), p["spec"]["nodeName"]
        if key in accepted:
            if node not in accepted[key]:
                out.append(Violation("bound once", f"{key}: on {node}, bound to {accepted[key]}"))
        elif node not in maybe.get(key, ()):
            out.append(Violation("bound once", f"{key}: on {node} with no bind seen"))
    return out


def _capacity(nodes: dict[str, dict[str, Any]], bound: list[dict[str, Any]]) -> list[Violation]:
    used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for p in bound:
        for name, v in _requests(p).items():
            used[p["spec"]["nodeName"]][name] += v
    out = []
    for node, amounts in sorted(used.items()):
        alloc = ((nodes.get(node) or {}).get("status") or {}).get("allocatable") or {}
        for name, v in amounts.items():
            have = to_canonical(name, alloc.get(name, "0"))
            if v > have + 1e-9:
                out.append(
                    Violation(
                        "nodes within capacity",
                        f"{node}: {name} {format_amount(name, v)} > {format_amount(name, have)}",
                    )
                )
    return out


def _phases(groups: list[dict[str, Any]], bound: list[dict[str, Any]]) -> list[Violation]:
    per = _bound_in(groups, bound)
    out = []
    for g in groups:
        need = int((g.get("spec") or {}).get("minMember") or 0)
        phase = (g.get("status") or {}).get("phase") or "(none)"
        n = per[_key(g)]
        if n >= need > 0 and phase != "Running":
            out.append(Violation("podgroup phases", f"{_key(g)}: {n} bound, phase {phase}"))
        if n == 0 and phase == "Running":
            out.append(Violation("podgroup phases", f"{_key(g)}: none bound, phase Running"))
    return out


def _queues(
    queues: list[dict[str, Any]], groups: list[dict[str, Any]], bound: list[dict[str, Any]]
) -> list[Violation]:
    queue_of = {_key(g): (g.get("spec") or {}).get("queue") or "default" for g in groups}
    held: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for p in bound:
        group = (p["metadata"].get("annotations") or {}).get(GROUP)
        q = queue_of.get(f"{p['metadata'].get('namespace', '')}/{group}", "default")
        for name, v in _requests(p).items():
            held[q][name] += v
    phases: dict[str, Counter[str]] = defaultdict(Counter)
    for g in groups:
        phases[queue_of[_key(g)]][(g.get("status") or {}).get("phase") or ""] += 1
    out = []
    for q in queues:
        name = q["metadata"]["name"]
        status = q.get("status") or {}
        allocated = status.get("allocated") or {}
        for dim in _DIMS:
            want = held[name].get(dim, 0.0)
            got = to_canonical(dim, allocated.get(dim, "0"))
            if abs(want - got) > 1e-6 * max(1.0, want):
                out.append(
                    Violation(
                        "queue status",
                        f"{name}: allocated {dim} {format_amount(dim, got)}, "
                        f"bound pods {format_amount(dim, want)}",
                    )
                )
        for phase, fld in PHASE_FIELDS.items():
            want_n, got_n = phases[name][phase], int(status.get(fld) or 0)
            if want_n != got_n:
                out.append(
                    Violation("queue status", f"{name}: {fld} {got_n}, podgroups {phase} {want_n}")
                )
    return out


__all__ = ["CHECKS", "Violation", "check_cluster"]
