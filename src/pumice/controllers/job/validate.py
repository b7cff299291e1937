"""What Volcano's admission webhook refuses in a new Job, as sentences.

Volcano checks a Job when it is created and the API server refuses it; pumice has no
webhook, so the job controller checks a Job before acting on it and, when
:func:`problems` finds any, leaves it Pending with the reasons (see the controller).
The rules are Volcano's (``pkg/webhooks/admission/jobs/validate``), applied after the
defaults the mutating webhook fills in (:mod:`spec`); the messages are pumice's own and
name the task or policy concerned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pumice.api.topology_spec import HARD, SOFT, NetworkTopology
from pumice.controllers.job.spec import JobSpec, Policy, TaskSpec

#: Events a policy may name (Volcano's ``policyEventMap`` entries open to users).
EVENTS = (
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
)
#: Actions a policy may take.
ACTIONS = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)
#: Job plugins pumice's controller runs.
PLUGINS = ("env", "svc", "ssh", "mpi", "pytorch")

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _policies(policies: tuple[Policy, ...], where: str) -> list[str]:
    """Volcano's ``validatePolicies``: the first problem of a policy list."""
    seen_events: set[str] = set()
    seen_codes: set[int] = set()
    for i, p in enumerate(policies):
        at = f"{where}[{i}]"
        if p.events and p.exit_code is not None:
            return [f"{at} names both an event and an exitCode; a policy takes one of them"]
        if not p.events and p.exit_code is None:
            return [f"{at} names neither an event nor an exitCode"]
        if p.action not in ACTIONS:
            return [f"{at}: unknown action {p.action!r} (valid actions: {', '.join(ACTIONS)})"]
        if p.events:
            for e in p.events:
                if e not in EVENTS:
                    return [f"{at}: unknown event {e!r} (valid events: {', '.join(EVENTS)})"]
                if e in seen_events:
                    return [f"{at}: event {e} is already handled by another policy"]
                seen_events.add(e)
        else:
            assert p.exit_code is not None
            if p.exit_code == 0:
                return [f"{at}: exitCode 0 is success, not an error code"]
            if p.exit_code in seen_codes:
                return [f"{at}: exitCode {p.exit_code} is already handled by another policy"]
            seen_codes.add(p.exit_code)
    if "*" in seen_events and len(seen_events) > 1:
        return [f"{where}: a policy on event '*' must be the only event policy"]
    return []


def _network_topology(nt: NetworkTopology | None, where: str) -> list[str]:
    """Volcano's ``validateNetworkTopology`` (one tier limit, not both), with what its
    CRD refuses by type (the mode, a negative tier)."""
    if nt is None:
        return []
    out = []
    if nt.mode not in (HARD, SOFT):
        out.append(f"{where}: mode must be {HARD} or {SOFT} (it is {nt.mode!r})")
    if nt.highest_tier is not None and nt.highest_tier_name:
        out.append(f"{where} sets both highestTierAllowed and highestTierName; give one of them")
    elif nt.highest_tier is not None and nt.highest_tier < 0:
        out.append(f"{where}: highestTierAllowed must not be negative (it is {nt.highest_tier})")
    return out


def _partition(task: TaskSpec) -> list[str]:
    """Volcano's ``validatePartitionPolicy``: the first problem of the counts, then the
    partitions' network topology. Beyond Volcano's own sentences: minPartitions above
    totalPartitions, which Volcano refuses as the minAvailable it derives from it being
    above the replicas."""
    p = task.partition
    if p is None:
        return []
    at = f"task {task.name!r}: partitionPolicy"
    out = []
    if p.total <= 0:
        out.append(f"{at}: totalPartitions must be at least 1 (it is {p.total})")
    elif p.size <= 0:
        out.append(f"{at}: partitionSize must be at least 1 (it is {p.size})")
    elif p.total * p.size != task.replicas:
        out.append(
            f"{at}: totalPartitions ({p.total}) times partitionSize ({p.size}) is "
            f"{p.total * p.size}, not the task's replicas ({task.replicas})"
        )
    elif p.min_partitions < 0:
        out.append(f"{at}: minPartitions must not be negative (it is {p.min_partitions})")
    elif p.min_partitions > p.total:
        out.append(
            f"{at}: minPartitions ({p.min_partitions}) is greater than totalPartitions ({p.total})"
        )
    elif (
        task.min_available_given is not None
        and p.min_partitions > 0
        and p.min_partitions * p.size != task.min_available_given
    ):
        out.append(
            f"{at}: the task's minAvailable ({task.min_available_given}) must be "
            f"minPartitions ({p.min_partitions}) times partitionSize ({p.size}), "
            f"{p.min_partitions * p.size}"
        )
    return out + _network_topology(p.topology, f"{at}.networkTopology")


def _template(spec: JobSpec, index: int) -> list[str]:
    task = spec.tasks[index]
    at = f"task {task.name!r}"
    containers = task.pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [f"{at}: the pod template has no containers"]
    names = [c.get("name") if isinstance(c, Mapping) else None for c in containers]
    if any(not isinstance(n, str) or not n for n in names):
        return [f"{at}: every container of the pod template needs a name"]
    if len(set(names)) != len(names):
        return [f"{at}: two containers of the pod template have the same name"]
    return []


