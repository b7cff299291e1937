"""Alibaba cluster-trace-gpu-v2020 (PAI): jobs of task roles from two CSV tables.

The trace (Weng et al., NSDI'22) describes jobs (``pai_job_table``), their tasks or roles
(``pai_task_table``: ``ps``, ``worker``, ``tensorflow`` ...) and each task's instances
(``pai_instance_table``). A task's ``inst_num`` is its replica count, so the job and task
tables are enough to rebuild every gang; the instance table is not read. The released
CSVs have no header row: columns are in the documented order (a header row, when
present, is recognised and used instead).

Mapping (``docs/traces.md`` has the full table):

- job = one PodGroup; each task row = one role with ``replicas = inst_num``; the gang
  minimum is every instance (PAI gang-schedules multi-instance jobs);
- ``plan_cpu`` is percent of a core (600 = 6 cores), ``plan_mem`` GiB, ``plan_gpu``
  percent of a GPU per instance, rounded *up* to whole GPUs (a 50% GPU task asks for one
  GPU: Kubernetes cannot share a device without a sharing plugin);
- arrival = job ``start_time`` (submission) relative to the earliest job loaded;
  duration = job ``end_time`` minus the earliest task ``start_time`` (so PAI's own queueing
  delay is not replayed as run time), or minus the job ``start_time`` when task times
  are missing or implausible;
- ``status``: Terminated -> succeed, Failed -> fail (it ran ``duration`` before failing);
  Running and Waiting jobs have no end and are skipped, counted;
- queue = user: one queue per user when there are at most ``max_queues`` users, else
  users hashed into ``max_queues`` queues; namespace = queue;
- ``gpu_type`` and ``inst_id`` are not mapped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from pumice.sim.traces import (
    QueueMapper,
    SkipLog,
    find_file,
    finish,
    k8s_name,
    parse_float,
    read_rows,
    require_float,
)
from pumice.sim.workload import GPU, JobSpec, Outcome, TaskSpec, Workload

JOB_TABLE = "pai_job_table.csv"
TASK_TABLE = "pai_task_table.csv"
JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
OUTCOMES: dict[str, Outcome] = {"Terminated": "succeed", "Failed": "fail"}
UNFINISHED = ("Running", "Waiting")
GiB = 2**30


@dataclass(slots=True)
class _Job:
    name: str
    raw_name: str
    user: str
    outcome: Outcome
    start: float
    end: float
    where: str
    tasks: list[TaskSpec] = field(default_factory=list)
    task_starts: list[float] = field(default_factory=list)


def _directory(path_or_dir: str) -> Path:
    path = Path(path_or_dir)
    return path.parent if path.is_file() else path


def load(path_or_dir: str, *, limit: int | None = None, max_queues: int = 16) -> Workload:
    """Read ``pai_job_table.csv`` and ``pai_task_table.csv`` from a directory (or from the
    directory of the file given).

    ``limit`` keeps the first jobs by submission time. Malformed rows, unfinished jobs,
    tasks of jobs absent from the job table and jobs left without tasks are skipped and
    counted; rows of the job table are checked (and counted) whatever ``limit`` is.
    """
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")
    directory = _directory(path_or_dir)
    job_file = find_file(str(directory), (JOB_TABLE,))
    task_file = find_file(str(directory), (TASK_TABLE,))
    skips = SkipLog()
    jobs, known = _read_jobs(job_file, skips)
    selected = sorted(jobs.values(), key=lambda j: (j.start, j.raw_name))
    if limit is not None:
        selected = selected[:limit]
    by_name = {j.raw_name: j for j in selected}
    _read_tasks(task_file, by_name, known, skips)

    mapper = QueueMapper([j.user for j in selected], max_queues=max_queues, prefix="user")
    t0 = min((j.start for j in selected), default=0.0)
    out: list[JobSpec] = []
    names: set[str] = set()
    for j in selected:
        if not j.tasks:
            skips.skip(f"{j.where}: job {j.raw_name} has no usable task in {TASK_TABLE}")
            continue
        if j.name in names:
            skips.skip(f"{j.where}: job name {j.name} is used twice after normalisation")
            continue
        names.add(j.name)
        run_start = min(j.task_starts) if j.task_starts else j.start
        if not j.start <= run_start <= j.end:
            run_start = j.start
        queue = mapper(j.user)
        replicas = sum(t.replicas for t in j.tasks)
        out.append(
            JobSpec(
                name=j.name,
                namespace=queue,
                queue=queue,
                arrival=j.start - t0,
                duration=j.end - run_start,
                tasks=tuple(j.tasks),
                min_available=replicas,
                outcome=j.outcome,
            )
        )
    return finish(out, mapper.queues(), skips)


def _read_jobs(path: Path, skips: SkipLog) -> tuple[dict[str, _Job], set[str]]:
    """The replayable jobs, and the names of every job in the table (so the tasks of a
    skipped job are not counted a second time)."""
    jobs: dict[str, _Job] = {}
    names: set[str] = set()
    for line, row in read_rows(path, JOB_COLUMNS):
        where = f"{path}:{line}"
        try:
            raw = row.get("job_name")
            if not raw:
                raise ValueError("missing job_name")
            names.add(raw)
            name = k8s_name(raw)
            if not name:
                raise ValueError(f"job_name {raw!r} has no usable characters")
            user = row.get("user")
            if not user:
                raise ValueError("missing user")
            status = row.get("status", "")
            if status in UNFINISHED:
                skips.skip(f"{where}: job {raw} is {status}: no end time to replay")
                continue
            if status not in OUTCOMES:
                raise ValueError(f"unknown status {status!r}")
            start = require_float(row, "start_time")
            end = require_float(row, "end_time")
            if end < start:
                raise ValueError(f"end_time {end:.12g} is before start_time {start:.12g}")
            if raw in jobs:
                raise ValueError(f"duplicate job_name {raw}")
        except ValueError as exc:
            skips.skip(f"{where}: {exc}")
            continue
        jobs[raw] = _Job(name, raw, user, OUTCOMES[status], start, end, where)
    return jobs, names


def _read_tasks(path: Path, jobs: dict[str, _Job], known: set[str], skips: SkipLog) -> None:
    for line, row in read_rows(path, TASK_COLUMNS):
        where = f"{path}:{line}"
        raw_job = row.get("job_name", "")
        job = jobs.get(raw_job)
        if job is None:
            if raw_job not in known:
                skips.skip(f"{where}: task of unknown job {raw_job!r}")
            continue
        try:
            task = _task(row)
            if any(t.name == task.name for t in job.tasks):
                raise ValueError(f"duplicate task {task.name} in job {raw_job}")
        except ValueError as exc:
            skips.skip(f"{where}: {exc}")
            continue
        job.tasks.append(task)
        start = parse_float(row, "start_time") if "start_time" in row else None
        if start is not None:
            job.task_starts.append(start)


def _task(row: dict[str, str]) -> TaskSpec:
    raw = row.get("task_name")
    if not raw:
        raise ValueError("missing task_name")
    name = k8s_name(raw)
    if not name:
        raise ValueError(f"task_name {raw!r} has no usable characters")
    inst = require_float(row, "inst_num")
    if inst < 1 or not inst.is_integer():
        raise ValueError(f"inst_num must be a whole number >= 1, got {row['inst_num']!r}")
    requests: dict[str, float] = {}
    cpu = parse_float(row, "plan_cpu")
    mem = parse_float(row, "plan_mem")
    gpu = parse_float(row, "plan_gpu")
    for column, value in (("plan_cpu", cpu), ("plan_mem", mem), ("plan_gpu", gpu)):
        if value is not None and value < 0:
            raise ValueError(f"{column} is negative: {value:g}")
    if cpu:
        requests["cpu"] = float(math.ceil(round(cpu * 10.0, 6)))
    if mem:
        requests["memory"] = float(math.ceil(mem * GiB))
    if gpu:
        requests[GPU] = float(math.ceil(round(gpu / 100.0, 6)))
    return TaskSpec(name=name, replicas=int(inst), requests=requests)
