"""The simulation loop: a virtual clock drives the kubelets and the scheduler.

One run wires the pieces the way a real deployment is wired, with the cluster replaced
by an in-memory store: pumice's job controller and the simulated kubelets
(:class:`~pumice.sim.kubelet.Kubelet`) change objects in a
:class:`~pumice.cluster.memory.MemoryCluster`; the scheduler's
:class:`~pumice.cache.cache.SchedulerCache` watches that store, hands a snapshot to
:meth:`Scheduler.cycle <pumice.scheduler.Scheduler.cycle>` and applies the decisions
through the cluster protocol. The scheduling code does not know it is simulated.

**Cycles and skipped ticks.** Volcano runs a cycle every schedule period (1 s by
default); so does the simulation, on simulated time, with one shortcut that keeps it
fast without changing any decision: a tick is *skipped* when nothing that could change
a decision happened since the last cycle, and when no job has pending work.

- The scheduling cycle is a pure function of the cluster state (``(snapshot, config) ->
  decisions``), so a cycle on the same state as the last one decides the same thing
  again: nothing new. The state changes a decision can depend on are work arriving
  (a job's PodGroup created, or sent back to Pending after a restart; with
  ``pods_on_admission=False`` its pods too) and resources freed (a pod ending or
  leaving its node); each schedules a tick at the next period boundary. Pods created
  on admission need none: the cycle that admitted the job is followed by another.
  A pod turning ``Running`` after its startup delay holds the same resources as when it
  was bound, so it schedules no tick. A cycle that changed the cluster itself (bound or
  evicted pods, moved a podgroup to another phase, e.g. ``Pending -> Inqueue``) is
  followed by one more at the next period, which sees that new state, as Volcano's
  next cycle would.
- Every action (enqueue, allocate, backfill, preempt, reclaim) starts from a job with
  pending tasks or a job not admitted yet; without one, a cycle can only rewrite
  podgroup status, so the tick is skipped (and counted in ``skipped_ticks``).

**Controllers.** Every Volcano job is a ``batch.volcano.sh`` Job (those of the workload
that are not are made one when they arrive, :func:`~pumice.sim.objects.volcano_job`;
a gang of another dialect never is), and pumice's
job controller
(:class:`~pumice.controllers.job.JobController`, the code ``pumice controllers`` runs
on a cluster) runs under a :class:`~pumice.controllers.manager.Manager`
over the same store (a :class:`~pumice.sim.apiserver.SimStore`), on the virtual clock:
the manager steps at the end of every instant that had events and before each cycle
(not when it is idle: no event for it or the kubelet, no requeue due),
and the clock gets a wake-up when a requeue (a policy timeout, a TTL) falls due. The
PodGroups and pods it creates are work for the next cycle (a period after the cycle
that admitted the job). ``SimOptions(job_controller=False)`` (or
``pods_on_admission=False``) leaves PodGroup-shaped jobs to the kubelet's lighter
PodGroup model instead; the controller then runs only if the workload has Jobs.

**Network topology.** ``hypernodes`` (``topology.volcano.sh`` HyperNode objects) go into
the store with the nodes, where the scheduler's cache reads them as on a cluster; the
kubelet and the metrics use the same tree (:mod:`pumice.sim.topology`) to find the tier
each gang spans when it starts, and ``SimOptions.topology_slowdown`` lengthens its run
accordingly (off by default).

**Storage.** ``storage`` (StorageClasses, PersistentVolumes, CSINodes, CSIDrivers of the
cluster file) goes into the store with the nodes; the workload's claims are created when
the first job mounting them arrives, and released volumes are reclaimed
(:mod:`pumice.sim.storage`); the controllers then also run the ephemeral claim
controller and the reclaimer. Binding a pod binds its volumes at once
(:meth:`~pumice.cluster.memory.MemoryCluster.bind`).

**Devices.** ``devices`` (ResourceSlices and DeviceClasses of the cluster file) go into
the store with the nodes; when the workload's pods need ResourceClaims, its templates
and claims are created (:mod:`pumice.sim.devices`), and the controllers also run the
resource-claim controller (:mod:`pumice.controllers.resourceclaims`): it makes the
claims of pods' template entries and gives a claim's devices back when its pods are
done. Binding a pod writes its claims' allocations at once.

**Gang timeouts.** A gang of another dialect (coscheduling, Kubernetes' Workload API)
times out and backs off on the session's clock (:mod:`pumice.plugins.gang_timeout`),
at times nothing else may mark: after each cycle the engine wakes for the first
timeout or end of a backoff of the gangs the cache keeps clocks for (see
:meth:`Simulation._gang_deadline`).

``SimOptions(skip_idle=False)`` runs a cycle at every period boundary instead;
``tests/sim/test_engine.py`` checks that both give the same metrics.
"""

