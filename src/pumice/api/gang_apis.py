"""Gangs in the dialects besides Volcano's, read into the same records.

Three API groups call their object ``PodGroup``; ``apiVersion`` tells them apart:

- ``scheduling.volcano.sh`` (or none): Volcano's, read by :func:`parse.parse_podgroup`;
- ``scheduling.x-k8s.io/v1alpha1``: scheduler-plugins coscheduling (``spec.minMember``,
  ``spec.minResources``, ``spec.scheduleTimeoutSeconds``); pods join by the label
  ``scheduling.x-k8s.io/pod-group``;
- ``scheduling.k8s.io/v1alpha2``: Kubernetes' runtime PodGroup (``spec.schedulingPolicy``
  ``gang.minCount`` or ``basic``); pods join by ``spec.schedulingGroup.podGroupName``.

Kubernetes' ``Workload`` (``scheduling.k8s.io``) is read by :func:`parse_workload`: in
``v1alpha1`` its ``spec.podGroups`` are the gangs themselves (pods join by
``spec.workloadRef``, one gang per pod group and replica key); in ``v1alpha2`` its
``spec.podGroupTemplates`` are templates the runtime PodGroups copy their policy from,
so pumice reads the PodGroups.

Every gang becomes a :class:`~pumice.api.parse.PodGroupRecord` with Volcano's fields:
the queue is the ``scheduling.volcano.sh/queue-name`` annotation of the group (of the
Workload for ``v1alpha1``), else the default queue; no priority class (the job takes its
pods'); a ``basic`` group has minMember 1 (independent pods), a ``gang`` one
``minCount``. The job uids (:func:`pumice.api.parse.job_uid`) cannot collide across
dialects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.api import parse
from pumice.api.parse import GangRef, PodGroupRecord, as_list, as_mapping
from pumice.errors import InputError, shown

VOLCANO_GROUP = "scheduling.volcano.sh"
COSCHEDULING_GROUP = "scheduling.x-k8s.io"
KUBERNETES_GROUP = "scheduling.k8s.io"
#: The versions of each group pumice reads.
COSCHEDULING_VERSIONS = ("v1alpha1",)
PODGROUP_VERSIONS = ("v1alpha2",)
WORKLOAD_VERSIONS = ("v1alpha1", "v1alpha2")


def _group_version(obj: Mapping[str, Any]) -> tuple[str, str]:
    api_version = parse.as_str(obj.get("apiVersion"), "apiVersion")
    group, _, version = api_version.rpartition("/")
    return group, version


def podgroup_readable(obj: Mapping[str, Any]) -> bool:
    """Whether pumice reads this ``kind: PodGroup`` object's API group and version."""
    try:
        podgroup_dialect(obj)
    except InputError:
        return False
    return True


def podgroup_dialect(obj: Mapping[str, Any]) -> str:
    """Which dialect a ``kind: PodGroup`` object is, from its ``apiVersion`` (none:
    Volcano's); a group or version pumice does not read is an InputError."""
    group, version = _group_version(obj)
    if group in ("", VOLCANO_GROUP):
        return "volcano"
    if group == COSCHEDULING_GROUP and version in COSCHEDULING_VERSIONS:
        return "coscheduling"
    if group == KUBERNETES_GROUP and version in PODGROUP_VERSIONS:
        return "workload"
    raise InputError(
        f"PodGroup of {shown(obj.get('apiVersion'))} is not read; pumice reads "
        f"{VOLCANO_GROUP}, {COSCHEDULING_GROUP}/v1alpha1 and {KUBERNETES_GROUP}/v1alpha2",
        field="apiVersion",
    )


def parse_any_podgroup(
    obj: Mapping[str, Any], default_queue: str = parse.DEFAULT_QUEUE
) -> PodGroupRecord:
    """A PodGroup of any dialect (see :func:`podgroup_dialect`)."""
    dialect = podgroup_dialect(obj)
    if dialect == "coscheduling":
        return parse_coscheduling_podgroup(obj, default_queue)
    if dialect == "workload":
        return parse_k8s_podgroup(obj, default_queue)
    return parse.parse_podgroup(obj, default_queue)


