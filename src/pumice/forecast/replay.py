"""When will a waiting job start: the scheduler replayed forward on a virtual clock.

:func:`forecast_starts` copies the cluster's objects into an in-memory cluster
(:class:`~pumice.cluster.memory.MemoryCluster`), puts the real scheduler cache and a
fresh :class:`~pumice.scheduler.Scheduler` of the same configuration over it, as the
simulator does, and runs cycles forward. Running pods end when
:mod:`pumice.forecast.ends` says (duration annotation, ``activeDeadlineSeconds``, or
their queue's learned run time); a waiting job starts at the cycle that binds its
first pod. ``batch.volcano.sh`` Jobs go through pumice's job controller on the same
clock, so a Job's pods appear when its PodGroup is admitted, as on a cluster. Where
nothing would make an admitted PodGroup's pods (the objects hold no Job: a running
scheduler does not watch Jobs), the replay makes ``minMember`` placeholder pods sharing
its ``minResources``, and the estimate says so.

**Assumptions.** No new job arrives; nothing fails; evicted pods leave after their grace
period and their Jobs' controller makes new ones; a pod bound in the replay starts
``startup`` seconds after its bind. Each estimate says which sources set the end times
of the pods that ended before it (the room it waits for).

**Cost.** Like the simulator, the replay skips idle time: after a cycle that changed
nothing, the clock jumps to the next pod end (rounded up to ``step``, a schedule period
by default) instead of ticking, and a cycle on an unchanged cluster repeats the last
one's decisions. It stops when every waiting job started, at ``horizon`` seconds past
``now``, or after ``max_cycles`` cycles, whichever comes first.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from pumice.api.job import INQUEUE, PENDING, JobInfo
from pumice.api.parse import DURATION_ANNOTATION, GROUP_ANNOTATION, timestamp
from pumice.api.quantity import render_quantity, to_canonical
from pumice.api.task import TaskStatus
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import DEFAULT_GRACE_SECONDS, MemoryCluster
from pumice.cluster.protocol import KINDS, store_kind
from pumice.conf.config import SchedulerConfig
from pumice.controllers.job import JobController
from pumice.controllers.job.expand import JOB_API
from pumice.controllers.manager import Manager
from pumice.controllers.store import MemoryStore
from pumice.forecast.durations import QueueDurations
from pumice.forecast.ends import (
    ANNOTATION,
    DEADLINE,
    LEARNED,
    pod_end,
    pod_start,
)
from pumice.scheduler import Scheduler

#: How far ahead a forecast looks by default (seconds).
DEFAULT_HORIZON = 7 * 24 * 3600.0
#: How many cycles a forecast runs at most by default.
DEFAULT_MAX_CYCLES = 20_000
#: Steps of the controllers within one instant before the replay moves on.
SETTLE = 50
#: The annotation naming the Volcano Job that made a pod.
JOB_NAME_ANNOTATION = "volcano.sh/job-name"
#: Source of the end of a pod that was being deleted.
DELETING = "deleting"

_SOURCE_WORDS = {
    ANNOTATION: "by {its} duration annotation",
    DEADLINE: "at {its} activeDeadlineSeconds",
    DELETING: "at the end of {its} deletion grace period",
    LEARNED: "at {its} queue's learned run time",
}


#: The ssh plugin's key pair in a replay: fixed, nothing logs in with it (and making a
#: real one per Job would cost more than the replay).
REPLAY_KEYS = (
    "-----BEGIN RSA PRIVATE KEY-----\npumice-forecast-key\n-----END RSA PRIVATE KEY-----\n",
    "ssh-rsa AAAApumiceforecastkey pumice@forecast\n",
)


def replay_keys() -> tuple[str, str]:
    return REPLAY_KEYS


@dataclass(slots=True, frozen=True)
class StartEstimate:
    """When a waiting job is expected to start, and on what that rests."""

    job: str  # "namespace/name" of the PodGroup/job, as the cache keys it
    start: float | None  # seconds since the epoch; None: not within the horizon
    assumption: str  # one sentence a user can act on or judge


@dataclass(slots=True)
class ForecastStats:
    """What a forecast cost and covered (for benchmarks and reports)."""

    cycles: int = 0
    virtual_seconds: float = 0.0
    waiting: int = 0
    started: int = 0
    stopped: str = ""  # "all started", "horizon", "quiet", "cycle cap"
    #: Wall seconds spent copying the objects into the replay's cluster and cache.
    setup_seconds: float = 0.0


def is_waiting(job: JobInfo) -> bool:
    """The job has not started: none of its pods holds a node or finished, and it has
    work to place (or is not admitted yet)."""
    if job.ready_num() or job.count((TaskStatus.RELEASING, TaskStatus.PIPELINED)):
        return False
    return job.phase == PENDING or bool(job.by_status.get(TaskStatus.PENDING))


def forecast_objects(objects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The objects a forecast replays (copies): the kinds the scheduler cache reads and
    Volcano's ``batch.volcano.sh`` Jobs."""
    kinds = set(KINDS)
    out = []
    for obj in objects:
        kind = store_kind(obj)
        if kind in kinds or (kind == "Job" and obj.get("apiVersion") == JOB_API):
            out.append(copy.deepcopy(dict(obj)))
    return out


