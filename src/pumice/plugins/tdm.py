"""tdm: revocable nodes, lent to preemptable work during their zone's daily window.

A node labelled ``volcano.sh/revocable-zone: <zone>`` is *revocable*: it belongs to
another tenant and is lent out only while its zone's window is open. The windows are
the plugin's arguments, ``tdm.revocable-zone.<zone>: "HH:MM-HH:MM"`` (local time of the
scheduler, as Volcano reads them; a window whose end is not after its start runs past
midnight, so ``"0:00-0:00"`` is always open). Volcano's rules:

- a pod may use a revocable node only while its zone's window is open, and only if the
  pod may be revoked: its annotation ``volcano.sh/revocable-zone: "*"``, or, without
  that annotation, ``volcano.sh/preemptable: "true"``. No pod may use a node whose zone
  is closed or named in no argument; other pods never use revocable nodes;
- such a pod scores 100 on an open revocable node (it goes there first);
- when a zone's window closes, the ``shuffle`` action evicts the preemptable Running
  pods on the zone's nodes, at most once per ``tdm.evict.period`` (a Go duration,
  default ``1m``), and per job no more than its disruption budget allows (the
  PodGroup's ``volcano.sh/jdb-max-unavailable`` or ``volcano.sh/jdb-min-available``,
  a number or a percentage of its pods; without one, one pod per job per round);
- a preemptor that may itself be revoked preempts nobody; any other may evict the
  preemptable Running pods of ordinary (not revocable) nodes, within the same budgets;
- jobs whose PodGroup is not preemptable go first (job order); a job starves only if
  it is not preemptable and has pending pods; a job counts as pipelined exactly when
  its waiting, ready and pending best-effort pods reach its ``minMember``.

One deliberate difference: Volcano checks a window that runs past midnight against
today's start only, so ``22:00-06:00`` is closed between midnight and 06:00 there;
pumice counts yesterday's window too, so it is open then, as written.

The answers depend on the session's clock (``pumice cycle``: the snapshot's time,
``--now``; ``simulate``: the virtual clock): :meth:`TdmPlugin.valid_until` names the
next opening or closing of a window, so a cycle repeated while nothing changes never
outlives a window's edge.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.task import (
    PREEMPTABLE_KEY,
    REVOCABLE_ZONE_KEY,
    TaskInfo,
    TaskStatus,
)
from pumice.conf.arguments import Arguments, go_duration
from pumice.errors import InputError, shown
from pumice.framework.scoring import SeparableScore
from pumice.framework.session import Session

ZONE_PREFIX = "tdm.revocable-zone."
EVICT_PERIOD = "tdm.evict.period"
DEFAULT_EVICT_PERIOD = 60.0
MAX_SCORE = 100.0
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
#: The key of this plugin's last eviction round in ``Snapshot.carried``.
CARRY_KEY = "tdm.last-evict"
#: Volcano's ``15:04`` layout: an hour of one or two digits, minutes of two.
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")
_DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Window:
    """A zone's daily window, ``start`` and ``end`` in minutes after midnight."""

    text: str
    start: int
    end: int

    def spans(self, now: float) -> list[tuple[float, float]]:
        """The windows (first second, last second, both inclusive, as Volcano compares
        whole seconds) that began yesterday, today and tomorrow, local time."""
        out = []
        for day in (-1, 0, 1):
            begin = _local_time(now, day, self.start)
            # A window whose end is not after its start ends on the next day.
            end = _local_time(now, day + (1 if self.end <= self.start else 0), self.end)
            out.append((begin, end))
        return out

    def is_open(self, now: float) -> bool:
        second = math.floor(now)
        return any(b <= second <= e for b, e in self.spans(now))

    def next_edge(self, now: float) -> float:
        """The first time after ``now`` at which :meth:`is_open` may change."""
        edges: list[float] = []
        for b, e in self.spans(now):
            edges.extend((b, e + 1.0))
        later = [t for t in edges if t > now]
        return min(later) if later else now + _DAY


