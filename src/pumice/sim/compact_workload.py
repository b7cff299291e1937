"""The compact ``kind: Workload`` document (``apiVersion: pumice.io/v1alpha1``), entry by entry.

A compact document lists ``queues``, ``priorityClasses`` and ``jobs``; this module reads one
queue or one job (with its tasks and its gang dialect) into the workload model, checked
field by field: unknown keys, names, counts, durations, the dialect's own keys. It knows
nothing of files or of the other entries: it raises :class:`~pumice.errors.InputError`
naming the field (``jobs[3].tasks[0].replicas``), and
:mod:`pumice.sim.workload_declarations` adds the file and the object and checks the
document's top-level keys (:data:`WORKLOAD_KEYS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pumice.api.limits import MAX_JOB_PODS
from pumice.api.topology_spec import parse_network_topology
from pumice.errors import InputError, shown
from pumice.sim.fields import (
    check_keys,
    is_dns_label,
    is_dns_subdomain,
    parse_resources,
    parse_seconds,
    require_int,
    require_str,
)
from pumice.sim.workload import (
    DEFAULT_POD_GROUP,
    DEFAULT_QUEUE,
    DEFAULT_TASK,
    DIALECTS,
    Dialect,
    JobSpec,
    QueueSpec,
    TaskSpec,
)
from pumice.sim.workload_fields import (
    optional_resources,
    optional_str,
    parse_end_fraction,
    parse_outcome,
    require_bool,
)

WORKLOAD_KEYS = ("apiVersion", "kind", "namespace", "queues", "priorityClasses", "jobs")
_JOB_KEYS = (
    "name",
    "namespace",
    "queue",
    "arrival",
    "duration",
    "minAvailable",
    "priorityClass",
    "tasks",
    "replicas",
    "requests",
    "outcome",
    "endFraction",
    "networkTopology",
    "dialect",
    "podGroup",
    "replicaKey",
)
_TASK_KEYS = ("name", "replicas", "requests", "minAvailable")
_QUEUE_KEYS = ("name", "weight", "capability", "guarantee", "deserved", "reclaimable", "parent")


def compact_queue(q: object, f: str) -> QueueSpec:
    """The entry ``f`` (``queues[i]``) of a compact document's queues."""
    if not isinstance(q, Mapping):
        raise InputError("expected a map", field=f)
    check_keys(q, _QUEUE_KEYS, field=f)
    name = require_str(q.get("name"), field=f"{f}.name")
    if not is_dns_label(name):
        raise InputError(f"invalid queue name {shown(name)}", field=f"{f}.name")
    return QueueSpec(
        name=name,
        weight=require_int(q.get("weight", 1), field=f"{f}.weight", minimum=1),
        capability=optional_resources(q, "capability", f"{f}.capability"),
        guarantee=optional_resources(q, "guarantee", f"{f}.guarantee"),
        deserved=optional_resources(q, "deserved", f"{f}.deserved"),
        reclaimable=require_bool(q.get("reclaimable", True), field=f"{f}.reclaimable"),
        parent=optional_str(q.get("parent"), field=f"{f}.parent"),
    )


def _compact_task(t: object, f: str) -> TaskSpec:
    if not isinstance(t, Mapping):
        raise InputError("expected a map", field=f)
    check_keys(t, _TASK_KEYS, field=f)
    name = t.get("name", DEFAULT_TASK)
    if not isinstance(name, str) or not is_dns_label(name):
        raise InputError(f"invalid task name {shown(name)}", field=f"{f}.name")
    if "replicas" not in t:
        raise InputError("missing replicas", field=f"{f}.replicas")
    replicas = require_int(t["replicas"], field=f"{f}.replicas", minimum=1, maximum=MAX_JOB_PODS)
    min_available = None
    if t.get("minAvailable") is not None:
        min_available = require_int(t["minAvailable"], field=f"{f}.minAvailable", minimum=1)
        if min_available > replicas:
            raise InputError(
                f"minAvailable {min_available} is greater than replicas {replicas}",
                field=f"{f}.minAvailable",
            )
    return TaskSpec(
        name=name,
        replicas=replicas,
        requests=parse_resources(t.get("requests"), field=f"{f}.requests"),
        min_available=min_available,
    )


