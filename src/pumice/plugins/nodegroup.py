"""nodegroup: keep each queue's pods on the node groups its ``spec.affinity`` names.

A node belongs to the group named by its label ``volcano.sh/nodegroup-name``. A queue's
``spec.affinity`` lists groups under ``nodeGroupAffinity`` and
``nodeGroupAntiAffinity``, each ``required...`` and ``preferred...``. As Volcano's
plugin decides (``pkg/scheduler/plugins/nodegroup``):

- **predicate.** A node without the label is refused ("node group label not found"),
  except with ``strict: false`` for a queue without any affinity. A labelled node is
  refused to a queue without affinity ("node group affinity not specified"). Otherwise
  the node's group must be required or preferred, not anti-required, unless it is
  anti-preferred, which lets it in ("node does not satisfy the node group affinity").
  A queue may also cap what it takes of a group: the annotation
  ``volcano.sh/nodegroup-resource-limits`` (``{"group": {"cpu": "8"}}``) refuses a group
  whose queue allocation plus the task's request would pass a listed resource ("node
  group resource limit exceeded"); an annotation that does not parse refuses every node
  to the queue's pods ("... annotation invalid"). Every refusal names the queue (and
  the group): no eviction clears it.
- **node_order.** 100 for a required group, plus 50 for a preferred one (with
  ``enablePreferredOrder``, ``50 * (N - i) / N`` for the i-th of N preferred groups);
  -1 for an anti-preferred group, whatever else.
- With ``enableHierarchy: true`` a queue without ``spec.affinity`` takes its nearest
  ancestor's (a queue without ``spec.parent`` is a child of ``root``). The limits
  annotation is the queue's own.

Arguments: ``strict`` (true), ``enablePreferredOrder`` (false).

The predicate depends on the task's queue, not only on its placement, so it is not
registered ``by_placement``: with nodegroup configured, allocate takes the long way
(every pod is concerned). The score is separable (``context`` / ``rows`` / ``one``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pumice.api import parse
from pumice.api.queue import NodeGroupAffinity, QueueInfo
from pumice.api.task import ALLOCATED_STATUSES, TaskInfo
from pumice.conf.arguments import Arguments
from pumice.documents import load_json
from pumice.errors import InputError
from pumice.framework.scoring import SeparableScore
from pumice.framework.session import EventHandler, Session
from pumice.framework.verdicts import timeless

LABEL = "volcano.sh/nodegroup-name"
LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"
ROOT = "root"
BASE_SCORE = 100.0
#: Volcano's smallest amount that counts as over a limit (``api.GetMinResource``).
MIN_RESOURCE = 0.1

# Volcano's words for its refusals (``errors.go``); pumice adds the queue and group.
NO_LABEL = "node group label not found"
NO_AFFINITY = "node group affinity not specified"
UNSATISFIED = "node does not satisfy the node group affinity"
LIMIT_INVALID = "node group resource limit annotation invalid"
LIMIT_EXCEEDED = "node group resource limit exceeded"

Reasons = list[tuple[str, np.ndarray]]


def unset(affinity: NodeGroupAffinity | None) -> bool:
    """No group named at all (Volcano's ``unsetAffinity``)."""
    return affinity is None or not (
        affinity.required or affinity.preferred or affinity.anti_required or affinity.anti_preferred
    )


def allows(affinity: NodeGroupAffinity, group: str) -> bool:
    """May a pod of a queue with ``affinity`` run in ``group``? Anti-affinity wins over
    affinity, and an anti-preferred group is let in (it only scores low)."""
    if group in affinity.anti_preferred:
        return True
    if group in affinity.anti_required:
        return False
    return group in affinity.required or group in affinity.preferred


def score(affinity: NodeGroupAffinity, group: str, ordered: bool) -> float:
    """A node of ``group``'s score for a pod of a queue with ``affinity``."""
    if group in affinity.anti_preferred:
        return -1.0
    total = BASE_SCORE if group in affinity.required else 0.0
    preferred = affinity.preferred
    if group in preferred:
        if ordered:
            ranks = {g: i for i, g in enumerate(preferred)}  # (the last of duplicates)
            n = len(ranks)
            total += 0.5 * BASE_SCORE * (n - ranks[group]) / n
        else:
            total += 0.5 * BASE_SCORE
    return total


def parse_limits(
    queue: QueueInfo, index: dict[str, int], size: int
) -> tuple[dict[str, tuple[np.ndarray, tuple[int, ...]]], str]:
    """The queue's per-group limits from its annotation: group -> (limit vector, the
    dimensions the annotation lists), and "" or why the annotation is refused. Listed
    resources the cluster has no column for are left out (nothing asks for them)."""
    raw = queue.annotations.get(LIMITS_ANNOTATION, "")
    if not raw:
        return {}, ""
    path = f"metadata.annotations.{LIMITS_ANNOTATION}"
    try:
        groups = parse.as_mapping(load_json(raw.encode(), source=""), path)
        out = {}
        for group, resources in groups.items():
            amounts = parse.resources(resources, f"{path}.{group}")
            limit = np.zeros(size)
            dims = []
            for name, amount in amounts.items():
                if name in index:
                    limit[index[name]] = amount
                    dims.append(index[name])
            out[str(group)] = (limit, tuple(sorted(dims)))
    except (ValueError, InputError) as err:  # (json's errors are ValueErrors)
        text = err.message if isinstance(err, InputError) else f"not JSON: {err}"
        return {}, text
    return out, ""


@dataclass(slots=True)
class QueueRule:
    """What the plugin knows of one queue in a cycle: its effective affinity, its
    static refusals over the nodes, its score table and its limits."""

    name: str
    affinity: NodeGroupAffinity | None
    blocked: np.ndarray | None = None
    reasons: Reasons = field(default_factory=list)
    scores: Scores | None = None
    limits: dict[str, tuple[np.ndarray, tuple[int, ...]]] = field(default_factory=dict)
    limit_error: str = ""
    #: group -> what the queue holds there (only for a queue with limits).
    allocated: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Scores:
    """A queue's node score by group code (the last entry, 0, for nodes without a
    group): the scorer's context, equal for queues that score alike."""

    values: tuple[float, ...]
    array: np.ndarray = field(compare=False, hash=False, repr=False)


class NodeGroupPlugin:
    name = "nodegroup"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ("strict", "enablePreferredOrder")

    def __init__(self, arguments: Arguments) -> None:
        self.strict = arguments.get_bool("strict", True)
        self.ordered = arguments.get_bool("enablePreferredOrder", False)
        self.ssn: Session | None = None
        self.groups: list[str] = []
        #: Per node, the index of its group in ``groups``; -1 without the label.
        self.codes = np.zeros(0, dtype=np.intp)
        self._codes_for: object = None
        self.rules: dict[str, QueueRule] = {}
        self.hierarchy = False

    def on_session_open(self, ssn: Session) -> None:
        ssn.on("predicate", self.name, self.predicate)
        ssn.on("node_order", self.name, NodeGroupScore(self))
        ssn.add_event_handler(EventHandler(allocate=self._allocated, deallocate=self._released))

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's nodes (group codes, kept while the labels stay) and queues (rules
        made when first asked); the queues' holdings per group where they are capped."""
        self.ssn = ssn
        self.hierarchy = _hierarchy(ssn, self.name)
        labels = ssn.nodes.labels
        if self._codes_for is not labels:  # (replaced, never changed in place)
            values, present = labels.column(LABEL)
            self.groups = sorted({str(v) for v, p in zip(values, present, strict=True) if p})
            at = {g: k for k, g in enumerate(self.groups)}
            self.codes = np.array(
                [at[str(v)] if p else -1 for v, p in zip(values, present, strict=True)],
                dtype=np.intp,
            )
            self._codes_for = labels
        self.rules = {}
        capped = [q for q in ssn.queues.values() if LIMITS_ANNOTATION in q.annotations]
        if capped:
            for q in capped:
                self.rule(q.name)
            for job in ssn.jobs.values():
                rule = self.rules.get(job.queue)
                if rule is None or not rule.limits:
                    continue
                for status, tasks in job.by_status.items():
                    if status in ALLOCATED_STATUSES:
                        for t in tasks.values():
                            self._add(rule, t, 1.0)

    # -- per queue ----------------------------------------------------------------------

    def rule(self, queue: str) -> QueueRule:
        got = self.rules.get(queue)
        if got is None:
            got = self.rules[queue] = self._make_rule(queue)
        return got

    def _make_rule(self, name: str) -> QueueRule:
        ssn = self.ssn
        assert ssn is not None
        queue = ssn.queues.get(name)
        affinity = None if queue is None else queue.affinity
        if affinity is None and queue is not None and self.hierarchy:
            affinity = _inherited(ssn.queues, queue)
        rule = QueueRule(name, affinity)
        if queue is not None:
            rule.limits, rule.limit_error = parse_limits(queue, ssn.space.index, ssn.space.size)
        n = len(self.codes)
        codes = self.codes
        labelled = codes >= 0
        reasons: Reasons = []
        if rule.limit_error:
            why = f"{LIMIT_INVALID} (queue {name}: {rule.limit_error})"
            reasons.append((why, np.ones(n, dtype=bool)))
        elif unset(affinity):
            if self.strict and (~labelled).any():
                reasons.append((_no_label(name), ~labelled))
            if labelled.any():
                why = f"{NO_AFFINITY} (queue {name} names no node group)"
                reasons.append((why, labelled))
        else:
            assert affinity is not None
            if (~labelled).any():
                reasons.append((_no_label(name), ~labelled))
            for k, group in enumerate(self.groups):
                if not allows(affinity, group):
                    why = f"{UNSATISFIED} (queue {name}, group {group})"
                    reasons.append((why, codes == k))
        rule.reasons = reasons
        if reasons:
            blocked = reasons[0][1].copy()
            for _, mask in reasons[1:]:
                blocked |= mask
            rule.blocked = blocked
        if affinity is not None:
            values = (*(score(affinity, g, self.ordered) for g in self.groups), 0.0)
            rule.scores = Scores(values, np.array(values))
        return rule

    # -- hook functions -----------------------------------------------------------------

    def predicate(self, task: TaskInfo) -> tuple[np.ndarray | None, Reasons]:
        ssn = self.ssn
        assert ssn is not None
        job = ssn.jobs.get(task.job or "")
        if job is None:
            return None, []
        rule = self.rule(job.queue)
        if not rule.limits:
            return rule.blocked, rule.reasons
        extra = self._over_limits(rule, task)
        if not extra:
            return rule.blocked, rule.reasons
        reasons = rule.reasons + extra
        blocked = np.zeros(len(self.codes), dtype=bool) if rule.blocked is None else rule.blocked
        for _, mask in extra:
            blocked = blocked | mask
        return blocked, reasons

    def _over_limits(self, rule: QueueRule, task: TaskInfo) -> Reasons:
        """The groups, among those the affinity allows, whose limit the task would pass."""
        out: Reasons = []
        names = self.ssn.space.names if self.ssn is not None else ()
        req = task.resreq
        for k, group in enumerate(self.groups):
            capped = rule.limits.get(group)
            if capped is None:
                continue
            limit, dims = capped
            held = rule.allocated.get(group)
            over = []
            for d in dims:
                used = float(req[d]) + (0.0 if held is None else float(held[d]))
                cap = float(limit[d])
                if used > cap and used - cap >= MIN_RESOURCE:
                    over.append(names[d])
            if not over:
                continue
            mask = self.codes == k
            if rule.blocked is not None:
                mask &= ~rule.blocked
            if mask.any():
                why = f"{LIMIT_EXCEEDED} (queue {rule.name}, group {group}: {', '.join(over)})"
                out.append((why, mask))
        return out

    # -- what the capped queues hold ------------------------------------------------------

    def _add(self, rule: QueueRule, task: TaskInfo, sign: float) -> None:
        ssn = self.ssn
        if task.node is None or ssn is None:
            return
        i = ssn.nodes.index.get(task.node)
        if i is None or self.codes[i] < 0:
            return
        group = self.groups[self.codes[i]]
        held = rule.allocated.get(group)
        if held is None:
            held = rule.allocated[group] = np.zeros(ssn.space.size)
        held += sign * task.resreq

    def _capped_rule(self, task: TaskInfo) -> QueueRule | None:
        ssn = self.ssn
        if ssn is None or not self.rules:
            return None
        job = ssn.jobs.get(task.job or "")
        if job is None:
            return None
        rule = self.rules.get(job.queue)
        return rule if rule is not None and rule.limits else None

    def _allocated(self, task: TaskInfo) -> None:
        rule = self._capped_rule(task)
        if rule is not None:
            self._add(rule, task, 1.0)

    def _released(self, task: TaskInfo) -> None:
        rule = self._capped_rule(task)
        if rule is not None:
            self._add(rule, task, -1.0)