from __future__ import annotations

import copy
import gc
import math
import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pumice.api import parse
from pumice.api.node_metrics import KIND as NODE_METRICS
from pumice.api.node_metrics import synthetic_node_metrics
from pumice.api.quantity import PODS, render_quantity, render_resources
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.conf.config import metrics_interval
from pumice.controllers.ephemeral import EphemeralClaimController
from pumice.controllers.job import JobController
from pumice.controllers.manager import Manager
from pumice.controllers.resourceclaims import ResourceClaimController
from pumice.errors import InputError, shown
from pumice.plugins.gang_timeout import CARRY_KEY, GangTimeouts
from pumice.scheduler import Scheduler
from pumice.sim.apiserver import SimStore, sim_keygen
from pumice.sim.clock import ARRIVAL, CONTROLLERS, CYCLE, SAMPLE, Clock
from pumice.sim.devices import DeviceClaimFeeder, check_device_claims, uses_devices
from pumice.sim.kubelet import DEFAULT_GRACE, DEFAULT_STARTUP_DELAY, Kubelet
from pumice.sim.metrics import Metrics
from pumice.sim.objects import (
    priority_class_objects,
    queue_objects,
)
from pumice.sim.storage import ClaimFeeder, VolumeReclaimer, mounts_claims
from pumice.sim.topology import NO_SLOWDOWN, Slowdown, Spans, cluster_topology
from pumice.sim.workload import JobSpec, Workload
from pumice.visibility.line import PendingJob, pending_jobs

#: How many sample points a run aims for (the time series of the report).
TARGET_SAMPLES = 600

#: Clock events that do not by themselves keep a simulation going.
_HOUSEKEEPING = frozenset({"tick", "sample", "deadline", "metrics"})
#: Steps of the controllers within one instant before the simulation gives up on
#: them settling (a controller fighting itself).
_SETTLE = 50

Progress = Callable[[int, int, float], None]  # (jobs ended, jobs total, simulated time)


@dataclass(frozen=True, slots=True)
class SimOptions:
    period: float = 1.0  # schedule period, seconds of simulated time
    startup_delay: float = DEFAULT_STARTUP_DELAY
    grace: float = DEFAULT_GRACE
    skip_idle: bool = True
    #: Create a job's pods when its PodGroup is admitted, as Volcano's job controller
    #: does (False: with the PodGroup, at arrival, as for PodGroups and pods submitted
    #: directly; this is the PodGroup model's, so it implies ``job_controller=False``).
    pods_on_admission: bool = True
    #: Run every job through pumice's job controller as a Volcano Job
    #: (:func:`~pumice.sim.objects.volcano_job`); False: PodGroup-shaped jobs go through
    #: the kubelet's lighter PodGroup model (jobs read as Volcano Jobs never do).
    job_controller: bool = True
    sample_interval: float | None = None  # default: about TARGET_SAMPLES samples
    scheduler_name: str = "volcano"
    #: Run-time factor by the tier a gang spans when it starts (needs HyperNodes;
    #: empty: none is slowed).
    topology_slowdown: Slowdown = NO_SLOWDOWN
    #: Measured node load for the ``usage`` plugin: every ``metrics_period`` seconds
    #: (None: the configuration's ``metrics.interval``, else 30 s) each node gets a
    #: NodeMetrics object saying it uses ``usage_factor`` times the requests of its
    #: pods (:func:`~pumice.api.node_metrics.synthetic_node_metrics`). Only when the
    #: configuration has the usage plugin: no other reads it.
    usage_factor: float = 0.6
    metrics_period: float | None = None
    #: Measure start forecasts against what happens (:mod:`pumice.sim.forecast_error`):
    #: how many jobs to forecast at most (0: none, the default) and how run times are
    #: known to the forecast ("learned" or "annotation").
    forecast_sample: int = 0
    forecast_durations: str = "learned"


