"""Microsoft Philly (``cluster_job_log``): multi-tenant DNN training jobs of 2017.

The trace (Jeon et al., ATC'19; msr-fiddle/philly-traces) is one JSON array of jobs, each
with ``jobid``, ``user``, ``vc`` (virtual cluster), ``status`` (Pass, Killed, Failed),
``submitted_time`` and ``attempts``: scheduling attempts with ``start_time``, ``end_time``
and ``detail`` (per server: ``ip`` and the ``gpus`` used). Times are local wall-clock
strings (``"2017-10-03 02:52:14"``), sometimes ``None``.

Mapping (``docs/traces.md`` has the full table):

- ``vc`` -> queue (and namespace), one per virtual cluster up to ``max_queues``, hashed
  beyond; ``user`` is not mapped;
- GPUs = the number of GPUs in the *last* attempt's ``detail``, split into pods of at most
  ``gpus_per_pod``: ``n = ceil(gpus / gpus_per_pod)`` equal pods when they divide evenly,
  else ``n - 1`` full pods (role ``worker``) plus one pod with the rest (role ``rest``);
  the job is a gang of all its pods;
- Philly records no cpu or memory: each pod asks ``cpu_per_gpu`` cores and
  ``memory_per_gpu`` GiB per GPU (assumptions, defaults 4 cores and 32 GiB);
- arrival = ``submitted_time`` relative to the earliest job loaded; duration = last
  attempt's ``end_time - start_time`` (earlier, failed attempts are not replayed);
- ``status`` Pass -> succeed, Killed -> cancel, Failed -> fail (each ends after the
  recorded duration, so ``end_fraction`` is 1);
- skipped and counted: jobs without attempts or GPUs, unparseable times, a last attempt
  still running (``end_time`` None), unknown statuses.

Times are parsed as naive wall-clock times; the trace's daylight-saving change shifts the
jobs around it by an hour.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pumice.documents import load_json
from pumice.errors import InputError
from pumice.sim.traces import QueueMapper, SkipLog, find_file, finish, k8s_name
from pumice.sim.workload import GPU, JobSpec, Outcome, TaskSpec, Workload

JOB_LOG_FILES = ("cluster_job_log", "cluster_job_log.json")
OUTCOMES: dict[str, Outcome] = {"Pass": "succeed", "Killed": "cancel", "Failed": "fail"}
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
GiB = 2**30
_EPOCH = datetime(1970, 1, 1)


def _time(value: object, what: str) -> float:
    if not isinstance(value, str) or value in ("", "None"):
        raise ValueError(f"no {what}")
    try:
        return (datetime.strptime(value.strip(), TIME_FORMAT) - _EPOCH).total_seconds()
    except ValueError:
        raise ValueError(f"{what} {value!r} is not a time like 2017-10-03 02:52:14") from None


def load(
    path_or_dir: str,
    *,
    limit: int | None = None,
    gpus_per_pod: int = 8,
    cpu_per_gpu: float = 4.0,
    memory_per_gpu: float = 32.0,
    max_queues: int = 32,
) -> Workload:
    """Read ``cluster_job_log`` (the file, or a directory holding it).

    ``limit`` keeps the first jobs by submission time. Jobs that cannot be replayed are
    skipped and counted; a file that is not a JSON array raises :class:`InputError`.
    """
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")
    if gpus_per_pod < 1 or cpu_per_gpu < 0 or memory_per_gpu < 0:
        raise ValueError("gpus_per_pod must be >= 1, cpu and memory per GPU >= 0")
    path = find_file(path_or_dir, JOB_LOG_FILES)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the job log: {exc.strerror}", file=str(path)) from None
    data = load_json(text, source=str(path))
    if not isinstance(data, list):
        raise InputError("expected a JSON array of jobs", file=str(path))
    skips = SkipLog()
    parsed: list[tuple[float, str, str, Outcome, float, int, str]] = []
    seen: set[str] = set()
    for i, entry in enumerate(data):
        jobid = entry.get("jobid") if isinstance(entry, Mapping) else None
        where = f"{path}: job #{i}" + (f" ({jobid})" if isinstance(jobid, str) else "")
        try:
            job = _job(entry)
            if job[1] in seen:
                raise ValueError(f"duplicate jobid {jobid}")
        except ValueError as exc:
            skips.skip(f"{where}: {exc}")
            continue
        seen.add(job[1])
        parsed.append((*job, where))
    parsed.sort(key=lambda p: (p[0], p[1]))
    if limit is not None:
        parsed = parsed[:limit]
    mapper = QueueMapper([p[2] for p in parsed], max_queues=max_queues, prefix="vc")
    t0 = parsed[0][0] if parsed else 0.0
    jobs = []
    for submitted, name, vc, outcome, duration, gpus, _ in parsed:
        tasks = _tasks(gpus, gpus_per_pod, cpu_per_gpu, memory_per_gpu)
        queue = mapper(vc)
        jobs.append(
            JobSpec(
                name=name,
                namespace=queue,
                queue=queue,
                arrival=submitted - t0,
                duration=duration,
                tasks=tasks,
                min_available=sum(t.replicas for t in tasks),
                outcome=outcome,
            )
        )
    return finish(jobs, mapper.queues(), skips)


def _job(entry: Any) -> tuple[float, str, str, Outcome, float, int]:
    """(submitted, name, vc, outcome, duration, gpus) of one job, or ValueError."""
    if not isinstance(entry, Mapping):
        raise ValueError("not a JSON object")
    jobid = entry.get("jobid")
    if not isinstance(jobid, str) or not k8s_name(jobid, max_len=253):
        raise ValueError(f"missing or unusable jobid {jobid!r}")
    vc = entry.get("vc")
    if not isinstance(vc, str) or not vc:
        raise ValueError("missing vc")
    status = entry.get("status")
    if status not in OUTCOMES:
        raise ValueError(f"unknown status {status!r}")
    submitted = _time(entry.get("submitted_time"), "submitted_time")
    attempts = entry.get("attempts")
    if not isinstance(attempts, list) or not attempts:
        raise ValueError("no scheduling attempt recorded")
    last = attempts[-1]
    if not isinstance(last, Mapping):
        raise ValueError("attempt is not a JSON object")
    if last.get("end_time") in (None, "None"):
        raise ValueError("the last attempt has no end_time (still running when the trace was cut)")
    start = _time(last.get("start_time"), "start_time")
    end = _time(last.get("end_time"), "end_time")
    if end < start:
        raise ValueError(f"end_time {last['end_time']} is before start_time {last['start_time']}")
    detail = last.get("detail")
    if not isinstance(detail, list):
        raise ValueError("the last attempt has no detail")
    gpus = 0
    for server in detail:
        if not isinstance(server, Mapping) or not isinstance(server.get("gpus"), list):
            raise ValueError("malformed detail entry")
        gpus += len(server["gpus"])
    if gpus == 0:
        raise ValueError("no GPU recorded in the last attempt")
    return submitted, k8s_name(jobid, max_len=253), vc, OUTCOMES[status], end - start, gpus


def _tasks(gpus: int, per_pod: int, cpu_per_gpu: float, mem_per_gpu: float) -> tuple[TaskSpec, ...]:
    def requests(g: int) -> dict[str, float]:
        r = {GPU: float(g)}
        if cpu_per_gpu:
            r["cpu"] = float(math.ceil(g * cpu_per_gpu * 1000.0))
        if mem_per_gpu:
            r["memory"] = float(math.ceil(g * mem_per_gpu * GiB))
        return r

    n = -(-gpus // per_pod)
    if gpus % n == 0:
        return (TaskSpec("worker", n, requests(gpus // n)),)
    rest = gpus - (n - 1) * per_pod
    return (TaskSpec("worker", n - 1, requests(per_pod)), TaskSpec("rest", 1, requests(rest)))