def _group_record(
    obj: Mapping[str, Any], api: str, default_queue: str, min_member: int
) -> PodGroupRecord:
    """What the non-Volcano PodGroups share: metadata, the queue annotation, no status
    (their status is another scheduler's vocabulary; the phase is derived from the pods,
    see :func:`pumice.cache.model.derived_phase`)."""
    meta = as_mapping(obj.get("metadata"), "metadata")
    annotations = parse.as_labels(meta.get("annotations"), "metadata.annotations")
    return PodGroupRecord(
        namespace=parse.as_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=parse.as_str(meta.get("name"), "metadata.name", required=True),
        min_member=min_member,
        min_task_member={},
        min_resources=None,
        queue=annotations.get(parse.QUEUE_ANNOTATION) or default_queue,
        priority_class="",
        phase="Pending",
        conditions=[],
        creation=parse.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        annotations=annotations,
        labels=parse.as_labels(meta.get("labels"), "metadata.labels"),
        api=api,
    )


def parse_coscheduling_podgroup(
    obj: Mapping[str, Any], default_queue: str = parse.DEFAULT_QUEUE
) -> PodGroupRecord:
    """A scheduler-plugins PodGroup: ``minMember`` (0 when absent, as the CRD leaves
    it: a group with no gang), ``minResources``, ``scheduleTimeoutSeconds``, and of its
    status only ``scheduleStartTime``."""
    spec = as_mapping(obj.get("spec"), "spec")
    rec = _group_record(
        obj,
        "coscheduling",
        default_queue,
        parse.as_int(spec.get("minMember"), "spec.minMember", 0, minimum=0),
    )
    min_res = spec.get("minResources")
    if min_res is not None:
        rec.min_resources = parse.resources(min_res, "spec.minResources")
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None:
        path = "spec.scheduleTimeoutSeconds"
        rec.schedule_timeout = float(parse.as_int(timeout, path, 0, minimum=0))
    status = obj.get("status")
    start = as_mapping(status, "status").get("scheduleStartTime") if status is not None else None
    if start is not None and start != "":
        rec.schedule_start = parse.timestamp(start, "status.scheduleStartTime")
    return rec


def scheduling_policy(value: Any, path: str) -> int | None:
    """A ``PodGroupSchedulingPolicy`` (``PodGroupPolicy`` in v1alpha1): exactly one of
    ``basic: {}`` (None: no gang) or ``gang: {minCount: N}``, N at least 1."""
    policy = as_mapping(value, path)
    basic, gang = policy.get("basic"), policy.get("gang")
    if (basic is None) == (gang is None):
        raise InputError("needs exactly one of basic or gang", field=path)
    if basic is not None:
        as_mapping(basic, f"{path}.basic")
        return None
    gang = as_mapping(gang, f"{path}.gang")
    if gang.get("minCount") is None:
        raise InputError("is required", field=f"{path}.gang.minCount")
    return parse.as_int(gang["minCount"], f"{path}.gang.minCount", 1, minimum=1)


