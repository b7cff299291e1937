"""predicates: which nodes a pod may run on at all, apart from free resources.

Checks, in kube-scheduler's order: node ready, unschedulable (cordoned) nodes, taints
with NoSchedule/NoExecute effect the pod does not tolerate, nodeSelector and required
node affinity, host ports already in use, required inter-pod affinity and anti-affinity
(:mod:`pumice.plugins.pod_affinity`), hard pod topology spread constraints
(:func:`spread_reasons`). The result for a pod's *placement* (selector, affinity,
tolerations) is computed once per session for all nodes and shared by every task with
the same placement: the replicas of a gang cost one evaluation. Host ports, inter-pod
affinity and hard spread constraints depend on the pods already placed, this cycle's
included, and are asked afresh each time.

Hook contract (``predicate``): ``fn(task) -> (blocked, reasons)`` where ``blocked`` is a
boolean mask of the nodes refused (or None when none are) and ``reasons`` lists
``(reason, mask)`` pairs, in order, explaining the refusals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pumice.api.node import NodeTable
from pumice.api.selectors import NodeIndex
from pumice.api.spread import SpreadConstraint, SpreadCounts, hard
from pumice.api.task import Placement, TaskInfo, Toleration
from pumice.conf.arguments import Arguments
from pumice.errors import InputError
from pumice.framework.session import EventHandler, Session
from pumice.framework.verdicts import timeless
from pumice.plugins.devices import DeviceChecks
from pumice.plugins.pod_affinity import RESOLVABLE, affinity_reasons, resolvable_on_node
from pumice.plugins.volumes import VolumeChecks

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
#: Kubernetes' PodTopologySpread refusals (``ErrReasonConstraintsNotMatch`` and
#: ``ErrReasonNodeLabelNotMatch``, without the "node(s)" the count stands for).
SPREAD = "didn't match pod topology spread constraints"
SPREAD_LABEL = f"{SPREAD} (missing required label)"

Reasons = list[tuple[str, np.ndarray]]


def _tolerates_unschedulable(tolerations: tuple[Toleration, ...]) -> bool:
    from pumice.api.task import Taint

    taint = Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule")
    return any(t.tolerates(taint) for t in tolerations)


def placement_filter(index: NodeIndex, placement: Placement) -> Reasons:
    """The static refusals for ``placement`` over all nodes of ``index``."""
    reasons: Reasons = []
    if index.not_ready.any():
        reasons.append(("were not ready", index.not_ready))
    if index.unschedulable.any() and not _tolerates_unschedulable(placement.tolerations):
        reasons.append(("were unschedulable (cordoned)", index.unschedulable))
    for taint, nodes in index.untolerated(placement.tolerations):
        mask = np.zeros(index.n, dtype=bool)
        mask[nodes] = True
        reasons.append((f"had untolerated taint {taint}", mask))
    match = index.selector(placement.node_selector) if placement.node_selector else None
    if placement.required_terms is not None:
        terms = np.zeros(index.n, dtype=bool)
        for term in placement.required_terms:
            terms |= index.term(term)
        match = terms if match is None else match & terms
    if match is not None and not match.all():
        reasons.append(("didn't match the pod's node selector/affinity", ~match))
    return reasons


def spread_reasons(
    counts: SpreadCounts, task: TaskInfo, constraints: tuple[SpreadConstraint, ...]
) -> Reasons:
    """The nodes ``task``'s hard topology spread ``constraints`` refuse, as Kubernetes'
    PodTopologySpread PreFilter and Filter decide (1.25, the gates of Volcano 1.7).

    Spreading is counted over the nodes that match the pod's nodeSelector and required
    node affinity and carry every constraint's topology key. Per constraint, a domain
    (a value of the key among those nodes) counts the pods its selector matches in the
    pod's namespace, and the global minimum is the least of those counts (a domain
    without pods counts 0; ``minDomains`` is left to its gate, off). A node passes when
    ``count(its domain) + 1 if the pod matches the selector itself - minimum <=
    maxSkew``. Constraints are asked in order and a node is refused by the first that
    fails it: one without the constraint's key is refused for the missing label (which
    evicting pods cannot cure), one over the skew for the constraints. A constraint
    whose nodes count no domain at all refuses nothing but the missing labels
    (Kubernetes' minimum is then MaxInt32)."""
    n = len(counts.nodes)
    eligible = counts.eligible(task.placement).copy()
    for c in constraints:
        eligible &= counts.domains(c.topology_key)[0] >= 0
    decided = np.zeros(n, dtype=bool)
    missing = np.zeros(n, dtype=bool)
    skewed = np.zeros(n, dtype=bool)
    for c in constraints:
        codes, k = counts.domains(c.topology_key)
        has = codes >= 0
        lacking = ~has & ~decided
        missing |= lacking
        decided |= lacking
        if c.selector is None:
            continue  # (matches no pod, the pod itself neither: every skew is 0)
        inside = codes[eligible]
        if inside.size == 0:
            continue
        pods = counts.pods(task.namespace, c.selector)
        per_domain = np.bincount(inside, weights=pods[eligible], minlength=k)
        seen = np.zeros(k, dtype=bool)
        seen[inside] = True
        low = per_domain[seen].min()
        own = 1.0 if c.selector.matches(task.labels) else 0.0
        over = has & ~decided & (per_domain[np.maximum(codes, 0)] + own - low > c.max_skew)
        skewed |= over
        decided |= over
    reasons: Reasons = []
    if skewed.any():
        reasons.append((SPREAD, skewed))
    if missing.any():
        reasons.append((SPREAD_LABEL, missing))
    return reasons


def _combine(reasons: Reasons) -> np.ndarray | None:
    if not reasons:
        return None
    blocked = reasons[0][1].copy()
    for _, m in reasons[1:]:
        blocked |= m
    return blocked


#: Volcano's enable flags of the volume checks (all on by default), and the bind wait.
VOLUME_BINDING = "predicate.VolumeBindingEnable"
VOLUME_ZONE = "predicate.VolumeZoneEnable"
VOLUME_LIMITS = "predicate.NodeVolumeLimitsEnable"
BIND_TIMEOUT = "volumebinding.bindTimeoutSeconds"
DRA = "predicate.DynamicResourceAllocationEnable"
#: kube-scheduler's default wait for the PV controller after a volume bind.
DEFAULT_BIND_TIMEOUT = 600


class PredicatesPlugin:
    name = "predicates"
    valid_until = timeless  # (answers do not depend on the clock)
    parks = True  # (its close writes only the binds' pre-bind writes: jobs may be parked)
    argument_keys = (VOLUME_BINDING, VOLUME_ZONE, VOLUME_LIMITS, BIND_TIMEOUT, DRA)

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self._volume_flags = {
            "binding": arguments.get_bool(VOLUME_BINDING, True),
            "zone": arguments.get_bool(VOLUME_ZONE, True),
            "limits": arguments.get_bool(VOLUME_LIMITS, True),
        }
        #: Seconds a bind waits for its volumes to be bound (``pumice run``).
        self.bind_timeout = arguments.get_int(BIND_TIMEOUT, DEFAULT_BIND_TIMEOUT)
        if self.bind_timeout <= 0:
            raise InputError("must be a positive number of seconds", field=BIND_TIMEOUT)
        #: This cycle's volume state (see :mod:`pumice.plugins.volumes` and
        #: :attr:`volumes`), made when first asked.
        self._volumes: VolumeChecks | None = None
        #: The cycle's nodes and objects the checks are made over.
        self._checks_of: tuple[NodeTable, Mapping[str, Mapping[str, Any]]] | None = None
        #: Whether pods' ResourceClaims are allocated (DRA is GA in Kubernetes 1.34, on
        #: by default), and this cycle's device state (:mod:`pumice.plugins.devices`).
        self._dra = arguments.get_bool(DRA, True)
        self._devices: DeviceChecks | None = None
        #: Each placement's node filter, while the node label columns stay the same.
        self._static: dict[Placement, tuple[np.ndarray | None, Reasons]] = {}
        self._static_for: object = None
        #: What the predicate was last registered saying (``by_placement``), if it was.
        self._registered: bool | None = None
        #: The cycle's nodes and spread counts, set by :meth:`on_cycle_open` before the
        #: functions it registers can run.
        self._nodes: NodeTable
        self._holders = False
        self._spread: SpreadCounts

    @property
    def volumes(self) -> VolumeChecks | None:
        """This cycle's volume state (see :mod:`pumice.plugins.volumes`): made when a
        task with claims first asks, as most cycles have none (what it is made from is
        the cycle's, and stands while the cycle runs)."""
        if self._volumes is None and self._checks_of is not None:
            nodes, objects = self._checks_of
            self._volumes = VolumeChecks(nodes, objects, **self._volume_flags)
        return self._volumes

    @property
    def devices(self) -> DeviceChecks | None:
        """This cycle's device state (see :mod:`pumice.plugins.devices`; None without
        DRA), made when first asked, as :attr:`volumes`."""
        if self._devices is None and self._dra and self._checks_of is not None:
            nodes, objects = self._checks_of
            self._devices = DeviceChecks(nodes, objects)
        return self._devices

    def on_session_open(self, ssn: Session) -> None:
        """The volume checks follow allocations (their tentative PV choices); the
        predicate's registration waits for :meth:`on_cycle_open`: what the plugin says
        of it depends on the cycle's pods."""

        def allocated(task: TaskInfo) -> None:
            if task.claims and self.volumes is not None:
                self.volumes.assume(task)
            if task.device_claims and self.devices is not None:
                self.devices.assume(task)

        def deallocated(task: TaskInfo) -> None:
            if task.claims and self.volumes is not None:
                self.volumes.forget(task)
            if task.device_claims and self.devices is not None:
                self.devices.forget(task)

        ssn.add_event_handler(EventHandler(allocate=allocated, deallocate=deallocated))

    def on_session_close(self, ssn: Session) -> None:
        """The volumes chosen for the pods that bind, as their pre-bind writes (checks
        never made chose nothing)."""
        if self._devices is not None:
            self._devices.write(ssn.decisions)
        if self._volumes is not None:
            self._volumes.write(ssn.decisions)
            for pre in ssn.decisions.prebind.values():
                if pre.volumes or pre.provision:
                    pre.timeout = float(self.bind_timeout)

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's nodes; the predicate registered again only when a pod with
        inter-pod affinity comes or goes (whether one answer serves every task of a
        placement)."""
        nodes = ssn.nodes
        if self._static_for is not nodes.labels:  # (replaced, never changed in place)
            self._static, self._static_for = {}, nodes.labels
        self._nodes = nodes
        self._holders = ssn.snapshot.affinity_about()
        self._spread = SpreadCounts(nodes)
        self._checks_of = (nodes, ssn.snapshot.objects)
        self._volumes = self._devices = None
        by_placement = not self._holders
        if self._registered != by_placement:
            if self._registered is not None:
                ssn.hooks.drop(self.name)
            self._register(ssn, by_placement)
            self._registered = by_placement

    def _register(self, ssn: Session, by_placement: bool) -> None:
        def predicate(task: TaskInfo) -> tuple[np.ndarray | None, Reasons]:
            nodes, holders = self._nodes, self._holders
            cached = self._static.get(task.placement)
            if cached is None:
                reasons = placement_filter(nodes.labels, task.placement)
                cached = (_combine(reasons), reasons)
                self._static[task.placement] = cached
            dynamic = (
                affinity_reasons(nodes, task, holders)
                if holders or task.pod_affinity is not None
                else []
            )
            constraints = hard(task.spread) if task.spread else ()
            if not task.host_ports and not dynamic and not constraints and not task.attaches:
                return cached
            reasons = list(cached[1]) + dynamic
            if task.claims and self.volumes is not None:
                reasons += self.volumes.reasons(task)
            if task.device_claims and self.devices is not None:
                reasons += self.devices.reasons(task)
            for port in task.host_ports:
                users = nodes.ports.get(port)
                if users:
                    mask = np.zeros(len(nodes), dtype=bool)
                    mask[list(users)] = True
                    reasons.append((f"didn't have free host port {port[0]}/{port[1]}", mask))
            if constraints:
                reasons += spread_reasons(self._spread, task, constraints)
            return _combine(reasons), reasons

        # Unless some pod of the session has pod (anti-)affinity, the answer for a task
        # without host ports or hard spread constraints depends on its placement alone:
        # the allocate fast path may then reuse it for every task of the same shape.
        # (Such tasks are left to the long way: see pumice.framework.fastpath. Spread
        # constraints bind only their own pod, so other tasks keep the shared answer.)

        def after_eviction(
            task: TaskInfo, i: int, gone: set[str], inter_pod: bool = True
        ) -> list[str]:
            """What eviction could clear but still refuses ``task`` on node ``i`` once the
            tasks whose keys are in ``gone`` have left (for preempt); ``inter_pod``: the
            anti-affinity refusals too (else only host ports)."""
            nodes = self._nodes
            reasons = resolvable_on_node(nodes, task, i, self._holders, gone) if inter_pod else []
            ports = set(task.host_ports)
            if ports and any(
                t.key not in gone and ports.intersection(t.host_ports)
                for t in nodes.tasks[i].values()
            ):
                reasons.append("didn't have free host port")
            return reasons

        ssn.on(
            "predicate",
            self.name,
            predicate,
            by_placement=by_placement,
            after_eviction=after_eviction,
            resolvable=_resolvable,
        )


def _resolvable(reason: str) -> bool:
    """A refusal that evicting pods of the node can clear (kube-scheduler's
    *Unschedulable*, not *UnschedulableAndUnresolvable*).

    A topology spread refusal is *Unschedulable* in kube-scheduler, but Volcano's
    preempt asks the filter after evicting with the counts its PreFilter made before
    (its removal simulation covers inter-pod affinity only), so evicting never makes
    such a node pass: pumice does not offer it to preempt or reclaim, in either mode.
    (Volcano's topology-aware dry run does not ask the spread filter at all; placing
    the preemptor against its own hard constraint is not copied.)"""
    return reason in RESOLVABLE or reason.startswith("didn't have free host port")
