"""cdp: cooldown protection, no eviction of a pod that started too recently.

Follows Volcano's ``cdp`` plugin: a Running pod whose ``volcano.sh/cooldown-time``
(label first, then annotation; a Go duration such as ``10m`` or ``1h30m``) has not yet
passed since its PodScheduled condition turned True is not a victim of preempt or
reclaim. Pods without the setting, with an unparsable one, or not Running are not
protected. "Now" is the session's time (``Snapshot.now``), so a snapshot replays the
same way whenever it is run.
"""

from __future__ import annotations

import math

from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.conf.arguments import go_duration as parse_go_duration
from pumice.framework.session import Session
from pumice.framework.victims import on_kind

COOLDOWN_KEY = "volcano.sh/cooldown-time"


def cooldown_of(task: TaskInfo) -> float | None:
    value = task.labels.get(COOLDOWN_KEY)
    if value is None:
        value = task.annotations.get(COOLDOWN_KEY)
    if value is None:
        return None
    return parse_go_duration(value)


class CdpPlugin:
    name = "cdp"
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        #: The earliest end of a cooldown that protected a candidate this session.
        self._turns = math.inf

    def valid_until(self, _ssn: Session) -> float:
        """The first cooldown to end among the pods it protected this session."""
        return self._turns

    def on_cycle_open(self, _ssn: Session) -> None:
        """A new cycle asks afresh which cooldowns end ahead (see :meth:`valid_until`);
        the function registered at open reads the cycle's clock from the session."""
        self._turns = math.inf

    def on_session_open(self, ssn: Session) -> None:
        def cooled(_actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            now = ssn.now
            victims = []
            for t in candidates:
                cooldown = cooldown_of(t)
                protected = (
                    cooldown is not None
                    and t.status == TaskStatus.RUNNING
                    and t.scheduled_at > 0
                    and t.scheduled_at + cooldown > now
                )
                if not protected:
                    victims.append(t)
                elif cooldown is not None and t.scheduled_at + cooldown < self._turns:
                    self._turns = t.scheduled_at + cooldown  # (protected: cooldown is set)
            return victims

        ssn.on("preemptable", self.name, cooled)
        ssn.on("reclaimable", self.name, cooled, alike=True)
        ssn.on("gang_evictable", self.name, on_kind(None, cooled))
