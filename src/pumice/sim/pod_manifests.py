"""One Pod manifest of a workload file, read as the simulator replays it.

A workload's pods are not kept one by one: pods of one role become one task of a job.
What the simulator needs of each pod is read here into a :class:`Pod`: its effective
requests (the sum over containers, at least each init container, a missing request
defaulting to its limit), the claim volumes and ``spec.resourceClaims`` it attaches (as
written, checked), and the gang it names (:func:`pod_ref`, in the scheduler's order of
precedence). Readers raise :class:`~pumice.errors.InputError` naming the field; the
caller adds the file and the object.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pumice.api.parse import pod_device_claims
from pumice.api.volumes import parse_pvc
from pumice.errors import InputError, shown
from pumice.sim.fields import is_dns_label, parse_resources, require_str
from pumice.sim.workload import ANNOTATION_GROUP_NAME, COSCHEDULING_LABEL
from pumice.sim.workload_fields import optional_str

#: A gang a pod names (see :class:`Pod`).
GangKey = tuple[str, str, str, str]


@dataclass(slots=True)
class Pod:
    """What the simulator keeps of one pod of a workload file until its gang is known:
    pods of one role become one task, so only what a task holds is kept."""

    file: str
    name: str
    namespace: str
    task: str
    requests: dict[str, float]
    annotations: Mapping[str, Any]
    priority_class: str | None
    queue: str | None
    #: The gang it joins: (dialect, group name, Workload pod group, replica key);
    #: None: a job of its own.
    ref: GangKey | None = None
    #: Its claim volumes (``persistentVolumeClaim`` or ``ephemeral``), as written.
    volumes: tuple[Mapping[str, Any], ...] = ()
    #: Its ``spec.resourceClaims`` (DRA), as written.
    resource_claims: tuple[Mapping[str, Any], ...] = ()


def _container_requests(c: object, field: str) -> dict[str, float]:
    if not isinstance(c, Mapping):
        raise InputError("expected a map", field=field)
    resources = c.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise InputError("expected a map", field=f"{field}.resources")
    # Kubernetes defaults a missing request to the limit.
    out = parse_resources(resources.get("limits"), field=f"{field}.resources.limits")
    out.update(parse_resources(resources.get("requests"), field=f"{field}.resources.requests"))
    return out


def pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """A pod's effective requests: the sum over containers, at least each init container."""
    total: dict[str, float] = {}
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise InputError("expected a list", field="spec.containers")
    for i, c in enumerate(containers):
        for name, amount in _container_requests(c, f"spec.containers[{i}]").items():
            total[name] = total.get(name, 0.0) + amount
    inits = spec.get("initContainers") or []
    if not isinstance(inits, list):
        raise InputError("expected a list", field="spec.initContainers")
    for i, c in enumerate(inits):
        for name, amount in _container_requests(c, f"spec.initContainers[{i}]").items():
            total[name] = max(total.get(name, 0.0), amount)
    return total


def pod_claim_volumes(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The pod's volumes that attach a claim (by name, or an ephemeral one), checked."""
    out = []
    volumes = spec.get("volumes") or []
    if not isinstance(volumes, list):
        raise InputError("expected a list", field="spec.volumes")
    for i, v in enumerate(volumes):
        f = f"spec.volumes[{i}]"
        if not isinstance(v, Mapping):
            raise InputError("expected a map", field=f)
        if "persistentVolumeClaim" in v:
            pvc = v["persistentVolumeClaim"]
            if not isinstance(pvc, Mapping):
                raise InputError("expected a map", field=f"{f}.persistentVolumeClaim")
            require_str(pvc.get("claimName"), field=f"{f}.persistentVolumeClaim.claimName")
        elif "ephemeral" in v:
            eph = v["ephemeral"]
            template = eph.get("volumeClaimTemplate") if isinstance(eph, Mapping) else None
            if not isinstance(template, Mapping):
                raise InputError("expected a map", field=f"{f}.ephemeral.volumeClaimTemplate")
            try:
                parse_pvc({"metadata": {"name": "x"}, "spec": template.get("spec")})
            except InputError as exc:
                raise InputError(
                    exc.message, field=f"{f}.ephemeral.volumeClaimTemplate.{exc.field}"
                ) from None
        else:
            continue
        name = require_str(v.get("name"), field=f"{f}.name")
        if not is_dns_label(name):
            raise InputError(f"invalid volume name {shown(name)}", field=f"{f}.name")
        out.append(copy.deepcopy(dict(v)))
    return tuple(out)


def pod_resource_claims(spec: Mapping[str, Any], namespace: str) -> tuple[Mapping[str, Any], ...]:
    """The pod's ``spec.resourceClaims`` entries (DRA), checked, as written."""
    entries = spec.get("resourceClaims")
    if not entries:
        return ()
    refs = pod_device_claims(spec, {}, namespace)  # (checks each entry)
    names = [r.name for r in refs]
    for i, name in enumerate(names):
        if not is_dns_label(name):
            raise InputError(
                f"invalid claim entry name {shown(name)}", field=f"spec.resourceClaims[{i}].name"
            )
        if name in names[:i]:
            raise InputError(f"entry {name} is given twice", field=f"spec.resourceClaims[{i}].name")
    return tuple(copy.deepcopy(dict(e)) for e in entries)


def pod_ref(
    annotations: Mapping[str, Any], labels: Mapping[str, Any], spec: Mapping[str, Any]
) -> GangKey | None:
    """The gang a pod joins, as the scheduler reads it (:func:`pumice.api.parse.parse_pod`):
    Volcano's annotation wins, then ``spec.schedulingGroup``, ``spec.workloadRef``, the
    coscheduling label."""
    group = annotations.get(ANNOTATION_GROUP_NAME)
    if group:
        return ("volcano", str(group), "", "")
    if spec.get("schedulingGroup") is not None:
        sg = spec["schedulingGroup"]
        if not isinstance(sg, Mapping):
            raise InputError("expected a map", field="spec.schedulingGroup")
        name = require_str(sg.get("podGroupName"), field="spec.schedulingGroup.podGroupName")
        return ("podgroup", name, "", "")
    if spec.get("workloadRef") is not None:
        ref = spec["workloadRef"]
        if not isinstance(ref, Mapping):
            raise InputError("expected a map", field="spec.workloadRef")
        name = require_str(ref.get("name"), field="spec.workloadRef.name")
        pg = require_str(ref.get("podGroup"), field="spec.workloadRef.podGroup")
        key = optional_str(
            ref.get("podGroupReplicaKey"), field="spec.workloadRef.podGroupReplicaKey"
        )
        return ("workload", name, pg, key or "")
    label = labels.get(COSCHEDULING_LABEL)
    if label:
        return ("coscheduling", str(label), "", "")
    return None
