"""Required inter-pod affinity and anti-affinity over all nodes (kube-scheduler's
InterPodAffinity filter, required terms only).

A node is refused for a pod when:

* the pod's anti-affinity term matches a pod already in the node's topology domain
  (the nodes sharing the value of the term's ``topologyKey`` label);
* a pod already placed has an anti-affinity term that matches the incoming pod, in
  that pod's domain;
* the pod's affinity term matches no pod in the node's domain (unless no pod matches
  anywhere and the pod matches its own term: the first pod of a group may go anywhere
  the label exists).

Nodes without the topology label are outside every domain. Pods on a node count
whatever their state (terminating ones too, as in kube-scheduler), except those a
caller names as ``gone``: preempt asks what a node would refuse once its victims are
evicted.

What eviction can resolve follows kube-scheduler's status codes: the two anti-affinity
refusals are *Unschedulable* (evicting the pods they are about clears them, so preempt
may try the node: :data:`RESOLVABLE`), an affinity refusal is *UnschedulableAndUnresolvable*
(evicting pods never brings a matching pod), so preempt and reclaim pass such a node over.
"""

from __future__ import annotations

from collections.abc import Container, Iterator

import numpy as np

from pumice.api.node import NodeTable
from pumice.api.task import PodTerm, TaskInfo

Reasons = list[tuple[str, np.ndarray]]

ANTI_AFFINITY = "didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "didn't satisfy existing pods' anti-affinity rules"
AFFINITY = "didn't match pod affinity rules"
#: The refusals that evicting pods of the node's domain can clear.
RESOLVABLE = frozenset({ANTI_AFFINITY, EXISTING_ANTI_AFFINITY})

_NONE: frozenset[str] = frozenset()


def _domains(nodes: NodeTable, key: str) -> tuple[np.ndarray, np.ndarray]:
    return nodes.labels.column(key)


def _pods(nodes: NodeTable, gone: Container[str]) -> Iterator[tuple[int, TaskInfo]]:
    if not gone:  # (the common case: no key to make per pod)
        for i, tasks in enumerate(nodes.tasks):
            for t in tasks.values():
                yield i, t
        return
    for i, tasks in enumerate(nodes.tasks):
        for t in tasks.values():
            if t.key not in gone:
                yield i, t


def _domain_mask(nodes: NodeTable, key: str, holders: set[int]) -> np.ndarray:
    """Nodes in the same ``key`` domain as any node of ``holders``."""
    values, present = _domains(nodes, key)
    out = np.zeros(len(nodes), dtype=bool)
    if not holders:
        return out
    hv = {values[i] for i in holders if present[i]}
    if not hv:
        return out
    return present & np.isin(values, list(hv))


def _matching_nodes(
    nodes: NodeTable, term: PodTerm, owner: TaskInfo, gone: Container[str]
) -> set[int]:
    return {
        i
        for i, t in _pods(nodes, gone)
        if t is not owner and term.matches(owner.namespace, t.namespace, t.labels)
    }


def affinity_reasons(
    nodes: NodeTable, task: TaskInfo, holders_exist: bool, gone: Container[str] = _NONE
) -> Reasons:
    """The refusals for ``task``; ``holders_exist`` says whether any pod of the session
    carries anti-affinity terms (else the symmetric check is skipped). Tasks whose key
    is in ``gone`` are left out, as if they had left their node."""
    reasons: Reasons = []
    pa = task.pod_affinity
    if pa is not None:
        for term in pa.anti:
            found = _matching_nodes(nodes, term, task, gone)
            mask = _domain_mask(nodes, term.topology_key, found)
            if mask.any():
                reasons.append((ANTI_AFFINITY, mask))
        for term in pa.affinity:
            _values, present = _domains(nodes, term.topology_key)
            found = _matching_nodes(nodes, term, task, gone)
            if found:
                ok = _domain_mask(nodes, term.topology_key, found)
            elif term.matches(task.namespace, task.namespace, task.labels):
                ok = present.copy()
            else:
                ok = np.zeros(len(nodes), dtype=bool)
            if not ok.all():
                reasons.append((AFFINITY, ~ok))
    if holders_exist:
        blocked = np.zeros(len(nodes), dtype=bool)
        for i, t in _pods(nodes, gone):
            if t is task or t.pod_affinity is None:
                continue
            for term in t.pod_affinity.anti:
                if term.matches(t.namespace, task.namespace, task.labels):
                    blocked |= _domain_mask(nodes, term.topology_key, {i})
        if blocked.any():
            reasons.append((EXISTING_ANTI_AFFINITY, blocked))
    return reasons


def resolvable_on_node(
    nodes: NodeTable, task: TaskInfo, i: int, holders_exist: bool, gone: Container[str]
) -> list[str]:
    """The anti-affinity refusals (:data:`RESOLVABLE`) ``task`` still meets on node ``i``
    once the tasks of ``gone`` have left: what preempt asks after evicting victims. The
    same answers as :func:`affinity_reasons` gives for node ``i``, looking only at the
    pods of ``i``'s domains (and at the pods that hold anti-affinity terms)."""
    out: list[str] = []
    pa = task.pod_affinity
    if pa is not None:
        for term in pa.anti:
            domain = _domain_of(nodes, term.topology_key, i)
            if any(
                t is not task
                and term.matches(task.namespace, t.namespace, t.labels)
                and t.key not in gone
                for j in domain
                for t in nodes.tasks[j].values()
            ):
                out.append(ANTI_AFFINITY)
                break
    if holders_exist:
        for j, tasks in enumerate(nodes.tasks):
            for t in tasks.values():
                if t.pod_affinity is None or t is task or not t.pod_affinity.anti:
                    continue
                for term in t.pod_affinity.anti:
                    if (
                        term.matches(t.namespace, task.namespace, task.labels)
                        and _same_domain(nodes, term.topology_key, i, j)
                        and t.key not in gone
                    ):
                        out.append(EXISTING_ANTI_AFFINITY)
                        return out
    return out


def _domain_of(nodes: NodeTable, key: str, i: int) -> list[int]:
    """The nodes of node ``i``'s ``key`` domain (none when ``i`` lacks the label)."""
    values, present = _domains(nodes, key)
    if not present[i]:
        return []
    return np.flatnonzero(present & (values == values[i])).tolist()


def _same_domain(nodes: NodeTable, key: str, i: int, j: int) -> bool:
    values, present = _domains(nodes, key)
    return bool(present[i] and present[j] and values[i] == values[j])
