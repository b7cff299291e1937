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
whatever their state (terminating ones too, as in kube-scheduler). Volcano treats these
refusals as not resolvable by preemption, so preempt does not evict to satisfy them.
"""

from __future__ import annotations

import numpy as np

from pumice.api.node import NodeTable
from pumice.api.task import PodTerm, TaskInfo

Reasons = list[tuple[str, np.ndarray]]


def _domains(nodes: NodeTable, key: str) -> tuple[np.ndarray, np.ndarray]:
    return nodes.labels.column(key)


def _pods(nodes: NodeTable):
    for i, tasks in enumerate(nodes.tasks):
        for t in tasks.values():
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


def _matching_nodes(nodes: NodeTable, term: PodTerm, owner: TaskInfo) -> set[int]:
    return {
        i
        for i, t in _pods(nodes)
        if t is not owner and term.matches(owner.namespace, t.namespace, t.labels)
    }


def affinity_reasons(nodes: NodeTable, task: TaskInfo, holders_exist: bool) -> Reasons:
    """The refusals for ``task``; ``holders_exist`` says whether any pod of the session
    carries anti-affinity terms (else the symmetric check is skipped)."""
    reasons: Reasons = []
    pa = task.pod_affinity
    if pa is not None:
        for term in pa.anti:
            mask = _domain_mask(nodes, term.topology_key, _matching_nodes(nodes, term, task))
            if mask.any():
                reasons.append(("didn't match pod anti-affinity rules", mask))
        for term in pa.affinity:
            _values, present = _domains(nodes, term.topology_key)
            found = _matching_nodes(nodes, term, task)
            if found:
                ok = _domain_mask(nodes, term.topology_key, found)
            elif term.matches(task.namespace, task.namespace, task.labels):
                ok = present.copy()
            else:
                ok = np.zeros(len(nodes), dtype=bool)
            if not ok.all():
                reasons.append(("didn't match pod affinity rules", ~ok))
    if holders_exist:
        blocked = np.zeros(len(nodes), dtype=bool)
        for i, t in _pods(nodes):
            if t is task or t.pod_affinity is None:
                continue
            for term in t.pod_affinity.anti:
                if term.matches(t.namespace, task.namespace, task.labels):
                    blocked |= _domain_mask(nodes, term.topology_key, {i})
        if blocked.any():
            reasons.append(("didn't satisfy existing pods' anti-affinity rules", blocked))
    return reasons
