"""sla: jobs that have waited longer than their SLA go first and are admitted.

The waiting time comes from the PodGroup annotation ``sla-waiting-time`` or the plugin
argument of the same name (a Go duration such as ``3m`` or ``1h30m``). A job past its
deadline (creation + waiting time) is permitted by enqueue and counts as pipelined;
jobs are ordered by deadline, jobs without one last. "Now" is the session's clock: the
snapshot's time in ``pumice cycle`` (``--now``), the virtual clock in ``simulate``.
"""

from __future__ import annotations

import math

from pumice.api.job import JobInfo
from pumice.conf.arguments import Arguments, go_duration
from pumice.errors import InputError, shown
from pumice.framework.session import Session

WAITING_TIME = "sla-waiting-time"


def parse_duration(text: str, *, field: str = WAITING_TIME) -> float:
    """A Go duration string (``1h30m``, ``90s``) in seconds, as Volcano reads the waiting
    time (Go's ``time.ParseDuration``); a negative one is refused too."""
    text = text.strip()
    seconds = go_duration(text)
    if seconds is None or seconds < 0:
        raise InputError(f"invalid duration {shown(text)} (expected e.g. 3m, 1h30m)", field=field)
    return seconds


class SlaPlugin:
    name = "sla"
    argument_keys = (WAITING_TIME,)

    def __init__(self, arguments: Arguments) -> None:
        raw = arguments.raw(WAITING_TIME)
        self.default = None
        #: The earliest deadline ahead of the session's clock that a permit saw.
        self._turns = math.inf
        if raw is not None:
            try:
                self.default = parse_duration(str(raw), field=f"arguments.{WAITING_TIME}")
            except InputError as err:
                raise err.located(obj="plugin sla") from None

    def valid_until(self, _ssn: Session) -> float:
        """The first waiting-time deadline still ahead among the jobs this session asked
        about: then a refused job may be admitted."""
        return self._turns

    def _waiting(self, job: JobInfo) -> float | None:
        raw = job.annotations.get(WAITING_TIME)
        if raw:
            try:
                return parse_duration(raw)
            except InputError:
                return self.default
        return self.default

    def on_cycle_open(self, _ssn: Session) -> None:
        """A new cycle asks afresh which deadlines lie ahead (see :meth:`valid_until`);
        the functions registered at open read the cycle's clock from the session."""
        self._turns = math.inf

    def on_session_open(self, ssn: Session) -> None:
        def deadline(job: JobInfo) -> float | None:
            w = self._waiting(job)
            return None if w is None else job.creation + w

        def job_order(a: JobInfo, b: JobInfo) -> int:
            da, db = deadline(a), deadline(b)
            if da is None or db is None:
                return 0 if da is db else (1 if da is None else -1)
            return (da > db) - (da < db)

        def permit(job: JobInfo) -> int:
            d = deadline(job)
            if d is None:
                return 0
            if ssn.now >= d:
                return 1
            if d < self._turns:
                self._turns = d
            return 0

        ssn.on("job_order", self.name, job_order)
        ssn.on("job_enqueueable", self.name, permit)
        ssn.on("job_pipelined", self.name, permit)