def problems(
    spec: JobSpec,
    queue_state: Callable[[str], str | None],
) -> list[str]:
    """Why Volcano's webhook would refuse the Job ``spec`` (empty when it would not).
    ``queue_state(name)`` is the queue's ``status.state`` ("" when not set yet, None
    when there is no such queue)."""
    out: list[str] = []
    if spec.min_available_given < 0:
        out.append(f"minAvailable must not be negative (it is {spec.min_available_given})")
    if spec.max_retry_given < 0:
        out.append(f"maxRetry must not be negative (it is {spec.max_retry_given})")
    if spec.ttl is not None and spec.ttl < 0:
        out.append(f"ttlSecondsAfterFinished must not be negative (it is {spec.ttl})")
    if spec.min_success is not None and spec.min_success < 1:
        out.append(f"minSuccess must be at least 1 (it is {spec.min_success})")
    out += _network_topology(spec.network_topology, "networkTopology")
    if not spec.tasks:
        return [*out, "the job has no tasks"]
    if "mpi" in spec.plugins:
        from pumice.controllers.job.plugins import flags

        args = flags(spec.plugins["mpi"], {"master": "master", "worker": "worker", "port": "22"})
        for role in ("master", "worker"):
            if spec.task(args[role]) is None:
                out.append(f"the mpi plugin's {role} task {args[role]!r} is not a task of the job")
    names: set[str] = set()
    for i, task in enumerate(spec.tasks):
        at = f"task {task.name!r}"
        if task.replicas < 0:
            out.append(f"{at}: replicas must not be negative (it is {task.replicas})")
        if task.min_available_given is not None:
            if task.min_available_given < 0:
                out.append(f"{at}: minAvailable must not be negative")
            elif task.min_available_given > task.replicas:
                out.append(
                    f"{at}: minAvailable ({task.min_available_given}) is greater than its "
                    f"replicas ({task.replicas})"
                )
        if len(task.name) > 63 or not _DNS1123_LABEL.match(task.name):
            out.append(
                f"{at}: a task name must be a DNS-1123 label (lower-case letters, digits "
                "and '-', starting and ending with a letter or digit, at most 63 characters)"
            )
        if task.name in names:
            out.append(f"{at}: two tasks have this name")
            break
        names.add(task.name)
        out += _policies(task.policies, f"{at}: policies")
        pod_name = f"{spec.name}-{task.name}-{i}"
        if len(pod_name) > 63 or not _QUALIFIED_NAME.match(pod_name):
            out.append(f"{at}: its pods' names ({pod_name}) would be longer than 63 characters")
        out += _template(spec, i)
        out += _partition(task)
    if len(spec.name) > 63 or not _QUALIFIED_NAME.match(spec.name):
        out.append(f"the job name {spec.name!r} is not a valid name (at most 63 characters)")
    if spec.total_replicas < spec.min_available_given:
        out.append(
            f"minAvailable ({spec.min_available_given}) is greater than the total replicas "
            f"of its tasks ({spec.total_replicas})"
        )
    out += _policies(spec.policies, "policies")
    out += _volumes(spec)
    for name in spec.plugins_given:
        if name not in PLUGINS:
            out.append(f"unknown job plugin {name!r} (pumice runs: {', '.join(PLUGINS)})")
    state = queue_state(spec.queue)
    if state is None:
        out.append(f"queue {spec.queue!r} does not exist")
    elif state not in ("", "Open"):
        out.append(f"queue {spec.queue!r} is {state}; jobs can only be submitted to an Open queue")
    return out


def _volumes(spec: JobSpec) -> list[str]:
    """Volcano's ``validateIO``: the first problem of ``spec.volumes``."""
    paths: set[str] = set()
    for i, v in enumerate(spec.volumes):
        at = f"volumes[{i}]"
        if not v.mount_path:
            return [f"{at}: mountPath is required"]
        if v.mount_path in paths:
            return [f"{at}: mountPath {v.mount_path} is used by another volume"]
        if v.claim is None and not v.claim_name:
            return [f"{at}: give volumeClaim (a claim to make) or volumeClaimName (one to use)"]
        if v.claim_name:
            if v.claim is not None:
                return [
                    f"{at} gives both volumeClaimName and volumeClaim: name an existing claim "
                    "with volumeClaimName, or describe a new one with volumeClaim"
                ]
            if len(v.claim_name) > 253 or not _DNS1123_SUBDOMAIN.match(v.claim_name):
                return [f"{at}: volumeClaimName {v.claim_name!r} is not a valid claim name"]
        paths.add(v.mount_path)
    return []


def queue_state_from(
    get: Callable[[str, str], Mapping[str, Any] | None],
) -> Callable[[str], str | None]:
    """A ``queue_state`` for :func:`problems` over a store's ``get``."""

    def state(name: str) -> str | None:
        q = get("Queue", name)
        if q is None:
            return None
        return str((q.get("status") or {}).get("state") or "")

    return state


__all__ = ["ACTIONS", "EVENTS", "PLUGINS", "problems", "queue_state_from"]
