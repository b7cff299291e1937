"""The simulated kubelets and job controller: what happens to pods once they exist.

The scheduler only binds and evicts. Everything else a real cluster does on its own is
modelled here, as a client of the same object store the scheduler's cache watches:

- a job *arrives*: its PodGroup is created (``Pending``); its Pods are created once the
  scheduler admits the PodGroup (phase ``Inqueue``), as Volcano's job controller does for
  a ``batch.volcano.sh`` Job, so that a job waiting for admission holds no pods (and no
  queue counts their requests as demand). With ``pods_on_admission=False`` the Pods are
  created with the PodGroup, as by a controller that does not wait (plain manifests);
- a *bound* pod starts after ``startup_delay`` (phase ``Running``), runs for its job's
  duration, then ``Succeeded`` (or ``Failed`` after ``end_fraction`` of it, for a job whose
  outcome is ``fail`` or ``cancel``); it releases its node's resources at that moment;
- a *terminating* pod (evicted) keeps its resources for its grace period, then is deleted;
- an *evicted* pod's job is restarted, as Volcano's job controller does on ``PodEvicted``
  (``RestartJob``): every other pod of the job is terminated too, and once all are gone
  its PodGroup goes back to ``Pending`` and the job's pods are created again (on
  admission, as at arrival); the restart
  and the work lost (pod-seconds of the pods that were running) are counted;
- a job *ends* when none of its pods holds a node any more (all bound pods ended);
  pods that never got a node are then deleted with the job, as are the PodGroup and the
  finished pods (a job controller's clean-up).

The kubelet learns about binds and evictions the way a real one does: from the store's
watch events (:meth:`Kubelet.sync`). Every step it takes is reported to ``observer``
(:class:`~pumice.sim.metrics.Metrics`) and, when it can change what the scheduler would
decide (work arrived, resources freed), to ``on_change``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.cluster.memory import DISRUPTION_TARGET, MemoryCluster
from pumice.cluster.protocol import MODIFIED
from pumice.sim.clock import ARRIVAL, RELEASE, START, Clock
from pumice.sim.metrics import Metrics
from pumice.sim.objects import job_objects
from pumice.sim.workload import JobSpec

DEFAULT_STARTUP_DELAY = 5.0
DEFAULT_GRACE = 30.0


@dataclass(slots=True)
class PodState:
    """The kubelet's view of one pod of a job (one incarnation of it)."""

    key: str
    job: JobState
    role: int  # index into job.spec.tasks
    incarnation: int
    node: str = ""
    bound_at: float | None = None
    started_at: float | None = None
    ended: bool = False
    terminating: bool = False


@dataclass(slots=True)
class JobState:
    uid: str
    spec: JobSpec
    pods: dict[str, PodState] = field(default_factory=dict)
    incarnation: int = 0
    active: int = 0  # pods holding a node (bound or running, not ended, not released)
    restarting: bool = False
    ended: bool = False
    awaiting_admission: bool = False  # pods are created when the PodGroup is admitted


