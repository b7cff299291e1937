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
import re

from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session
from pumice.framework.victims import on_kind

COOLDOWN_KEY = "volcano.sh/cooldown-time"

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float | None:
    """Go's ``time.ParseDuration`` in seconds; None when it would fail."""
    s = text.strip()
    sign = 1.0
    if s[:1] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        return None
    pos, total = 0, 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


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
                elif t.scheduled_at + cooldown < self._turns:
                    self._turns = t.scheduled_at + cooldown  # (cooldown is set)
            return victims

        ssn.on("preemptable", self.name, cooled)
        ssn.on("reclaimable", self.name, cooled, alike=True)
        ssn.on("gang_evictable", self.name, on_kind(None, cooled))
