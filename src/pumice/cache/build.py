"""Build a :class:`~pumice.api.snapshot.Snapshot` from Kubernetes objects.

This is the one place where records become the model: it fixes the resource space,
resolves priorities, groups pods into jobs and accounts running pods on their nodes.
Every object is validated before anything is built, so a bad object written by hand
fails the whole snapshot with an error that names it; an object read from a cluster
that pumice cannot read is skipped with a note instead, as ``pumice run`` skips it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pumice.api import dra, gang_apis, parse
from pumice.api.hypernode import NodeFacts, build_topology, parse_hypernode
from pumice.api.job import JobInfo
from pumice.api.node import NodeTable
from pumice.api.pdb import parse_pdb
from pumice.api.quantity import plural
from pumice.api.queue import QueueInfo
from pumice.api.side_objects import SIDE_PARSERS, side_key
from pumice.api.snapshot import Snapshot
from pumice.api.task import TERMINATED_STATUSES, status_of_pod
from pumice.cache.model import ModelBuilder, bare_phase, derived_phase, queue_fix, resource_space
from pumice.cluster.protocol import object_key
from pumice.errors import InputError, shown_text

DEFAULT_SCHEDULER = "volcano"
ROOT_QUEUE = "root"

_KINDS = {
    "Node": parse.parse_node,
    "Pod": parse.parse_pod,
    "PodGroup": gang_apis.parse_any_podgroup,  # (every dialect: see gang_apis)
    "Queue": parse.parse_queue,
    "PriorityClass": parse.parse_priority_class,
    "PodDisruptionBudget": parse_pdb,
    "HyperNode": parse_hypernode,
    "Workload": gang_apis.parse_workload,
    **SIDE_PARSERS,
}


@dataclass(slots=True)
class SourcedObject:
    """An object and the file it came from (for error messages)."""

    obj: Mapping[str, Any]
    source: str = ""


def from_cluster(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` was read from an API server (kubectl's output, ``pumice run``'s
    dump): it carries the ``metadata.resourceVersion`` only a server gives. The server
    accepted it, so pumice skips what it cannot read of it, as ``pumice run`` does;
    an object written by hand has none, and its mistake is an error."""
    meta = obj.get("metadata")
    return isinstance(meta, Mapping) and bool(meta.get("resourceVersion"))


def skipped_why(err: InputError) -> str:
    """What is wrong with a skipped object, without the object's name (the key it is
    listed under): ``field spec.minMember: ...``."""
    return InputError(err.message, field=err.field).render()


def parse_objects(
    objects: Iterable[SourcedObject],
    invalid: dict[str, str] | None = None,
    served: set[tuple[str, str]] | None = None,
) -> tuple[dict[str, list], list[str], dict[tuple[str, str], str]]:
    """Validate every object; return records by kind, notes on skipped kinds, and the
    file each (kind, namespace/name) came from.

    With ``invalid``, an object read from a cluster (:func:`from_cluster`) that pumice
    cannot read is left out and listed there (``Kind namespace/name`` -> why) instead
    of failing the whole snapshot; ``served`` collects the (kind, namespace/name) of
    the objects read from a cluster."""
    records: dict[str, list] = {k: [] for k in _KINDS}
    notes: list[str] = []
    skipped: dict[str, int] = {}
    seen: dict[tuple[str, str], str] = {}
    for item in objects:
        obj = item.obj
        if not isinstance(obj, Mapping):
            raise InputError("expected a Kubernetes object (a mapping)", file=item.source)
        kind = obj.get("kind")
        if not kind:
            raise InputError(
                "is required", file=item.source, obj=parse.object_name(obj), field="kind"
            )
        if not isinstance(kind, str):
            raise InputError(
                f"expected a string, got {type(kind).__name__}",
                file=item.source,
                obj=parse.object_name(obj),
                field="kind",
            )
        fn = _KINDS.get(str(kind))
        if kind == "Workload" and not gang_apis.is_kubernetes_workload(obj):
            fn = None  # (another group's Workload, pumice's simulator workloads say)
        if kind == "PodGroup" and not gang_apis.podgroup_readable(obj):
            # (another API group's, e.g. coscheduling's old scheduling.sigs.k8s.io)
            kind = f"PodGroup of {shown_text(obj.get('apiVersion'))}"
            fn = None
        if fn is None:
            skipped[str(kind)] = skipped.get(str(kind), 0) + 1
            continue
        try:
            rec = fn(obj)
        except InputError as err:
            if invalid is None or not from_cluster(obj):
                raise err.located(file=item.source, obj=parse.object_name(obj)) from None
            invalid[cluster_name(obj)] = skipped_why(err)
            continue
        ident = getattr(rec, "namespace", "") + "/" + rec.name
        if isinstance(rec, parse.PodGroupRecord):
            ident = rec.uid  # (PodGroups of two API groups may share a name)
        if (kind, ident) in seen:
            raise InputError("appears twice", file=item.source, obj=parse.object_name(obj))
        seen[(str(kind), ident)] = item.source
        if served is not None and from_cluster(obj):
            served.add((str(kind), ident))
        records[str(kind)].append(rec)
    for kind, n in sorted(skipped.items()):
        notes.append(f"skipped {plural(n, 'object')} of kind {kind}")
    return records, notes, seen