def _local_time(now: float, day_offset: int, minutes: int) -> float:
    """The epoch seconds of ``minutes`` after local midnight of the day ``day_offset``
    days from ``now``'s (mktime normalizes the day and daylight saving time)."""
    t = time.localtime(now)
    return time.mktime(
        (t.tm_year, t.tm_mon, t.tm_mday + day_offset, minutes // 60, minutes % 60, 0, 0, 0, -1)
    )


def parse_window(text: str, *, field: str) -> Window:
    """A window ``"HH:MM-HH:MM"`` (surrounding spaces allowed), as Volcano parses it."""
    parts = text.strip().split("-")
    if len(parts) != 2:
        raise InputError(f"expected a window such as 10:00-21:00, got {shown(text)}", field=field)
    minutes = []
    for part in parts:
        m = _CLOCK.fullmatch(part)
        if m is None or int(m.group(1)) > 23 or int(m.group(2)) > 59:
            raise InputError(
                f"expected a time of day HH:MM in the window, got {shown(part)}", field=field
            )
        minutes.append(int(m.group(1)) * 60 + int(m.group(2)))
    return Window(text.strip(), minutes[0], minutes[1])


def _go_bool(value: str | None) -> bool | None:
    if value is None:
        return None
    return value in ("1", "t", "T", "TRUE", "true", "True")


def job_preemptable(job: JobInfo) -> bool:
    """Volcano's job ``Preemptable``: the PodGroup's ``volcano.sh/preemptable``
    annotation, else its label; absent means no (unlike a pod's)."""
    for source in (job.annotations, job.labels):
        value = source.get(PREEMPTABLE_KEY)
        if value is not None:
            return bool(_go_bool(value))
    return False


def _int_or_percent(text: str, total: int) -> int:
    """Kubernetes' IntOrString: an integer, or a percentage of ``total`` rounded up;
    0 for anything else (Volcano logs it and reads 0)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    if text.endswith("%") and text[:-1].isdigit():
        return math.ceil(int(text[:-1]) * total / 100)
    return 0


def max_evictions(job: JobInfo) -> int:
    """How many of ``job``'s pods one round may evict (Volcano's
    ``getMaxPodEvictNum``): what its disruption budget leaves, or 1 without one."""
    tasks = len(job.tasks)
    running = len(job.by_status.get(TaskStatus.RUNNING, {}))
    max_unavailable = job.annotations.get(JDB_MAX_UNAVAILABLE)
    min_available = job.annotations.get(JDB_MIN_AVAILABLE)
    if min_available is not None:  # (Volcano reads minAvailable first when both are set)
        floor = _int_or_percent(min_available, tasks)
        return running - floor if running >= floor else 1
    if max_unavailable is not None:
        most = _int_or_percent(max_unavailable, tasks)
        finished = len(job.by_status.get(TaskStatus.SUCCEEDED, {})) + len(
            job.by_status.get(TaskStatus.FAILED, {})
        )
        unavailable = tasks - finished - running
        return 0 if unavailable >= most else most - unavailable
    return 1


class TdmPlugin:
    name = "tdm"
    argument_keys = (f"{ZONE_PREFIX}*", EVICT_PERIOD)

    def __init__(self, arguments: Arguments) -> None:
        self.zones: dict[str, Window] = {}
        for key in arguments:
            if key.startswith(ZONE_PREFIX) and len(key) > len(ZONE_PREFIX):
                zone = key[len(ZONE_PREFIX) :]
                raw = arguments.get_str(key, "")
                try:
                    self.zones[zone] = parse_window(raw, field=f"arguments.{key}")
                except InputError as err:
                    raise err.located(obj="plugin tdm") from None
        self.evict_period = DEFAULT_EVICT_PERIOD
        if EVICT_PERIOD in arguments:
            raw = arguments.get_str(EVICT_PERIOD, "")
            period = go_duration(raw)
            if period is None or period < 0:
                raise InputError(
                    f"expected a duration such as 1m or 30s, got {shown(raw)}",
                    obj="plugin tdm",
                    field=f"arguments.{EVICT_PERIOD}",
                )
            self.evict_period = period
        #: This cycle's view: each node's zone ("" for ordinary nodes), the zones open
        #: now, and per node whether it is revocable and open.
        self._zone_of = np.zeros(0, dtype=object)
        self._revocable = np.zeros(0, dtype=bool)
        self._open_nodes = np.zeros(0, dtype=bool)
        self._open: frozenset[str] = frozenset()
        self._reasons: list[tuple[str, np.ndarray]] = []
        self._closed: np.ndarray | None = None
        self._refused: np.ndarray | None = None
        #: The zones open in the last cycle (None: no cycle yet).
        self._last_open: frozenset[str] | None = None
        self._asked_victims = False
        self._session: Session | None = None

    # -- the cycle ----------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self._session = ssn
        ssn.on("predicate", self.name, self._predicate, by_placement=True)
        ssn.on("node_order", self.name, TdmScore(self))
        ssn.on("preemptable", self.name, self._preemptable)
        ssn.on("victim_tasks", self.name, lambda tasks: self._victims(ssn, tasks))
        ssn.on("job_order", self.name, _job_order)
        ssn.on("job_pipelined", self.name, _job_pipelined)
        ssn.on("job_starving", self.name, _job_starving)

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's nodes and clock: which revocable nodes are open now. When the
        open zones differ from the last cycle's, the node masks allocate kept for task
        shapes no longer hold: they are forgotten."""
        nodes = ssn.nodes
        values, present = nodes.labels.column(REVOCABLE_ZONE_KEY)
        zone_of = np.where(present, values, "")
        self._zone_of = zone_of
        self._revocable = zone_of != ""
        self._open = frozenset(z for z, w in self.zones.items() if w.is_open(ssn.now))
        self._open_nodes = np.isin(zone_of, list(self._open)) & self._revocable
        closed = self._revocable & ~self._open_nodes
        self._reasons = []
        for zone in sorted(set(zone_of[closed].tolist())):
            mask = zone_of == zone
            window = self.zones.get(zone)
            if window is None:
                why = f"were in revocable zone {zone}, which no tdm.revocable-zone argument opens"
            else:
                why = f"were in revocable zone {zone}, closed now (open {window.text})"
            self._reasons.append((why, mask))
        self._closed = closed if closed.any() else None
        self._refused = self._open_nodes if self._open_nodes.any() else None
        self._asked_victims = False
        if self._last_open is not None and self._last_open != self._open:
            memory = ssn.snapshot.slot_memory
            if memory is not None:
                memory.forget()
        self._last_open = self._open

    def valid_until(self, ssn: Session) -> float:
        """The next opening or closing of a window; and, once a round of evictions ran
        in this session, the end of the evict period."""
        until = math.inf
        for window in self.zones.values():
            until = min(until, window.next_edge(ssn.now))
        last = ssn.snapshot.carried.get(CARRY_KEY)
        if self._asked_victims and last is not None:
            until = min(until, math.nextafter(last + self.evict_period, math.inf))
        return until

    # -- the hooks ----------------------------------------------------------------------

    def _predicate(self, task: TaskInfo) -> tuple[np.ndarray | None, list]:
        if task.placement.revocable or self._refused is None:
            return self._closed, self._reasons
        why = (
            "were revocable (the pod may use revocable nodes only with the annotation "
            f'{REVOCABLE_ZONE_KEY}: "*" or {PREEMPTABLE_KEY}: "true")'
        )
        reasons = [*self._reasons, (why, self._refused)]
        blocked = self._refused if self._closed is None else (self._closed | self._refused)
        return blocked, reasons

    def _preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """A preemptor that may itself be revoked evicts nobody; another may evict the
        preemptable Running pods of ordinary nodes, within each job's budget."""
        if preemptor.preemptable or preemptor.placement.revocable:
            return []
        ssn_index = self._node_index
        picked = [
            t
            for t in candidates
            if t.preemptable
            and t.status == TaskStatus.RUNNING
            and t.node is not None
            and t.node in ssn_index
            and not self._revocable[ssn_index[t.node]]
        ]
        return self._within_budgets(picked)

    def _victims(self, ssn: Session, tasks: Sequence[TaskInfo]) -> list[tuple[TaskInfo, str, str]]:
        """The preemptable Running pods on the nodes of closed zones, once per evict
        period."""
        self._asked_victims = True
        carried = ssn.snapshot.carried
        last = carried.get(CARRY_KEY)
        if last is not None and last <= ssn.now < last + self.evict_period:
            return []
        carried[CARRY_KEY] = ssn.now
        index = ssn.nodes.index
        out: list[tuple[TaskInfo, str, str]] = []
        for zone in sorted(self.zones):
            if zone in self._open:
                continue
            on_zone = [
                t
                for t in tasks
                if t.preemptable
                and t.status == TaskStatus.RUNNING
                and t.node is not None
                and t.node in index
                and self._zone_of[index[t.node]] == zone
            ]
            rule = (
                f"revocable zone {zone} is closed (open {self.zones[zone].text}): its "
                "preemptable pods are evicted, within their job's disruption budget"
            )
            out.extend((t, "", rule) for t in self._within_budgets(on_zone))
        return out

    def _within_budgets(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        by_job: dict[str, list[TaskInfo]] = {}
        for t in tasks:
            if t.job is not None:
                by_job.setdefault(t.job, []).append(t)
        jobs = self._jobs
        out: list[TaskInfo] = []
        for uid, group in by_job.items():
            job = jobs.get(uid)
            if job is not None:
                out.extend(group[: max(0, max_evictions(job))])
        return out

    # The session's jobs and node index, read when the hooks are called (a living
    # plugin's functions read the cycle's state).
    @property
    def _jobs(self) -> dict[str, JobInfo]:
        assert self._session is not None
        return self._session.jobs

    @property
    def _node_index(self) -> dict[str, int]:
        assert self._session is not None
        return self._session.nodes.index


def _job_order(a: JobInfo, b: JobInfo) -> int:
    pa, pb = job_preemptable(a), job_preemptable(b)
    if pa == pb:
        return 0
    return 1 if pa else -1


def _job_pipelined(job: JobInfo) -> int:
    occupied = job.waiting_num() + job.ready_num() + job.pending_best_effort_num()
    return 1 if occupied >= job.min_available else -1


def _job_starving(job: JobInfo) -> bool:
    return not job_preemptable(job) and bool(job.by_status.get(TaskStatus.PENDING))


class TdmScore(SeparableScore):
    """The ``node_order`` function: 100 on an open revocable node for a pod that may
    use one, else 0. Each node is scored on its own (the separable form of
    :class:`pumice.plugins.nodeorder.NodeOrderScore`); whether a pod may use revocable
    nodes is part of its placement, so of its shape."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: TdmPlugin) -> None:
        self.plugin = plugin

    def rows(self, task: TaskInfo, rows: np.ndarray, _ctx: None) -> np.ndarray:
        if not task.placement.revocable:
            return np.zeros(len(rows))
        return np.where(self.plugin._open_nodes[rows], MAX_SCORE, 0.0)

    def one(self, task: TaskInfo, i: int, _ctx: None) -> float:
        if not task.placement.revocable:
            return 0.0
        return MAX_SCORE if self.plugin._open_nodes[i] else 0.0


__all__ = ["TdmPlugin", "Window", "max_evictions", "parse_window"]
