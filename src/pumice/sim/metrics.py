"""What a simulation measures, and the definitions the report states.

Per job (:class:`JobRecord`):

- ``submit``: arrival time; ``start``: when its gang was bound (the first bind of its
  last incarnation, so a restarted job starts again); ``end``: when its last pod ended;
- ``wait = start - submit`` (first start), ``completion = end - submit`` (job completion
  time, JCT);
- ``restarts`` (the job was restarted: its Job's ``retryCount`` rose, or the PodGroup
  model restarted it after an eviction), ``evictions`` (its pods the scheduler
  evicted), ``lost`` (pod-seconds of work thrown away: by restarts, and for a Volcano
  Job by any pod deleted before it ended on its own);
- ``phase``: a Volcano Job's final phase (Completed, Failed, Aborted, Terminated) and
  ``retries`` its final ``retryCount``.

Per action, over the run: ``actions`` (how often the job controller executed each
lifecycle action, e.g. RestartJob, RestartTask, AbortJob, CompleteJob, from its
``ExecuteAction`` Events; the PodGroup model's restarts count as RestartJob) and
``lost_by_cause`` (the pod-seconds thrown away, by the action that deleted the pods, or
``Evicted`` for the pods the scheduler evicted from a Volcano Job).
- ``pending_reason``: for a job that never started, the core's last explanation
  (``Decisions.pending``);
- ``reasons``: what held a job while it waited, as the core explained it, read at every
  sample: ``(time, explanation)`` each time it changed, and ``(time, "")`` when the job
  stopped waiting (its gang bound, or it ended); every incarnation of a restarted job.
  :mod:`pumice.sim.findings` reads it (how long each reason held the longest waits).

Over time (samples every ``interval`` seconds of simulated time):

- utilization per resource: resources held by bound pods / cluster allocatable (pods hold
  resources from bind to release, as the scheduler accounts them), never above 1;
- per queue: allocated share (dominant share over cpu, memory and extended resources of
  what its bound pods hold) and deserved share: the weighted max-min fair division of
  the cluster among the queues' current demand (requests of their pending and bound
  pods), capped by capability, the same water-filling the ``proportion`` plugin uses.
  It is computed here, independently of the scheduler's configuration, so that what-if
  runs of different configurations are measured against the same yardstick;
- pending jobs (submitted, not started or restarting) and running jobs.

Utilization is also integrated exactly, event by event (not from the samples), as a time
average over three windows, because a run's tail can hide what the cluster did while it
was busy (one long job running for days after the last arrival makes the whole-run
average small however full the cluster was before):

- ``utilization``: over the whole run, from the first arrival to the last event;
- ``utilization_arrivals``: over the arrival window, from the first arrival to the last
  (``arrival_window`` seconds; empty when all jobs arrived at once);
- ``utilization_waiting``: over the time in which at least one job was pending
  (``waiting_seconds``; empty when no job ever waited), i.e. while work was there that
  the cluster did not run.

Network topology (a cluster with HyperNodes): per job, the lowest HyperNode holding the
nodes its pods were on when its gang started running (its last incarnation), the tier of
that HyperNode (``tier``; the virtual root, the whole cluster, is one above the highest
real tier), how many nodes those were, and the run-time factor applied; per run, the
gangs (jobs of more than one pod) by the tier they spanned, and for the jobs with a
``networkTopology`` the same by mode, with the hard gangs found above their limit (which
must be none).

Gang atomicity: after every cycle's binds, every job that received binds must hold at
least ``minMember`` pods (bound, running or finished); each job found short is counted
as a violation. The count must be 0; it is measured, not assumed.

Everything here is a function of simulated events only (no wall-clock), so the same
inputs give identical metrics.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pumice.framework.said import Layer, Reasons, Text
from pumice.sim.topology import NO_SLOWDOWN, Slowdown, Spans
from pumice.sim.workload import GPU, JobSpec, QueueSpec

#: Resources that never count for utilization or shares.
NOT_SHARED = frozenset({"pods", "ephemeral-storage"})


@dataclass(slots=True)
class JobRecord:
    uid: str
    queue: str
    submit: float
    pods: int
    min_available: int
    gpus: float
    outcome: str
    start: float | None = None  # first start
    restart_start: float | None = None  # start of the last incarnation
    running_at: float | None = None  # first pod Running
    end: float | None = None
    restarts: int = 0
    evictions: int = 0
    lost: float = 0.0
    pending_reason: str = ""
    phase: str = ""
    retries: int = 0
    #: With a network topology: the span of its gang at its (last) start, its tier, the
    #: nodes it covered, the run-time factor; its networkTopology's mode and tier limit.
    hypernode: str = ""
    tier: int | None = None
    nodes_spanned: int = 0
    slowdown: float = 1.0
    nt_mode: str = ""
    nt_limit: int | None = None
    #: CPU (millicores) its pods request, all replicas: the yardstick of a job's size on a
    #: cluster without GPUs (``gpus`` otherwise).
    cpu: float = 0.0
    #: Memory (bytes) its pods request, all replicas (with ``cpu`` and ``gpus``, the
    #: whole request a remedy sizes a queue's guarantee by).
    memory: float = 0.0
    #: What held it while it waited: ``(sample time, explanation)`` at each change, and
    #: ``(time, "")`` when it stopped waiting (see the module docstring).
    reasons: list[tuple[float, str]] = field(default_factory=list)

    @property
    def wait(self) -> float | None:
        return None if self.start is None else self.start - self.submit

    @property
    def completion(self) -> float | None:
        return None if self.end is None else self.end - self.submit


@dataclass(slots=True)
class Series:
    """Samples over time: one row per sample time."""

    time: list[float] = field(default_factory=list)
    utilization: list[list[float]] = field(default_factory=list)  # per resource
    queue_share: list[list[float]] = field(default_factory=list)  # per queue
    queue_deserved: list[list[float]] = field(default_factory=list)  # per queue
    pending: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    #: per queue, the dominant share of its demand capped by its capability (what the
    #: deserved share is water-filled over); read by the findings, not written out
    queue_demand: list[list[float]] = field(default_factory=list)

    def thin(self) -> None:
        """Keep every other sample (the engine then samples half as often)."""
        for name in (
            "time",
            "utilization",
            "queue_share",
            "queue_deserved",
            "pending",
            "running",
            "queue_demand",
        ):
            setattr(self, name, getattr(self, name)[::2])


def water_fill(
    total: np.ndarray, demand: np.ndarray, weights: np.ndarray, capability: np.ndarray
) -> np.ndarray:
    """Weighted max-min fair division of ``total`` (R) among queues (Q x R ``demand``),
    each capped by its ``capability`` (Q x R, +inf = unlimited): proportion's deserved."""
    # (array methods rather than numpy's functions, and the loop's constants taken
    # once: the arrays are a few queues by a few resources, so the calls are the cost)
    want = np.minimum(demand, capability)
    deserved = np.zeros_like(want)
    remaining = total.astype(np.float64).copy()
    active = (want > 1e-9).any(axis=1)
    settled = 1e-6 * np.maximum(want, 1.0)
    for _ in range(len(weights) + 1):
        if not active.any() or not (remaining > 1e-9).any():
            break
        w = np.where(active, weights, 0.0)
        portion = (w / w.sum())[:, np.newaxis] * remaining[np.newaxis, :]
        new = np.minimum(deserved + portion, want)
        delta = new - deserved
        deserved = new
        remaining = np.maximum(remaining - delta.sum(axis=0), 0.0)
        active = (want - deserved > settled).any(axis=1)
        if not (delta > 1e-9).any():
            break
    return deserved


