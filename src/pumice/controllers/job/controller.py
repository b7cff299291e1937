"""The Job controller: ``batch.volcano.sh/v1alpha1`` Jobs made into PodGroups and pods.

One reconcile of a Job (its key ``namespace/name``):

1. A Job not yet accepted is checked as Volcano's admission webhook would
   (:mod:`validate`); a refused Job stays ``Pending`` with reason ``Invalid`` and the
   reasons in ``status.state.message``, and gets a Warning Event; nothing else is
   created. It is checked again when it (or its queue) changes.
2. One request is chosen: the oldest Command targeting the Job (deleted as it is
   consumed, with a ``CommandIssued`` Event), else the first event that holds
   (:mod:`observe`) whose policy calls for an action (:mod:`policy`), once its timeout
   has passed; else ``SyncJob``.
3. The state machine (:mod:`state`) says what to do: sync (plugins, the claims of
   ``spec.volumes`` (:mod:`volumes`), PodGroup, the pods
   once the PodGroup is admitted), kill (all pods but those retained, the PodGroup, the
   plugins' objects; ``status.version`` goes up, so the next run's pods are told
   apart) or kill a target; then the phase transition.
4. The status is written when it changed (a merge patch of what differs), the phase's
   ``lastTransitionTime`` and a condition added when the phase moved.
5. A finished Job with ``ttlSecondsAfterFinished`` is deleted that long after it
   finished (its pods and PodGroup go with it, by ownerReference).

What the controller remembers between reconciles is small and can be lost: which pods
and Commands belong to which Job (from the watch; rebuilt by ``resync``), the pods it
deleted itself (to tell them from evictions), deletions by others not yet acted on,
and when each timed event was first seen.

**Which events call for a reconcile.** Only those that change something a reconcile
reads, so that the controller's own writes coming back do not make it run again for
nothing (each would cost a full reconcile that writes nothing):

- a Job: created or deleted; updated with another ``metadata.generation`` (its spec
  changed; the API server leaves the generation alone on status writes) or another
  phase. A phase the controller wrote itself after acting in that phase (no
  transition: ``""`` to ``Pending`` on the first reconcile, a count changing) is
  skipped too; one it moved the Job to is not, as in Volcano, since the new phase may
  have work of its own on the same pods (``Running`` to ``Completed``, then the kill),
  unless the reconcile that moved it can tell that the new phase has none: a sync that
  wrote nothing but the status, for a Job without plugins or volumes, into a phase that
  syncs too and whose transition does not fire on the same pods (``Pending`` to
  ``Running`` as the gang starts: the Running phase's turn would write nothing);
- a pod: deleted, or changed in what the controller reads of it (:class:`PodView`'s
  ``seen``: phase, deletion mark, version, exit code, restarts, ...); a bind or a
  condition is not. The pods it creates are noted as created (Pending), so their
  creation coming back is skipped; when a policy times ``PodPending``, the controller
  runs again at once instead, so the timer starts when the pods appear;
- a PodGroup: changed in its generation, or between not admitted, admitted and
  ``Unknown`` (the scheduler's status writes that move it from ``Inqueue`` to
  ``Running`` or change its conditions are not), or deleted by someone else; its own
  creation and deletion coming back are skipped;
- a Command targeting the Job; a Queue a refused Job waits for.

A store whose objects have no ``generation`` (made by another client of the in-memory
cluster) makes every Job and PodGroup event count.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from pumice.api.parse import copy_tree, timestamp
from pumice.cluster.protocol import DELETED, WatchEvent
from pumice.controllers.commands import JOB_ACTIONS, parse_command
from pumice.controllers.job import state as st
from pumice.controllers.job.observe import (
    Eviction,
    PodView,
    observe,
    policy_events,
    task_of,
    version_of,
)
from pumice.controllers.job.plugins import JobPlugin, PluginError, build_plugins, ssh_keygen
from pumice.controllers.job.pods import (
    build_pod,
    build_podgroup,
    min_resources,
    podgroup_changes,
)
from pumice.controllers.job.policy import action_for
from pumice.controllers.job.record import record as record_event
from pumice.controllers.job.spec import (
    API_VERSION,
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER,
    KIND,
    JobSpec,
    TaskSpec,
    format_duration,
    parse_job,
)
from pumice.controllers.job.validate import problems, queue_state_from
from pumice.controllers.job.volumes import Mount, VolumeError, ensure_claims, mount
from pumice.controllers.store import Store, controller_of, is_mapping
from pumice.errors import InputError

log = logging.getLogger("pumice.controllers.job")

INVALID = "Invalid"
#: Stands for a spec not kept by :meth:`JobController._parse` (told by its generation).
_BY_GENERATION = object()
#: Seconds before a reconcile that could not finish (a plugin failed) is tried again.
RETRY_AFTER = 5.0
#: The policy events :func:`observe` reads off the pods and tasks (``*``: all of them);
#: a Job whose policies name none of them can only see an eviction or an Unknown group.
_READ_OFF_PODS = frozenset({"*", "PodFailed", "PodPending", "TaskCompleted", "TaskFailed"})


def _job_ref(obj: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of the Volcano Job controlling ``obj``, if one does."""
    ref = controller_of(obj)
    if (
        ref is None
        or ref.get("kind") != KIND
        or not str(ref.get("apiVersion", "")).startswith("batch.volcano.sh/")
    ):
        return None
    return f"{(obj.get('metadata') or {}).get('namespace') or 'default'}/{ref.get('name')}"


def merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that turns ``old`` into ``new`` (empty when equal)."""
    out: dict[str, Any] = {}
    if not old.keys() <= new.keys():  # (most diffs remove nothing: told without a set)
        for k in old:
            if k not in new:
                out[k] = None
    for k, v in new.items():
        o = old.get(k)
        if o == v:
            continue  # (equal trees have no diff: compared at once, not key by key)
        t = type(v)  # (a status is made of dicts, texts and counts: told without a call)
        if (t is dict or (t is not int and t is not str and is_mapping(v))) and (
            type(o) is dict or is_mapping(o)
        ):
            sub = merge_diff(o, v)
            if sub:
                out[k] = sub
        else:
            out[k] = v
    return out


@dataclass(slots=True, eq=False)
class _Plan:
    """What every reconcile of a Job reads off its parse, worked out once per parse:
    its key, its PodGroup's key, the events its policies name, the name of the pod of
    each (task, index) the spec wants, in the spec's order, and the tasks' priority
    classes."""

    spec: JobSpec
    key: str
    podgroup: str
    events: frozenset[str]
    #: Per pod the spec wants: its task, index, name and (task name, index).
    slots: tuple[tuple[TaskSpec, int, str, tuple[str, int]], ...]
    #: (task name, index) -> the name of that pod.
    names: dict[tuple[str, int], str]
    #: Each task's priorityClassName ("" for none), in the spec's order.
    classes: tuple[str, ...]
    #: Whether an event its policies name is read off the pods (see ``_READ_OFF_PODS``).
    reads_pods: bool
    #: Whether a policy times ``PodPending`` (the pods it creates start the timer).
    times_pending: bool

    @classmethod
    def of(cls, spec: JobSpec) -> _Plan:
        slots = tuple(
            (task, i, f"{spec.name}-{task.name}-{i}", (task.name, i))
            for task in spec.tasks
            for i in range(task.replicas)
        )
        events = policy_events(spec)
        return cls(
            spec=spec,
            key=spec.key,
            podgroup=f"{spec.namespace}/{spec.podgroup_name}",
            events=events,
            slots=slots,
            names={at: name for _task, _i, name, at in slots},
            classes=tuple(str(t.pod_spec.get("priorityClassName") or "") for t in spec.tasks),
            reads_pods=not events.isdisjoint(_READ_OFF_PODS),
            times_pending="PodPending" in events or "*" in events,
        )


@dataclass(slots=True)
class _Run:
    """One reconcile's working state."""

    job: Mapping[str, Any]
    spec: JobSpec
    plan: _Plan
    pods: list[PodView]
    status: st.Status
    version: int
    resources: dict[str, str]
    plugins: list[JobPlugin]
    changed: bool = False  # the phase moved
    killed: bool = False  # a kill deleted pods or moved the phase
    created: bool = False  # pods were created
    wrote: bool = False  # the sync made, patched or deleted a PodGroup or pod
    duration: str | None = None