def _claims_from_templates(records: dict[str, list], notes: list[str]) -> None:
    """The ResourceClaims the resource-claim controller would make from templates for
    pods that reference one and have none yet: made here, as the Volcano Jobs of a
    snapshot are expanded, so that a replay says which devices each pod would get. A
    pod whose template is not in the snapshot keeps waiting for its claim."""
    templates = {f"{t.namespace}/{t.name}": t for t in records["ResourceClaimTemplate"]}
    if not templates:
        return
    existing = {c.key for c in records["ResourceClaim"]}
    made = 0
    for p in records["Pod"]:
        if not any(r.waiting for r in p.device_claims):
            continue
        refs = []
        for ref in p.device_claims:
            template = templates.get(f"{ref.namespace}/{ref.template}") if ref.waiting else None
            if template is not None:
                name = dra.generated_claim_name(p.name, p.uid, ref.name)
                if f"{ref.namespace}/{name}" not in existing:
                    existing.add(f"{ref.namespace}/{name}")
                    notes_ = {dra.POD_CLAIM_NAME_ANNOTATION: ref.name}
                    claim = dra.ResourceClaim(ref.namespace, name, "", template.spec, notes_)
                    records["ResourceClaim"].append(claim)
                    made += 1
                ref = replace(ref, claim_name=name)
            refs.append(ref)
        p.device_claims = tuple(refs)
    if made:
        notes.append(
            f"made {plural(made, 'ResourceClaim')} from templates, as the resource-claim "
            "controller would"
        )