def cluster_objects(cluster: Any) -> list[Mapping[str, Any]]:
    """Every object of a cluster (anything with the protocol's ``list``) a forecast
    reads: what a running scheduler hands :func:`forecast_starts`."""
    out: list[Mapping[str, Any]] = []
    for kind in (*KINDS, "Job"):
        try:
            out.extend(cluster.list(kind))
        except (KeyError, ValueError):
            continue
    return out


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


class _Replay:
    """One forecast's state (see the module docstring)."""

    def __init__(
        self,
        objects: Iterable[Mapping[str, Any]],
        scheduler: Scheduler,
        now: float,
        *,
        durations: QueueDurations | None,
        annotation: str | None,
        period: float,
        step: float,
        startup: float,
        scheduler_name: str,
    ) -> None:
        self.now = self.t = now
        self.period = period
        self.step = step
        self.startup = startup
        self.durations = durations
        self.annotation = annotation
        self.scheduler = scheduler
        self.store = MemoryCluster(clock=lambda: self.t)
        objs = forecast_objects(objects)
        self.store.create_all(objs)
        self.manager: Manager | None = None
        if any(store_kind(o) == "Job" for o in objs):
            api = MemoryStore(self.store)
            controller = JobController(api, scheduler_names=(scheduler_name,), keygen=replay_keys)
            self.manager = Manager(api, [controller])
        self.cache = SchedulerCache(self.store, scheduler_name=scheduler_name, clock=lambda: self.t)
        self.events: list[tuple[float, int, str, str, str]] = []  # (t, seq, kind, pod, source)
        self.seq = itertools.count()
        #: Bound pods whose end is on the clock, and the sequence number of that entry
        #: (an evicted pod's entry is dropped, so that its old end never fires).
        self.tracked: dict[str, int] = {}
        #: Pods with no known end, by queue.
        self.unknown: Counter[str] = Counter()
        #: Sources of the pod ends so far (and the queues of the learned ones).
        self.ended: Counter[str] = Counter()
        self.learned_queues: set[str] = set()
        self.started: dict[str, float] = {}
        self.rests: dict[str, tuple[Counter[str], frozenset[str]]] = {}
        self.pending: dict[str, str] = {}
        self.stats = ForecastStats()
        self.waiting: set[str] = set()
        #: Waiting PodGroups given placeholder pods (see :meth:`make_placeholders`).
        self.placeholders: set[str] = set()
        self.scheduler_name = scheduler_name

    # -- the cluster ---------------------------------------------------------------------

    def settle(self) -> None:
        if self.manager is None:
            return
        for _ in range(SETTLE):
            if not self.manager.step():
                break

    def queue_of(self, pod_key: str) -> str:
        task = self.cache.tasks.get(pod_key)
        job = self.cache.jobs.get(task.job) if task is not None and task.job else None
        return job.queue if job is not None else ""

    def track(self, pod_key: str, started: float) -> None:
        """Put a bound pod's end on the clock (or count it as of no known end)."""
        if pod_key in self.tracked:
            return
        pod = self.store.get("Pod", pod_key)
        if pod is None:
            return
        self.tracked[pod_key] = -1
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") is not None:
            grace = meta.get("deletionGracePeriodSeconds")
            grace = DEFAULT_GRACE_SECONDS if grace is None else float(grace)
            at = timestamp(meta["deletionTimestamp"], "metadata.deletionTimestamp")
            self.push(max(at + grace, self.t), "delete", pod_key, DELETING)
            return
        queue = self.queue_of(pod_key)
        owner = None
        job_name = (meta.get("annotations") or {}).get(JOB_NAME_ANNOTATION)
        if job_name:
            job = self.store.get("Job", f"{meta.get('namespace') or 'default'}/{job_name}")
            owner = ((job or {}).get("metadata") or {}).get("annotations")
        end = pod_end(pod, queue, started, self.durations, self.annotation, owner)
        if end.at is None:
            self.unknown[queue] += 1
            return
        self.push(max(end.at, self.t), "end", pod_key, end.source)
        if end.source == LEARNED:
            self.learned_queues.add(queue)

    def push(self, at: float, kind: str, pod_key: str, source: str) -> None:
        seq = next(self.seq)
        if kind != "evicted":
            self.tracked[pod_key] = seq
        heapq.heappush(self.events, (at, seq, kind, pod_key, source))

    def track_running(self) -> None:
        for pod in self.store.list("Pod"):
            spec = pod.get("spec") or {}
            phase = (pod.get("status") or {}).get("phase")
            if spec.get("nodeName") and phase not in ("Succeeded", "Failed"):
                key = f"{pod['metadata'].get('namespace') or 'default'}/{pod['metadata']['name']}"
                self.track(key, pod_start(pod, self.startup, self.t))

    def happen(self, until: float) -> None:
        """Carry out every pod end and deletion due by ``until``."""
        while self.events and self.events[0][0] <= until:
            at, seq, kind, key, source = heapq.heappop(self.events)
            self.t = max(self.t, at)
            if kind == "evicted":  # the grace period is over: the pod goes
                self.store.delete("Pod", key)
                continue
            if self.tracked.get(key) != seq:
                continue  # evicted before it ended
            del self.tracked[key]
            self.ended[source] += 1
            if kind == "delete":
                self.store.delete("Pod", key)
            else:
                self.store.set_pod_phase(key, "Succeeded")

    def make_placeholders(self) -> bool:
        """Pods for the admitted PodGroups that have none and nothing to make them (a
        running scheduler's cluster holds no Volcano Jobs: vc-controller makes a Job's
        pods once its PodGroup is admitted): ``minMember`` pods sharing ``minResources``,
        so that the gang can be placed and start. True when it made some."""
        jobs = self.cache.jobs
        made = False
        for uid in sorted(self.waiting - self.placeholders):
            job = jobs.get(uid)
            if job is None or job.tasks or job.phase != INQUEUE or job.min_available < 1:
                continue
            group = self.store.get("PodGroup", uid)
            if group is None:
                continue
            self.placeholders.add(uid)
            made = True
            members = job.min_available
            spec = group.get("spec") or {}
            share = {
                name: render_quantity(name, to_canonical(name, value) / members)
                for name, value in (spec.get("minResources") or {}).items()
            }
            pod_spec: dict[str, Any] = {
                "schedulerName": self.scheduler_name,
                "containers": [{"name": "placeholder", "resources": {"requests": share}}],
            }
            if spec.get("priorityClassName"):
                pod_spec["priorityClassName"] = spec["priorityClassName"]
            for i in range(members):
                self.store.create(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"{job.name}-forecast-{i}",
                            "namespace": job.namespace,
                            "creationTimestamp": self.t,
                            "annotations": {GROUP_ANNOTATION: job.name},
                        },
                        "spec": pod_spec,
                        "status": {"phase": "Pending"},
                    }
                )
        return made

    # -- the loop ------------------------------------------------------------------------

    def cycle(self) -> bool:
        """One scheduling cycle at ``t``; True when it changed the cluster."""
        cache = self.cache
        cache.sync()
        if self.manager is None and self.make_placeholders():
            cache.sync()
        if not cache.has_pending_work():
            return False
        self.stats.cycles += 1
        decisions = self.scheduler.cycle(cache.snapshot())
        applied = cache.apply(decisions)
        self.pending.update(decisions.pending)
        for key, _node in applied.bound:
            task = cache.tasks.get(key)
            uid = task.job if task is not None else None
            if uid is not None and uid not in self.started:
                self.started[uid] = self.t
                self.rests[uid] = (Counter(self.ended), frozenset(self.learned_queues))
            self.track(key, self.t + self.startup)
        for key in applied.evicted:
            pod = self.store.get("Pod", key)
            grace = ((pod or {}).get("metadata") or {}).get("deletionGracePeriodSeconds")
            grace = DEFAULT_GRACE_SECONDS if grace is None else float(grace)
            self.tracked.pop(key, None)
            self.push(self.t + grace, "evicted", key, "")
        return applied.changed()

    def run(self, horizon: float, max_cycles: int) -> None:
        self.settle()
        self.cache.sync()
        waiting = {uid for uid, job in self.cache.jobs.items() if is_waiting(job)}
        self.waiting = waiting
        self.stats.waiting = len(waiting)
        self.track_running()
        end = self.now + horizon
        period = self.period
        while True:
            self.settle()
            changed = self.cycle()
            self.settle()
            if waiting <= self.started.keys():
                self.stats.stopped = "all started"
                break
            if self.stats.cycles >= max_cycles:
                self.stats.stopped = "cycle cap"
                break
            due = []
            if self.events:  # the next pod end, on the replay's coarser step
                step = self.step
                due.append(
                    self.now + math.ceil((self.events[0][0] - self.now) / step - 1e-9) * step
                )
            if changed:
                due.append(self.t + period)
            if self.manager is not None and (wake := self.manager.next_due()) is not None:
                due.append(wake)
            if not due:
                self.stats.stopped = "quiet"
                break
            nxt = self.now + math.ceil((min(due) - self.now) / period - 1e-9) * period
            nxt = max(nxt, self.t + period)
            if nxt > end:
                self.stats.stopped = "horizon"
                break
            self.happen(nxt)
            self.t = nxt
        self.stats.virtual_seconds = self.t - self.now
        self.stats.started = len(waiting & self.started.keys())

    # -- what it says ----------------------------------------------------------------------

    def _rests_on(self, ended: Counter[str], queues: frozenset[str]) -> str:
        parts = []

        def words(source: str) -> str:
            n = ended[source]
            return f"{n} " + _SOURCE_WORDS[source].format(its="its" if n == 1 else "their")

        for source in (DEADLINE, ANNOTATION, DELETING):
            if ended[source]:
                parts.append(words(source))
        if ended[LEARNED]:
            how = []
            for q in sorted(queues):
                guess = self.durations.estimate(q) if self.durations is not None else None
                if guess is not None and self.durations is not None:
                    desc = self.durations.describe(q)
                    how.append(f"queue {q}: {guess:.0f} s, {desc}")
            parts.append(f"{words(LEARNED)} ({'; '.join(how)})")
        return ", ".join(parts)

    def estimate(self, uid: str, horizon: float) -> StartEstimate:
        start = self.started.get(uid)
        if start is None:
            return self._no_estimate(uid, horizon)
        wait = start - self.now
        ended, queues = self.rests[uid]
        n = sum(ended.values())
        if not n:
            when = "fits now" if wait < self.period else f"starts in about {_minutes(wait)}"
            said = f"{when}: no running pod needs to end first"
        else:
            said = (
                f"starts in about {_minutes(wait)}, once {n} running pod"
                f"{'s' if n != 1 else ''} end{'' if n != 1 else 's'} as assumed: "
                f"{self._rests_on(ended, queues)}"
            )
        if uid in self.placeholders:
            said += (
                "; its pods did not exist yet, so the forecast placed minMember pods "
                "sharing its PodGroup's minResources"
            )
        return StartEstimate(uid, start, f"{said} (no new arrivals assumed)")

    def _no_estimate(self, uid: str, horizon: float) -> StartEstimate:
        said = self.pending.get(uid, "")
        why = f" (the scheduler says: {said})" if said else ""
        stopped = self.stats.stopped
        if stopped == "cycle cap":
            return StartEstimate(
                uid,
                None,
                f"no estimate: the replay stopped at its cap of {self.stats.cycles} cycles "
                f"before the job started{why}",
            )
        job = self.cache.jobs.get(uid)
        if job is not None and not job.tasks and stopped != "horizon":
            return StartEstimate(
                uid,
                None,
                "no estimate: its pods do not exist yet and the forecast was given nothing to "
                "make them from (its batch.volcano.sh Job is not among the objects, and its "
                "PodGroup has no minMember)",
            )
        if "can never fit" in said:
            because = "it can never fit"
        elif self.unknown:
            n = sum(self.unknown.values())
            queues = ", ".join(sorted(q or "(none)" for q in self.unknown))
            because = (
                f"{n} running pod{'s' if n != 1 else ''} (queue {queues}) "
                f"{'have' if n != 1 else 'has'} no known end: no "
                f"{self.annotation or 'duration'} annotation, no activeDeadlineSeconds, "
                f"and too few finished jobs in the queue to learn a run time from"
            )
        elif stopped == "quiet":
            because = "no running pod is left to end and it still does not fit"
        else:
            because = "it is still waiting at the horizon"
        return StartEstimate(
            uid,
            None,
            f"no estimate: would not start within the {_minutes(horizon)} horizon because "
            f"{because}{why}; no new arrivals assumed",
        )


