"""conformance: never evict kube-system pods or pods of system-critical priority classes."""

from __future__ import annotations

from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless
from pumice.framework.victims import on_kind

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


def is_critical(task: TaskInfo) -> bool:
    return task.priority_class in CRITICAL_CLASSES or task.namespace == SYSTEM_NAMESPACE


class ConformancePlugin:
    name = "conformance"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        def evictable(_actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            return [t for t in candidates if not is_critical(t)]

        ssn.on("preemptable", self.name, evictable)
        ssn.on("reclaimable", self.name, evictable, alike=True)
        ssn.on("gang_evictable", self.name, on_kind(None, evictable))

    def on_cycle_open(self, ssn: Session) -> None:
        """Nothing to refresh: the functions read the session when they are called, so
        they stay registered from cycle to cycle."""
