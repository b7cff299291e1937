"""The scheduler cache's base model: the scheduling model kept up to date event by event.

A :class:`NodeTable` with every bound pod accounted, a :class:`JobInfo` per PodGroup (or
bare pod) with its tasks, the queues, and the per-queue sums kept job by job
(:mod:`pumice.api.ledger`), with the jobs a cycle must look at named (``unsettled``,
``dirty``). :class:`BaseModel` is built from the cache's records
(:mod:`pumice.cache.records`) and then changed one pod, PodGroup or Workload at a time,
so that an event costs what it changes, not the cluster's size.

Snapshots share the base's jobs and tasks; a cycle writes into the ones it works on,
and :meth:`BaseModel.restore` undoes that from the records, which a cycle never sees.

Contract: the records are the truth and the model follows them; the cache
(:class:`~pumice.cache.cache.SchedulerCache`) decides when an event changes the model
in place and when it is rebuilt (:meth:`BaseModel.rebuild`), and calls these methods
only on a model that is not due for a rebuild.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from operator import attrgetter
from typing import Any

from pumice.api import gang_apis, parse
from pumice.api.job import INQUEUE, PENDING, JobInfo
from pumice.api.ledger import Ledger
from pumice.api.node import NodeTable
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace
from pumice.api.task import TERMINATED_STATUSES, TaskInfo, TaskStatus, status_of_pod
from pumice.cache.build import invalid_group_reason
from pumice.cache.model import (
    ModelBuilder,
    bare_phase,
    derived_phase,
    queue_fix,
    resource_space,
)
from pumice.cache.records import Records


class BaseModel:
    """The jobs, tasks, nodes and queues of the records, as a scheduling model.

    ``ours``: the scheduler names whose pods (and pods naming none) this scheduler
    schedules; the others' pods only occupy their nodes."""

    def __init__(self, records: Records, ours: Collection[str], default_queue: str) -> None:
        self.records = records
        self.ours = frozenset(ours)
        self.default_queue = default_queue
        self.space = ResourceSpace(())
        self.nodes = NodeTable([], self.space)
        self.model = ModelBuilder(self.space, (), default_queue)
        self.queues: dict[str, QueueInfo] = {}
        self.jobs: dict[str, JobInfo] = {}
        #: ``jobs`` is handed to a snapshot as it is (see :meth:`lend_jobs`): the next
        #: change of the job table makes a new one, the lent one stays as lent.
        self.jobs_lent = False
        self.tasks: dict[str, TaskInfo] = {}  # pod key -> task
        self.others: dict[str, TaskInfo] = {}  # pods of other schedulers (occupy nodes)
        self.orphans: dict[str, dict[str, TaskInfo]] = {}  # missing podgroup -> tasks
        #: Per-queue sums over the jobs, kept job by job (see :mod:`pumice.api.ledger`).
        self.ledger = Ledger(self.space)
        #: Jobs that are not settled: a cycle has work or status to write for them.
        self.unsettled: set[str] = set()
        #: Jobs changed since the last snapshot (their status is due to be written).
        self.dirty: set[str] = set()
        #: Volcano PodGroups whose status moved with nothing else of their job (not
        #: marked changed: see :meth:`podgroup_changed`), for the next apply to compare
        #: with what the cycle decided even where it would carry the last comparison
        #: (someone else may have rewritten it); the apply empties it.
        self.status_moved: dict[str, None] = {}
        #: Jobs whose queue does not exist (left out of snapshots, explained instead).
        self.queueless: set[str] = set()
        #: job uid -> (namespace, reference) of the pods that join a gang of another
        #: dialect by it: what makes a Workload's pod group a job, and what a pod whose
        #: group is missing waits for.
        self.refs: dict[str, tuple[str, parse.GangRef]] = {}
        #: Jobs of other dialects a cycle admitted (Inqueue): their status is not
        #: written, so the model remembers it (see ``derived_phase``).
        self.admitted: set[str] = set()
        #: Jobs changed during a batch of events (None: outside one; see
        #: :meth:`begin_batch`).
        self.batch: dict[str, JobInfo] | None = None

    # -- building -----------------------------------------------------------------------

    def rebuild(self, queues_r: list[parse.QueueRecord]) -> None:
        """Build the model afresh from the records, with ``queues_r`` the queues whose
        tree is sound (start, or a set-up change)."""
        r = self.records
        space = self.space = resource_space(
            r.nodes_r.values(), r.pods_r.values(), r.pgs_r.values(), queues_r
        )
        self.model = ModelBuilder(space, (r.pcs_r[k] for k in sorted(r.pcs_r)), self.default_queue)
        self.nodes = NodeTable(list(r.nodes_r.values()), space)
        self.queues = {q.name: self.model.queue(q) for q in queues_r}
        self.jobs, self.tasks, self.others, self.orphans = {}, {}, {}, {}
        self.jobs_lent = False
        self.ledger = Ledger(space)
        self.unsettled, self.dirty, self.queueless = set(), set(), set()
        for key in sorted(r.pgs_r):
            self.add_job(r.pgs_r[key])
        for key in sorted(r.pods_r):
            self.add_pod(key, r.pods_r[key])

    def begin_batch(self) -> None:
        """Start a batch of events: the jobs they change are brought up to date in the
        ledger and the active sets once each, by :meth:`end_batch` (a gang's pods bound
        together change one job several times)."""
        self.batch = {}

    def end_batch(self, touch: bool) -> None:
        """End the batch; ``touch``: bring its jobs up to date (False: the model is
        rebuilt anyway)."""
        batch, self.batch = self.batch, None
        if not touch or not batch:
            return
        jobs = self.jobs
        for uid, job in batch.items():
            if jobs.get(uid) is job:  # (not dropped or replaced since)
                self.touch(job)

    # -- jobs ---------------------------------------------------------------------------

    def add_job(
        self, g: parse.PodGroupRecord, uid: str | None = None, tasks: list[TaskInfo] | None = None
    ) -> JobInfo:
        """The job of ``g`` (``uid``: see ``ModelBuilder.job``), with ``tasks`` and the
        pods that waited for it."""
        job = self.model.job(g, uid)
        uid = job.uid
        implicit = self.jobs.get(uid)
        self.own_jobs()[uid] = job
        tasks = list(tasks or ())
        tasks.extend(self.orphans.pop(uid, {}).values())
        if implicit is not None and implicit.bare:
            # The PodGroup the controller made for pods held as an implicit job of the
            # same name: they are its tasks now.
            tasks.extend(implicit.tasks.values())
        for task in tasks:
            task.job = uid
            job.add_task(task)
            self.model.join(job, task)
        if job.api != "volcano":
            if uid in self.admitted:
                job.phase = INQUEUE
            job.phase = derived_phase(job)
        self.touch(job)
        return job

    def drop_job(self, uid: str) -> None:
        """The object of job ``uid`` is gone: its pods wait for it (see ``orphans``)."""
        job = self.own_jobs().pop(uid, None)
        self.forget(uid)
        if job is not None and job.tasks:
            self.orphans[uid] = dict(job.tasks)

    def podgroup_changed(self, old: parse.PodGroupRecord | None, rec: parse.PodGroupRecord) -> None:
        """A PodGroup's record went from ``old`` (None: new) to ``rec``: its job made
        anew when what the job is made of changed, else its phase and notes taken."""
        uid = rec.uid
        if old is not None and old is not rec and old.uid != uid:
            self.drop_job(old.uid)  # (now a PodGroup of another API group)
            old = None
        job = self.jobs.get(uid)
        if old is None or job is None:
            self.add_job(rec)
            return
        if old is not rec and (  # (the same record: only its status was read anew)
            old.min_member,
            old.min_task_member,
            old.min_resources,
            old.min_quota,
            old.queue,
            old.priority_class,
        ) != (
            rec.min_member,
            rec.min_task_member,
            rec.min_resources,
            rec.min_quota,
            rec.queue,
            rec.priority_class,
        ):
            tasks = list(job.tasks.values())
            del self.own_jobs()[uid]
            self.add_job(rec, tasks=tasks)
            return
        if rec.api == "volcano":
            if old is rec and job.phase == rec.phase and uid in self.unsettled:
                # Only the status's conditions or counts moved, mostly the scheduler's
                # own write coming back: nothing a cycle reads of the job changed, and
                # an unsettled job is looked at in every cycle anyway. Not marked
                # changed, so that a job parked while it waits for admission stays
                # parked. The next apply compares its status with the cycle's
                # (``status_moved``): someone else may have written it.
                job.conditions = rec.conditions
                self.status_moved[uid] = None
                return
            job.phase = rec.phase
            job.conditions = rec.conditions
        job.annotations = rec.annotations
        self.touch(job)

    def workload_changed(self, key: str) -> None:
        """Workload ``key`` changed: the jobs of its pod groups (v1alpha1), made from the
        pods that name them, are dropped and made again from its spec now."""
        prefix = gang_apis.workload_prefix(key)
        for uid in [u for u in self.jobs if u.startswith(prefix)]:
            self.drop_job(uid)
        workloads_r = self.records.workloads_r
        for uid in sorted(u for u in self.orphans if u.startswith(prefix)):
            namespace, ref = self.refs[uid]
            g = gang_apis.workload_gang(ref, namespace, workloads_r, self.default_queue)
            if g is not None:
                self.add_job(g, uid)

    def admit(self, uid: str, phase: str) -> bool:
        """A cycle admitted (or gave back) a gang of another dialect, whose status pumice
        does not write: the model keeps its Inqueue phase itself, as Volcano keeps it in
        the PodGroup, so that later cycles see it admitted. True when the job's phase
        changed."""
        job = self.jobs.get(uid)
        if job is None or job.api == "volcano" or phase not in (INQUEUE, PENDING):
            return False
        if (phase == INQUEUE) == (uid in self.admitted):
            return False
        if phase == INQUEUE:
            self.admitted.add(uid)
        else:
            self.admitted.discard(uid)
        before = job.phase
        job.phase = phase
        job.phase = derived_phase(job)
        if job.phase == before:
            return False
        self.touch(job)
        return True

    def lend_jobs(self) -> dict[str, JobInfo]:
        """The job table, to be handed to a snapshot as it is: a snapshot keeps its
        jobs by uid as they were when it was taken, and copying a large table (every
        job waiting or running) for each cycle costs more than the cycle's own work on
        a backlog. So the table is not written from now on: its next change is made
        in a copy (:meth:`own_jobs`), once, and cycles after which no job came, went
        or was made anew copy nothing."""
        self.jobs_lent = True
        return self.jobs

    def own_jobs(self) -> dict[str, JobInfo]:
        """The job table, to be written: a copy of it, once, when it is lent."""
        if self.jobs_lent:
            self.jobs = dict(self.jobs)
            self.jobs_lent = False
        return self.jobs

    def touch(self, job: JobInfo) -> None:
        """``job`` changed: its ledger part, whether it is settled, and its status is due
        (during a batch, once at its end)."""
        uid = job.uid
        if self.batch is not None:
            self.batch[uid] = job
            return
        self.ledger.update(job)
        self.dirty.add(uid)
        if job.queue in self.queues:
            self.queueless.discard(uid)
        else:
            self.queueless.add(uid)
        if job.settled():
            self.unsettled.discard(uid)
        else:
            self.unsettled.add(uid)

    def forget(self, uid: str) -> None:
        """Job ``uid`` is gone from the model: out of the ledger and the active sets."""
        self.ledger.remove(uid)
        self.dirty.discard(uid)
        self.unsettled.discard(uid)
        self.queueless.discard(uid)
        self.admitted.discard(uid)

    # -- pods ---------------------------------------------------------------------------

    def add_pod(self, key: str, p: parse.PodRecord) -> None:
        """A new pod: a task of its job (or of the implicit job of a bare pod, or of no
        job: another scheduler's pod), waiting in ``orphans`` while its group is
        missing, and accounted on its node."""
        ours = p.scheduler_name in self.ours
        status = status_of_pod(p.phase, p.node_name, p.terminating)
        job_uid: str | None = None
        if ours and p.group:
            job_uid = f"{p.namespace}/{p.group}"
        elif ours and p.gang is not None:
            job_uid = p.gang.uid(p.namespace)
            self.refs[job_uid] = (p.namespace, p.gang)
            if job_uid not in self.jobs:  # (a Workload's pod group: made by its pods)
                g = gang_apis.workload_gang(
                    p.gang, p.namespace, self.records.workloads_r, self.default_queue
                )
                if g is not None:
                    self.add_job(g, job_uid)
        elif ours:
            job_uid = self.model.bare_job_for(self.own_jobs(), p, status).uid
        task = self.model.task(p, job_uid, status, None)
        if job_uid is None:
            self.others[key] = task
        else:
            self.tasks[key] = task
            job = self.jobs.get(job_uid)
            if job is None:
                self.orphans.setdefault(job_uid, {})[task.uid] = task
            else:
                job.add_task(task)
                self.model.join(job, p)
                if job.bare:
                    job.phase = bare_phase(job)
                elif job.api != "volcano":
                    job.phase = derived_phase(job)
                self.touch(job)
        self.place(task, p.node_name or None)

    def pod_changed(self, key: str, rec: parse.PodRecord, noted: bool) -> None:
        """Pod ``key``'s record was updated (:meth:`Records.update_pod`; ``noted``: its
        annotations or device claims changed): its task follows."""
        task = self.tasks.get(key) or self.others.get(key)
        if task is None:
            return
        job = self.jobs.get(task.job) if task.job else None
        if noted:
            task.annotations = rec.annotations
            task.device_claims = rec.device_claims
            if job is not None:
                self.touch(job)
        if task.scheduled_at != rec.scheduled_at:
            task.scheduled_at = rec.scheduled_at
            if job is not None:
                self.touch(job)
        status = status_of_pod(rec.phase, rec.node_name, rec.terminating)
        new_node = rec.node_name or None
        if status == task.status and new_node == task.node:
            return
        # On the same node and accounted alike (a bound pod that starts running), the
        # task is not taken off its node and put back: nothing of the node moves.
        i = (
            self.nodes.index.get(new_node)
            if new_node is not None and new_node == task.node
            else None
        )
        stays = i is not None and self.nodes.accounted_alike(i, task, status)
        if not stays:
            self.place(task, None)
        if job is not None:
            job.update_status(task, status)
            if job.bare:
                job.phase = bare_phase(job)
            elif job.api != "volcano":
                job.phase = derived_phase(job)
            self.touch(job)
        else:
            task.status = status
        if not stays:
            self.place(task, new_node)

    def place(self, task: TaskInfo, node: str | None) -> None:
        """Take ``task`` off its node (``node`` None) or account it on ``node``."""
        if node is None:
            if task.node is not None:
                i = self.nodes.index.get(task.node)
                if i is not None:
                    self.nodes.remove_task(i, task)
            task.node = None
            return
        task.node = node
        i = self.nodes.index.get(node)
        if i is not None:
            self.nodes.add_task(i, task)

    def remove_pod(self, key: str) -> None:
        """Pod ``key`` is gone: off its node and out of its job (a bare pod's job, or a
        Workload's pod group, goes with its last pod)."""
        task = self.tasks.pop(key, None) or self.others.pop(key, None)
        if task is None:
            return
        self.place(task, None)
        if task.job is None:
            return
        job = self.jobs.get(task.job)
        if job is None:
            orphans = self.orphans.get(task.job)
            if orphans is not None:
                orphans.pop(task.uid, None)
                if not orphans:
                    del self.orphans[task.job]
                    self.refs.pop(task.job, None)
            return
        job.update_status(task, TaskStatus.UNKNOWN)  # leaves `allocated` in step
        job.by_status[TaskStatus.UNKNOWN].pop(task.uid, None)
        del job.tasks[task.uid]
        if not job.tasks:
            self.refs.pop(job.uid, None)
        if (job.bare or gang_apis.is_workload_gang(job.uid)) and not job.tasks:
            del self.own_jobs()[job.uid]
            self.forget(job.uid)
        else:
            if job.bare:
                job.phase = bare_phase(job)
            elif job.api != "volcano":
                job.phase = derived_phase(job)
            self.touch(job)

    # -- what the engine and snapshots ask ----------------------------------------------

    def has_pending_work(self) -> bool:
        """True when some job has a task waiting for a node or is not admitted yet: only
        then can a cycle decide anything (every action starts from pending work)."""
        jobs = self.jobs
        for uid in self.unsettled:  # a settled job has neither
            job = jobs.get(uid)
            if job is not None and (job.phase == PENDING or job.by_status.get(TaskStatus.PENDING)):
                return True
        return False

    def blocked(self, invalid: Mapping[str, str]) -> dict[str, str]:
        """Why each job whose pods wait for a missing PodGroup or Workload is not
        scheduled (``invalid``: objects left out because they cannot be read)."""
        blocked: dict[str, str] = {}
        for uid, orphans in self.orphans.items():
            if all(t.status in TERMINATED_STATUSES for t in orphans.values()):
                continue  # (finished pods wait for nothing: not a pending job)
            ref = self.refs.get(uid)
            why = invalid.get(f"PodGroup {uid}") if ref is None else None
            if ref is not None:
                blocked[uid] = gang_apis.missing_reason(ref[1], ref[0], self.records.workloads_r)
            elif why is not None:
                blocked[uid] = invalid_group_reason(uid, why)
            else:
                blocked[uid] = (
                    f"PodGroup {uid} does not exist; create it or fix the "
                    f"{parse.GROUP_ANNOTATION} annotation of its pods"
                )
        return blocked

    def queueless_reason(self, job: JobInfo, bad_queues: Mapping[str, str]) -> str:
        """Why ``job``, whose queue is not in the model, is not scheduled."""
        bad = bad_queues.get(job.queue)
        if bad is not None:
            return f"queue {job.queue!r} is left out because {bad}; fix its spec.parent"
        return f"queue {job.queue!r} does not exist; create the Queue or {queue_fix(job)}"

    def restore(
        self,
        touched: Iterable[str],
        touched_pods: Iterable[str],
        lent: list[tuple[JobInfo, int, str]],
    ) -> None:
        """Undo what a cycle wrote into the model's jobs and tasks.

        A cycle writes session notes and phases into its active jobs (``lent``: each
        with its version and phase as handed out), and moves tasks through statements
        (allocations, evictions, whether committed or rolled back); every such job is
        in ``touched`` or changed its ``JobInfo.version``, every such pod of no job in
        ``touched_pods``. Those jobs are rebuilt from the records, which a cycle never
        sees, and the decisions reach the model the way every change does: as cluster
        events.
        """
        rebuild: set[str] = set(touched)
        for job, version, phase in lent:
            job.phase = phase
            if job.fit_errors:
                job.fit_errors = {}
            job.note, job.tentative, job.tentative_at_most = "", 0, False
            if job.version != version:
                rebuild.add(job.uid)
        for uid in sorted(rebuild):
            moved = self.jobs.get(uid)
            if moved is not None:
                moved.fit_errors, moved.note, moved.tentative = {}, "", 0
                moved.tentative_at_most = False
                self.reindex(moved)
        pods_r = self.records.pods_r
        for key in sorted(touched_pods):  # pods of no job a statement moved
            task, rec = self.others.get(key), pods_r.get(key)
            if task is not None and rec is not None:
                task.status = status_of_pod(rec.phase, rec.node_name, rec.terminating)
                task.node = rec.node_name or None

    def reindex(self, job: JobInfo) -> None:
        """Rebuild ``job`` with its tasks' status and node as the cluster last said."""
        tasks = list(job.tasks.values())
        new = _respec(job, allocated=self.space.zeros(), tasks={}, by_status={})
        pods_r = self.records.pods_r
        for t in tasks:
            rec = pods_r.get(f"{t.namespace}/{t.name}")
            if rec is not None:
                t.status = status_of_pod(rec.phase, rec.node_name, rec.terminating)
                t.node = rec.node_name or None
            new.add_task(t)
        self.own_jobs()[job.uid] = new
        self.touch(new)


#: The fields a job is made with (``dataclasses.replace`` makes a job anew from them).
_INIT_FIELDS = tuple(f.name for f in dataclasses.fields(JobInfo) if f.init)
_SPEC = attrgetter(*_INIT_FIELDS)


def _respec(job: JobInfo, **state: Any) -> JobInfo:
    """A job with ``job``'s spec and the given task state; session notes start empty.

    What ``dataclasses.replace`` makes, with the fields read at once: a cycle's
    allocations make a job anew for each job they moved."""
    made = dict(zip(_INIT_FIELDS, _SPEC(job), strict=True))
    made.update(fit_errors={}, note="", tentative=0, tentative_at_most=False, **state)
    return JobInfo(**made)


__all__ = ["BaseModel"]
