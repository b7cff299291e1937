"""Pod topology spread constraints (``spec.topologySpreadConstraints``).

A constraint asks that the pods its label selector matches (in the pod's namespace) be
spread over the domains of a node label (``topologyKey``): hard ones
(``whenUnsatisfiable: DoNotSchedule``) filter nodes, soft ones (``ScheduleAnyway``) are
scored by nodeorder, as Kubernetes' PodTopologySpread plugin does inside Volcano's
predicates and nodeorder plugins. The fields Volcano 1.7 (Kubernetes 1.25) leaves to
feature gates that are off by default (``minDomains``: MinDomainsInPodTopologySpread,
beta but off; ``matchLabelKeys``; ``nodeAffinityPolicy`` and ``nodeTaintsPolicy``:
NodeInclusionPolicyInPodTopologySpread, alpha) are checked for shape and otherwise not
read: node affinity is always honoured, taints always ignored, the global minimum is
the least count over the domains that exist.

:class:`SpreadCounts` is what both halves count with: the domains of a topology key and
the matching pods per node, kept current with the node table's change log.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from pumice.api.pdb import LabelSelector, parse_label_selector
from pumice.api.task import TaskStatus
from pumice.errors import InputError, shown

if TYPE_CHECKING:
    from pumice.api.node import NodeTable
    from pumice.api.task import Placement, TaskInfo

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
_POLICIES = ("Honor", "Ignore")


@dataclass(slots=True, frozen=True)
class SpreadConstraint:
    """One topology spread constraint; ``selector`` None matches no pod (Kubernetes'
    ``LabelSelectorAsSelector(nil)``), an empty one every pod."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None

    @property
    def soft(self) -> bool:
        return self.when_unsatisfiable == SCHEDULE_ANYWAY


def _positive_int(value: Any, path: str, *, required: bool) -> int | None:
    if value is None:
        if required:
            raise InputError("is required", field=path)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {shown(value)}", field=path)
    if value < 1:
        raise InputError(f"must be greater than zero, got {value}", field=path)
    return value