@dataclass(slots=True)
class SimResult:
    metrics: Metrics
    summary: dict[str, Any]
    events: int
    sim_time: float
    workload: Workload
    config_name: str = "default"
    notes: list[str] = field(default_factory=list)
    #: Wall seconds spent scheduling: the cycles and the cache's work around them
    #: (taking in the watch events, the snapshot, applying the decisions), which
    #: ``pumice run`` does on a cluster too. The rest of a run's wall time is the
    #: simulated cluster (controllers, kubelets, metrics). Not part of the metrics:
    #: like the wall time, it differs between two runs of the same inputs.
    scheduling_seconds: float = 0.0
    #: Of ``scheduling_seconds``, those inside the scheduling cycles themselves
    #: (``Scheduler.cycle``), without the cache's work around them.
    cycle_seconds: float = 0.0
    #: Wall seconds the start forecasts of ``--forecast-error`` took (0.0: none ran).
    forecast_seconds: float = 0.0
    #: One entry per cycle run (skipped ticks have none), in order: the jobs the cycle
    #: left waiting (``len(decisions.pending)``) and the wall seconds of its scheduling
    #: step (the cache's sync and snapshot, ``Scheduler.cycle``, applying the decisions:
    #: its share of ``scheduling_seconds``). Wall time, so not part of the metrics; the
    #: report's ``cycle_cost.png`` and run.json's ``cycle_cost_by_backlog`` read them.
    cycle_backlog: array[int] = field(default_factory=lambda: array("I"))
    cycle_wall: array[float] = field(default_factory=lambda: array("d"))
    #: The line of waiting jobs at the busiest moment (the first cycle at which the
    #: most jobs waited): (simulated time, the jobs in the order the scheduler tried
    #: them); None when no job ever waited after a cycle.
    busiest_line: tuple[float, list[PendingJob]] | None = None