class JobController:
    """Volcano's job controller over a :class:`Store` (see the module docstring).

    ``default_queue`` and the first of ``scheduler_names`` are the defaults Volcano's
    webhook fills in;
    ``keygen`` makes the ssh plugin's key pairs (``ssh-keygen`` by default; a fixed pair
    makes a simulation fast and repeatable)."""

    name = "job"
    kinds = ("Job", "Pod", "PodGroup", "Command", "Queue")
    #: What it reads and writes beyond what it watches.
    reads = ("PriorityClass", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim")

    def __init__(
        self,
        store: Store,
        *,
        default_queue: str = DEFAULT_QUEUE,
        scheduler_names: Sequence[str] = (DEFAULT_SCHEDULER,),
        keygen: Callable[[], tuple[str, str]] = ssh_keygen,
    ) -> None:
        self.store = store
        self.default_queue = default_queue
        self.scheduler_name = scheduler_names[0] if scheduler_names else DEFAULT_SCHEDULER
        self.keygen = keygen
        #: Per Job, its pods as last seen on the watch (read once per event).
        self._pods: dict[str, dict[str, PodView]] = {}
        #: Pod key -> the Job its last event was indexed under (see :meth:`_index_pod`).
        self._pod_jobs: dict[str, str] = {}
        self._commands: dict[str, set[str]] = {}
        self._killed: set[str] = set()
        self._evicted: dict[str, dict[str, Eviction]] = {}
        self._since: dict[str, dict[str, float]] = {}
        self._refused: dict[str, str] = {}
        #: Job key -> (generation, phase) of its last watch event.
        self._generations: dict[str, tuple[Any, Any]] = {}
        #: Job key -> (generation, phase) its last reconcile acted in and left it in.
        self._settled: dict[str, tuple[Any, Any]] = {}
        #: PodGroup key -> what the controller reads of it (None: nothing to compare).
        self._groups: dict[str, tuple[Any, ...] | None] = {}
        #: PodGroups the controller deleted itself, until their deletion comes back.
        self._groups_deleted: set[str] = set()
        self._event_counts: dict[str, int] = {}
        self._indexed = False
        #: Per Job, what its spec was parsed from (a private copy) and the parse, so an
        #: unchanged Job is not parsed again on every reconcile.
        self._specs: dict[str, tuple[tuple[Any, ...], JobSpec, Any]] = {}
        #: Per Job, its PodGroup's minResources for a parse and its tasks' priorities.
        self._min_res: dict[str, tuple[JobSpec, tuple[int, ...], dict[str, str]]] = {}
        #: minResources by the gang's shape (see :func:`_gang_shape`): the Jobs of a
        #: workload repeat a few shapes, whose quantities need not be summed again.
        self._min_res_shapes: dict[tuple[Any, ...], dict[str, str]] = {}
        #: Per Job, the parse, minResources and PodGroup (uid, generation) for which
        #: its PodGroup was last found to need no change.
        self._pg_kept: dict[str, tuple[JobSpec, dict[str, str], tuple[Any, Any]]] = {}
        #: Per Job, the plan of its last parse.
        self._plans: dict[str, _Plan] = {}

    # -- watch ------------------------------------------------------------------------------

    def _index_pod(self, type_: str, key: str, pod: Mapping[str, Any]) -> tuple[str | None, bool]:
        """Note a pod event: the Job it belongs to, and whether it changed anything the
        controller reads of the pod. A pod still controlled by the owner (by uid) it
        was last indexed under belongs to the same Job: its ownerReferences are not
        read again (most pod events)."""
        if type_ != DELETED:
            job = self._pod_jobs.get(key)
            if job is not None:
                pods = self._pods.get(job)
                old = pods.get(key) if pods is not None else None
                if pods is not None and old is not None and old.owner:
                    view = PodView.of(pod, old)
                    if view.owner == old.owner:
                        pods[key] = view
                        return job, old.seen != view.seen
        job = _job_ref(pod)
        if job is None:
            self._pod_jobs.pop(key, None)
            return None, False
        if type_ == DELETED:
            self._pod_jobs.pop(key, None)
            self._pods.get(job, {}).pop(key, None)
            uid = str((pod.get("metadata") or {}).get("uid", ""))
            if uid in self._killed:
                self._killed.discard(uid)
            elif self.store.get(KIND, job) is not None:
                # (a pod of a Job that is gone, taken by the garbage collector, is no
                # eviction: its reconcile forgets the Job, whatever it noted of it)
                name = str(pod["metadata"]["name"])
                self._evicted.setdefault(job, {})[name] = Eviction(
                    name, task_of(pod), version_of(pod), uid, PodView.of(pod).owner
                )
            return job, True
        self._pod_jobs[key] = job
        pods = self._pods.setdefault(job, {})
        old = pods.get(key)
        view = pods[key] = PodView.of(pod, old)
        return job, old is None or old.seen != view.seen

    @staticmethod
    def _command_target(cmd: Mapping[str, Any]) -> str | None:
        try:
            c = parse_command(cmd)
        except InputError:
            return None  # not anyone's to apply; the Queue controller ignores it too
        return f"{c.namespace}/{c.target_name}" if c.targets(KIND) else None

    def _index_command(self, type_: str, key: str, cmd: Mapping[str, Any]) -> str | None:
        job = self._command_target(cmd)
        if job is None:
            return None
        if type_ == DELETED:
            self._commands.get(job, set()).discard(key)
            return None
        self._commands.setdefault(job, set()).add(key)
        return job

    def _build_index(self) -> None:
        self._indexed = True
        for pod in self.store.list("Pod"):
            self._index_pod("ADDED", _key(pod), pod)
        for pg in self.store.list("PodGroup"):
            if _job_ref(pg) is not None:
                self._groups[_key(pg)] = _group_view(pg)
        for cmd in self.store.list("Command"):
            self._index_command("ADDED", _key(cmd), cmd)

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        """The Job an event concerns, when it changed something a reconcile reads (see
        the module docstring)."""
        if event.kind == "Job":
            return () if self._status_only(event) else (event.key,)
        if event.kind == "Pod":
            job, changed = self._index_pod(event.type, event.key, event.obj)
            return (job,) if job and changed else ()
        if event.kind == "PodGroup":
            if event.type != DELETED:
                # (most PodGroup events are the scheduler's status writes, which leave
                # what a reconcile reads as it was: then whose it is is not read)
                last = self._groups.get(event.key)
                if last is not None and _group_view(event.obj) == last:
                    return ()
            job = _job_ref(event.obj)
            return (job,) if job and self._group_changed(event) else ()
        if event.kind == "Command":
            job = self._index_command(event.type, event.key, event.obj)
            return (job,) if job else ()
        if event.kind == "Queue":
            return sorted(k for k, q in self._refused.items() if q == event.key)
        return ()

    def _status_only(self, event: WatchEvent) -> bool:
        """A Job update that changed neither its spec (the API server's ``generation``)
        nor its phase, or left it in the phase its last reconcile acted in: a status
        write coming back, ignored as Volcano's ``updateJob`` ignores it (or a status
        that moves with the clock, such as ``runningDuration``, would reconcile the Job
        again and again). Without a generation every event counts."""
        meta = event.obj.get("metadata") or {}
        seen = (meta.get("generation"), ((event.obj.get("status") or {}).get("state") or {})
                .get("phase"))  # fmt: skip
        if event.type == DELETED or seen[0] is None:
            self._generations.pop(event.key, None)
            return False
        last, self._generations[event.key] = self._generations.get(event.key), seen
        if event.type == "ADDED":
            return False
        return last == seen or self._settled.get(event.key) == seen

    def _group_changed(self, event: WatchEvent) -> bool:
        """Whether a PodGroup event changed what a reconcile reads of it (see the
        module docstring), noting what it now is."""
        key = event.key
        if event.type == DELETED:
            self._groups.pop(key, None)
            if key in self._groups_deleted:
                self._groups_deleted.discard(key)
                return False
            return True
        view = _group_view(event.obj)
        last = self._groups.get(key)
        self._groups[key] = view
        return view is None or view != last

    def resync(self) -> Iterable[str]:
        self._build_index()
        return [_key(j) for j in self.store.list("Job")]

    # -- reconcile ----------------------------------------------------------------------------

    def _forget(self, key: str) -> None:
        self._pods.pop(key, None)
        self._settled.pop(key, None)
        self._evicted.pop(key, None)
        self._since.pop(key, None)
        self._refused.pop(key, None)
        self._specs.pop(key, None)
        self._min_res.pop(key, None)
        self._pg_kept.pop(key, None)
        self._plans.pop(key, None)

    def _parse(self, key: str, job: Mapping[str, Any]) -> JobSpec:
        """:func:`parse_job` of ``job``, or the last parse of an equal Job (the fields
        it reads compared with a copy taken when it was parsed; the spec by its
        ``generation`` when the store keeps one, as the API server does)."""
        meta = job.get("metadata")
        if not is_mapping(meta):
            return parse_job(
                job, default_queue=self.default_queue, default_scheduler=self.scheduler_name
            )
        generation = meta.get("generation")
        hit = self._specs.get(key)
        same_spec = hit is not None and isinstance(generation, int) and generation == hit[2]
        if hit is not None and same_spec:
            own = hit[0]  # (the common case: field by field, no tuple of them to build)
            if (
                own[0] == meta.get("namespace")
                and own[1] == meta.get("name")
                and own[2] == meta.get("uid")
                and own[3] == meta.get("labels")
                and own[4] == meta.get("annotations")
            ):
                return hit[1]
        read = (
            meta.get("namespace"),
            meta.get("name"),
            meta.get("uid"),
            meta.get("labels"),
            meta.get("annotations"),
            job.get("spec"),
        )
        if hit is not None and not same_spec and hit[0] == read:
            return hit[1]
        if isinstance(generation, int):
            # The spec is told apart by its generation, so it is not copied: the API
            # server replaces an object on every write, and the in-memory store bumps
            # the generation of a spec it patches. The metadata read is compared by
            # value, so it is.
            ns, name, uid, labels, annotations = copy_tree(read[:5])
            body = read[5]
            own = (ns, name, uid, labels, annotations, _BY_GENERATION)
        else:
            own = copy_tree(read)
            ns, name, uid, labels, annotations, body = own
        meta_copy = {
            "namespace": ns,
            "name": name,
            "uid": uid,
            "labels": labels,
            "annotations": annotations,
        }
        spec = parse_job(
            {"metadata": meta_copy, "spec": body},
            default_queue=self.default_queue,
            default_scheduler=self.scheduler_name,
        )
        self._specs[key] = (own, spec, generation)
        return spec

    def _min_resources(self, spec: JobSpec, plan: _Plan) -> dict[str, str]:
        """:func:`min_resources` of ``spec`` (``plan`` its plan), again only when the
        spec or the priority of a task's class changed."""
        prios = tuple([self._priority(name) for name in plan.classes])
        hit = self._min_res.get(plan.key)
        if hit is not None and hit[0] is spec and hit[1] == prios:
            return hit[2]
        shape = _gang_shape(spec, prios)
        got = self._min_res_shapes.get(shape) if shape is not None else None
        if got is None:
            got = min_resources(spec, self._priority)
            if shape is not None:
                if len(self._min_res_shapes) >= _SHAPES_KEPT:
                    self._min_res_shapes.clear()
                self._min_res_shapes[shape] = got
        self._min_res[plan.key] = (spec, prios, got)
        return got

    def _podgroup_patch(self, pg: Mapping[str, Any], spec: JobSpec, plan: _Plan) -> dict[str, Any]:
        """:func:`podgroup_changes` of the Job's PodGroup; known to be empty, without
        building the PodGroup again, when neither the parse of the Job, its
        minResources, nor the PodGroup's ``generation`` (its spec) moved since a
        reconcile found nothing to change."""
        min_res = self._min_resources(spec, plan)
        meta = pg.get("metadata") or {}
        seen = (meta.get("uid"), meta.get("generation"))
        kept = self._pg_kept.get(plan.key)
        if kept is not None and kept[0] is spec and kept[1] is min_res and kept[2] == seen:
            return {}
        patch = podgroup_changes(pg, spec, self._priority, min_res=min_res)
        if not patch and isinstance(seen[1], int):
            self._pg_kept[plan.key] = (spec, min_res, seen)
        return patch

    def _keep_made(
        self,
        key: str,
        made: Mapping[str, Any],
        built: dict[str, Any],
        spec: JobSpec,
        min_res: dict[str, str],
    ) -> None:
        """Note the PodGroup just created for the Job ``key`` as needing no change (see
        :meth:`_podgroup_patch`) when the store created the very object built (the
        in-memory store keeps what it is given, filling in only metadata): its spec is
        then what :func:`podgroup_changes` builds for the same parse and minResources,
        so the next reconcile need not build it again to find nothing to patch. A store
        that answers with its own copy (the API server's, which may have defaulted
        fields) is compared on the next reconcile, as before."""
        if made is not built:
            return
        meta = made.get("metadata") or {}
        generation = meta.get("generation")
        if isinstance(generation, int):
            self._pg_kept[key] = (spec, min_res, (meta.get("uid"), generation))

    def reconcile(self, key: str) -> float | None:
        if not self._indexed:
            self._build_index()
        job = self.store.get("Job", key)
        if job is None:
            for cmd in sorted(self._commands.pop(key, ())):
                self.store.delete("Command", cmd)
            self._forget(key)
            return None
        meta = job.get("metadata") or {}
        if meta.get("deletionTimestamp") is not None:
            return None
        status = job.get("status") or {}
        state = status.get("state") or {}
        phase = str(state.get("phase") or "")
        try:
            spec = self._parse(key, job)
        except InputError as err:
            where = f"{err.field}: " if err.field else ""
            self._refuse(job, key, self.default_queue, [f"{where}{err.message}"])
            return None
        if not phase or (phase == st.PENDING and state.get("reason") == INVALID):
            found = problems(spec, queue_state_from(self.store.get))
            if found:
                self._refuse(job, key, spec.queue, found)
                return None
            self._refused.pop(key, None)
        return self._drive(job, key, spec, phase)

    def _refuse(self, job: Mapping[str, Any], key: str, queue: str, found: list[str]) -> None:
        """Leave the Job Pending with why it is refused (once per message)."""
        self._refused[key] = queue
        message = "refused: " + "; ".join(found)
        state = (job.get("status") or {}).get("state") or {}
        if state.get("reason") == INVALID and state.get("message") == message:
            return None
        now = self.store.stamp()
        self.store.patch(
            KIND,
            key,
            {
                "status": {
                    "state": {
                        "phase": st.PENDING,
                        "reason": INVALID,
                        "message": message,
                        "lastTransitionTime": now,
                    },
                    "conditions": [{"status": st.PENDING, "lastTransitionTime": now}],
                }
            },
            subresource="status",
        )
        self._settle(key, job, st.PENDING)
        self._record(job, "Warning", INVALID, message)
        return None

    def _settle(self, key: str, job: Mapping[str, Any], phase: str) -> None:
        """The last reconcile acted in ``phase`` and left the Job in it: its status
        write coming back needs no reconcile."""
        self._settled[key] = (_generation(job), phase)

    def _record(self, job: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        record_event(self.store, job, type_, reason, message, self._event_counts)

    def _priority(self, name: str) -> int:
        pc = self.store.get("PriorityClass", name)
        try:
            return int((pc or {}).get("value") or 0)
        except (TypeError, ValueError):
            return 0

    def _next_command(self, key: str, uid: str) -> str | None:
        """The action of the oldest Command for the Job, consumed (deleted); None if
        none is left. A Command naming another uid (for an earlier Job of the same
        name) is consumed and ignored."""
        if not self._commands.get(key):
            return None  # (most reconciles)
        cmds = []
        for ck in list(self._commands.get(key, ())):
            obj = self.store.get("Command", ck)
            if obj is None:
                self._commands[key].discard(ck)
                continue
            with contextlib.suppress(InputError):
                cmds.append(parse_command(obj))
        for cmd in sorted(cmds, key=lambda c: c.order()):
            self._commands[key].discard(cmd.key)
            if not self.store.delete("Command", cmd.key, cascade=False):
                continue
            if cmd.target_uid and uid and cmd.target_uid != uid:
                continue
            return cmd.action
        return None

    def _drive(self, job: Mapping[str, Any], key: str, spec: JobSpec, phase: str) -> float | None:
        status = job.get("status") or {}
        version = int(status.get("version") or 0)
        plan = self._plans.get(key)  # (the plan of this parse, made once per parse)
        if plan is None or plan.spec is not spec:
            plan = self._plans[key] = _Plan.of(spec)
        uid = spec.uid
        # The Job's pods as the watch last showed them, those controlled by this uid
        # (not an earlier Job's of the name).
        known = self._pods.get(key)
        pods = [p for p in known.values() if p.owner == uid] if known else []
        pg = self.store.get("PodGroup", plan.podgroup)
        pg_phase = str(((pg or {}).get("status") or {}).get("phase") or "") if pg else ""
        again: list[float] = []

        # -- the request --
        action, task, pod_target = st.SYNC, "", ""
        command = self._next_command(key, uid) if self._commands.get(key) else None
        if command is not None:
            action = command
            self._record(
                job,
                "Normal",
                "CommandIssued",
                f"Start to execute command {action}, and clean it up to make sure executed not "
                "more than once.",
            )
            if action not in JOB_ACTIONS:
                self._record(
                    job,
                    "Warning",
                    "CommandIssued",
                    f"unknown action {action!r} ignored",
                )
                action = st.SYNC
            again.append(0.0)
        elif plan.reads_pods or pg_phase == "Unknown" or self._evicted.get(key):
            action, task, pod_target = self._from_events(
                key, spec, plan.events, pods, version, pg_phase, self.store.now(), again
            )
        else:  # (most reconciles: see _from_events)
            started = self._since.get(key)
            if started:
                started.clear()
        if action != st.SYNC:
            self._record(job, "Normal", "ExecuteAction", f"Start to execute action {action}")

        # -- the work --
        if task or pod_target:
            step = st.decide(phase or st.PENDING, action, task=task, pod=pod_target)
        else:  # (most reconciles: a cheaper key for decide's cache)
            step = st.decide(phase or st.PENDING, action)
        run = _Run(
            job=job,
            spec=spec,
            plan=plan,
            pods=pods,
            status=st.Status(
                phase=phase or st.PENDING,
                retry_count=int(status.get("retryCount") or 0),
                min_available=spec.min_available,
                counts=st.Counts(),
            ),
            version=version,
            resources=dict(status.get("controlledResources") or {}),
            plugins=build_plugins(spec, keygen=self.keygen) if spec.plugins else [],
            changed=not phase or (status.get("state") or {}).get("reason") == INVALID,
        )
        try:
            if step.work == "sync":
                self._sync(run, pg, pg_phase)
            elif step.work == "kill":
                self._kill(run, step.retain, pg)
            else:
                self._kill_target(run, step.task, step.pod)
        except PluginError as err:
            self._record(job, "Warning", "PluginError", str(err))
            return RETRY_AFTER
        except VolumeError as err:  # (Volcano's createJobIOIfNotExist: Pending, retried)
            self._record(job, "Warning", "PVCError", f"Failed to create PVC, err: {err}")
            self._write(run, key)
            return RETRY_AFTER
        if step.transition is not None and step.transition(run.status, spec):
            run.changed = True
        if step.work == "kill" and run.changed:
            run.killed = True
        if run.killed:
            run.version += 1
        self._write(run, key)
        if run.status.phase == (phase or st.PENDING) or (
            command is None and action == st.SYNC and self._idle_in_new_phase(run, step)
        ):
            self._settled[key] = (_generation(job), run.status.phase)  # (_settle)
        else:  # moved: the new phase may have work of its own (its write calls for it)
            self._settled.pop(key, None)
        if run.created and plan.times_pending:
            again.append(0.0)  # the pods it created start PodPending's timer now
        if spec.ttl is not None:
            after = self._ttl(run, key)
            if after is not None:
                again.append(after)
        return min(again) if again else None

    @staticmethod
    def _idle_in_new_phase(run: _Run, step: st.Step) -> bool:
        """Whether a sync that moved the Job to another phase left nothing for that
        phase to do, so that its status write coming back needs no reconcile: the new
        phase syncs too, on the same pods (this one made, patched or deleted nothing,
        and the Job has no plugins or volumes, whose work differs by phase), and its
        transition does not fire on the same counts. Such a reconcile would choose the
        same request (nothing new was observed), count the same pods and write the
        status just written, so it would change nothing."""
        if step.work != "sync" or run.created or run.wrote or run.plugins or run.spec.volumes:
            return False
        status = run.status
        turn = st.decide(status.phase, st.SYNC)
        if turn.work != "sync":
            return False
        if turn.transition is None:
            return True
        probe = st.Status(status.phase, status.retry_count, status.min_available, status.counts)
        return not turn.transition(probe, run.spec)

    def _from_events(
        self,
        key: str,
        spec: JobSpec,
        wanted: frozenset[str],
        pods: list[PodView],
        version: int,
        pg_phase: str,
        now: float,
        again: list[float],
    ) -> tuple[str, str, str]:
        """The action the events that hold call for (module docstring, step 2);
        ``wanted``: the events the Job's policies name."""
        evicted = self._evicted.get(key, {})
        if evicted:
            running = {p.name: p.uid for p in pods if p.phase == "Running" and not p.terminating}
            for name, e in list(evicted.items()):  # replaced and running again, or stale
                stale = e.version < version or e.owner != spec.uid
                if stale or (name in running and running[name] != e.uid):
                    del evicted[name]
        if not evicted and pg_phase != "Unknown" and wanted.isdisjoint(_READ_OFF_PODS):
            # No event can hold: none is read off the pods, no eviction is pending and
            # the PodGroup is not Unknown (most reconciles). No timer is left running.
            started = self._since.get(key)
            if started:
                started.clear()
            return (st.SYNC, "", "")
        since = self._since.setdefault(key, {})
        seen: set[str] = set()
        chosen: tuple[str, str, str] | None = None
        for o in observe(spec, pods, version, list(evicted.values()), pg_phase, wanted):
            decision = action_for(spec, o.event, task=o.task, exit_code=o.exit_code)
            seen.add(o.ident)
            if decision.action == st.SYNC:
                if o.event == "PodEvicted":
                    evicted.pop(o.pod, None)
                continue
            if decision.delay > 0:
                first = since.setdefault(o.ident, now)
                if now - first < decision.delay:
                    again.append(first + decision.delay - now)
                    continue
            if chosen is None:
                chosen = (decision.action, o.task, o.pod)
                since.pop(o.ident, None)
                if o.event == "PodEvicted":
                    evicted.pop(o.pod, None)
        for ident in [i for i in since if i not in seen]:
            del since[ident]
        return chosen or (st.SYNC, "", "")

    # -- the work --------------------------------------------------------------------------

    def _plugins_add(self, run: _Run) -> None:
        for p in run.plugins:
            marker = f"plugin-{p.name}"
            if run.resources.get(marker) != p.name:
                if p.ignored:  # (once per setting up of the plugin)
                    message = (
                        f"plugin {p.name}: pumice does not implement the argument(s) "
                        f"{' '.join(p.ignored)}; ignored"
                    )
                    log.warning("Job %s: %s", run.spec.key, message)
                    self._record(run.job, "Warning", "PluginError", message)
                p.on_job_add(run.spec, self.store)
                run.resources[marker] = p.name

    def _plugins_delete(self, run: _Run) -> None:
        for p in run.plugins:
            marker = f"plugin-{p.name}"
            if run.resources.get(marker) == p.name:
                p.on_job_delete(run.spec, self.store)
                del run.resources[marker]

    def _delete_pod(self, pod: PodView) -> None:
        if self.store.delete("Pod", pod.key, cascade=False):
            self._killed.add(pod.uid)

    def _sync(self, run: _Run, pg: Mapping[str, Any] | None, pg_phase: str) -> None:
        spec, counts = run.spec, run.status.counts
        if not run.plugins:
            pass  # (most Jobs)
        elif run.status.phase == st.PENDING:
            self._plugins_add(run)
        else:
            for p in run.plugins:
                p.on_job_update(spec, self.store)
        mounts: list[Mount] = []
        if spec.volumes:
            initiate = run.status.phase == st.PENDING
            mounts = ensure_claims(spec, self.store, run.resources, initiate=initiate)
        if pg is None:
            min_res = self._min_resources(spec, run.plan)
            built = build_podgroup(spec, self._priority, min_res=min_res)
            made = self.store.create(built)
            run.wrote = True
            if made is not None:  # its creation coming back changes nothing
                self._groups[_key(made)] = _group_view(made)
                self._keep_made(run.plan.key, made, built, spec, min_res)
        else:
            patch = self._podgroup_patch(pg, spec, run.plan)
            run.wrote = bool(patch)
            if patch and self.store.patch("PodGroup", _key(pg), patch):
                now = self.store.get("PodGroup", _key(pg))  # its own change: not news
                if now is not None:
                    self._groups[_key(pg)] = _group_view(now)
        admitted = pg is not None and pg_phase not in ("", "Pending")
        have = {(p.task, p.index): p for p in run.pods} if run.pods else {}
        creates: list[dict[str, Any]] = []
        add = counts.add
        for task, i, name, at in run.plan.slots:
            pod = have.get(at)
            if pod is not None and pod.name == name:
                if pod.terminating:
                    counts.terminating += 1
                else:
                    add(task.name, pod.phase)
                continue
            if not admitted:
                continue
            new = build_pod(spec, task, i, run.version, run.status.retry_count)
            mount(new, mounts)
            for p in run.plugins:
                p.on_pod_create(new, spec)
            creates.append(new)
            counts.add(task.name, "Pending")
        if creates:
            run.created = True
            known = self._pods.setdefault(spec.key, {})
            jobs = self._pod_jobs
            for made in self.store.create_all(creates):  # (a Job's pods at once, on a cluster)
                if made is not None:  # counted Pending above: its creation coming back is not news
                    view = PodView.of(made)
                    known[view.key] = view
                    jobs[view.key] = spec.key
        names = run.plan.names
        for pod in run.pods:  # beyond the spec (scaled down, a task gone)
            if names.get((pod.task, pod.index)) == pod.name:
                continue  # (wanted, and named as the spec names it)
            if not pod.terminating:
                self._delete_pod(pod)
                run.wrote = True
            counts.terminating += 1

    def _kill(self, run: _Run, retain: frozenset[str], pg: Mapping[str, Any] | None) -> None:
        spec, counts = run.spec, run.status.counts
        if run.status.retry_count >= spec.max_retry - 1:
            retain = st.SOFT  # the last retry keeps what finished, to be looked at
        for pod in run.pods:
            if pod.terminating:
                counts.terminating += 1
            elif pod.phase in retain:
                counts.add(pod.task, pod.phase)
            else:
                self._delete_pod(pod)
                counts.terminating += 1
                run.killed = True
        self._plugins_delete(run)
        if pg is not None and self.store.delete("PodGroup", _key(pg), cascade=False):
            self._groups_deleted.add(_key(pg))
        created = timestamp(
            (run.job.get("metadata") or {}).get("creationTimestamp"), "creationTimestamp"
        )
        run.duration = format_duration(self.store.now() - created) if created else None

    def _kill_target(self, run: _Run, task: str, pod: str) -> None:
        counts = run.status.counts
        for p in run.pods:
            if p.terminating:
                counts.terminating += 1
            elif p.task == task and (not pod or p.name == pod):
                self._delete_pod(p)
                counts.terminating += 1
            else:
                counts.add(p.task, p.phase)

    # -- status -------------------------------------------------------------------------------

    def _write(self, run: _Run, key: str) -> None:
        old = run.job.get("status") or {}
        c = run.status.counts
        # (the old state and conditions, when kept, go in as they are: equal, so no
        # part of the patch; neither is changed in place)
        state = old.get("state") or {}
        conditions = old.get("conditions") or []
        if run.changed or state.get("phase") != run.status.phase:
            now = self.store.stamp()
            state = {"phase": run.status.phase, "lastTransitionTime": now}
            # one condition per phase, the latest (Volcano's appendJobCondition)
            conditions = [c for c in conditions if c.get("status") != run.status.phase]
            conditions.append({"status": run.status.phase, "lastTransitionTime": now})
        new: dict[str, Any] = {"state": state, "minAvailable": run.spec.min_available}
        if c.pending:
            new["pending"] = c.pending
        if c.running:
            new["running"] = c.running
        if c.succeeded:
            new["succeeded"] = c.succeeded
        if c.failed:
            new["failed"] = c.failed
        if c.terminating:
            new["terminating"] = c.terminating
        if c.unknown:
            new["unknown"] = c.unknown
        if run.version:
            new["version"] = run.version
        if run.status.retry_count:
            new["retryCount"] = run.status.retry_count
        tasks = c.tasks
        if len(tasks) == 1:  # (most Jobs: one task, its pods mostly in one phase)
            for t, ph in tasks.items():
                new["taskStatusCount"] = {
                    t: {"phase": dict(sorted(ph.items())) if len(ph) > 1 else dict(ph)}
                }
        elif tasks:
            new["taskStatusCount"] = {
                t: {"phase": dict(sorted(ph.items()))} for t, ph in sorted(tasks.items())
            }
        if run.resources:
            new["controlledResources"] = dict(sorted(run.resources.items()))
        duration = run.duration or old.get("runningDuration")
        if duration:
            new["runningDuration"] = duration
        if conditions:
            new["conditions"] = conditions
        if old == new:
            return  # nothing to write (the common case, and cheaper to tell than a diff)
        patch = merge_diff(old, new)
        if patch:
            self.store.patch(KIND, key, {"status": patch}, subresource="status")

    def _ttl(self, run: _Run, key: str) -> float | None:
        """Delete a finished Job once its TTL passed; else seconds until it does."""
        if run.spec.ttl is None or run.status.phase not in st.FINISHED:
            return None
        job = self.store.get(KIND, key) or run.job
        when = ((job.get("status") or {}).get("state") or {}).get("lastTransitionTime")
        finished = timestamp(when, "status.state.lastTransitionTime") if when else self.store.now()
        left = finished + run.spec.ttl - self.store.now()
        if left > 0:
            return left
        self.store.delete(KIND, key)
        self._forget(key)
        return None


#: Gang shapes whose minResources are kept (the table starts afresh beyond it).
_SHAPES_KEPT = 4096


def _gang_shape(spec: JobSpec, prios: tuple[int, ...]) -> tuple[Any, ...] | None:
    """Everything :func:`min_resources` reads of ``spec``: the Job's minAvailable and,
    per task in order, its minAvailable, replicas, priority and the resources of its
    pod template (containers, init containers, overhead) as canonical JSON; None when
    the template does not serialize (then nothing is shared)."""
    try:
        tasks = []
        for t, prio in zip(spec.tasks, prios, strict=True):
            ps = t.pod_spec
            resources = [
                [(c or {}).get("resources") for c in ps.get("containers") or ()],
                [(c or {}).get("resources") for c in ps.get("initContainers") or ()],
                ps.get("overhead"),
            ]
            raw = orjson.dumps(resources, option=orjson.OPT_SORT_KEYS)
            tasks.append((t.min_available, t.replicas, prio, raw))
    except Exception:  # (a malformed template: min_resources says what is wrong)
        return None
    return (spec.min_available, tuple(tasks))


def _group_view(pg: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What a reconcile reads of a PodGroup: its uid and generation (its spec, which the
    controller keeps as the Job says), and whether it is admitted or Unknown; None
    without a generation (nothing to compare: every change counts)."""
    meta = pg.get("metadata") or {}
    generation = meta.get("generation")
    if generation is None:
        return None
    phase = str((pg.get("status") or {}).get("phase") or "")
    return (meta.get("uid"), generation, phase not in ("", "Pending"), phase == "Unknown")


def _generation(obj: Mapping[str, Any]) -> Any:
    """``metadata.generation`` of ``obj`` (None without one)."""
    return (obj.get("metadata") or {}).get("generation")


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


__all__ = ["API_VERSION", "INVALID", "JobController", "merge_diff"]