def parse_spread(spec: Mapping[str, Any]) -> tuple[SpreadConstraint, ...]:
    """The pod's ``spec.topologySpreadConstraints``, checked as the API server checks
    them (a positive ``maxSkew``, a ``topologyKey``, a known ``whenUnsatisfiable``, one
    constraint per key and action)."""
    path = "spec.topologySpreadConstraints"
    items = spec.get("topologySpreadConstraints")
    if items is None:
        return ()
    if not isinstance(items, list):
        raise InputError(f"expected a list, got {type(items).__name__}", field=path)
    out: list[SpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise InputError(f"expected a mapping, got {type(item).__name__}", field=p)
        skew = _positive_int(item.get("maxSkew"), f"{p}.maxSkew", required=True)
        key = item.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise InputError("is required (a node label key)", field=f"{p}.topologyKey")
        action = item.get("whenUnsatisfiable")
        if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise InputError(
                f"must be {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}, got {shown(action)}",
                field=f"{p}.whenUnsatisfiable",
            )
        if (key, action) in seen:
            raise InputError(
                f"duplicate constraint for topologyKey {shown(key)} and {action}",
                field=f"{p}.topologyKey",
            )
        seen.add((key, action))
        domains = _positive_int(item.get("minDomains"), f"{p}.minDomains", required=False)
        if domains is not None and action != DO_NOT_SCHEDULE:
            raise InputError(
                f"can only be set with whenUnsatisfiable {DO_NOT_SCHEDULE}",
                field=f"{p}.minDomains",
            )
        for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = item.get(name)
            if policy is not None and policy not in _POLICIES:
                raise InputError(
                    f"must be Honor or Ignore, got {shown(policy)}", field=f"{p}.{name}"
                )
        keys = item.get("matchLabelKeys")
        if keys is not None and not (
            isinstance(keys, list) and all(isinstance(k, str) for k in keys)
        ):
            raise InputError("expected a list of label keys", field=f"{p}.matchLabelKeys")
        selector = parse_label_selector(item.get("labelSelector"), f"{p}.labelSelector")
        assert skew is not None
        out.append(SpreadConstraint(skew, key, str(action), selector))
    return tuple(out)


@lru_cache(maxsize=1024)
def hard(constraints: tuple[SpreadConstraint, ...]) -> tuple[SpreadConstraint, ...]:
    """The ``DoNotSchedule`` constraints of a pod (the predicates' half), in pod order.
    Constraint tuples are frozen and shared by the replicas of a gang: memoized."""
    return tuple(c for c in constraints if not c.soft)


def hard_key(task: TaskInfo) -> Hashable | None:
    """What the predicates' answer for ``task`` takes from its hard constraints, besides
    its placement and the pods on the nodes: the namespace counted in, the constraints,
    and whether the task matches each one's selector itself (Kubernetes' self-match).
    None when the task has no hard constraint. Two tasks with equal keys, equal
    placements and the same nodes get the same answer."""
    if not task.spread:
        return None
    cs = hard(task.spread)
    if not cs:
        return None
    labels = task.labels
    own = tuple(c.selector is not None and c.selector.matches(labels) for c in cs)
    return (task.namespace, cs, own)


class SpreadCounts:
    """Topology domains and matching pods over the nodes of one session.

    ``domains(key)`` numbers the values of a node label (-1 for a node without it);
    ``pods(namespace, selector)`` counts, per node, the pods the selector matches in
    the namespace, leaving terminating ones out (Kubernetes' ``countPodsMatchSelector``;
    every other pod on the node counts, pipelined ones and those placed earlier in the
    cycle too, as Volcano's event handlers add them to the plugins' node view). Counts
    are refreshed from the node table's change log, a placement costing a recount of
    its node only; ``eligible(placement)`` is the nodes a pod's nodeSelector and
    required node affinity allow (the nodes spreading is counted over, Kubernetes'
    ``nodeAffinityPolicy: Honor``)."""

    __slots__ = ("_codes", "_counts", "_eligible", "nodes")

    def __init__(self, nodes: NodeTable) -> None:
        self.nodes = nodes
        self._codes: dict[str, tuple[np.ndarray, int]] = {}
        #: (namespace, selector) -> [matching pods per node, position in nodes.changes]
        self._counts: dict[tuple, list] = {}
        self._eligible: dict[Placement, np.ndarray] = {}

    def domains(self, key: str) -> tuple[np.ndarray, int]:
        """(value code per node, -1 without the label; number of values)."""
        got = self._codes.get(key)
        if got is None:
            values, present = self.nodes.labels.column(key)
            codes = np.full(len(values), -1, dtype=np.intp)
            k = 0
            if present.any():
                uniq, inverse = np.unique(values[present].astype(str), return_inverse=True)
                codes[present] = inverse
                k = len(uniq)
            got = self._codes[key] = (codes, k)
        return got

    def eligible(self, placement: Placement) -> np.ndarray:
        got = self._eligible.get(placement)
        if got is None:
            index = self.nodes.labels
            got = np.ones(index.n, dtype=bool)
            if placement.node_selector:
                got &= index.selector(placement.node_selector)
            if placement.required_terms is not None:
                terms = np.zeros(index.n, dtype=bool)
                for term in placement.required_terms:
                    terms |= index.term(term)
                got &= terms
            self._eligible[placement] = got
        return got

    def pods(self, namespace: str, selector: LabelSelector | None) -> np.ndarray:
        """Per node, the pods ``selector`` matches in ``namespace`` (read-only)."""
        nodes = self.nodes
        key = (namespace, selector)
        entry = self._counts.get(key)
        changes = nodes.changes
        if entry is not None and entry[1] == len(changes):
            return entry[0]
        if entry is None or len(changes) - entry[1] > len(nodes) // 4:
            rows: Any = range(len(nodes))
            counts = np.zeros(len(nodes), dtype=np.int64)
        else:
            rows, counts = set(changes[entry[1] :]), entry[0]
        if selector is not None:
            releasing = TaskStatus.RELEASING
            for i in rows:
                k = 0
                for t in nodes.tasks[i].values():
                    if (
                        t.namespace == namespace
                        and t.status != releasing
                        and selector.matches(t.labels)
                    ):
                        k += 1
                counts[i] = k
        self._counts[key] = [counts, len(changes)]
        return counts


__all__ = [
    "DO_NOT_SCHEDULE",
    "SCHEDULE_ANYWAY",
    "SpreadConstraint",
    "SpreadCounts",
    "hard",
    "hard_key",
    "parse_spread",
]
