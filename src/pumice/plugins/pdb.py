"""pdb: never evict past a PodDisruptionBudget.

Follows Volcano's ``pdb`` plugin: for the candidates of one preemption or reclaim, each
budget's allowed disruptions are counted down, candidate by candidate, and a candidate
that would take any budget below zero is kept. Pods already listed in a budget's
``status.disruptedPods`` do not count against it. A budget whose selector is empty
matches nothing. When a snapshot's budget has no status, the allowed disruptions are
derived from ``minAvailable`` / ``maxUnavailable`` and the matching running pods (see
:mod:`pumice.api.pdb`).

Evictions already decided in the same cycle spend the budget (Volcano reads the budget
afresh for each preemptor task, so one cycle can overrun it).

As in Volcano, a pod without any label is never a victim while this plugin is on
(Volcano skips such pods instead of letting them through; pumice keeps the quirk so
that decisions match).
"""

from __future__ import annotations

from pumice.api.pdb import LabelSelector, PdbRecord, disruptions_allowed
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless
from pumice.framework.victims import on_kind

_HEALTHY = frozenset({TaskStatus.RUNNING})


class PdbPlugin:
    name = "pdb"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        #: The cycle's budgets that select pods: (budget, its selector, disruptions allowed).
        self.allowed: list[tuple[PdbRecord, LabelSelector, int]] = []
        #: The pods already releasing when the cycle opened (evictions of earlier
        #: cycles, which the budgets counted).
        self._releasing_at_open: set[str] = set()

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's budgets: each budget's disruptions allowed, from the pods that
        match it as the cycle opens."""
        pdbs = [
            (p, p.selector)
            for p in ssn.snapshot.pdbs
            if p.selector is not None and not p.selector.empty()
        ]
        pods = [t for tasks in ssn.nodes.tasks for t in tasks.values()]
        for job in ssn.jobs.values():
            pods.extend(job.with_status(TaskStatus.PENDING))
        self.allowed = []
        for pdb, selector in pdbs:
            matching = [
                t for t in pods if t.namespace == pdb.namespace and selector.matches(t.labels)
            ]
            healthy = sum(1 for t in matching if t.status in _HEALTHY)
            self.allowed.append((pdb, selector, disruptions_allowed(pdb, len(matching), healthy)))

        self._releasing_at_open = {
            t.uid for tasks in ssn.nodes.tasks for t in tasks.values()
            if t.status == TaskStatus.RELEASING
        }  # fmt: skip

    def on_session_open(self, ssn: Session) -> None:
        """Register the guard once, for as long as the session lives: it reads the
        cycle's budgets from the plugin (see :meth:`on_cycle_open`)."""

        def evicted_this_cycle() -> list[TaskInfo]:
            releasing_at_open = self._releasing_at_open
            return [
                t
                for tasks in ssn.nodes.tasks
                for t in tasks.values()
                if t.status == TaskStatus.RELEASING and t.uid not in releasing_at_open
            ]

        def guard(_actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            left = [n for _, _s, n in self.allowed]
            # Unlike Volcano, which reads the budget afresh for every preemptor task,
            # evictions already decided in this cycle spend the budget.
            for t in evicted_this_cycle():
                for k, (pdb, selector, _n) in enumerate(self.allowed):
                    if pdb.namespace == t.namespace and selector.matches(t.labels):
                        left[k] -= 1
            victims = []
            for t in candidates:
                if not t.labels:
                    continue  # Volcano's quirk: unlabelled pods are never victims
                violated = False
                for k, (pdb, selector, _n) in enumerate(self.allowed):
                    if pdb.namespace != t.namespace or not selector.matches(t.labels):
                        continue
                    if t.name in pdb.disrupted_pods:
                        continue
                    left[k] -= 1
                    if left[k] < 0:
                        violated = True
                if not violated:
                    victims.append(t)
            return victims

        ssn.on("preemptable", self.name, guard)
        ssn.on("reclaimable", self.name, guard, alike=True)
        ssn.on("gang_evictable", self.name, on_kind(None, guard))

    def explain(self) -> list[str]:
        return [f"{p.namespace}/{p.name}: {n} disruption(s) allowed" for p, _s, n in self.allowed]
