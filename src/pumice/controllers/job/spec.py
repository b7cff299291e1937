"""A ``batch.volcano.sh/v1alpha1`` Job as typed records, with Volcano's defaults.

:func:`parse_job` reads the fields the job controller uses and fills in what Volcano's
mutating admission webhook would have (pumice has no webhook, so the controller applies
the defaults as it reads, and never writes them back into the Job's spec):

- ``queue`` ``default``, ``schedulerName`` ``volcano``, ``maxRetry`` 3 (also when 0);
- a task without a name is ``default<index>``; a task without ``minAvailable`` needs
  all its replicas; a task's ``maxRetry`` (container restarts before ``TaskFailed``) 3;
- a task with a ``partitionPolicy`` whose ``minPartitions`` is set (above 0) and no
  ``minAvailable`` needs ``minPartitions * partitionSize`` pods;
- ``minAvailable`` 0 or missing is the sum of the tasks' ``minAvailable``;
- a ``networkTopology`` without ``mode`` is ``hard`` (the CRD's default);
- the ``mpi``, ``pytorch`` and ``tensorflow`` plugins bring ``svc``, ``mpi`` ``ssh``.

A field of the wrong shape (a string where a count goes) raises
:class:`~pumice.errors.InputError` naming the field; rules on values (a negative count,
an unknown policy event) are :mod:`validate`'s, which the webhook checks after the
defaults, as here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from pumice.api.parse import as_list, as_mapping, parse_pod
from pumice.api.topology_spec import HARD, NetworkTopology
from pumice.conf.arguments import go_duration
from pumice.errors import InputError, shown, shown_text

API_VERSION = "batch.volcano.sh/v1alpha1"
KIND = "Job"
DEFAULT_QUEUE = "default"
DEFAULT_SCHEDULER = "volcano"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_MAX_RETRY = 3
#: Plugins that need others, as the mutating webhook adds them.
IMPLIED_PLUGINS = {"mpi": ("svc", "ssh"), "pytorch": ("svc",), "tensorflow": ("svc",)}


@dataclass(frozen=True, slots=True)
class Policy:
    """One lifecycle policy: on ``events`` (or a container's ``exit_code``), ``action``,
    after ``timeout`` seconds when set."""

    action: str
    events: tuple[str, ...] = ()
    exit_code: int | None = None
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class PartitionPolicy:
    """A task's ``partitionPolicy``: its ``replicas`` pods cut into ``total`` partitions
    of ``size`` pods each (pod ``i`` in partition ``i // size``), each placed as one
    sub-gang within ``topology``; the job needs ``min_partitions`` of them (0: as many
    pods as the task's minAvailable, in whatever partitions). Values as written:
    :mod:`validate` says which are refused."""

    total: int
    size: int
    min_partitions: int = 0
    topology: NetworkTopology | None = None


@dataclass(frozen=True, slots=True)
class VolumeSpec:
    """One entry of the Job's ``spec.volumes``: a claim mounted at ``mount_path`` in
    every container of every pod. ``claim_name`` names an existing claim; else
    ``claim`` (a PersistentVolumeClaim spec) is the claim the controller makes for the
    Job (see :mod:`pumice.controllers.job.volumes`)."""

    mount_path: str
    claim_name: str = ""
    claim: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TaskSpec:
    name: str
    replicas: int
    #: Pods of this task the gang needs (defaulted to ``replicas``).
    min_available: int
    #: ``minAvailable`` as written (None when absent), for validation.
    min_available_given: int | None
    #: The pod template, as written (a mapping with ``metadata`` and ``spec``).
    template: Mapping[str, Any]
    policies: tuple[Policy, ...]
    max_retry: int
    topology_policy: str = ""
    partition: PartitionPolicy | None = None

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        return self.template.get("spec") or {}


@dataclass(frozen=True, slots=True)
class JobSpec:
    namespace: str
    name: str
    uid: str
    tasks: tuple[TaskSpec, ...]
    min_available: int
    min_success: int | None
    queue: str
    priority_class: str
    scheduler_name: str
    max_retry: int
    ttl: int | None
    policies: tuple[Policy, ...]
    #: Plugin name -> its arguments (``["--port=23456"]``), with the implied ones.
    plugins: Mapping[str, tuple[str, ...]]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    #: The fields as written, for validation (the webhook sees them before defaults).
    min_available_given: int
    max_retry_given: int
    plugins_given: tuple[str, ...] = ()
    #: ``spec.networkTopology``: how far apart (in HyperNode tiers) the gang may be.
    network_topology: NetworkTopology | None = None
    #: ``spec.volumes``: claims every pod mounts.
    volumes: tuple[VolumeSpec, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def total_replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    @property
    def podgroup_name(self) -> str:
        """``<job>-<job uid>``, as Volcano has named a Job's PodGroup since 1.6."""
        return f"{self.name}-{self.uid}"

    def task(self, name: str) -> TaskSpec | None:
        for t in self.tasks:
            if t.name == name:
                return t
        return None


def _str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", field=path)
    return value


def _int(value: Any, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {shown(value)}", field=path)
    if not -(2**31) <= value < 2**31:
        raise InputError(f"{shown(value)} is out of range for a 32-bit integer", field=path)
    return value


def _str_at(m: Mapping[str, Any], key: str, base: str) -> str:
    """``_str(m.get(key), f"{base}.{key}")``, the path written only for an error (a
    Job is parsed field by field, nearly always without one)."""
    value = m.get(key)
    if value is None or type(value) is str:
        return value or ""
    return _str(value, f"{base}.{key}")


def _int_at(m: Mapping[str, Any], key: str, base: str) -> int | None:
    """``_int(m.get(key), f"{base}.{key}")``, the path written only for an error."""
    value = m.get(key)
    if value is None or (type(value) is int and -(2**31) <= value < 2**31):
        return value
    return _int(value, f"{base}.{key}")


def parse_duration(value: Any, path: str) -> float:
    """A Go duration (``"90s"``, ``"1h30m"``, ``"500ms"``) in seconds, as Go's
    ``time.ParseDuration`` reads it."""
    text = _str(value, path).strip()
    seconds = go_duration(text)
    if seconds is None:
        raise InputError(
            f"invalid duration {shown(text)} (expected e.g. 90s, 5m, 1h30m)", field=path
        )
    return seconds


def format_duration(seconds: float) -> str:
    """Seconds as Go prints a duration: ``1h2m3s``, ``1.5s``, ``0s``."""
    if seconds <= 0:
        return "0s"
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = ""
    if h:
        out += f"{int(h)}h"
    if h or m:
        out += f"{int(m)}m"
    out += f"{round(s, 9):g}s"
    return out


def _policies(value: Any, path: str) -> tuple[Policy, ...]:
    out = []
    for i, item in enumerate(as_list(value, path)):
        p = f"{path}[{i}]"
        m = as_mapping(item, p)
        listed = m.get("events")
        events = (
            [_str(e, f"{p}.events") for e in as_list(listed, f"{p}.events")]
            if listed is not None
            else []
        )
        one = _str_at(m, "event", p)
        if one:
            events.append(one)
        timeout = m.get("timeout")
        out.append(
            Policy(
                action=_str_at(m, "action", p),
                events=tuple(dict.fromkeys(events)),
                exit_code=_int_at(m, "exitCode", p),
                timeout=None if timeout is None else parse_duration(timeout, f"{p}.timeout"),
            )
        )
    return tuple(out)


def _plugins(value: Any, path: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, args in as_mapping(value, path).items():
        p = f"{path}.{name}"
        out[str(name)] = tuple(_str(a, p) for a in as_list(args, p))
    return out


def _labels(value: Any, path: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_mapping(value, path).items()}


def _network_topology(value: Any, path: str) -> NetworkTopology | None:
    """A ``networkTopology`` as written (both tiers kept, any mode): the shape is
    checked here, the values by :mod:`validate`."""
    if value is None:
        return None
    m = as_mapping(value, path)
    return NetworkTopology(
        mode=_str(m.get("mode"), f"{path}.mode") or HARD,
        highest_tier=_int(m.get("highestTierAllowed"), f"{path}.highestTierAllowed"),
        highest_tier_name=_str(m.get("highestTierName"), f"{path}.highestTierName"),
    )


def _volumes(value: Any, path: str) -> tuple[VolumeSpec, ...]:
    out = []
    for i, item in enumerate(as_list(value, path)):
        p = f"{path}[{i}]"
        m = as_mapping(item, p)
        claim = m.get("volumeClaim")
        out.append(
            VolumeSpec(
                mount_path=_str(m.get("mountPath"), f"{p}.mountPath"),
                claim_name=_str(m.get("volumeClaimName"), f"{p}.volumeClaimName"),
                claim=None if claim is None else as_mapping(claim, f"{p}.volumeClaim"),
            )
        )
    return tuple(out)


def _partition(value: Any, path: str) -> PartitionPolicy | None:
    if value is None:
        return None
    m = as_mapping(value, path)
    return PartitionPolicy(
        total=_int(m.get("totalPartitions"), f"{path}.totalPartitions") or 0,
        size=_int(m.get("partitionSize"), f"{path}.partitionSize") or 0,
        min_partitions=_int(m.get("minPartitions"), f"{path}.minPartitions") or 0,
        topology=_network_topology(m.get("networkTopology"), f"{path}.networkTopology"),
    )


def _task_minimum(replicas: int, given: int | None, partition: PartitionPolicy | None) -> int:
    """The pods of a task the gang needs, as the mutating webhook fills it in."""
    if given is not None:
        return given
    if partition is not None and partition.min_partitions > 0:
        return partition.min_partitions * partition.size
    return replicas


#: Pod templates found valid, by their canonical JSON: the Jobs of a workload repeat a
#: few templates, which need not be parsed again for each (the table starts afresh
#: beyond :data:`_TEMPLATES_KEPT`).
_valid_templates: dict[bytes, None] = {}
_TEMPLATES_KEPT = 4096


def _check_template(template: Mapping[str, Any], path: str) -> None:
    """Refuse a pod template no pod could be made from, as the API server would, with
    the field under ``path``: the pods are built from it later, with no Job to name."""
    meta = as_mapping(template.get("metadata"), f"{path}.metadata")
    as_mapping(template.get("spec"), f"{path}.spec")
    try:
        seen: bytes | None = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # (not plain JSON: checked every time)
        seen = None
    if seen is not None and b"null" in seen:
        seen = None  # (NaN and infinities are written as null too: not told apart)
    if seen is not None and seen in _valid_templates:
        return
    try:
        parse_pod({"metadata": {**meta, "name": "template"}, "spec": template.get("spec")})
    except InputError as err:
        field = f"{path}.{err.field}" if err.field else path
        raise InputError(err.message, field=field) from None
    if seen is not None:
        if len(_valid_templates) >= _TEMPLATES_KEPT:
            _valid_templates.clear()
        _valid_templates[seen] = None


def _task(item: Any, index: int) -> TaskSpec:
    p = f"spec.tasks[{index}]"
    m = as_mapping(item, p)
    replicas = _int_at(m, "replicas", p) or 0
    given = _int_at(m, "minAvailable", p)
    partition = _partition(m.get("partitionPolicy"), f"{p}.partitionPolicy")
    template = as_mapping(m.get("template"), f"{p}.template")
    _check_template(template, f"{p}.template")
    max_retry = _int_at(m, "maxRetry", p) or DEFAULT_TASK_MAX_RETRY
    policies = m.get("policies")
    return TaskSpec(
        name=_str_at(m, "name", p) or f"default{index}",
        replicas=replicas,
        min_available=_task_minimum(replicas, given, partition),
        min_available_given=given,
        template=template,
        policies=_policies(policies, f"{p}.policies") if policies is not None else (),
        max_retry=max_retry,
        topology_policy=_str_at(m, "topologyPolicy", p),
        partition=partition,
    )


def parse_job(
    obj: Mapping[str, Any],
    *,
    default_queue: str = DEFAULT_QUEUE,
    default_scheduler: str = DEFAULT_SCHEDULER,
) -> JobSpec:
    """The Job ``obj`` as a :class:`JobSpec` with Volcano's defaults (module docstring);
    InputError naming the Job and the field for a field of the wrong shape."""
    meta = as_mapping(obj.get("metadata"), "metadata")
    try:
        spec = as_mapping(obj.get("spec"), "spec")
        tasks = tuple(_task(t, i) for i, t in enumerate(as_list(spec.get("tasks"), "spec.tasks")))
        min_given = _int_at(spec, "minAvailable", "spec") or 0
        retry_given = _int_at(spec, "maxRetry", "spec") or 0
        ttl = _int_at(spec, "ttlSecondsAfterFinished", "spec")
        plugins = _plugins(spec.get("plugins"), "spec.plugins")
        given = tuple(plugins)
        for name in given:
            for extra in IMPLIED_PLUGINS.get(name, ()):
                plugins.setdefault(extra, ())
        return JobSpec(
            namespace=str(meta.get("namespace") or "default"),
            name=_str(meta.get("name"), "metadata.name"),
            uid=_str(meta.get("uid"), "metadata.uid"),
            tasks=tasks,
            min_available=min_given or sum(t.min_available for t in tasks),
            min_success=_int_at(spec, "minSuccess", "spec"),
            queue=_str_at(spec, "queue", "spec") or default_queue,
            priority_class=_str_at(spec, "priorityClassName", "spec"),
            scheduler_name=_str_at(spec, "schedulerName", "spec") or default_scheduler,
            max_retry=retry_given or DEFAULT_MAX_RETRY,
            ttl=ttl,
            policies=_policies(spec.get("policies"), "spec.policies"),
            plugins=plugins,
            labels=_labels(meta.get("labels"), "metadata.labels"),
            annotations=_labels(meta.get("annotations"), "metadata.annotations"),
            min_available_given=min_given,
            max_retry_given=retry_given,
            plugins_given=given,
            network_topology=_network_topology(spec.get("networkTopology"), "spec.networkTopology"),
            volumes=_volumes(spec.get("volumes"), "spec.volumes"),
        )
    except InputError as err:
        ns, name = meta.get("namespace") or "default", meta.get("name", "?")
        raise err.located(obj=f"Job {shown_text(ns)}/{shown_text(name)}") from None


__all__ = [
    "API_VERSION",
    "KIND",
    "JobSpec",
    "PartitionPolicy",
    "Policy",
    "TaskSpec",
    "VolumeSpec",
    "format_duration",
    "parse_duration",
    "parse_job",
]