def scheduler_of(config: Scheduler | SchedulerConfig) -> Scheduler:
    """A scheduler of its own for a forecast: the same configuration and registries,
    without the living session of the one that schedules the cluster."""
    if isinstance(config, Scheduler):
        return Scheduler(config.config, config.plugins, config.actions)
    return Scheduler.create(config)


def forecast_starts(
    snapshot: Iterable[Mapping[str, Any]],
    config: Scheduler | SchedulerConfig,
    now: float,
    *,
    durations: QueueDurations | None = None,
    horizon: float = DEFAULT_HORIZON,
    max_cycles: int = DEFAULT_MAX_CYCLES,
    period: float = 1.0,
    step: float | None = None,
    startup: float = 0.0,
    annotation: str | None = DURATION_ANNOTATION,
    scheduler_name: str = "volcano",
    stats: ForecastStats | None = None,
) -> dict[str, StartEstimate]:
    """An estimated start for every job waiting in ``snapshot`` (the cluster's objects:
    what ``pumice cycle`` reads, or :func:`cluster_objects` of a live cluster), by the
    job's key in the scheduler cache (``namespace/name`` of its PodGroup).

    ``config``: the scheduler's configuration (or the scheduler itself: a fresh one of
    the same configuration replays, so the caller's living session is left alone).
    ``now``: the forecast's start (seconds since the epoch); estimates are on that
    clock. ``durations``: learned run times per queue for pods that say nothing of
    their own (None: none). ``period``: the schedule period; ``step``: pod ends are
    taken in at multiples of it (None: the period; a coarser step replays fewer cycles
    on a large cluster, each estimate then up to a step late); ``startup``: seconds from a
    bind to the pod running; ``annotation``: the duration annotation read (None: none);
    ``stats``: filled with what the forecast cost. See the module docstring for the
    assumptions."""
    began = time.perf_counter()
    replay = _Replay(
        snapshot,
        scheduler_of(config),
        now,
        durations=durations,
        annotation=annotation,
        period=period,
        step=max(step or period, period),
        startup=startup,
        scheduler_name=scheduler_name,
    )
    replay.stats.setup_seconds = time.perf_counter() - began
    replay.run(horizon, max_cycles)
    if stats is not None:
        for f in fields(ForecastStats):
            setattr(stats, f.name, getattr(replay.stats, f.name))
    return {uid: replay.estimate(uid, horizon) for uid in sorted(replay.waiting)}


__all__ = [
    "DEFAULT_HORIZON",
    "DEFAULT_MAX_CYCLES",
    "ForecastStats",
    "StartEstimate",
    "cluster_objects",
    "forecast_objects",
    "forecast_starts",
    "is_waiting",
    "scheduler_of",
]