class Metrics:
    """Collects what :class:`~pumice.sim.kubelet.Kubelet` and the engine report."""

    def __init__(
        self,
        allocatable: Mapping[str, float],
        queues: Sequence[QueueSpec],
        *,
        spans: Spans | None = None,
        slowdown: Slowdown = NO_SLOWDOWN,
    ) -> None:
        self.spans = spans
        self.slowdown = slowdown
        self.resources = [r for r in sorted(allocatable) if r not in NOT_SHARED]
        # cpu and memory first, as everywhere in pumice
        self.resources.sort(key=lambda r: ({"cpu": 0, "memory": 1}.get(r, 2), r))
        self.index = {r: i for i, r in enumerate(self.resources)}
        self.total = np.array([allocatable[r] for r in self.resources], dtype=np.float64)
        #: The resources the cluster has, and what a share of each is taken of (1 for
        #: those it has none of, whose shares are 0).
        self._present = self.total > 0
        self._over = np.where(self._present, self.total, 1.0)
        self.queues = [q.name for q in queues]
        self.queue_index = {q: i for i, q in enumerate(self.queues)}
        nq, nr = len(self.queues), len(self.resources)
        self.weights = np.array([max(q.weight, 1) for q in queues], dtype=np.float64)
        self.capability = np.full((nq, nr), np.inf)
        for i, q in enumerate(queues):
            for name, amount in (q.capability or {}).items():
                if name in self.index:
                    self.capability[i, self.index[name]] = amount
        self.used = np.zeros(nr)
        self.alloc = np.zeros((nq, nr))
        self.demand = np.zeros((nq, nr))
        self.area = np.zeros(nr)  # integral of used over time
        self.last_change = 0.0
        #: The integral of used up to the latest arrival, and that arrival's time.
        self.area_at_last_submit = np.zeros(nr)
        self.last_submit = 0.0
        #: The integral of used over the time some job was pending, that time, and the
        #: time up to which both are counted.
        self.waiting_area = np.zeros(nr)
        self.waiting_seconds = 0.0
        self.waiting_counted_to = 0.0
        self.jobs: dict[str, JobRecord] = {}
        self._job_queue: dict[str, int] = {}
        self._vectors: dict[int, tuple[Mapping[str, float], np.ndarray]] = {}
        self.series = Series()
        self.gang_violations = 0
        self.gang_checks = 0
        self.cycles = 0
        self.skipped_ticks = 0
        self.binds = 0
        self.evictions = 0
        self.restarts = 0
        self.lost_work = 0.0
        self.actions: dict[str, int] = {}
        self.lost_by_cause: dict[str, float] = {}
        self.pending_jobs = 0
        self.running_jobs = 0
        self.first_submit: float | None = None
        self.last_end = 0.0
        #: Jobs waiting now (submitted or restarted, no pod of this incarnation bound,
        #: not ended) and the core's latest explanation of each, for ``reasons``.
        self._waiting: dict[str, None] = {}
        self._reason: dict[str, Held] = {}
        #: The core's latest explanation of each job that has not started, as the
        #: cycle handed it over (see :mod:`pumice.framework.said`): said into the
        #: record's ``pending_reason`` when the job starts, or by :meth:`summary`.
        self._said: dict[str, Held] = {}
        #: The cells of the last cycle's layers (see :meth:`cycle`), and the restarts
        #: and names they were kept with.
        self._cells: list[list[Layer]] = []
        self._cells_restarts = 0
        self._cells_names: Mapping[str, str] | None = None
        #: The last sample's used, alloc and demand (as bytes) and its rows of them.
        self._sampled: tuple[tuple[bytes, ...], tuple[list[float], ...]] = ((), ())
        #: The jobs submitted that have not started (whose record's ``start`` is None).
        self._unstarted: dict[str, None] = {}
        #: Start forecasts set against the run (``--forecast-error``; see
        #: :mod:`pumice.sim.forecast_error`), None when none were made.
        self.forecast: dict[str, Any] | None = None

    # -- helpers ------------------------------------------------------------------------

    def vector(self, requests: Mapping[str, float]) -> np.ndarray:
        hit = self._vectors.get(id(requests))
        if hit is not None and hit[0] is requests:
            return hit[1]
        v = np.zeros(len(self.resources))
        for name, amount in requests.items():
            i = self.index.get(name)
            if i is not None:
                v[i] = amount
        self._vectors[id(requests)] = (requests, v)
        return v

    def _advance(self, now: float) -> None:
        if now > self.last_change:
            self.area += self.used * (now - self.last_change)
            self.last_change = now

    def _count_waiting(self, now: float) -> None:
        """Count ``[waiting_counted_to, now)`` into the waiting totals if a job was
        pending then; called before anything changes ``used`` or ``pending_jobs``."""
        if now > self.waiting_counted_to:
            if self.pending_jobs > 0:
                self.waiting_area += self.used * (now - self.waiting_counted_to)
                self.waiting_seconds += now - self.waiting_counted_to
            self.waiting_counted_to = now

    def waiting_totals(self, end: float) -> tuple[np.ndarray, float]:
        """The integral of used over the time some job was pending, and that time,
        counted up to ``end`` (the run's end; nothing is changed)."""
        area, seconds = self.waiting_area, self.waiting_seconds
        if end > self.waiting_counted_to and self.pending_jobs > 0:
            area = area + self.used * (end - self.waiting_counted_to)
            seconds += end - self.waiting_counted_to
        return area, seconds

    # -- events from the kubelet --------------------------------------------------------

    def job_submitted(self, now: float, uid: str, spec: JobSpec) -> None:
        if self.first_submit is None:
            self.first_submit = now
        self._count_waiting(now)
        # (not _advance: the whole-run integral keeps its own steps)
        self.area_at_last_submit = self.area + self.used * max(now - self.last_change, 0.0)
        self.last_submit = now
        self.jobs[uid] = JobRecord(
            uid=uid,
            queue=spec.queue,
            submit=now,
            pods=spec.replicas,
            min_available=spec.min_available,
            gpus=spec.total(GPU),
            outcome=spec.outcome,
            cpu=spec.total("cpu"),
            memory=spec.total("memory"),
        )
        self._waiting[uid] = None
        self._unstarted[uid] = None
        nt = spec.network_topology
        if nt is not None and self.spans is not None:
            rec = self.jobs[uid]
            rec.nt_mode = nt.mode
            rec.nt_limit = self.spans.limit(nt)
        self._job_queue[uid] = self.queue_index.get(spec.queue, -1)
        self.pending_jobs += 1

    def pod_created(self, uid: str, requests: Mapping[str, float]) -> None:
        q = self._job_queue[uid]
        if q >= 0:
            self.demand[q] += self.vector(requests)

    def pod_dropped(self, uid: str, requests: Mapping[str, float]) -> None:
        """A pod that never held a node is gone."""
        q = self._job_queue[uid]
        if q >= 0:
            self.demand[q] -= self.vector(requests)

    def pod_bound(self, now: float, uid: str, requests: Mapping[str, float], active: int) -> None:
        self._advance(now)
        self._count_waiting(now)
        v = self.vector(requests)
        self.used += v
        q = self._job_queue[uid]
        if q >= 0:
            self.alloc[q] += v
        self.binds += 1
        rec = self.jobs[uid]
        if rec.restart_start is None:
            rec.restart_start = now
            if rec.start is None:
                rec.start = now
                del self._unstarted[uid]
                said = self._said.pop(uid, None)
                if said is not None:
                    rec.pending_reason = _said(said)
            self.pending_jobs -= 1
            self.running_jobs += 1
            self._stop_waiting(now, rec)

    def pod_started(self, now: float, uid: str) -> None:
        rec = self.jobs[uid]
        if rec.running_at is None:
            rec.running_at = now

    def job_spanned(self, uid: str, hypernode: str, tier: int, nodes: int, slowdown: float) -> None:
        """Job ``uid``'s gang started running on ``nodes`` nodes, all under
        ``hypernode`` (of ``tier``); it runs ``slowdown`` times its duration."""
        rec = self.jobs[uid]
        rec.hypernode, rec.tier, rec.nodes_spanned, rec.slowdown = hypernode, tier, nodes, slowdown

    def pod_released(self, now: float, uid: str, requests: Mapping[str, float]) -> None:
        self._advance(now)
        self._count_waiting(now)
        v = self.vector(requests)
        self.used -= v
        q = self._job_queue[uid]
        if q >= 0:
            self.alloc[q] -= v
            self.demand[q] -= v

    def pod_evicted(self, now: float, uid: str) -> None:
        self.jobs[uid].evictions += 1
        self.evictions += 1

    def job_action(self, uid: str, action: str) -> None:
        """The job controller executed ``action`` on job ``uid``."""
        self.actions[action] = self.actions.get(action, 0) + 1

    def work_lost(self, uid: str, cause: str, seconds: float) -> None:
        """``seconds`` pod-seconds of job ``uid``'s work were thrown away by ``cause``."""
        rec = self.jobs[uid]
        rec.lost += seconds
        self.lost_work += seconds
        self.lost_by_cause[cause] = self.lost_by_cause.get(cause, 0.0) + seconds

    def job_restarted(self, now: float, uid: str, lost: float, action: str = "") -> None:
        """Job ``uid`` starts over; ``lost`` pod-seconds go with it (0 when the lost work
        is reported pod by pod, :meth:`work_lost`), charged to ``action``."""
        self._count_waiting(now)
        rec = self.jobs[uid]
        rec.restarts += 1
        self.restarts += 1
        if lost:
            self.work_lost(uid, action or "RestartJob", lost)
        if rec.restart_start is not None:
            rec.restart_start = None
            self.pending_jobs += 1
            self.running_jobs -= 1
            self._waiting[uid] = None

    def job_ended(
        self, now: float, uid: str, outcome: str, *, phase: str = "", retries: int = 0
    ) -> None:
        self._count_waiting(now)
        rec = self.jobs[uid]
        rec.end = now
        rec.outcome = outcome
        rec.phase = phase
        rec.retries = retries
        self.last_end = max(self.last_end, now)
        self._stop_waiting(now, rec)
        if rec.restart_start is None:
            self.pending_jobs -= 1
        else:
            self.running_jobs -= 1

    # -- events from the engine ---------------------------------------------------------

    def cycle(self, pending: Mapping[str, Text], names: Mapping[str, str] | None = None) -> None:
        """A cycle's explanations (``Decisions.pending``; ``names``: the job uid of a
        podgroup uid, where they differ). Kept as handed over: only those read at a
        sample or a job's start are said.

        A :class:`~pumice.framework.said.Layer` (a parked backlog refused as one) is
        kept by reference: each of its jobs as (cell, podgroup uid), the cell holding
        the layer. When the next cycle's layer covers the same jobs, as it does while a
        backlog waits unchanged, the cell takes the new layer and nothing is done per
        job (none of them can have started or come back to wait in between, short of a
        restart, after which the jobs are taken one by one again)."""
        self.cycles += 1
        # (Set operations and bulk updates: a backlog is handed over in every cycle.)
        if isinstance(pending, Reasons):
            held, layers = pending.held()
        else:
            held, layers = dict(pending), ()
        if held:  # (none in many cycles: all that wait are in layers)
            if names:
                held = dict(zip(map(names.get, held, held), held.values(), strict=True))
            self._keep(held)
        last, self._cells = self._cells, []
        if self._cells_restarts != self.restarts or self._cells_names is not names:
            last = []
            self._cells_restarts, self._cells_names = self.restarts, names
        if len(last) == 1 == len(layers):  # (the backlog of the last cycle, moved on)
            self._cells = [self._move(last[0], layers[0], names)]
            return
        for layer in layers:
            cell = [layer]
            self._keep_in(cell, list(layer), names)
            self._cells.append(cell)

    def _move(
        self, cell: list[Layer], layer: Layer, names: Mapping[str, str] | None
    ) -> list[Layer]:
        """``cell`` (the last cycle's layer) takes ``layer`` for the jobs in both: the
        jobs only in the last one keep its explanation (in a cell of their own), those
        only in ``layer`` are kept one by one."""
        last = cell[0]
        if not last.same_jobs(layer):
            before, now = set(last), set(layer)
            gone = before - now
            if gone:
                frozen = [last]
                for uid in gone:
                    job = names.get(uid, uid) if names else uid
                    for kept in (self._said, self._reason):
                        held = kept.get(job)
                        if type(held) is tuple and held[0] is cell:
                            kept[job] = (frozen, uid)
            added = sorted(now - before)
            if added:
                self._keep_in(cell, added, names)
        cell[0] = layer
        return cell

    def _keep_in(self, cell: list[Layer], uids: list[str], names: Mapping[str, str] | None) -> None:
        """Keep the explanations of ``uids`` (podgroup uids) as held by ``cell``'s layer."""
        jobs = list(map(names.get, uids, uids)) if names else uids
        self._keep(dict(zip(jobs, zip(itertools.repeat(cell), uids), strict=True)))

    def _keep(self, pending: Mapping[str, Held]) -> None:
        """Keep ``pending``'s explanations of the jobs that have not started and of
        those waiting."""
        keys, get = pending.keys(), pending.__getitem__
        # (Most cycles explain only jobs that have not started and wait: those are
        # kept whole, without a set of them to build.)
        if keys <= self._unstarted.keys():
            self._said.update(pending)
        else:
            unstarted = keys & self._unstarted.keys()
            self._said.update(zip(unstarted, map(get, unstarted), strict=True))
        if keys <= self._waiting.keys():
            self._reason.update(pending)
        else:
            waiting = keys & self._waiting.keys()
            self._reason.update(zip(waiting, map(get, waiting), strict=True))

    def say_reasons(self) -> None:
        """Write each unstarted job's latest explanation into its record."""
        jobs = self.jobs
        for uid, reason in self._said.items():
            jobs[uid].pending_reason = _said(reason)
        self._said.clear()

    def _stop_waiting(self, now: float, rec: JobRecord) -> None:
        """``rec`` no longer waits: close its ``reasons`` timeline."""
        self._waiting.pop(rec.uid, None)
        self._reason.pop(rec.uid, None)
        if rec.reasons and rec.reasons[-1][1]:
            rec.reasons.append((now, ""))

    def check_gang(self, uid: str, held: int) -> None:
        rec = self.jobs.get(uid)
        if rec is None:
            return
        self.gang_checks += 1
        if 0 < held < rec.min_available:
            self.gang_violations += 1

    def sample(self, now: float) -> None:
        self._advance(now)
        s = self.series
        s.time.append(now)
        # (what the shares are made of, as it stands: half the samples of the built-in
        # scenario find it as the last one did, and so its shares)
        state = (self.used.tobytes(), self.alloc.tobytes(), self.demand.tobytes())
        if state != self._sampled[0]:
            self._sampled = (state, self._shares())
        util, shares, deserved, wanted = self._sampled[1]
        s.utilization.append(list(util))
        s.queue_share.append(list(shares))
        s.queue_deserved.append(list(deserved))
        s.pending.append(self.pending_jobs)
        s.running.append(self.running_jobs)
        s.queue_demand.append(list(wanted))
        jobs, reason = self.jobs, self._reason
        for uid in self._waiting:
            text = reason.get(uid)
            if text is not None and type(text) is not str:
                if type(text) is tuple:  # (a layer's: its cell moves on with the backlog)
                    text = _said(text)
                else:
                    text = reason[uid] = _said(text)
            if text:
                timeline = jobs[uid].reasons
                if not timeline or timeline[-1][1] != text:
                    timeline.append((now, text))

    def _shares(self) -> tuple[list[float], list[float], list[float], list[float]]:
        """A sample's rows, rounded: the cluster's utilization per resource, and per
        queue its largest share of a resource allocated, deserved (water fill of the
        demand) and wanted (the demand within its capability)."""
        total, present, over = self.total, self._present, self._over
        with np.errstate(divide="ignore", invalid="ignore"):
            util = np.where(present, self.used / over, 0.0)
            shares = np.where(present, self.alloc / over, 0.0)
            demand = np.maximum(self.demand, 0.0)
            deserved = water_fill(total, demand, self.weights, self.capability)
            dshare = np.where(present, deserved / over, 0.0)
            want = np.minimum(demand, self.capability)
            wshare = np.where(present, want / over, 0.0)
        return (
            [round(x, 6) for x in util.tolist()],
            [round(x, 6) for x in shares.max(axis=1, initial=0.0).tolist()],
            [round(x, 6) for x in dshare.max(axis=1, initial=0.0).tolist()],
            [round(x, 6) for x in wshare.max(axis=1, initial=0.0).tolist()],
        )

    # -- results ------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Headline numbers (the report's summary table); see :func:`summarize`."""
        self.say_reasons()
        return summarize(self)


