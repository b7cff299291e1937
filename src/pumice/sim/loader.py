"""Reading a :class:`~pumice.sim.workload.Workload` from files (``pumice simulate WORKLOAD...``).

Two forms are accepted and may be mixed: Kubernetes manifests (PodGroups and Pods with
``pumice.sim/*`` annotations, Queues, PriorityClasses) and the compact ``kind: Workload``
document; :func:`load_workload` describes both. Loading is all or nothing: a malformed field
or a reference to an undeclared queue or priority class raises
:class:`~pumice.errors.InputError` naming the file, the object and the field, and nothing is
returned, so a simulation never starts on part of a workload. Objects that are not part of
a workload are skipped, counted and reported as warnings.

This module finds the files and reads their documents; each object is filed by
:mod:`pumice.sim.workload_declarations` (the compact form in
:mod:`pumice.sim.compact_workload`, pods in :mod:`pumice.sim.pod_manifests`, the job of
each gang in :mod:`pumice.sim.manifest_jobs`), and :mod:`pumice.sim.workload_assembly`
checks what refers to what and builds the workload.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path

from pumice.errors import InputError
from pumice.sim.documents import iter_objects, read_documents
from pumice.sim.workload import Workload
from pumice.sim.workload_assembly import assemble_workload
from pumice.sim.workload_declarations import Declarations

_EXTENSIONS = (".yaml", ".yml", ".json")


def _expand(paths: Sequence[str]) -> Iterator[Path]:
    """The files ``paths`` name: a file as it is; a directory's YAML and JSON files,
    searched recursively, in sorted order; a path that does not exist is refused."""
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files = sorted(
                f for f in path.rglob("*") if f.is_file() and f.suffix.lower() in _EXTENSIONS
            )
            yield from files
        elif path.is_file():
            yield path
        else:
            raise InputError("no such file or directory", file=str(p))


def load_workload(
    paths: Sequence[str],
    *,
    known_queues: Collection[str] = (),
    known_priority_classes: Mapping[str, int] | None = None,
) -> Workload:
    """Read a workload from YAML/JSON files or directories of them (searched recursively,
    in sorted order).

    Two forms, which may be mixed across and within files:

    - Kubernetes manifests: PodGroups and Pods (plus Queues and PriorityClasses). A job's
      arrival and duration come from the ``pumice.sim/arrival`` and ``pumice.sim/duration``
      annotations of its PodGroup (or of its pods, which must then agree; a pod without
      a group is a job of one). Pods are grouped into roles by ``volcano.sh/task-spec``
      (or ``volcano.sh/task-name``, as annotation or label; default ``task``); all pods
      of a role must request the same resources. Pod names are not kept: a loaded job's
      pods are named ``{job}-{task}-{i}`` again when rendered.
    - Gangs of the other dialects, with their pods: scheduler-plugins coscheduling
      PodGroups (``scheduling.x-k8s.io/v1alpha1``), Kubernetes' ``scheduling.k8s.io``
      v1alpha1 Workloads (one job per pod group and replica key its pods name) and
      v1alpha2 PodGroups, with the same annotations; the group object is kept for the
      simulated cluster as written (``JobSpec.group``).
    - The compact form: a ``kind: Workload`` document (``apiVersion: pumice.io/v1alpha1``)
      with ``queues``, ``priorityClasses`` and ``jobs`` (each may say its ``dialect``).

    - PersistentVolumeClaims the pods mount (a pod volume's
      ``persistentVolumeClaim.claimName``, a Volcano Job's ``volumeClaimName``): each
      claim mounted by name must be declared by some file; it is created in the
      simulated cluster when the first job mounting it arrives (:mod:`pumice.sim.storage`).
      The pods of one role attach the same claims (a pod's claim volumes are kept, as
      written, for every pod of its role).
    - ResourceClaimTemplates and ResourceClaims (dynamic resource allocation) the pods
      name in ``spec.resourceClaims`` (a pod's or a Volcano Job task template's): each
      must be declared by some file; they are created in the simulated cluster
      (:mod:`pumice.sim.devices`). The pods of one role name the same claims.

    Objects of other kinds (Nodes, say) are skipped and counted. Every job's queue must be
    declared by some file or be in ``known_queues``, except Volcano's ``default`` queue,
    which every Volcano cluster has: when a job names it (a job that names no queue is
    in it) and no file declares it, the workload gets it as Volcano creates it (weight 1,
    reclaimable, no capability or guarantee). Every priority class a job names must be
    declared or in ``known_priority_classes``. Anything malformed raises
    :class:`InputError` naming the file, the object and the field; nothing is returned then.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [str(paths)]
    declared = Declarations()
    for path in _expand(paths):
        file = str(path)
        for obj in iter_objects(read_documents(path), file=file):
            try:
                declared.add(obj, file)
            except InputError as exc:
                raise exc.located(file=file) from None
    try:
        return assemble_workload(declared, known_queues, known_priority_classes or {})
    except InputError as exc:  # (what is not about one object is about the files)
        raise exc.located(file=", ".join(map(str, paths))) from None