def compact_job(j: object, f: str, namespace: str) -> JobSpec:
    """The entry ``f`` (``jobs[i]``) of a compact document's jobs, in ``namespace``
    unless it says its own: its tasks (or the shorthand of one), gang and dialect."""
    if not isinstance(j, Mapping):
        raise InputError("expected a map", field=f)
    check_keys(j, _JOB_KEYS, field=f)
    name = require_str(j.get("name"), field=f"{f}.name")
    if not is_dns_subdomain(name):
        raise InputError(f"invalid job name {shown(name)}", field=f"{f}.name")
    ns = j.get("namespace", namespace)
    if not isinstance(ns, str) or not is_dns_label(ns):
        raise InputError(f"invalid namespace {shown(ns)}", field=f"{f}.namespace")
    queue = require_str(j.get("queue", DEFAULT_QUEUE), field=f"{f}.queue")
    if "tasks" in j:
        if "replicas" in j or "requests" in j:
            raise InputError(
                "give either tasks or the shorthand replicas + requests, not both",
                field=f"{f}.tasks",
            )
        raw_tasks = j["tasks"]
        if not isinstance(raw_tasks, list) or not raw_tasks:
            raise InputError("expected a non-empty list", field=f"{f}.tasks")
        tasks = tuple(_compact_task(t, f"{f}.tasks[{k}]") for k, t in enumerate(raw_tasks))
        names = [t.name for t in tasks]
        for k, n in enumerate(names):
            if n in names[:k]:
                raise InputError(f"duplicate task name {shown(n)}", field=f"{f}.tasks[{k}].name")
    else:
        if "replicas" not in j:
            raise InputError("missing replicas (or tasks)", field=f"{f}.replicas")
        replicas = require_int(
            j["replicas"], field=f"{f}.replicas", minimum=1, maximum=MAX_JOB_PODS
        )
        tasks = (
            TaskSpec(
                name=DEFAULT_TASK,
                replicas=replicas,
                requests=parse_resources(j.get("requests"), field=f"{f}.requests"),
            ),
        )
    total = sum(t.replicas for t in tasks)
    min_available = total
    if j.get("minAvailable") is not None:
        min_available = require_int(j["minAvailable"], field=f"{f}.minAvailable", minimum=1)
        if min_available > total:
            raise InputError(
                f"minAvailable {min_available} is greater than the job's {total} replicas",
                field=f"{f}.minAvailable",
            )
    if "duration" not in j:
        raise InputError("missing duration", field=f"{f}.duration")
    outcome = parse_outcome(j.get("outcome", "succeed"), field=f"{f}.outcome")
    dialect, pod_group, replica_key = _compact_dialect(j, f, tasks)
    return JobSpec(
        name=name,
        namespace=ns,
        queue=queue,
        arrival=parse_seconds(j.get("arrival", 0), field=f"{f}.arrival"),
        duration=parse_seconds(j["duration"], field=f"{f}.duration"),
        tasks=tasks,
        min_available=min_available,
        priority_class=optional_str(j.get("priorityClass"), field=f"{f}.priorityClass"),
        outcome=outcome,
        end_fraction=parse_end_fraction(j.get("endFraction"), outcome, field=f"{f}.endFraction"),
        network_topology=parse_network_topology(j.get("networkTopology"), f"{f}.networkTopology"),
        dialect=dialect,
        pod_group=pod_group,
        replica_key=replica_key,
    )


def _compact_dialect(
    j: Mapping[str, Any], f: str, tasks: Sequence[TaskSpec]
) -> tuple[Dialect, str, str]:
    """A compact job's ``dialect`` (default ``volcano``) and, for ``workload``, its
    ``podGroup`` (default :data:`DEFAULT_POD_GROUP`) and ``replicaKey``. What only a
    Volcano PodGroup can say (a role's own minimum, a network topology) is refused for
    the others."""
    dialect = j.get("dialect", "volcano")
    if dialect not in DIALECTS:
        raise InputError(
            f"expected one of {', '.join(DIALECTS)}, got {shown(dialect)}", field=f"{f}.dialect"
        )
    if dialect != "volcano":
        if j.get("networkTopology") is not None:
            raise InputError(
                "only a Volcano PodGroup has a network topology", field=f"{f}.networkTopology"
            )
        for k, t in enumerate(tasks):
            if t.min_available is not None:
                raise InputError(
                    f"a {dialect} gang has no minimum per role (only Volcano's minTaskMember)",
                    field=f"{f}.tasks[{k}].minAvailable",
                )
    if dialect != "workload":
        for key in ("podGroup", "replicaKey"):
            if key in j:
                raise InputError("only a job of dialect workload has one", field=f"{f}.{key}")
        return dialect, "", ""
    pod_group = j.get("podGroup", DEFAULT_POD_GROUP)
    if not isinstance(pod_group, str) or not is_dns_label(pod_group):
        raise InputError(f"invalid pod group name {shown(pod_group)}", field=f"{f}.podGroup")
    replica_key = j.get("replicaKey", "")
    if not isinstance(replica_key, str) or (replica_key and not is_dns_label(replica_key)):
        raise InputError(f"invalid replica key {shown(replica_key)}", field=f"{f}.replicaKey")
    return "workload", pod_group, replica_key