#: An explanation as the metrics keep it: a sentence, one to be made when read, or a
#: layer's, as (the cell holding the layer, the uid it knows the job by).
Held = Text | tuple[list[Layer], str]


def _said(held: Held) -> str:
    """The sentence of an explanation kept."""
    if type(held) is tuple:
        return held[0][0][held[1]]
    return str(held)


def stats(values: Sequence[float]) -> dict[str, float | None]:
    """Mean, p50, p95 and max of ``values`` (rounded; None for none)."""
    return _stats(values)


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p95": None, "max": None}
    a = np.asarray(values, dtype=np.float64)
    return {
        "mean": round(float(a.mean()), 3),
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "max": round(float(a.max()), 3),
    }


def _phases(ended: Sequence[JobRecord]) -> dict[str, int]:
    """Final phases of the Volcano Jobs that ended (empty when none was one)."""
    out: dict[str, int] = {}
    for j in ended:
        if j.phase:
            out[j.phase] = out.get(j.phase, 0) + 1
    return dict(sorted(out.items()))


def _averages(m: Metrics, area: np.ndarray, seconds: float) -> dict[str, float]:
    """Per resource, the time average of use over ``seconds`` whose integral is
    ``area``, as a share of the cluster; empty when ``seconds`` is 0."""
    if seconds <= 0:
        return {}
    return {
        r: round(float(area[i] / (m.total[i] * seconds)), 6) if m.total[i] else 0.0
        for i, r in enumerate(m.resources)
    }