def parse_k8s_podgroup(
    obj: Mapping[str, Any], default_queue: str = parse.DEFAULT_QUEUE
) -> PodGroupRecord:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup: its own ``spec.schedulingPolicy``
    (copied from the Workload's template when it was made; the Workload is not read)."""
    spec = as_mapping(obj.get("spec"), "spec")
    if spec.get("schedulingPolicy") is None:
        raise InputError("is required", field="spec.schedulingPolicy")
    min_count = scheduling_policy(spec["schedulingPolicy"], "spec.schedulingPolicy")
    return _group_record(obj, "workload", default_queue, 1 if min_count is None else min_count)


@dataclass(slots=True)
class WorkloadRecord:
    """A Workload: its pod groups (v1alpha1 ``podGroups``, v1alpha2
    ``podGroupTemplates``) by name -> minCount (None: ``basic``)."""

    namespace: str
    name: str
    version: str
    groups: dict[str, int | None]
    creation: float
    annotations: dict[str, str] = field(default_factory=dict)

    def job(self, group: str, replica_key: str, default_queue: str) -> PodGroupRecord:
        """The gang of pod group ``group`` and replica ``replica_key`` (a v1alpha1
        pod group), as a record named ``<workload>`` with the job uid of the group."""
        min_count = self.groups[group]
        return PodGroupRecord(
            namespace=self.namespace,
            name=self.name,
            min_member=1 if min_count is None else min_count,
            min_task_member={},
            min_resources=None,
            queue=self.annotations.get(parse.QUEUE_ANNOTATION) or default_queue,
            priority_class="",
            phase="Pending",
            conditions=[],
            creation=self.creation,
            annotations=self.annotations,
            api="workload",
        )


def is_kubernetes_workload(obj: Mapping[str, Any]) -> bool:
    """Whether a ``kind: Workload`` object is Kubernetes' (``scheduling.k8s.io``); other
    groups' (pumice's own simulator workloads, ``pumice.io``) are not scheduling objects."""
    api_version = obj.get("apiVersion")
    return isinstance(api_version, str) and api_version.startswith(f"{KUBERNETES_GROUP}/")


def parse_workload(obj: Mapping[str, Any]) -> WorkloadRecord:
    group, version = _group_version(obj)
    if group != KUBERNETES_GROUP or version not in WORKLOAD_VERSIONS:
        raise InputError(
            f"Workload of {shown(obj.get('apiVersion'))} is not read; pumice reads "
            f"{KUBERNETES_GROUP}/v1alpha1 and v1alpha2",
            field="apiVersion",
        )
    meta = as_mapping(obj.get("metadata"), "metadata")
    spec = as_mapping(obj.get("spec"), "spec")
    if version == "v1alpha1":
        key, policy_key = "podGroups", "policy"
    else:
        key, policy_key = "podGroupTemplates", "schedulingPolicy"
    path = f"spec.{key}"
    items = as_list(spec.get(key), path)
    if not items:
        raise InputError("needs at least one pod group", field=path)
    groups: dict[str, int | None] = {}
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        item = as_mapping(item, p)
        name = parse.as_str(item.get("name"), f"{p}.name", required=True)
        if name in groups:
            raise InputError(f"pod group {shown(name)} appears twice", field=f"{p}.name")
        if item.get(policy_key) is None:
            raise InputError("is required", field=f"{p}.{policy_key}")
        groups[name] = scheduling_policy(item[policy_key], f"{p}.{policy_key}")
    return WorkloadRecord(
        namespace=parse.as_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=parse.as_str(meta.get("name"), "metadata.name", required=True),
        version=version,
        groups=groups,
        creation=parse.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        annotations=parse.as_labels(meta.get("annotations"), "metadata.annotations"),
    )


def workload_prefix(key: str) -> str:
    """The start of the uid of every job of the Workload ``key`` (``namespace/name``)."""
    namespace, _, name = key.partition("/")
    return f"{namespace}/workload:{name}:"


def is_workload_gang(uid: str) -> bool:
    """Whether job ``uid`` is a v1alpha1 Workload's pod group (a job its pods make,
    gone with its last pod) rather than an object's."""
    return uid.partition("/")[2].startswith("workload:")


def missing_reason(ref: GangRef, namespace: str, workloads: Mapping[str, WorkloadRecord]) -> str:
    """Why a pod naming ``ref`` waits: the object it names does not exist (upstream's
    PreEnqueue keeps such a pod out of the scheduling queue)."""
    if ref.api == "coscheduling":
        return (
            f"PodGroup {namespace}/{ref.name} ({COSCHEDULING_GROUP}) does not exist; "
            f"create it or fix the {parse.COSCHEDULING_LABEL} label of its pods"
        )
    if not ref.pod_group:
        return (
            f"PodGroup {namespace}/{ref.name} ({KUBERNETES_GROUP}) does not exist; "
            f"create it or fix spec.schedulingGroup.podGroupName of its pods"
        )
    w = workloads.get(f"{namespace}/{ref.name}")
    if w is None:
        return (
            f"Workload {namespace}/{ref.name} does not exist; create it or fix "
            f"spec.workloadRef.name of its pods"
        )
    return (
        f"Workload {namespace}/{ref.name} has no pod group {ref.pod_group!r} (it has "
        f"{', '.join(sorted(w.groups))}); fix spec.workloadRef.podGroup of its pods"
    )


def workload_gang(
    ref: GangRef, namespace: str, workloads: Mapping[str, WorkloadRecord], default_queue: str
) -> PodGroupRecord | None:
    """The record of the v1alpha1 Workload gang ``ref`` names (None: it names a
    PodGroup, or its Workload or pod group does not exist)."""
    if ref.api != "workload" or not ref.pod_group:
        return None
    w = workloads.get(f"{namespace}/{ref.name}")
    if w is None or ref.pod_group not in w.groups:
        return None
    return w.job(ref.pod_group, ref.replica_key, default_queue)


__all__ = [
    "WorkloadRecord",
    "is_kubernetes_workload",
    "is_workload_gang",
    "missing_reason",
    "parse_any_podgroup",
    "parse_coscheduling_podgroup",
    "parse_k8s_podgroup",
    "parse_workload",
    "podgroup_dialect",
    "workload_gang",
    "workload_prefix",
]