def cluster_name(obj: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` as the cache keys it (a namespaced object without a
    namespace is in ``default``; cluster-scoped kinds have no namespace)."""
    kind = str(obj.get("kind"))
    return f"{kind} {object_key(kind, obj)}"


def invalid_group_reason(uid: str, why: str) -> str:
    """The explanation of pods whose Volcano PodGroup ``uid`` pumice skipped as
    invalid (``why``): they wait for it to be fixed, not for it to be created."""
    return f"PodGroup {uid} is invalid and skipped ({why}); fix it: its pods wait for it"


def check_queue_tree(queues: list[parse.QueueRecord]) -> None:
    by_name = {q.name: q for q in queues}
    for q in queues:
        if q.parent and q.parent not in by_name and q.parent != ROOT_QUEUE:
            raise InputError(
                f"parent queue {q.parent!r} does not exist",
                obj=f"Queue {q.name}",
                field="spec.parent",
            )
        path = [q.name]
        cur = q
        while cur.parent and cur.parent in by_name:
            if cur.parent in path:
                cycle = " -> ".join([*path[path.index(cur.parent) :], cur.parent])
                raise InputError(
                    f"queue parents form a cycle: {cycle}",
                    obj=f"Queue {q.name}",
                    field="spec.parent",
                )
            path.append(cur.parent)
            cur = by_name[cur.parent]


def _some(names: list[str], limit: int = 3) -> str:
    """``a, b, c and 4 more``: the first few of ``names`` for a note."""
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def _odd_objects(
    pods: list[parse.PodRecord], podgroups: list[parse.PodGroupRecord], model: ModelBuilder
) -> list[str]:
    """Notes on objects that are scheduled, but not as their author may think: a pod
    without containers (Kubernetes refuses one; here it asks for a pod slot alone) and
    a priorityClassName that names no PriorityClass (the default priority, as Volcano
    gives it)."""
    notes = []
    empty = [f"{p.namespace}/{p.name}" for p in pods if not p.containers]
    if empty:
        have = "has" if len(empty) == 1 else "have"
        notes.append(
            f"{plural(len(empty), 'pod')} {have} no containers, which Kubernetes would "
            f"refuse: {_some(empty)}; {'it asks' if len(empty) == 1 else 'each asks'} for "
            f"nothing but a pod slot"
        )
    classes = model.priority_classes
    unknown: dict[str, list[str]] = {}
    for kind, records in (("pod", pods), ("podgroup", podgroups)):
        for r in records:
            if r.priority_class and r.priority_class not in classes:
                unknown.setdefault(r.priority_class, []).append(f"{kind} {r.namespace}/{r.name}")
    for name, users in sorted(unknown.items()):
        notes.append(
            f"priorityClassName {name!r} names no PriorityClass ({_some(users)}): "
            f"priority {model.default_priority}, the default"
        )
    return notes


def _gang_job(
    jobs: dict[str, JobInfo],
    blocked: dict[str, str],
    p: parse.PodRecord,
    workloads: Mapping[str, gang_apis.WorkloadRecord],
    model: ModelBuilder,
) -> str | None:
    """The uid of the job ``p`` joins by another dialect's reference (see
    :mod:`pumice.api.gang_apis`), made on first use for a Workload's pod group; None,
    with the reason in ``blocked``, when the object it names does not exist."""
    assert p.gang is not None
    uid = p.gang.uid(p.namespace)
    if uid in jobs:
        return uid
    g = gang_apis.workload_gang(p.gang, p.namespace, workloads, model.default_queue)
    if g is None:
        blocked.setdefault(uid, gang_apis.missing_reason(p.gang, p.namespace, workloads))
        return None
    jobs[uid] = model.job(g, uid)
    return uid


def build_snapshot(
    objects: Iterable[SourcedObject],
    *,
    scheduler_name: str = DEFAULT_SCHEDULER,
    now: float | None = None,
) -> Snapshot:
    """Validate ``objects`` and build the snapshot one cycle schedules against.

    Pods whose ``schedulerName`` is ``scheduler_name`` (or empty) are ours; other pods
    only occupy their nodes. An object read from a cluster that pumice cannot read (a
    PodGroup with ``minMember: -1``, which the API server accepts) is left out, as
    ``pumice run`` leaves it out, and listed in ``Snapshot.skipped`` and the notes, so
    that a dump of the cluster replays; a bad object written by hand is an error.
    """
    invalid: dict[str, str] = {}
    served: set[tuple[str, str]] = set()
    records, notes, sources = parse_objects(objects, invalid, served)
    nodes_r: list = records["Node"]
    pods_r: list[parse.PodRecord] = records["Pod"]
    pgs_r: list[parse.PodGroupRecord] = records["PodGroup"]
    queues_r: list[parse.QueueRecord] = records["Queue"]
    pcs_r: list[parse.PriorityClassRecord] = records["PriorityClass"]
    workloads = {f"{w.namespace}/{w.name}": w for w in records["Workload"]}
    while True:
        try:
            check_queue_tree(queues_r)
            break
        except InputError as err:
            name = (err.obj or "").removeprefix("Queue ")
            if ("Queue", "/" + name) not in served:
                raise err.located(file=sources.get(("Queue", "/" + name))) from None
            invalid[f"Queue {name}"] = skipped_why(err)  # (as pumice run leaves it out)
            queues_r = [q for q in queues_r if q.name != name]

    def bad_hypernode(what: str, message: str) -> None:
        name = what.removeprefix("HyperNode ")
        if ("HyperNode", "/" + name) not in served:
            raise InputError(message, file=sources.get(("HyperNode", "/" + name)), obj=what)
        invalid[what] = message

    try:
        topology = build_topology(
            records["HyperNode"],
            [NodeFacts(n.name, n.labels) for n in nodes_r],
            on_bad=bad_hypernode,
        )
    except InputError as err:
        name = (err.obj or "").removeprefix("HyperNode ")
        raise err.located(file=sources.get(("HyperNode", "/" + name))) from None

    _claims_from_templates(records, notes)
    space = resource_space(nodes_r, pods_r, pgs_r, queues_r)
    nodes = NodeTable(nodes_r, space)
    model = ModelBuilder(space, pcs_r)
    queues: dict[str, QueueInfo] = {q.name: model.queue(q) for q in queues_r}
    jobs: dict[str, JobInfo] = {}
    for g in pgs_r:
        job = model.job(g)
        jobs[job.uid] = job

    blocked: dict[str, str] = {}
    #: Jobs without their object that some pod still waits in (finished pods wait for
    #: nothing: a completed job whose PodGroup was deleted is not pending).
    waiting: set[str] = set()
    unknown_nodes = 0
    for p in pods_r:
        ours = p.scheduler_name in ("", scheduler_name)
        status = status_of_pod(p.phase, p.node_name, p.terminating)
        job_uid: str | None = None
        if ours:
            if p.group:
                job_uid = f"{p.namespace}/{p.group}"
                if job_uid not in jobs:
                    why = invalid.get(f"PodGroup {job_uid}")
                    blocked.setdefault(
                        job_uid,
                        f"PodGroup {job_uid} does not exist; create it or fix the "
                        f"{parse.GROUP_ANNOTATION} annotation of its pods"
                        if why is None
                        else invalid_group_reason(job_uid, why),
                    )
                    if status not in TERMINATED_STATUSES:
                        waiting.add(job_uid)
                    job_uid = None
            elif p.gang is not None:
                job_uid = _gang_job(jobs, blocked, p, workloads, model)
                if job_uid is None and status not in TERMINATED_STATUSES:
                    waiting.add(p.gang.uid(p.namespace))
            else:
                job_uid = model.bare_job_for(jobs, p, status).uid
        task = model.task(p, job_uid, status, p.node_name or None)
        if job_uid is not None:
            model.join(jobs[job_uid], p)
            jobs[job_uid].add_task(task)
        if task.node:
            i = nodes.index.get(task.node)
            if i is None:
                unknown_nodes += 1
            else:
                nodes.add_task(i, task)
    blocked = {uid: reason for uid, reason in blocked.items() if uid in waiting}
    if unknown_nodes:
        are = "is on a node" if unknown_nodes == 1 else "are on nodes"
        notes.append(f"{plural(unknown_nodes, 'pod')} {are} not in the snapshot; ignored")
    # The session's table: without the nodes Volcano leaves out (not ready, out of sync).
    nodes = nodes.copy()
    notes.extend(nodes.left_out_notes())
    if topology is not None:
        notes.extend(topology.notes)
    notes.extend(_odd_objects(pods_r, pgs_r, model))

    blocked_queues: dict[str, str] = {}
    for uid in list(jobs):
        job = jobs[uid]
        if job.bare:
            job.phase = bare_phase(job)
        elif job.api != "volcano":
            job.phase = derived_phase(job)
        if job.queue not in queues:
            fix = queue_fix(job)
            blocked[uid] = f"queue {job.queue!r} does not exist; create the Queue or {fix}"
            blocked_queues[uid] = job.queue
            del jobs[uid]
    if now is None:
        stamps = [max(p.creation, p.scheduled_at) for p in pods_r] + [g.creation for g in pgs_r]
        stamps += [w.creation for w in workloads.values()]
        now = max(stamps, default=0.0)
    return Snapshot(
        now=now,
        space=space,
        nodes=nodes,
        jobs=jobs,
        queues=queues,
        priority_classes=model.priority_classes,
        default_priority=model.default_priority,
        blocked=blocked,
        blocked_queues=blocked_queues,
        notes=notes,
        skipped=invalid,
        pdbs=records["PodDisruptionBudget"],
        topology=topology,
        objects={k: {side_key(r): r for r in records[k]} for k in SIDE_PARSERS if records[k]},
    )


__all__ = ["DEFAULT_SCHEDULER", "SourcedObject", "build_snapshot", "parse_objects"]
