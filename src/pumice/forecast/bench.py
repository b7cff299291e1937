"""What a start forecast costs on a large cluster: ``python -m pumice.forecast.bench``.

Builds a cluster's objects: ``--nodes`` nodes of 8 GPUs, every GPU taken by a running
pod (gangs of 1 to 8 pods, their ends a third each from a duration annotation, an
``activeDeadlineSeconds`` and their queue's learned run time), and ``--waiting`` gangs
waiting in ``--queues`` queues; then times :func:`~pumice.forecast.forecast_starts`
over them and prints the figures (wall seconds, cycles replayed, virtual time covered,
estimates given). Deterministic for a ``--seed``.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from pumice.api.parse import DURATION_ANNOTATION
from pumice.forecast.durations import QueueDurations
from pumice.forecast.replay import ForecastStats, forecast_starts
from pumice.scheduler import Scheduler

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
GPU = "nvidia.com/gpu"


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _pod(name: str, group: str, *, node: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "8", "memory": "64Gi", GPU: "1"}}}
        ],
    }
    status: dict[str, Any] = {"phase": "Pending"}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "annotations": {"scheduling.k8s.io/group-name": group},
        "creationTimestamp": _rfc3339(extra.pop("created", NOW - 3600)),
    }
    if node is not None:
        spec["nodeName"] = node
        status = {"phase": "Running", "startTime": _rfc3339(extra.pop("started"))}
    if "deadline" in extra:
        spec["activeDeadlineSeconds"] = extra.pop("deadline")
    if "duration" in extra:
        meta["annotations"][DURATION_ANNOTATION] = str(extra.pop("duration"))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _group(name: str, queue: str, members: int, phase: str, created: float) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": _rfc3339(created)},
        "spec": {"minMember": members, "queue": queue},
        "status": {"phase": phase},
    }


def cluster(nodes: int, waiting: int, queues: int, seed: int) -> list[dict[str, Any]]:
    """The objects of the benchmark's cluster (see the module docstring)."""
    rng = random.Random(seed)
    names = [f"q{i}" for i in range(queues)]
    out: list[dict[str, Any]] = []
    for i in range(nodes):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {
                    "allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110", GPU: "8"}
                },
            }
        )
    for q in names:
        out.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": q},
                "spec": {"weight": 1},
                "status": {"state": "Open"},
            }
        )
    slots = [(f"n{i}", g) for i in range(nodes) for g in range(8)]
    j = 0
    while slots:
        size = min(rng.choice((1, 1, 2, 4, 8)), len(slots))
        queue, group = rng.choice(names), f"run-{j}"
        out.append(_group(group, queue, size, "Running", NOW - 7200))
        started = NOW - rng.uniform(0, 3 * 3600)
        how = j % 3
        for k in range(size):
            node, _gpu = slots.pop()
            extra: dict[str, Any] = {"started": started}
            if how == 0:
                extra["duration"] = round(rng.uniform(3600, 4 * 3600))
            elif how == 1:
                extra["deadline"] = round(rng.uniform(3 * 3600, 6 * 3600))
            out.append(_pod(f"{group}-{k}", group, node=node, **extra))
        j += 1
    for w in range(waiting):
        size = rng.choice((1, 1, 2, 4, 8))
        queue, group = rng.choice(names), f"wait-{w}"
        created = NOW - rng.uniform(0, 3600)
        out.append(_group(group, queue, size, "Pending", created))
        for k in range(size):
            extra = {"created": created, "duration": round(rng.uniform(1800, 4 * 3600))}
            out.append(_pod(f"{group}-{k}", group, **extra))
    return out


def learned(queues: int) -> QueueDurations:
    """Run times as if each queue had finished jobs of 1 to 3 hours."""
    runs = QueueDurations()
    for i in range(queues):
        for h in (1.0, 2.0, 3.0):
            runs.finished(f"q{i}", h * 3600)
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pumice.forecast.bench", description=__doc__)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--waiting", type=int, default=3000)
    p.add_argument("--queues", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--step", type=float, default=None, help="replay step in seconds")
    args = p.parse_args(argv)
    objects = cluster(args.nodes, args.waiting, args.queues, args.seed)
    pods = sum(1 for o in objects if o["kind"] == "Pod")
    scheduler = Scheduler.from_file(None)
    stats = ForecastStats()
    t0, c0 = time.perf_counter(), time.process_time()
    got = forecast_starts(
        objects, scheduler, NOW, durations=learned(args.queues), stats=stats, step=args.step
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    estimated = sum(1 for e in got.values() if e.start is not None)
    print(
        f"forecast: {args.nodes} nodes, {pods:,} pods, {stats.waiting:,} waiting jobs: "
        f"{wall:.1f} s wall ({cpu:.1f} s CPU; setup {stats.setup_seconds:.1f} s wall), "
        f"step {args.step or 1:g} s, "
        f"{stats.cycles:,} cycles replayed over "
        f"{stats.virtual_seconds / 3600:.1f} h virtual (stopped: {stats.stopped}); "
        f"{estimated:,} of {len(got):,} jobs with an estimate"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
