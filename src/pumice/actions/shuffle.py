"""shuffle: evict the running pods that plugins name as victims.

Follows Volcano's ``shuffle`` action: every Running task of the session's jobs is offered
to the ``victim_tasks`` functions (the ``rescheduling`` plugin's strategies, or a custom
plugin's), and the tasks they name are evicted; their controllers recreate them and
later cycles place them anew. The functions are asked tier by tier, as Volcano's
``VictimTasks`` asks them: within a tier their answers are joined, and the first tier
that names any victim decides (later tiers are not asked).

A function returns the tasks to evict, each either a task or ``(task, strategy, rule)``:
the strategy that chose it and the rule, a sentence saying why. A named task that was
not offered (not Running, or not of a job) is not evicted. The evictions go through one
statement, committed at once, and each has an audit record: ``action: shuffle``, the
``plugin``, its ``tier``, the ``strategy`` and the ``rule``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pumice.actions.eviction import tier_of
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session
from pumice.framework.statement import Statement
from pumice.framework.verdicts import timeless

ACTION = "shuffle"
HOOK = "victim_tasks"


@dataclass(slots=True)
class Named:
    """A victim as a plugin named it."""

    task: TaskInfo
    plugin: str
    strategy: str
    rule: str


def running_tasks(ssn: Session) -> list[TaskInfo]:
    """What the victim functions are offered: the Running tasks of every job, in pod
    key order (a stable order whatever the jobs' order)."""
    tasks = [t for job in ssn.jobs.values() for t in job.with_status(TaskStatus.RUNNING)]
    tasks.sort(key=lambda t: t.key)
    return tasks


def _unpack(item: Any, plugin: str) -> tuple[TaskInfo, str, str]:
    if isinstance(item, TaskInfo):
        return item, "", f"named by {plugin}"
    task, strategy, rule = item
    return task, strategy, rule


def named_victims(ssn: Session, tasks: list[TaskInfo]) -> list[Named]:
    """The victims of the deciding tier, in the order named, each once (the first
    plugin to name a task is the one recorded)."""
    offered = {id(t) for t in tasks}
    for tier in ssn.hooks.chain(HOOK):
        named: dict[int, Named] = {}
        for plugin, fn in tier:
            answer: Iterable[Any] = fn(list(tasks)) or ()
            for item in answer:
                task, strategy, rule = _unpack(item, plugin)
                if id(task) in offered and id(task) not in named:
                    named[id(task)] = Named(task, plugin, strategy, rule)
        if named:
            return list(named.values())
    return []


def audit_record(ssn: Session, v: Named) -> dict[str, Any]:
    """The audit record of one shuffle eviction (the fields preempt's records have,
    with no preemptor, and the plugin, tier, strategy and rule)."""
    t = v.task
    tier = tier_of(ssn, v.plugin)
    who = f"{v.plugin} (tier {tier})" + (f", {v.strategy}" if v.strategy else "")
    return {
        "action": ACTION,
        "kind": "evict",
        "preemptor": "",
        "task": "",
        "victim": t.key,
        "node": t.node or "",
        "reason": f"{who}: {v.rule}",
        "victim_job": t.job or "",
        "victim_priority": t.priority,
        "plugin": v.plugin,
        "tier": tier,
        "strategy": v.strategy,
        "rule": v.rule,
    }


class ShuffleAction:
    name = ACTION
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        if not ssn.hooks.chain(HOOK):
            return
        tasks = running_tasks(ssn)
        if not tasks:
            return
        victims = named_victims(ssn, tasks)
        if not victims:
            return
        stmt = Statement(ssn)
        for v in victims:
            stmt.evict(v.task, ACTION, audit_record(ssn, v))
        stmt.commit()