def node_allocatable(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Each node's allocatable resources in canonical units (validating the nodes)."""
    out = []
    for n in nodes:
        try:
            out.append(dict(parse.parse_node(n).allocatable))
        except InputError as err:
            name = (n.get("metadata") or {}).get("name", "?")
            raise err.located(obj=f"Node {name}") from None
    return out


def check_workload(workload: Workload, nodes: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a workload the cluster can never run: a pod no node can hold, a gang
    larger than the whole cluster, a job in a queue that does not exist."""
    allocs = node_allocatable(nodes)
    total: dict[str, float] = {}
    for a in allocs:
        for k, v in a.items():
            total[k] = total.get(k, 0.0) + v
    queues = {q.name for q in workload.queues}
    fits: dict[int, bool] = {}
    for job in workload.jobs:
        where = job.origin
        file = where.file if where is not None else None
        obj = where.obj if where is not None else f"job {job.uid}"
        if job.queue not in queues:
            raise InputError(
                f"queue {shown(job.queue)} does not exist (queues: {', '.join(sorted(queues))})",
                file=file,
                obj=obj,
                field=where.queue_field if where is not None else "queue",
            )
        for index, task in enumerate(job.tasks):
            req = task.requests
            ok = fits.get(id(req))
            if ok is None:
                ok = any(all(v <= a.get(k, 0.0) for k, v in req.items()) for a in allocs)
                fits[id(req)] = ok
            if not ok:
                asked = ", ".join(f"{k} {v}" for k, v in render_resources(req).items())
                raise InputError(
                    f"a pod of task {task.name} asks for {asked}: no node of the cluster "
                    f"can ever hold it",
                    file=file,
                    obj=obj,
                    field=where.requests_field.format(task=index)
                    if where is not None
                    else f"tasks.{task.name}.requests",
                )
        # every pod takes one of its node's pod slots, whatever else it asks for
        for name in {PODS, *(k for t in job.tasks for k in t.requests)}:
            amount = job.total(name) if name != PODS else sum(t.replicas for t in job.tasks)
            if amount > total.get(name, 0.0):
                largest = max(range(len(job.tasks)), key=lambda i: job.tasks[i].replicas)
                raise InputError(
                    f"the job asks for {render_quantity(name, amount)} {name} in "
                    f"all, more than the cluster's {render_quantity(name, total.get(name, 0.0))}",
                    file=file,
                    obj=obj,
                    field=where.replicas_field.format(task=largest) if where is not None else None,
                )


def _copies(objs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Deep copies of ``objs`` for the store to create (and then write into): the
    objects a simulation is given are dicts, read from documents or built."""
    return cast(list[dict[str, Any]], copy.deepcopy(list(objs)))


class Simulation:
    """One simulated run of ``workload`` on ``nodes`` under ``scheduler``."""

    def __init__(
        self,
        nodes: Sequence[Mapping[str, Any]],
        workload: Workload,
        scheduler: Scheduler,
        options: SimOptions = SimOptions(),
        *,
        config_name: str = "default",
        hypernodes: Sequence[Mapping[str, Any]] = (),
        storage: Sequence[Mapping[str, Any]] = (),
        devices: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        check_workload(workload, nodes)
        dra = uses_devices(workload)
        if dra:
            check_device_claims(workload, nodes, devices)
        topology = cluster_topology(nodes, hypernodes)
        self.spans = Spans(topology) if topology is not None else None
        # PodGroup-shaped jobs are made Volcano Jobs when they arrive (so that a long
        # workload does not hold every Job at once).
        as_jobs = options.job_controller and options.pods_on_admission
        self.options = options
        self.workload = workload
        self.scheduler = scheduler
        self.config_name = config_name
        self.clock = Clock()
        self.store = MemoryCluster(clock=lambda: self.clock.now)
        allocs = node_allocatable(nodes)
        total: dict[str, float] = {}
        for a in allocs:
            for k, v in a.items():
                total[k] = total.get(k, 0.0) + v
        self.metrics = Metrics(
            total, workload.queues, spans=self.spans, slowdown=options.topology_slowdown
        )
        self.store.create_all(_copies(nodes))
        if hypernodes:
            self.store.create_all(_copies(hypernodes))
        if storage:
            self.store.create_all(_copies(storage))
        if devices:
            self.store.create_all(_copies(devices))
        self.store.create_all(priority_class_objects(workload.priority_classes))
        self.store.create_all(queue_objects(workload.queues))
        self.api: SimStore | None = None
        self.manager: Manager | None = None
        self.claims: ClaimFeeder | None = None
        self.reclaimer: VolumeReclaimer | None = None
        self.device_claims: DeviceClaimFeeder | None = None
        self.claim_controller: ResourceClaimController | None = None
        jobs = as_jobs or any(j.manifest is not None for j in workload.jobs)
        volumes = bool(storage) or mounts_claims(workload)
        if jobs or volumes or dra:
            api = SimStore(self.store, grace=options.grace)
            controllers: list[Any] = []
            if jobs:
                self.api = api
                controllers.append(
                    JobController(api, scheduler_names=(options.scheduler_name,), keygen=sim_keygen)
                )
            if volumes:
                self.claims = ClaimFeeder(api, workload.claims)
                self.claims.start(workload.jobs)
                self.reclaimer = VolumeReclaimer(api, on_free=self._changed)
                controllers += [EphemeralClaimController(api), self.reclaimer]
            if dra:
                self.device_claims = DeviceClaimFeeder(api, workload.device_claims)
                self.device_claims.start(workload.jobs)
                self.claim_controller = ResourceClaimController(api, on_release=self._changed)
                controllers.append(self.claim_controller)
            self.manager = Manager(api, controllers)
        self.cache = SchedulerCache(
            self.store, scheduler_name=options.scheduler_name, clock=lambda: self.clock.now
        )
        self.kubelet = Kubelet(
            self.store,
            self.clock,
            self.metrics,
            on_change=self._changed,
            startup_delay=options.startup_delay,
            grace=options.grace,
            priority_classes=workload.priority_classes,
            scheduler_name=options.scheduler_name,
            pods_on_admission=options.pods_on_admission,
            api=self.api,
            volcano_jobs=as_jobs,
            on_work=self._work,
            spans=self.spans,
            slowdown=options.topology_slowdown,
        )
        #: The gang plugin's timeouts (gangs of other dialects time out; None: no gang
        #: plugin, so none does).
        self.timeouts: GangTimeouts | None = None
        for opt in scheduler.config.instances():
            if opt.name == "gang":
                self.timeouts = GangTimeouts(opt.arguments)
        #: How often nodes' measured load is written (None: the usage plugin is not
        #: configured; see :meth:`_node_metrics`).
        self.metrics_period: float | None = None
        if "usage" in scheduler.config.plugin_names():
            if options.usage_factor < 0:
                raise InputError(f"must not be negative, got {options.usage_factor:g}",
                                 field="usage factor")  # fmt: skip
            period = options.metrics_period or metrics_interval(scheduler.config, 30.0)
            if period <= 0:
                raise InputError(f"must be positive, got {period:g}", field="metrics period")
            self.metrics_period = period
        #: Did the last cycle change the cluster; wake-ups for timeouts since anything
        #: else happened (see :meth:`_gang_deadline`).
        self._changed_cluster = False
        self._quiet_wakes = 0
        #: The clock entry of the next gang deadline (see :meth:`_gang_deadline`).
        self._deadline: tuple | None = None
        self._next_tick: float | None = None
        self._last_cycle = -math.inf  # when the last tick ran
        self._wakes: set[float] = set()  # controller wake-ups on the clock
        self._arrivals = iter(workload.jobs)
        self.events = 0
        self.scheduling_seconds = 0.0
        self.cycle_seconds = 0.0
        #: Per cycle run: jobs left waiting, wall seconds (see ``SimResult.cycle_wall``).
        self.cycle_backlog: array[int] = array("I")
        self.cycle_wall: array[float] = array("d")
        #: Start forecasts measured against the run (None: not asked for).
        self.forecasts: Any = None
        if options.forecast_sample > 0:
            from pumice.sim.forecast_error import ForecastProbe

            self.forecasts = ForecastProbe(options.forecast_sample, options.forecast_durations)
            self.forecasts.start(self)
        #: The decisions of the cycle at which the most jobs waited, its time, and the
        #: Volcano Jobs' names of the PodGroups then (the line is built at the end).
        self._busiest: tuple[float, Any, dict[str, str]] | None = None

    # -- scheduling ticks ---------------------------------------------------------------

    def _changed(self) -> None:
        """Something a decision may depend on changed: cycle at the next boundary."""
        period = self.options.period
        t = math.ceil(self.clock.now / period - 1e-9) * period
        if self._next_tick is None or t < self._next_tick:
            self._next_tick = t
            self.clock.at(t, CYCLE, ("tick", t))

    def _work(self) -> None:
        """New work from the controllers: for the next cycle (never one more at an
        instant whose cycle already ran)."""
        period = self.options.period
        t = math.ceil(self.clock.now / period - 1e-9) * period
        if t <= self._last_cycle:
            t = self._last_cycle + period
        if self._next_tick is None or t < self._next_tick:
            self._next_tick = t
            self.clock.at(t, CYCLE, ("tick", t))

    def _controllers(self) -> None:
        """Let the controllers catch up with the store, the kubelet with them; then
        wake up for their next requeue."""
        manager = self.manager
        if manager is None:
            return
        if manager.idle() and not self.kubelet.watch.pending():
            return  # (nothing new since the last call: its wake-up stands; most calls)
        for _ in range(_SETTLE):
            ran = manager.step()
            self.kubelet.sync()
            if not ran or manager.idle():
                break  # (idle: the kubelet wrote nothing the controllers watch)
        due = manager.next_due()
        if due is not None and due not in self._wakes:
            self._wakes.add(due)
            self.clock.at(due, CONTROLLERS, ("controllers", due))

    def _changed_after(self, t: float) -> None:
        """The cycle at ``t`` changed the cluster: the next cycle sees a new state."""
        nxt = t + self.options.period
        if self._next_tick is None or nxt < self._next_tick:
            self._next_tick = nxt
            self.clock.at(nxt, CYCLE, ("tick", nxt))

    def _gang_deadline(self) -> None:
        """A gang of another dialect that waits times out, and one that backs off is
        tried again, at a set time, with nothing else happening then: wake for the first
        such time (the cycle at or after it). When nothing but these wake-ups is left
        (no arrival, no pod to end) and they change nothing, the run stops once each
        waiting gang had about two of them: a timeout can free places another gang
        waits for, but a gang that can never fit would otherwise retry forever."""
        if self._deadline is not None:  # (replaced by the one due now, if any)
            self.clock.discard(self._deadline)
            self._deadline = None
        clocks = self.cache.carried.get(CARRY_KEY)
        if not clocks or self.timeouts is None:
            return
        if self._changed_cluster or self.clock.busy(_HOUSEKEEPING):
            self._quiet_wakes = 0
        else:  # only the timeouts are left to happen: they may free a gang, not forever
            self._quiet_wakes += 1
            if self._quiet_wakes > 2 * len(clocks) + 2:
                return
        due = math.inf
        for uid, clock in clocks.items():
            if clock.until is not None:
                due = min(due, clock.until)
                continue
            job = self.cache.jobs.get(uid)
            if job is not None:
                due = min(due, clock.start + self.timeouts.timeout(job)[0])
        if due == math.inf:
            return
        period = self.options.period
        t = max(math.ceil(due / period - 1e-9) * period, self._last_cycle + period)
        self._deadline = self.clock.at(t, CYCLE, ("deadline", t))

    def _busier(self, waiting: int) -> bool:
        """Would a cycle leaving ``waiting`` jobs waiting be the busiest yet? Only the
        busiest cycle's line of waiting jobs is kept (the report shows it)."""
        return waiting > 0 and (self._busiest is None or waiting > len(self._busiest[1].waiting))

    def _tick(self, t: float) -> None:
        if self._next_tick != t:
            return  # superseded by an earlier tick
        self._next_tick = None
        self._last_cycle = t
        self._changed_cluster = False
        if self.forecasts is not None:
            self.forecasts.before_cycle(self, t)
        try:
            self._cycle(t)
        finally:
            self._gang_deadline()

    def _cycle(self, t: float) -> None:
        cache, m = self.cache, self.metrics
        start = time.perf_counter()
        cache.sync()
        if not self.options.skip_idle and self.clock.busy(_HOUSEKEEPING):
            self._next_tick = t + self.options.period
            self.clock.at(self._next_tick, CYCLE, ("tick", self._next_tick))
        if not cache.has_pending_work():
            m.skipped_ticks += 1
            self.scheduling_seconds += time.perf_counter() - start
            return
        snapshot = cache.snapshot()
        deciding = time.perf_counter()
        decisions = self.scheduler.cycle(snapshot, line=self._busier)
        decided = time.perf_counter()
        applied = cache.apply(decisions)
        self.cycle_seconds += decided - deciding
        step = time.perf_counter() - start
        self.scheduling_seconds += step
        self.cycle_backlog.append(len(decisions.pending))
        self.cycle_wall.append(step)
        if applied.changed():
            self._changed_cluster = True
            self._changed_after(t)
        self.kubelet.sync()
        # (said when the metrics read them; a Volcano Job's PodGroup is named for its uid)
        m.cycle(decisions.pending, self.kubelet.groups)
        if decisions.waiting and (
            self._busiest is None or len(decisions.waiting) > len(self._busiest[1].waiting)
        ):
            self._busiest = (t, decisions, dict(self.kubelet.groups))
        bound_jobs: dict[str, None] = {}
        for pod, _node in applied.bound:
            st = self.kubelet.pods.get(pod)
            if st is not None:
                bound_jobs[st.job.uid] = None
        for uid in bound_jobs:
            m.check_gang(uid, self.kubelet.held(uid))

    # -- measured load -------------------------------------------------------------------

    def _node_metrics(self) -> None:
        """Write every node's measured load, as metrics-server would, from the pods on
        it now; a new measurement may change decisions (the usage plugin's filter and
        score), so a cycle follows. The next round is due a period later while anything
        else is left to happen."""
        period = self.metrics_period
        assert period is not None
        cache, store = self.cache, self.store
        cache.sync()
        for obj in synthetic_node_metrics(cache.nodes, self.options.usage_factor, self.clock.now):
            name = obj["metadata"]["name"]
            if store.get(NODE_METRICS, name) is None:
                store.create(obj)
            else:

                def refresh(old: dict[str, Any], new: dict[str, Any] = obj) -> None:
                    old.update(new)

                store.modify(NODE_METRICS, name, refresh)
        self._changed()
        if self.clock.busy(_HOUSEKEEPING):
            self.clock.after(period, SAMPLE, ("metrics", None))

    # -- the loop -----------------------------------------------------------------------

    def _next_arrival(self) -> None:
        job: JobSpec | None = next(self._arrivals, None)
        if job is not None:
            self.clock.at(job.arrival, ARRIVAL, ("arrival", job))

    def _sample_interval(self) -> float:
        if self.options.sample_interval:
            return self.options.sample_interval
        jobs = self.workload.jobs
        if not jobs:
            return 60.0
        span = jobs[-1].arrival - jobs[0].arrival
        span += sum(j.duration for j in jobs) / len(jobs)
        return float(max(self.options.period, math.ceil(span / TARGET_SAMPLES)))

    def run(self, progress: Progress | None = None) -> SimResult:
        """Run to the end. What exists when the run starts (the modules, the workload,
        the cluster as built) lives to its end: it is kept out of the garbage
        collector's full collections meanwhile (``gc.freeze``), which otherwise walk it
        again and again as the run's own objects pile up (about half their time on the
        built-in scenario, two thirds on a generated one of 5,000 jobs). And a full
        collection is considered after a hundred collections of the middle generation,
        not ten: what a cycle hands over (explanations said when read, carried status)
        lives a cycle or two and reaches the oldest generation in numbers, so full
        collections of a large cluster's objects came every few hundred cycles, most of
        the garbage collector's time. The youngest generation is collected after 20,000
        allocations rather than 700: a cycle allocates thousands of objects, nearly all
        freed by reference counting, and each young collection that finds them alive
        moves them on to be walked again (on the built-in scenario, half the middle and
        full collections)."""
        threshold = gc.get_threshold()
        gc.set_threshold(max(threshold[0], 20000), threshold[1], max(threshold[2], 100))
        gc.freeze()
        try:
            return self._run(progress)
        finally:
            gc.unfreeze()
            gc.set_threshold(*threshold)

    def _run(self, progress: Progress | None) -> SimResult:
        clock, kubelet, m = self.clock, self.kubelet, self.metrics
        total = len(self.workload.jobs)
        interval = self._sample_interval()
        self._next_arrival()
        if self.workload.jobs:
            clock.at(self.workload.jobs[0].arrival, SAMPLE, ("sample", None))
        if self.metrics_period is not None:  # (a measurement at time 0 would be undated)
            clock.at(self.metrics_period, SAMPLE, ("metrics", None))
        events = 0
        while len(clock):
            _t, event = clock.pop()
            events += 1
            kind = event[0]
            if kind == "tick":
                self._controllers()
                self._tick(event[1])
            elif kind == "controllers":
                self._wakes.discard(event[1])
            elif kind == "deadline":  # a gang times out or is tried again
                self._deadline = None
                self._changed()
            elif kind == "metrics":
                self._node_metrics()
            elif kind == "call":  # something from outside at a set time (tests, what-ifs)
                event[1](self)
            elif kind == "arrival":
                if self.claims is not None:
                    self.claims.arrive(event[1])
                if self.device_claims is not None:
                    self.device_claims.arrive(event[1])
                kubelet.arrive(event[1])
                self._next_arrival()
            elif kind == "sample":
                m.sample(clock.now)
                if len(m.series.time) >= 2 * TARGET_SAMPLES:  # a long run: thin out
                    m.series.thin()
                    interval *= 2
                if clock.peek() is not None and (
                    self.options.skip_idle or clock.busy(_HOUSEKEEPING)
                ):
                    clock.after(interval, SAMPLE, ("sample", None))
            else:
                kubelet.handle(event)
            if self.manager is not None:
                nxt = clock.peek()
                if nxt is None or nxt > clock.now:
                    self._controllers()
            if progress is not None and events % 512 == 0:
                progress(total - len(kubelet.jobs) - _unarrived(self), total, clock.now)
        if not m.series.time or m.series.time[-1] < clock.now:
            m.sample(clock.now)
        if progress is not None:
            progress(total - len(kubelet.jobs), total, clock.now)
        self.events = events
        if self.forecasts is not None:
            m.forecast = self.forecasts.figures(self)
        return SimResult(
            metrics=m,
            summary=m.summary(),
            events=events,
            sim_time=clock.now,
            workload=self.workload,
            config_name=self.config_name,
            scheduling_seconds=self.scheduling_seconds,
            cycle_seconds=self.cycle_seconds,
            forecast_seconds=self.forecasts.seconds if self.forecasts is not None else 0.0,
            busiest_line=self._busiest_line(),
            cycle_backlog=self.cycle_backlog,
            cycle_wall=self.cycle_wall,
        )

    def _busiest_line(self) -> tuple[float, list[PendingJob]] | None:
        """The line at the busiest moment, its PodGroups named for their Volcano Jobs."""
        if self._busiest is None:
            return None
        t, decisions, groups = self._busiest
        jobs = pending_jobs(decisions)
        for j in jobs:
            named = groups.get(f"{j.namespace}/{j.name}")
            if named is not None:
                j.namespace, _, j.name = named.rpartition("/")
        return t, jobs


def _unarrived(sim: Simulation) -> int:
    return len(sim.workload.jobs) - len(sim.metrics.jobs)


def simulate(
    nodes: Sequence[Mapping[str, Any]],
    workload: Workload,
    scheduler: Scheduler,
    options: SimOptions = SimOptions(),
    *,
    config_name: str = "default",
    progress: Progress | None = None,
    hypernodes: Sequence[Mapping[str, Any]] = (),
    storage: Sequence[Mapping[str, Any]] = (),
    devices: Sequence[Mapping[str, Any]] = (),
) -> SimResult:
    """Run one simulation and return its metrics."""
    sim = Simulation(
        nodes,
        workload,
        scheduler,
        options,
        config_name=config_name,
        hypernodes=hypernodes,
        storage=storage,
        devices=devices,
    )
    return sim.run(progress)


__all__ = ["SimOptions", "SimResult", "Simulation", "check_workload", "simulate"]
