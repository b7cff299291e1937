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

A job read from a ``batch.volcano.sh`` Job manifest (``JobSpec.manifest``) takes the
other path: at arrival the Job itself is created, and pumice's job controller
(:mod:`pumice.controllers.job`, run by the engine over the same store) makes its
PodGroup and pods and applies its lifecycle policies, exactly as on a cluster. The
kubelet then only runs those pods (start, run for the task's duration, succeed or fail
with exit code 0 or 1, end a terminating pod after its grace period) and watches the
Job's status for what to measure: a rising ``retryCount`` is a restart, the actions the
controller executes (its ``ExecuteAction`` Events) are counted by name, and the job
ends when its phase is Completed, Failed, Aborted or Terminated and no pod of it holds
a node (the simulator then deletes the Job, its PodGroup and pods going with it).

A gang of another dialect (``JobSpec.dialect``: a coscheduling PodGroup, a Kubernetes
Workload's pod group or v1alpha2 PodGroup) has no controller that waits for an
admission: at arrival its group object is created in its own dialect (a Workload once,
for all the gangs that name it, and deleted with the last of them) with all its pods,
and it follows the PodGroup model from there, whatever ``volcano_jobs`` says.

**Network topology.** On a cluster with HyperNodes (``spans``), when a job's gang starts
running (the first of its pods, in each incarnation, to turn Running) the kubelet looks
up the lowest HyperNode holding the nodes of the job's pods then on a node, and its tier.
The tier is reported to ``observer``; with a ``slowdown`` (a factor per tier), every pod
of that incarnation runs its duration times the factor of that tier.

The kubelet learns about binds and evictions the way a real one does: from the store's
watch events (:meth:`Kubelet.sync`). Every step it takes is reported to ``observer``
(:class:`~pumice.sim.metrics.Metrics`) and, when it can change what the scheduler would
decide (work arrived, resources freed), to ``on_change``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.api.parse import copy_tree
from pumice.cluster.memory import DISRUPTION_TARGET, MemoryCluster
from pumice.cluster.protocol import ADDED, DELETED, MODIFIED
from pumice.controllers.store import Store
from pumice.sim.clock import ARRIVAL, RELEASE, START, Clock
from pumice.sim.metrics import Metrics
from pumice.sim.objects import group_key, job_objects, volcano_job
from pumice.sim.topology import NO_SLOWDOWN, Slowdown, Spans
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
    uid: str = ""  # the pod's metadata.uid (controller-made pods)
    ended_at: float | None = None
    #: Why a controller-made pod is being deleted: the action being executed, or
    #: "Evicted" (the scheduler's eviction).
    cause: str = ""


#: A Job's phases after which the simulation counts it as ended (nothing resumes an
#: Aborted job in a simulation), and the outcome each stands for.
FINAL_PHASES = {"Completed": "succeed", "Failed": "fail", "Aborted": "cancel",
                "Terminated": "cancel"}  # fmt: skip
#: How the job controller's ExecuteAction Events begin.
EXECUTE_PREFIX = "Start to execute action "


@dataclass(slots=True)
class JobState:
    uid: str
    spec: JobSpec
    pods: dict[str, PodState] = field(default_factory=dict)
    incarnation: int = 0
    active: int = 0  # pods holding a node (bound or running, not ended, not released)
    restarting: bool = False
    ended: bool = False
    #: Its PodGroup is not admitted yet (not yet made, or Pending): it holds no pods to
    #: place (the PodGroup model creates them on admission, as the controller does).
    awaiting_admission: bool = False
    #: Driven by the job controller (a Volcano Job manifest), not by this model.
    controlled: bool = False
    retries: int = 0  # the Job's status.retryCount as last seen
    phase: str = ""  # the Job's status.state.phase as last seen
    action: str = ""  # the last action the controller executed
    roles: dict[str, int] = field(default_factory=dict)  # task name -> index
    #: The incarnation whose gang span was looked up, and its run-time factor.
    spanned: int = -1
    slowdown: float = 1.0


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
        api: Store | None = None,
        volcano_jobs: bool = False,
        on_work: Callable[[], None] | None = None,
        spans: Spans | None = None,
        slowdown: Slowdown = NO_SLOWDOWN,
    ) -> None:
        self.store = store
        self.spans = spans
        self.slowdown = slowdown
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
        #: The controllers' store (a :class:`~pumice.sim.apiserver.SimStore`), needed
        #: for Volcano Job manifests; ``on_work`` is told when their pods or PodGroup
        #: appear (work for the next cycle, not the one that may have just run).
        self.api = api
        #: Make every PodGroup-shaped job a Volcano Job when it arrives
        #: (:func:`~pumice.sim.objects.volcano_job`), for the job controller to drive.
        self.volcano_jobs = volcano_jobs
        self.on_work = on_work or on_change
        #: PodGroup key -> job uid, for controller-made PodGroups (named by the Job's uid).
        self.groups: dict[str, str] = {}
        #: The group objects of other dialects (store kind, key) -> jobs that use them.
        self.group_users: dict[tuple[str, str], int] = {}
        kinds = ("Pod", "PodGroup") if api is None else ("Pod", "PodGroup", "Job", "Event")
        self.watch = store.watch(kinds)

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
        uid = spec.uid
        job = JobState(uid, spec)
        self.jobs[uid] = job
        self.observer.job_submitted(self.clock.now, uid, spec)
        if spec.dialect != "volcano":
            self._arrive_dialect(job)
            return
        if spec.manifest is not None or self.volcano_jobs:
            if self.api is None:
                raise RuntimeError("a Volcano Job needs the controllers' store (api)")
            job.controlled = True
            job.awaiting_admission = True
            job.roles = {t.name: r for r, t in enumerate(spec.tasks)}
            if spec.manifest is not None:
                manifest = copy_tree(dict(spec.manifest))
            else:
                manifest = volcano_job(spec, scheduler_name=self.scheduler_name)
            self.api.create(manifest)
            self.on_change()
            return
        objects = self._objects(spec)
        self.store.create(objects[0])
        if self.pods_on_admission:
            job.awaiting_admission = True
        else:
            self._create_pods(job, objects[1:])
        self.on_change()

    def _arrive_dialect(self, job: JobState) -> None:
        """A gang of another dialect: its group object, in that dialect, and its pods at
        once (no controller of those dialects waits for an admission: their pods come
        from a Deployment, a batch Job or a JobSet, which makes them right away). A
        Workload is made by its first gang to arrive and serves them all."""
        objects = self._objects(job.spec)
        key = group_key(job.spec)
        users = self.group_users.get(key, 0)
        if users == 0:
            self.store.create(objects[0])
        self.group_users[key] = users + 1
        self._create_pods(job, objects[1:])
        self.on_change()

    def _drop_group(self, spec: JobSpec) -> None:
        """The job is over: its group object goes with it (a Workload with the last of
        its gangs)."""
        if spec.dialect == "volcano":
            self.store.delete("PodGroup", spec.uid)
            return
        key = group_key(spec)
        users = self.group_users.pop(key, 1) - 1
        if users > 0:
            self.group_users[key] = users
        else:
            self.store.delete(*key)

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
            if self.api is not None and self._controlled_event(ev):
                continue
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

    # -- jobs driven by the job controller ----------------------------------------------

    def _controlled_event(self, ev: Any) -> bool:
        """Handle a watch event of the controller-driven path; False when it is the
        PodGroup model's to handle."""
        kind, obj = ev.kind, ev.obj
        if kind == "Job":
            job = self.jobs.get(ev.key)
            if job is not None and job.controlled and ev.type != DELETED:
                self._job_status(job, obj)
            return True
        if kind == "Event":
            if ev.type != DELETED and obj.get("reason") == "ExecuteAction":
                ref = obj.get("involvedObject") or {}
                job = self.jobs.get(f"{ref.get('namespace') or 'default'}/{ref.get('name')}")
                msg = str(obj.get("message") or "")
                if job is not None and job.controlled and msg.startswith(EXECUTE_PREFIX):
                    job.action = msg[len(EXECUTE_PREFIX) :]
                    self.observer.job_action(job.uid, job.action)
            return True
        # A pod or PodGroup this path took in before, as the same object: its Job is
        # known (nothing in a simulation gives an object another controller), so its
        # ownerReferences are not read again (most events: binds, starts, ends, the
        # scheduler's status writes).
        if kind == "Pod":
            st = self.pods.get(ev.key)
            if (
                st is not None
                and st.uid
                and ev.type != ADDED
                and st.uid == str((obj.get("metadata") or {}).get("uid", ""))
            ):
                return self._pod_changed(st, ev.type, obj)
        elif kind == "PodGroup" and ev.type == MODIFIED:
            owner = self.groups.get(ev.key)
            if owner is not None:
                job = self.jobs.get(owner)
                if job is not None and job.controlled:
                    phase = (obj.get("status") or {}).get("phase") or "Pending"
                    job.awaiting_admission = phase == "Pending"
                return True
        owner = _volcano_job(obj)
        if owner is None:
            return False
        job = self.jobs.get(owner)
        if kind == "PodGroup":
            if ev.type == DELETED:
                self.groups.pop(ev.key, None)
                if job is not None and job.controlled:
                    job.awaiting_admission = True  # (a restart makes it again, Pending)
                return True
            if job is not None and job.controlled:
                phase = (obj.get("status") or {}).get("phase") or "Pending"
                job.awaiting_admission = phase == "Pending"
                if ev.type == ADDED:
                    self.groups[ev.key] = job.uid
                    self.on_work()
            return True
        st = self.pods.get(ev.key)
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        if st is not None and st.uid != uid:
            st = None
        if ev.type == ADDED:
            if st is None and job is not None and job.controlled:
                self._pod_added(job, ev.key, obj, uid)
            return True
        if st is None:
            return True
        return self._pod_changed(st, ev.type, obj)

    def _pod_changed(self, st: PodState, type_: str, obj: Mapping[str, Any]) -> bool:
        """A controller-made pod the kubelet knows changed or went."""
        if type_ == DELETED:
            self._pod_gone(st)
            return True
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp") is not None and not st.terminating:
            evicted = any(
                c.get("type") == DISRUPTION_TARGET
                for c in (obj.get("status") or {}).get("conditions") or ()
            )
            self._pod_terminating(st, obj, evicted)
            return True
        node = (obj.get("spec") or {}).get("nodeName")
        if node and st.bound_at is None and not st.terminating:
            self._bound(st, node)
        return True

    def _pod_added(self, job: JobState, key: str, obj: Mapping[str, Any], uid: str) -> None:
        task = str(((obj.get("metadata") or {}).get("annotations") or {}).get(TASK_SPEC) or "")
        role = job.roles.get(task, 0)
        st = PodState(key, job, role, job.retries, uid=uid)
        job.pods[key] = st
        self.pods[key] = st
        self.observer.pod_created(job.uid, job.spec.tasks[role].requests)
        self.on_work()

    def _pod_terminating(self, pod: PodState, obj: Mapping[str, Any], evicted: bool) -> None:
        """A controller-made pod is being deleted (by the controller or an eviction):
        its work so far is lost; it keeps its node for its grace period."""
        job = pod.job
        now = self.clock.now
        pod.terminating = True
        pod.cause = "Evicted" if evicted else (job.action or "deleted")
        if evicted:
            self.observer.pod_evicted(now, job.uid)
        if pod.started_at is not None and not pod.ended and pod.cause not in KEEPS_WORK:
            self.observer.work_lost(job.uid, pod.cause, now - pod.started_at)
        if pod.bound_at is None:
            self.store.delete("Pod", pod.key)
            return
        self.clock.after(deletion_grace(obj, self.grace), RELEASE, ("release", pod))

    def _pod_gone(self, pod: PodState) -> None:
        """A controller-made pod left the store."""
        job = pod.job
        now = self.clock.now
        if not pod.ended:
            if pod.bound_at is None:
                self.observer.pod_dropped(job.uid, job.spec.tasks[pod.role].requests)
            else:  # deleted without grace: it leaves its node now
                job.active -= 1
                self.observer.pod_released(now, job.uid, job.spec.tasks[pod.role].requests)
                if pod.started_at is not None and not pod.terminating:
                    self.observer.work_lost(job.uid, job.action or "deleted", now - pod.started_at)
            pod.ended = True
            self.on_work()
        elif (
            not job.ended
            and pod.started_at is not None
            and pod.ended_at is not None
            and job.action in RESTARTS
            and job.phase not in FINAL_PHASES
        ):  # a finished pod thrown away by a restart: its whole run is lost
            self.observer.work_lost(job.uid, job.action, pod.ended_at - pod.started_at)
        job.pods.pop(pod.key, None)
        self.pods.pop(pod.key, None)
        self._maybe_finish(job)

    def _job_status(self, job: JobState, obj: Mapping[str, Any]) -> None:
        status = obj.get("status") or {}
        retries = int(status.get("retryCount") or 0)
        job.phase = str((status.get("state") or {}).get("phase") or "")
        if retries > job.retries:
            for _ in range(retries - job.retries):
                self.observer.job_restarted(self.clock.now, job.uid, 0.0, job.action)
            job.retries = retries
        self._maybe_finish(job)

    def _maybe_finish(self, job: JobState) -> None:
        """A controller-driven job ends when its Job reached a final phase and none of
        its pods holds a node; the simulator then deletes it (as a TTL of 0 would)."""
        if job.ended or not job.controlled or job.phase not in FINAL_PHASES or job.active:
            return
        job.ended = True
        self.jobs.pop(job.uid, None)
        outcome = FINAL_PHASES[job.phase]
        if outcome == "fail" and job.spec.outcome == "cancel":
            outcome = "cancel"  # its pods were stopped, which the Job sees as failed
        self.observer.job_ended(
            self.clock.now, job.uid, outcome, phase=job.phase, retries=job.retries
        )
        if self.api is not None:
            self.api.delete("Job", job.uid)

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
        job = pod.job
        if self.spans is not None and job.spanned != pod.incarnation:
            self._gang_started(job, pod.incarnation)
        self.store.set_pod_phase(pod.key, "Running")
        self.observer.pod_started(now, job.uid)
        runtime = _runtime(pod)
        if job.slowdown != 1.0:
            runtime *= job.slowdown
        self.clock.after(runtime, RELEASE, ("end", pod))

    def _gang_started(self, job: JobState, incarnation: int) -> None:
        """The gang of ``incarnation`` starts running: the tier its pods on nodes span
        sets its run-time factor."""
        spans = self.spans
        assert spans is not None
        nodes = sorted(
            {p.node for p in job.pods.values() if p.node and not p.terminating and not p.ended}
        )
        hypernode = spans.span(nodes)
        tier = spans.tier(hypernode) if hypernode else 0
        job.spanned = incarnation
        job.slowdown = self.slowdown.factor(tier) if self.slowdown else 1.0
        self.observer.job_spanned(job.uid, hypernode, tier, len(nodes), job.slowdown)

    def _end(self, pod: PodState) -> None:
        if pod.terminating or pod.ended:
            return
        job = pod.job
        ok = _outcome(pod) == "succeed"
        pod.ended = True
        pod.ended_at = self.clock.now
        if job.controlled:
            self.store.modify("Pod", pod.key, _terminated(ok))
        else:
            self.store.set_pod_phase(pod.key, "Succeeded" if ok else "Failed")
        job.active -= 1
        self.observer.pod_released(self.clock.now, job.uid, job.spec.tasks[pod.role].requests)
        if job.controlled:
            self.on_work()
            self._maybe_finish(job)
            return
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
        self._drop_group(job.spec)
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
            self.observer.job_action(job.uid, "RestartJob")
            self.observer.job_restarted(now, job.uid, lost, "RestartJob")
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
        if job.controlled:  # the kubelet confirms the deletion: the pod leaves the store
            self.store.delete("Pod", pod.key)
            self.on_work()
            return
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
        if job.spec.dialect != "volcano":
            self._restart_group(job.spec)
            self._create_pods(job, self._objects(job.spec)[1:])
            self.on_change()
            return
        self.store.update_podgroup_status(job.uid, "Pending", ())
        if self.pods_on_admission:
            job.awaiting_admission = True
        else:
            self._create_pods(job, self._objects(job.spec)[1:])
        self.on_change()

    def _restart_group(self, spec: JobSpec) -> None:
        """A restarted coscheduling gang schedules afresh: its PodGroup's
        ``scheduleStartTime`` (which its timeout counts from) is cleared, as when it was
        made. The other dialects' objects hold nothing of a try."""
        if spec.dialect != "coscheduling":
            return

        def fresh(obj: dict[str, Any]) -> None:
            status = obj.get("status")
            if isinstance(status, dict):
                status.pop("scheduleStartTime", None)
                status["phase"] = "Pending"

        self.store.modify(*group_key(spec), fresh)

    def held(self, uid: str) -> int:
        """Pods of job ``uid`` that hold a node or finished on one (gang accounting)."""
        job = self.jobs.get(uid)
        if job is None:
            return 0
        return sum(1 for p in job.pods.values() if p.bound_at is not None and not p.terminating)

    def schedule_arrival(self, spec: JobSpec) -> None:
        self.clock.at(spec.arrival, ARRIVAL, ("arrive", spec))