class Kubelet:
    """Pods' lives on the simulated nodes (see the module docstring)."""

    def __init__(
        self,
        store: MemoryCluster,
        clock: Clock,
        observer: Metrics,
        *,
        on_change: Callable[[], None] = lambda: None,
        startup_delay: float = DEFAULT_STARTUP_DELAY,
        grace: float = DEFAULT_GRACE,
        priority_classes: Mapping[str, int] | None = None,
        scheduler_name: str = "volcano",
        pods_on_admission: bool = True,
    ) -> None:
        self.store = store
        self.clock = clock
        self.observer = observer
        self.on_change = on_change
        self.startup_delay = startup_delay
        self.grace = grace
        self.priority_classes = dict(priority_classes or {})
        self.scheduler_name = scheduler_name
        self.pods_on_admission = pods_on_admission
        self.jobs: dict[str, JobState] = {}
        self.pods: dict[str, PodState] = {}
        self.watch = store.watch(("Pod", "PodGroup"))

    # -- events from the clock ----------------------------------------------------------

    def handle(self, event: tuple) -> None:
        """Run one clock event: ``("arrive", spec)``, ``("start"|"end"|"release", pod)``."""
        kind, arg = event[0], event[1]
        if kind == "arrive":
            self.arrive(arg)
            return
        pod: PodState = arg
        if self.pods.get(pod.key) is not pod:
            return  # an earlier incarnation, or the job is gone
        if kind == "start":
            self._start(pod)
        elif kind == "end":
            self._end(pod)
        elif kind == "release":
            self._release(pod)

    def arrive(self, spec: JobSpec) -> None:
        uid = f"{spec.namespace}/{spec.name}"
        job = JobState(uid, spec)
        self.jobs[uid] = job
        self.observer.job_submitted(self.clock.now, uid, spec)
        objects = self._objects(spec)
        self.store.create(objects[0])
        if self.pods_on_admission:
            job.awaiting_admission = True
        else:
            self._create_pods(job, objects[1:])
        self.on_change()

    def _objects(self, spec: JobSpec) -> list[dict[str, Any]]:
        objects = job_objects(
            spec, scheduler_name=self.scheduler_name, priority_classes=self.priority_classes
        )
        now = self.clock.now
        for obj in objects:
            obj["metadata"]["creationTimestamp"] = now
        return objects

    def _create_pods(self, job: JobState, pods: list[dict[str, Any]]) -> None:
        roles = []
        for r, task in enumerate(job.spec.tasks):
            roles.extend([r] * task.replicas)
        for obj, role in zip(pods, roles, strict=True):
            key = f"{job.spec.namespace}/{obj['metadata']['name']}"
            st = PodState(key, job, role, job.incarnation)
            job.pods[key] = st
            self.pods[key] = st
            self.store.create(obj)
            self.observer.pod_created(job.uid, job.spec.tasks[role].requests)

    # -- what the scheduler did (watch events) ------------------------------------------

    def sync(self) -> None:
        """Take in binds, evictions and admissions from the store's watch.

        Pods created for an admitted job need no extra cycle: the cycle that admitted the
        job changed the cluster, so the engine runs the next one a period later anyway."""
        for ev in self.watch.drain():
            if ev.type != MODIFIED:
                continue
            if ev.kind == "PodGroup":
                job = self.jobs.get(ev.key)
                phase = (ev.obj.get("status") or {}).get("phase") or "Pending"
                if job is not None and job.awaiting_admission and phase != "Pending":
                    job.awaiting_admission = False
                    self._create_pods(job, self._objects(job.spec)[1:])
                continue
            st = self.pods.get(ev.key)
            if st is None or st.ended:
                continue
            obj = ev.obj
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp") is not None and not st.terminating:
                evicted = any(
                    c.get("type") == DISRUPTION_TARGET
                    for c in (obj.get("status") or {}).get("conditions") or ()
                )
                self._terminating(st, evicted)
                continue
            node = (obj.get("spec") or {}).get("nodeName")
            if node and st.bound_at is None and not st.terminating:
                self._bound(st, node)

    def _bound(self, pod: PodState, node: str) -> None:
        now = self.clock.now
        pod.node, pod.bound_at = node, now
        job = pod.job
        job.active += 1
        self.observer.pod_bound(now, job.uid, job.spec.tasks[pod.role].requests, job.active)
        self.clock.after(self.startup_delay, START, ("start", pod))

    def _start(self, pod: PodState) -> None:
        if pod.terminating or pod.ended:
            return
        now = self.clock.now
        pod.started_at = now
        self.store.set_pod_phase(pod.key, "Running")
        spec = pod.job.spec
        self.observer.pod_started(now, pod.job.uid)
        runtime = spec.duration if spec.outcome == "succeed" else spec.duration * spec.end_fraction
        self.clock.after(runtime, RELEASE, ("end", pod))

    def _end(self, pod: PodState) -> None:
        if pod.terminating or pod.ended:
            return
        job = pod.job
        ok = job.spec.outcome == "succeed"
        pod.ended = True
        self.store.set_pod_phase(pod.key, "Succeeded" if ok else "Failed")
        job.active -= 1
        self.observer.pod_released(self.clock.now, job.uid, job.spec.tasks[pod.role].requests)
        self.on_change()
        if job.active == 0 and not job.restarting:
            self._finish(job)

    def _finish(self, job: JobState) -> None:
        """The job is over: delete what is left of it (pending pods, finished pods, group)."""
        job.ended = True
        for key, pod in job.pods.items():
            if not pod.ended and pod.bound_at is None:
                self.observer.pod_dropped(job.uid, job.spec.tasks[pod.role].requests)
            self.pods.pop(key, None)
            self.store.delete("Pod", key)
        job.pods.clear()
        self.store.delete("PodGroup", job.uid)
        self.jobs.pop(job.uid, None)
        self.observer.job_ended(self.clock.now, job.uid, job.spec.outcome)

    # -- eviction and restart -----------------------------------------------------------

    def _terminating(self, pod: PodState, evicted: bool) -> None:
        job = pod.job
        now = self.clock.now
        pod.terminating = True
        if evicted:
            self.observer.pod_evicted(now, job.uid)
        if not job.restarting:
            job.restarting = True
            lost = sum(
                now - p.started_at
                for p in job.pods.values()
                if p.started_at is not None and not p.ended
            )
            self.observer.job_restarted(now, job.uid, lost)
            for other in list(job.pods.values()):
                if other is pod or other.terminating:
                    continue
                if (
                    other.ended or other.bound_at is None
                ):  # not on a node: deleted at once  # not on a node: deleted at once
                    other.terminating = True
                    self._delete(other)
                else:
                    other.terminating = True
                    self.store.modify("Pod", other.key, _mark_deleted(now, self.grace))
                    self.clock.after(self.grace, RELEASE, ("release", other))
        grace = self.grace
        if evicted:
            obj = self.store.get("Pod", pod.key)
            if obj is not None:
                grace = deletion_grace(obj, self.grace)
        if pod.bound_at is None:
            self._delete(pod)
        else:
            self.clock.after(grace, RELEASE, ("release", pod))

    def _release(self, pod: PodState) -> None:
        """A terminating pod's grace period is over: it leaves its node."""
        job = pod.job
        if pod.bound_at is not None and not pod.ended:
            job.active -= 1
            pod.ended = True
            self.observer.pod_released(self.clock.now, job.uid, job.spec.tasks[pod.role].requests)
        self._delete(pod)

    def _delete(self, pod: PodState) -> None:
        job = pod.job
        if pod.bound_at is None and not pod.ended:
            self.observer.pod_dropped(job.uid, job.spec.tasks[pod.role].requests)
            pod.ended = True
        job.pods.pop(pod.key, None)
        self.pods.pop(pod.key, None)
        self.store.delete("Pod", pod.key)
        self.on_change()
        if job.restarting and not job.pods:
            self._recreate(job)

    def _recreate(self, job: JobState) -> None:
        """All pods of a restarting job are gone: create them again, group back to Pending."""
        job.restarting = False
        job.incarnation += 1
        job.active = 0
        self.store.update_podgroup_status(job.uid, "Pending", ())
        if self.pods_on_admission:
            job.awaiting_admission = True
        else:
            self._create_pods(job, self._objects(job.spec)[1:])
        self.on_change()

    def held(self, uid: str) -> int:
        """Pods of job ``uid`` that hold a node or finished on one (gang accounting)."""
        job = self.jobs.get(uid)
        if job is None:
            return 0
        return sum(1 for p in job.pods.values() if p.bound_at is not None and not p.terminating)

    def schedule_arrival(self, spec: JobSpec) -> None:
        self.clock.at(spec.arrival, ARRIVAL, ("arrive", spec))


def deletion_grace(pod: Mapping[str, Any], default: float) -> float:
    """How long a terminating pod keeps its node: the grace period its deletion was
    given (``metadata.deletionGracePeriodSeconds``, which the API server sets on every
    graceful delete), else ``default``. Shared with the sandbox's fake kubelet."""
    g = (pod.get("metadata") or {}).get("deletionGracePeriodSeconds")
    return default if g is None else float(g)


def _mark_deleted(now: float, grace: float) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"]["deletionTimestamp"] = now
        obj["metadata"]["deletionGracePeriodSeconds"] = grace

    return change


__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_STARTUP_DELAY",
    "JobState",
    "Kubelet",
    "PodState",
    "deletion_grace",
]
