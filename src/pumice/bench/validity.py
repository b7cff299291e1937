"""Whether a cycle's decisions are valid on the cluster they were made for.

The check is independent of the scheduler's own accounting: it re-reads the objects and
adds up, per node, the requests of the pods already there and of the pods bound this
cycle (no node may go over its allocatable), and per PodGroup, the pods running plus
bound (a group that got any bind must reach its minMember); what pods attach is checked
likewise (:mod:`pumice.bench.checks`: GPU cards, NUMA nodes, DRA devices). Every
benchmark that runs cycles (snapshot scenarios, simulator windows) checks with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pumice.api import parse
from pumice.api.node import NodeSpec
from pumice.bench.checks import card_problems, device_problems, numa_problems
from pumice.framework.decisions import Decisions

#: Tolerance for summed float requests (canonical units: millicores, bytes).
EPSILON = 1e-6


#: The kinds the checks of what pods attach read (:mod:`pumice.bench.checks`).
ATTACHED_KINDS = ("Numatopology", "ResourceSlice", "ResourceClaim")


def check_decisions(objects: Iterable[Mapping[str, Any]], decisions: Decisions) -> list[str]:
    """Problems with ``decisions`` on the cluster ``objects``: nodes over capacity after
    the binds, PodGroups bound below their minMember, a PV chosen for two claims or for
    a pod on a node it does not reach (by its ``kubernetes.io/hostname``), and what
    pods attach (shared GPU cards over their memory, NUMA nodes short of a pod's CPUs,
    devices given twice: :mod:`pumice.bench.checks`). Empty when valid."""
    alloc: dict[str, dict[str, float]] = {}
    specs: dict[str, NodeSpec] = {}
    pods: dict[str, parse.PodRecord] = {}
    min_member: dict[str, int] = {}
    hostnames: dict[str, str] = {}
    pv_hosts: dict[str, set[str] | None] = {}
    attached: dict[str, list[Mapping[str, Any]]] = {k: [] for k in ATTACHED_KINDS}
    for obj in objects:
        kind = obj.get("kind")
        if kind == "PersistentVolume":
            pv_hosts[obj["metadata"]["name"]] = _hostnames(obj)
        elif kind in attached:
            attached[kind].append(obj)
        elif kind == "Node":
            spec = parse.parse_node(obj)
            specs[spec.name] = spec
            alloc[spec.name] = spec.allocatable
            labels = (obj.get("metadata") or {}).get("labels") or {}
            hostnames[spec.name] = labels.get("kubernetes.io/hostname", spec.name)
        elif kind == "Pod":
            p = parse.parse_pod(obj)
            pods[f"{p.namespace}/{p.name}"] = p
        elif kind == "PodGroup":
            group = parse.parse_podgroup(obj)
            min_member[f"{group.namespace}/{group.name}"] = group.min_member
    problems: list[str] = []
    used: dict[str, dict[str, float]] = {n: {} for n in alloc}
    ready: dict[str, int] = {}
    bound: dict[str, int] = {}

    def take(node_name: str, req: Mapping[str, float]) -> None:
        u = used.setdefault(node_name, {})
        for r, v in req.items():
            u[r] = u.get(r, 0.0) + v

    for p in pods.values():
        if p.node_name and p.phase in ("Running", "Pending"):
            take(p.node_name, p.resreq)
            if p.group:
                g = f"{p.namespace}/{p.group}"
                ready[g] = ready.get(g, 0) + 1
    for key, node_name in decisions.binds.items():
        got = pods.get(key)
        if got is None:
            problems.append(f"bound pod {key} does not exist")
            continue
        if got.node_name:
            problems.append(f"pod {key} was already on node {got.node_name}")
        if node_name not in alloc:
            problems.append(f"pod {key} bound to unknown node {node_name}")
            continue
        take(node_name, got.resreq)
        if got.group:
            g = f"{got.namespace}/{got.group}"
            bound[g] = bound.get(g, 0) + 1
    for node_name, u in sorted(used.items()):
        cap = alloc.get(node_name)
        if cap is None:
            continue
        for r, v in sorted(u.items()):
            if v > cap.get(r, 0.0) + EPSILON:
                problems.append(f"node {node_name} over capacity in {r}: {v:g} > {cap.get(r, 0):g}")
    for g, n in sorted(bound.items()):
        need = min_member.get(g, 1)
        have = n + ready.get(g, 0)
        if have < need:
            problems.append(f"podgroup {g} bound {n} pods, {have} placed < minMember {need}")
    given: dict[str, str] = {}
    for pod_key, pre in sorted(decisions.prebind.items()):
        bound_to = decisions.binds.get(pod_key)
        for claim, pv in sorted(pre.volumes.items()):
            other = given.setdefault(pv, claim)
            if other != claim:
                problems.append(f"PV {pv} given to claims {other} and {claim}")
            hosts = pv_hosts.get(pv)
            host = hostnames.get(bound_to or "")
            if bound_to is not None and hosts is not None and host not in hosts:
                problems.append(f"pod {pod_key} on {bound_to}, its claim's PV {pv} elsewhere")
    problems += card_problems(specs, pods, decisions)
    problems += numa_problems(attached["Numatopology"], pods, decisions)
    problems += device_problems(
        attached["ResourceSlice"], attached["ResourceClaim"], pods, decisions
    )
    return problems


def _hostnames(pv: Mapping[str, Any]) -> set[str] | None:
    """The hostnames a PV's node affinity names (None: it names none, or more than
    hostnames, and is not checked here)."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    out: set[str] = set()
    for term in required.get("nodeSelectorTerms") or ():
        exprs: Sequence[Mapping[str, Any]] = term.get("matchExpressions") or ()
        if term.get("matchFields") or len(exprs) != 1:
            return None
        e = exprs[0]
        if e.get("key") != "kubernetes.io/hostname" or e.get("operator") != "In":
            return None
        out.update(e.get("values") or ())
    return out or None


__all__ = ["check_decisions"]