class NodeGroupScore(SeparableScore):
    """The ``node_order`` function: a node's score depends on its group and the task's
    queue alone, so the context is the queue's score table (None: a queue without
    affinity, every node 0)."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: NodeGroupPlugin) -> None:
        self.plugin = plugin

    def context(self, task: TaskInfo, cand: np.ndarray) -> Scores | None:
        plugin = self.plugin
        ssn = plugin.ssn
        job = None if ssn is None else ssn.jobs.get(task.job or "")
        if job is None:
            return None
        return plugin.rule(job.queue).scores

    def rows(self, task: TaskInfo, rows: np.ndarray, ctx: Scores | None) -> np.ndarray:
        if ctx is None:
            return np.zeros(rows.size)
        return ctx.array[self.plugin.codes[rows]]

    def one(self, task: TaskInfo, i: int, ctx: Scores | None) -> float:
        if ctx is None:
            return 0.0
        return ctx.values[int(self.plugin.codes[i])]


def _no_label(queue: str) -> str:
    return f"{NO_LABEL} (queue {queue} runs only on nodes with the {LABEL} label)"


def _hierarchy(ssn: Session, plugin: str) -> bool:
    """The plugin's ``enableHierarchy`` flag (off unless set)."""
    for tier in ssn.config.tiers:
        for opt in tier.plugins:
            if opt.name == plugin:
                return opt.enabled("hierarchy")
    return False


def _inherited(queues: dict[str, QueueInfo], queue: QueueInfo) -> NodeGroupAffinity | None:
    """The affinity of ``queue``'s nearest ancestor that has one (a queue without a
    parent is a child of ``root``; a loop in the tree ends the walk)."""
    seen = {queue.name}
    current = queue
    while current.name != ROOT:
        parent = queues.get(current.parent or ROOT)
        if parent is None or parent.name in seen:
            return None
        if parent.affinity is not None:
            return parent.affinity
        seen.add(parent.name)
        current = parent
    return None