def summarize(m: Metrics) -> dict[str, Any]:
    jobs = list(m.jobs.values())
    started = [j for j in jobs if j.start is not None]
    ended = [j for j in jobs if j.end is not None]
    start = m.first_submit or 0.0
    makespan = (m.last_end - start) if ended else 0.0
    span = max(m.last_change - start, 0.0)
    util = {}
    for i, r in enumerate(m.resources):
        util[r] = round(float(m.area[i] / (m.total[i] * span)), 6) if span and m.total[i] else 0.0
    window = max(m.last_submit - start, 0.0)
    waiting_area, waiting = m.waiting_totals(m.last_change)
    per_queue: dict[str, Any] = {}
    share = np.asarray(m.series.queue_share) if m.series.time else np.zeros((0, len(m.queues)))
    deserved = (
        np.asarray(m.series.queue_deserved) if m.series.time else np.zeros((0, len(m.queues)))
    )
    for qi, q in enumerate(m.queues):
        qjobs = [j for j in jobs if j.queue == q]
        stray = float(np.mean(np.abs(share[:, qi] - deserved[:, qi]))) if len(share) else 0.0
        per_queue[q] = {
            "jobs": len(qjobs),
            "wait": _stats([j.wait for j in qjobs if j.wait is not None]),
            "completion": _stats([j.completion for j in qjobs if j.completion is not None]),
            "mean_share": round(float(share[:, qi].mean()), 6) if len(share) else 0.0,
            "mean_deserved": round(float(deserved[:, qi].mean()), 6) if len(share) else 0.0,
            "fairness_gap": round(stray, 6),
            "evictions": sum(j.evictions for j in qjobs),
        }
    gaps = [v["fairness_gap"] for v in per_queue.values() if v["jobs"]]
    out = {
        "jobs": len(jobs),
        "jobs_started": len(started),
        "jobs_ended": len(ended),
        "jobs_succeeded": sum(1 for j in ended if j.outcome == "succeed"),
        "jobs_failed": sum(1 for j in ended if j.outcome == "fail"),
        "jobs_cancelled": sum(1 for j in ended if j.outcome == "cancel"),
        "jobs_never_ran": len(jobs) - len(started),
        "makespan": round(makespan, 3),
        "wait": _stats([j.wait for j in started if j.wait is not None]),
        "completion": _stats([j.completion for j in ended if j.completion is not None]),
        "utilization": util,
        "arrival_window": round(window, 3),
        "utilization_arrivals": _averages(m, m.area_at_last_submit, window),
        "waiting_seconds": round(waiting, 3),
        "utilization_waiting": _averages(m, waiting_area, waiting),
        "fairness_gap": round(float(np.mean(gaps)), 6) if gaps else 0.0,
        "evictions": m.evictions,
        "restarts": m.restarts,
        "lost_work_pod_seconds": round(m.lost_work, 3),
        "actions": dict(sorted(m.actions.items())),
        "lost_by_cause": {k: round(v, 3) for k, v in sorted(m.lost_by_cause.items())},
        "jobs_by_phase": _phases(ended),
        "gang_violations": m.gang_violations,
        "gang_checks": m.gang_checks,
        "binds": m.binds,
        "cycles": m.cycles,
        "skipped_ticks": m.skipped_ticks,
        "queues": per_queue,
    }
    if m.spans is not None:
        out["topology"] = topology_summary(m, jobs)
    if m.forecast is not None:
        out["forecast"] = m.forecast
    return out