#: Actions that end a job with its work done: the pods they stop lose nothing.
KEEPS_WORK = frozenset({"CompleteJob"})
#: Actions whose kill throws finished pods away too (they retain nothing).
RESTARTS = frozenset({"RestartJob", "RestartTask", "RestartPod"})
TASK_SPEC = "volcano.sh/task-spec"


def _volcano_job(obj: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of the Volcano Job controlling ``obj``, if one does."""
    meta = obj.get("metadata") or {}
    for r in meta.get("ownerReferences") or ():
        if (
            r.get("controller")
            and r.get("kind") == "Job"
            and str(r.get("apiVersion", "")).startswith("batch.volcano.sh/")
        ):
            return f"{meta.get('namespace') or 'default'}/{r.get('name')}"
    return None


def _outcome(pod: PodState) -> str:
    task = pod.job.spec.tasks[pod.role]
    return task.outcome or pod.job.spec.outcome


def _runtime(pod: PodState) -> float:
    """How long the pod runs once started: its task's duration (or the job's), the
    end fraction of it when it fails or is cancelled."""
    spec = pod.job.spec
    task = spec.tasks[pod.role]
    duration = spec.duration if task.duration is None else task.duration
    if _outcome(pod) == "succeed":
        return duration
    fraction = spec.end_fraction if task.end_fraction is None else task.end_fraction
    return duration * fraction


def _terminated(ok: bool) -> Callable[[dict[str, Any]], None]:
    """The pod ended (Succeeded, or Failed with exit code 1), as a kubelet reports it."""

    def change(obj: dict[str, Any]) -> None:
        status = obj.setdefault("status", {})
        status["phase"] = "Succeeded" if ok else "Failed"
        names = [c.get("name", "") for c in (obj.get("spec") or {}).get("containers") or ()]
        status["containerStatuses"] = [
            {
                "name": n,
                "ready": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 0 if ok else 1,
                        "reason": "Completed" if ok else "Error",
                    }
                },
            }
            for n in names or ["main"]
        ]

    return change


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
