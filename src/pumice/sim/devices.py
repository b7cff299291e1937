"""Devices in a simulated run (dynamic resource allocation): when the workload's
ResourceClaims and ResourceClaimTemplates appear, and whether its pods' claims could
ever be allocated.

**Claims.** A workload's ResourceClaimTemplates (``Workload.device_claims``) are created
at the start; a ResourceClaim it declares, when the first job whose pods name it
(``spec.resourceClaims[].resourceClaimName``) arrives, with that job's objects (at the
start when no job names it). The claims of template entries are made by the
resource-claim controller (:mod:`pumice.controllers.resourceclaims`), owned by their
pods, which the simulation runs whenever the workload uses claims. Allocation is the
scheduler's (the predicates plugin's device checks); a bind writes it into the claim at
once (:meth:`~pumice.cluster.memory.MemoryCluster.bind`). When a pod is done, the
controller takes it out of its claims' ``reservedFor``, clears the allocation of a claim
no pod uses any more, and deletes the claim made for the pod: the devices are free for
the next pod. A workload's own claims are never deleted.

**Never allocatable.** :func:`check_device_claims` refuses, before the run, a workload
with a role whose pods' claims no node of the cluster could ever serve, even with every
device free (no device class of that name, too few matching devices on any node), as
:func:`~pumice.sim.engine.check_workload` refuses a pod no node can hold.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pumice.api.dra import (
    Allocation,
    ResourceClaim,
    Shortfall,
    allocate,
    devices_on_node,
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from pumice.controllers.store import Store
from pumice.errors import InputError
from pumice.sim.workload import JobSpec, Workload

TEMPLATE = "ResourceClaimTemplate"
CLAIM = "ResourceClaim"


def claim_refs(job: JobSpec) -> list[tuple[str, str]]:
    """``(kind, name)`` of each ResourceClaim and ResourceClaimTemplate the pods of
    ``job`` name (in the job's namespace), in order, each once."""
    out: list[tuple[str, str]] = []
    for task in job.tasks:
        for entry in task.resource_claims:
            if entry.get("resourceClaimName"):
                out.append((CLAIM, str(entry["resourceClaimName"])))
            elif entry.get("resourceClaimTemplateName"):
                out.append((TEMPLATE, str(entry["resourceClaimTemplateName"])))
    return list(dict.fromkeys(out))


def uses_devices(workload: Workload) -> bool:
    """Whether some job's pods need ResourceClaims (or the workload holds some)."""
    if workload.device_claims:
        return True
    return any(t.resource_claims for j in workload.jobs for t in j.tasks)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind")), f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


class DeviceClaimFeeder:
    """Creates the workload's templates and claims when they are first needed (module
    docstring)."""

    def __init__(self, store: Store, manifests: Sequence[Mapping[str, Any]]) -> None:
        self.store = store
        self.waiting: dict[tuple[str, str], Mapping[str, Any]] = {_key(m): m for m in manifests}

    def start(self, jobs: Iterable[JobSpec]) -> None:
        """Create the templates, and the claims no job names."""
        wanted = {(kind, f"{j.namespace}/{n}") for j in jobs for kind, n in claim_refs(j)}
        for key in [k for k in self.waiting if k[0] == TEMPLATE or k not in wanted]:
            self._create(key)

    def arrive(self, job: JobSpec) -> None:
        """``job`` arrives: create the claims its pods name that are not there yet."""
        if not self.waiting:
            return
        for kind, name in claim_refs(job):
            key = (kind, f"{job.namespace}/{name}")
            if key in self.waiting:
                self._create(key)

    def _create(self, key: tuple[str, str]) -> None:
        obj = copy.deepcopy(dict(self.waiting.pop(key)))
        obj.pop("status", None)
        obj["metadata"].setdefault("namespace", "default")
        self.store.create(obj)


def _claim_records(
    job: JobSpec, entries: Sequence[Mapping[str, Any]], manifests: Mapping[tuple[str, str], Any]
) -> list[ResourceClaim]:
    out = []
    for entry in entries:
        direct = entry.get("resourceClaimName")
        kind = CLAIM if direct else TEMPLATE
        name = str(direct or entry.get("resourceClaimTemplateName"))
        obj = manifests[(kind, f"{job.namespace}/{name}")]
        if kind == CLAIM:
            claim = parse_resource_claim(obj)
            out.append(ResourceClaim(claim.namespace, claim.name, claim.uid, claim.spec))
        else:
            tmpl = parse_resource_claim_template(obj)
            label = f"{entry.get('name')} (template {name})"
            out.append(ResourceClaim(job.namespace, label, "", tmpl.spec))
    return out


def check_device_claims(
    workload: Workload,
    nodes: Sequence[Mapping[str, Any]],
    devices: Sequence[Mapping[str, Any]],
) -> None:
    """Refuse a workload with a role whose pods' claims no node could ever serve, all
    of them together, with every device free (module docstring). The workload's
    manifests were checked when they were read (every claim and template a pod names
    is declared)."""
    manifests = {_key(m): m for m in workload.device_claims}
    slices = [parse_resource_slice(o) for o in devices if o.get("kind") == "ResourceSlice"]
    classes = [parse_device_class(o) for o in devices if o.get("kind") == "DeviceClass"]
    offered = []
    for n in nodes:
        meta = n.get("metadata") or {}
        name, labels = str(meta.get("name")), dict(meta.get("labels") or {})
        reach = devices_on_node(name, labels, slices)
        if reach.devices:
            offered.append((name, labels, reach))
    answers: dict[tuple, str] = {}
    for job in workload.jobs:
        for j, task in enumerate(job.tasks):
            if not task.resource_claims:
                continue
            claims = _claim_records(job, task.resource_claims, manifests)
            memo = tuple(c.spec for c in claims)
            if memo not in answers:
                answers[memo] = _never(claims, offered, classes)
            why = answers[memo]
            if why:
                where = job.origin
                raise InputError(
                    f"the claims of task {task.name}'s pods can never be allocated: {why}",
                    file=where.file if where is not None else None,
                    obj=where.obj if where is not None else f"job {job.uid}",
                    field=f"{where.spec_field}.resourceClaims".format(task=j)
                    if where is not None
                    else f"tasks.{task.name}.resourceClaims",
                )


def _never(claims: list[ResourceClaim], offered: list[tuple], classes: list[Any]) -> str:
    """Why no node could serve ``claims`` ("" when some node could)."""
    if not offered:
        return "no node of the cluster has devices (no ResourceSlice)"
    first: tuple[str, Shortfall] | None = None
    for name, labels, reach in offered:
        got = allocate(claims, name, labels, reach, classes, frozenset())
        if isinstance(got, Allocation) or got.too_complex:
            return ""  # (too complex to search proves nothing)
        if first is None:
            first = (name, got)
    assert first is not None
    return f"on node {first[0]} (and every other): {first[1].reason}"


__all__ = [
    "DeviceClaimFeeder",
    "check_device_claims",
    "claim_refs",
    "uses_devices",
]
