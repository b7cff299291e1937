"""Alibaba cluster-trace-gpu-v2023 (openb): single pods of a GPU-sharing cluster.

The trace (Weng et al., "Beware of Fragmentation", ATC'23) lists pods
(``openb_pod_list_*.csv``) and nodes (``openb_node_list_gpu_node.csv``,
``openb_node_list_all_node.csv``), both with a header row.

Mapping (``docs/traces.md`` has the full table):

- every pod is a job of one (the trace has no gangs), named after the pod;
- ``cpu_milli`` -> cpu millicores, ``memory_mib`` -> memory (MiB), ``num_gpu`` ->
  ``nvidia.com/gpu``; a GPU-sharing pod (``num_gpu`` 1 with ``gpu_milli`` < 1000) is rounded
  *up* to one whole GPU, since pumice models whole devices;
- arrival = ``creation_time`` relative to the earliest pod loaded; duration =
  ``deletion_time - scheduled_time`` (the time it ran), or ``- creation_time`` when the pod
  has no usable ``scheduled_time``;
- ``pod_phase`` Failed -> fail; Succeeded, Running and Pending -> succeed (every row has
  a deletion time, so the pod's life in the trace is replayed whole); a pod without
  ``deletion_time`` is skipped;
- ``qos`` -> priority class: LS -> ``ls`` (1000), Burstable -> ``burstable`` (100),
  BE -> ``be`` (10); any other value -> none;
- all pods go to one queue (``queue``, default ``default``), namespace ``default``;
- ``gpu_spec`` (GPU model constraints) is not mapped: the workload model has no node
  selector yet.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from pumice.errors import InputError
from pumice.sim.cluster_spec import GPU_PRODUCT_LABEL, node_object
from pumice.sim.traces import (
    SkipLog,
    find_file,
    finish,
    k8s_name,
    parse_float,
    read_rows,
    require_float,
)
from pumice.sim.workload import GPU, JobSpec, Outcome, QueueSpec, TaskSpec, Workload

POD_FILES = ("openb_pod_list_default.csv", "openb_pod_list.csv")
NODE_FILES = ("openb_node_list_gpu_node.csv", "openb_node_list_all_node.csv")
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
QOS_CLASSES = {"LS": ("ls", 1000), "Burstable": ("burstable", 100), "BE": ("be", 10)}
CLASS_VALUES = dict(QOS_CLASSES.values())
PHASES: dict[str, Outcome] = {
    "Failed": "fail",
    "Succeeded": "succeed",
    "Running": "succeed",
    "Pending": "succeed",
}
MiB = 2**20


def load(
    path_or_dir: str,
    *,
    limit: int | None = None,
    queue: str = "default",
    namespace: str = "default",
) -> Workload:
    """Read an ``openb_pod_list_*.csv`` file (or ``openb_pod_list_default.csv`` in a
    directory). ``limit`` keeps the first pods by creation time; malformed rows are
    skipped and counted."""
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")
    path = find_file(path_or_dir, POD_FILES)
    skips = SkipLog()
    rows: list[tuple[float, str, JobSpec, str | None]] = []
    seen: set[str] = set()
    for line, row in read_rows(path, POD_COLUMNS):
        where = f"{path}:{line}"
        try:
            created, raw, job, pc = _pod(row, queue, namespace)
            if job.name in seen:
                raise ValueError(f"duplicate pod name {job.name}")
        except ValueError as exc:
            skips.skip(f"{where}: {exc}")
            continue
        seen.add(job.name)
        rows.append((created, raw, job, pc))
    rows.sort(key=lambda r: (r[0], r[1]))
    if limit is not None:
        rows = rows[:limit]
    t0 = rows[0][0] if rows else 0.0
    jobs = []
    classes: dict[str, int] = {}
    for created, _, job, pc in rows:
        jobs.append(replace(job, arrival=created - t0))
        if pc is not None:
            classes[pc] = CLASS_VALUES[pc]
    return finish(jobs, (QueueSpec(queue),), skips, classes)


def _pod(row: dict[str, str], queue: str, namespace: str) -> tuple[float, str, JobSpec, str | None]:
    raw = row.get("name")
    if not raw:
        raise ValueError("missing name")
    name = k8s_name(raw, max_len=253)
    if not name:
        raise ValueError(f"name {raw!r} has no usable characters")
    cpu = require_float(row, "cpu_milli")
    mem = require_float(row, "memory_mib")
    num_gpu = require_float(row, "num_gpu")
    gpu_milli = parse_float(row, "gpu_milli") or 0.0
    for column, value in (("cpu_milli", cpu), ("memory_mib", mem), ("num_gpu", num_gpu)):
        if value < 0:
            raise ValueError(f"{column} is negative: {value:g}")
    if not num_gpu.is_integer():
        raise ValueError(f"num_gpu must be a whole number, got {row['num_gpu']!r}")
    gpus = int(num_gpu) if num_gpu >= 1 else (1 if gpu_milli > 0 else 0)
    created = require_float(row, "creation_time")
    if "deletion_time" not in row:
        raise ValueError("no deletion_time: the pod never ended in the trace")
    deleted = require_float(row, "deletion_time")
    scheduled = parse_float(row, "scheduled_time")
    start = scheduled if scheduled is not None and created <= scheduled <= deleted else created
    if deleted < start:
        raise ValueError(f"deletion_time {deleted:.12g} is before creation_time {created:.12g}")
    phase = row.get("pod_phase", "Succeeded")
    if phase not in PHASES:
        raise ValueError(f"unknown pod_phase {phase!r}")
    pc = QOS_CLASSES.get(row.get("qos", ""), (None, 0))[0]
    requests: dict[str, float] = {}
    if cpu:
        requests["cpu"] = float(math.ceil(cpu))
    if mem:
        requests["memory"] = float(math.ceil(mem * MiB))
    if gpus:
        requests[GPU] = float(gpus)
    job = JobSpec(
        name=name,
        namespace=namespace,
        queue=queue,
        arrival=0.0,
        duration=deleted - start,
        tasks=(TaskSpec("task", 1, requests),),
        min_available=1,
        priority_class=pc,
        outcome=PHASES[phase],
    )
    return created, raw, job, pc


def load_nodes(path: str) -> list[dict[str, Any]]:
    """Nodes from ``openb_node_list_gpu_node.csv`` (or ``..._all_node.csv``, or either in a
    directory) as v1 Node dicts: ``sn`` -> name, ``cpu_milli``, ``memory_mib``, ``gpu`` ->
    allocatable, ``model`` -> label ``nvidia.com/gpu.product``.

    A cluster with a node missing would mislead every result, so a bad row raises
    :class:`InputError` naming the file and line instead of being skipped.
    """
    file = find_file(path, NODE_FILES)
    nodes: list[dict[str, Any]] = []
    names: set[str] = set()
    for line, row in read_rows(file, NODE_COLUMNS):
        where = f"{file}:{line}"
        try:
            raw = row.get("sn")
            if not raw:
                raise ValueError("missing sn")
            name = k8s_name(raw, max_len=253)
            if not name or name in names:
                raise ValueError(f"unusable or duplicate node name {raw!r}")
            cpu = require_float(row, "cpu_milli")
            mem = require_float(row, "memory_mib")
            gpu = parse_float(row, "gpu") or 0.0
            if cpu <= 0 or mem <= 0 or gpu < 0 or not gpu.is_integer():
                raise ValueError("cpu_milli and memory_mib must be > 0, gpu a whole number")
        except ValueError as exc:
            raise InputError(str(exc), file=where, obj=f"node {row.get('sn', '?')}") from None
        names.add(name)
        allocatable = {"cpu": float(math.floor(cpu)), "memory": float(math.floor(mem)) * MiB}
        labels = {}
        if gpu:
            allocatable[GPU] = gpu
            model = row.get("model", "")
            if model and model.lower() != "nan":
                labels[GPU_PRODUCT_LABEL] = model
        nodes.append(node_object(name, allocatable, labels=labels))
    if not nodes:
        raise InputError("no nodes", file=str(file))
    return nodes