def _by_tier(jobs: Sequence[JobRecord], tiers: Sequence[int]) -> dict[str, int]:
    counts = {str(t): 0 for t in tiers}
    for j in jobs:
        if j.tier is not None:
            counts[str(j.tier)] = counts.get(str(j.tier), 0) + 1
    return counts


def topology_summary(m: Metrics, jobs: Sequence[JobRecord]) -> dict[str, Any]:
    """The network side of a run: tiers, gangs by the tier they spanned, and the jobs
    with a networkTopology by mode (hard gangs above their limit must be none)."""
    assert m.spans is not None
    tiers = list(m.spans.topology.tiers)
    gangs = [j for j in jobs if j.pods > 1 and j.start is not None]
    constrained: dict[str, Any] = {}
    for mode in ("hard", "soft"):
        mine = [j for j in jobs if j.nt_mode == mode]
        if not mine:
            continue
        started = [j for j in mine if j.start is not None]
        constrained[mode] = {
            "jobs": len(mine),
            "started": len(started),
            "by_tier": _by_tier(started, tiers),
            "above_limit": sum(
                1
                for j in started
                if j.tier is not None and j.nt_limit is not None and j.tier > j.nt_limit
            ),
            "wait": _stats([j.wait for j in started if j.wait is not None]),
        }
    return {
        "tiers": tiers,
        "root_tier": m.spans.root_tier,
        "slowdown": m.slowdown.as_dict(),
        "gangs_started": len(gangs),
        "gangs_by_tier": _by_tier(gangs, tiers),
        "slowed_gangs": sum(1 for j in gangs if j.slowdown != 1.0),
        "constrained": constrained,
    }


__all__ = [
    "JobRecord",
    "Metrics",
    "Series",
    "stats",
    "summarize",
    "topology_summary",
    "water_fill",
]
