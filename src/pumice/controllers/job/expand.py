"""A snapshot's Volcano Jobs, as the job controller would have turned them into objects.

``pumice cycle`` schedules PodGroups and pods; a snapshot written by hand, or the
examples of Volcano's guides, often hold ``batch.volcano.sh/v1alpha1`` Jobs instead. A Job
whose PodGroup is not in the snapshot is expanded here into the PodGroup and the pods
that pumice's job controller creates for it. The PodGroup is ``Pending``, for enqueue to
admit, and named ``<job>-<uid>`` (a Job without a uid gets one derived from its name).
The pods are there at once, as if created on arrival (the simulator's
``--pods-upfront``). A Job whose
PodGroup is there (a dump of a live cluster) is left alone: its objects are already in
the snapshot. A Job Volcano's webhook would refuse is left out, with the reasons.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from pumice.api.limits import MAX_JOB_PODS
from pumice.api.parse import as_mapping
from pumice.controllers.job.pods import build_pod, build_podgroup
from pumice.controllers.job.spec import parse_job
from pumice.controllers.job.validate import problems
from pumice.errors import InputError, shown_text

JOB_API = "batch.volcano.sh/v1alpha1"


def _map(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one: the objects beside the Jobs are
    only looked at here; the snapshot builder checks them and names what is wrong."""
    return value if isinstance(value, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = _map(obj.get("metadata"))
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _priority(obj: Mapping[str, Any]) -> int:
    value = obj.get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def expand_jobs(
    objects: Iterable[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], list[str]]:
    """(the objects without the Jobs, the objects the Jobs expand to, notes)."""
    rest: list[Mapping[str, Any]] = []
    jobs: list[Mapping[str, Any]] = []
    for obj in objects:
        if obj.get("kind") == "Job" and obj.get("apiVersion") == JOB_API:
            jobs.append(obj)
        else:
            rest.append(obj)
    if not jobs:
        return rest, [], []
    podgroups = {_key(o) for o in rest if o.get("kind") == "PodGroup"}
    classes = {
        str(_map(o.get("metadata")).get("name")): _priority(o)
        for o in rest
        if o.get("kind") == "PriorityClass"
    }
    queues = {
        str(_map(o.get("metadata")).get("name")): str(_map(o.get("status")).get("state") or "")
        for o in rest
        if o.get("kind") == "Queue"
    }
    made: list[Mapping[str, Any]] = []
    notes: list[str] = []
    for obj in jobs:
        try:
            meta = as_mapping(obj.get("metadata"), "metadata")
        except InputError as err:
            raise err.located(obj="Job") from None
        if not meta.get("uid"):  # a Job written by hand: the uid the API server would give
            ns, name = _key(obj)
            obj = {
                **obj,
                "metadata": {**meta, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{ns}/{name}"))},
            }
        spec = parse_job(obj)
        where = f"Job {shown_text(spec.namespace)}/{shown_text(spec.name)}"
        if spec.total_replicas > MAX_JOB_PODS:
            raise InputError(
                f"{spec.total_replicas:,} pods in all, more than the {MAX_JOB_PODS:,} pumice "
                "expands for one Job",
                obj=where,
                field="spec.tasks[*].replicas",
            )
        if (spec.namespace, spec.podgroup_name) in podgroups:
            continue
        refused = problems(spec, queues.get)
        if refused:
            notes.append(
                f"{where} left out, as Volcano's webhook would refuse it: " + "; ".join(refused)
            )
            continue
        created = _map(obj.get("metadata")).get("creationTimestamp")
        pg = build_podgroup(spec, lambda name: classes.get(name, 0))
        if created:
            pg["metadata"]["creationTimestamp"] = created
        made.append(pg)
        for task in spec.tasks:
            for i in range(task.replicas):
                pod = build_pod(spec, task, i, 0, 0)
                meta = pod.setdefault("metadata", {})
                meta.setdefault("namespace", spec.namespace)
                meta.setdefault("uid", f"{spec.namespace}-{meta.get('name')}")
                if created:
                    meta["creationTimestamp"] = created
                pod["status"] = {"phase": "Pending"}
                made.append(pod)
        notes.append(
            f"{where}: expanded into its PodGroup and {spec.total_replicas} pods, as the "
            f"job controller would create them"
        )
    return rest, made, notes


__all__ = ["expand_jobs"]
