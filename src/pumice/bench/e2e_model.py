"""What an end-to-end benchmark run is asked to do (:class:`E2EOptions`) and what it
measured (:class:`E2EResult`): the inputs and outputs of :mod:`pumice.bench.e2e`, shared
with its vcjob workload, its command line and its report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORKLOADS = ("basic", "gangs", "vcjob")
#: Where the shared binaries and Volcano's files are looked for when not given.
DEFAULT_K8S = Path(os.environ.get("PUMICE_K8S_DIR", "/work/shared/k8s"))


@dataclass(frozen=True, slots=True)
class E2EOptions:
    nodes: int = 1000
    pods: int = 5000
    gangs: int = 20
    gang_size: int = 500
    schedulers: tuple[str, ...] = ("pumice", "kube-scheduler", "volcano")
    workloads: tuple[str, ...] = ("basic", "gangs")
    job_pods: int = 1000  # replicas of the vcjob workload's one task
    job_min_available: int | None = None  # the Job's minAvailable; None: all its pods
    inline_controllers: bool = False  # pumice's controllers inside `pumice run --controllers`
    churn: bool = False
    churn_period: float = 10.0
    clients: int = 16
    runs: int = 1
    timeout: float | None = None  # per run, from the first create; None: by size
    startup_timeout: float = 120.0
    quiet: float | None = None  # wait before each run until others use fewer cores
    workdir: Path | None = None  # logs and control planes kept here; None: a temp dir
    k8s_dir: Path = DEFAULT_K8S
    log: Callable[[str], None] | None = None  # told each line of progress

    def volcano_dir(self) -> Path:
        return self.k8s_dir / "volcano-1.7"

    def pod_count(self, workload: str) -> int:
        if workload == "vcjob":
            return self.job_pods
        return self.pods if workload == "basic" else self.gangs * self.gang_size

    def run_timeout(self, workload: str) -> float:
        if self.timeout is not None:
            return self.timeout
        return 60.0 + self.pod_count(workload) / 10.0


@dataclass(slots=True)
class E2EResult:
    """One scheduler on one workload (see the module docstring for each figure)."""

    workload: str
    scheduler: str
    run: int
    nodes: int
    pods: int
    gangs: int = 0
    gang_size: int = 0
    churn: bool = False
    bound: int = 0
    pods_per_s: float | None = None
    all_bound_s: float | None = None
    create_s: float | None = None
    tail_s: float | None = None
    created_per_s: float | None = None
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None
    startup_s: float | None = None
    scheduler_cpu_s: float | None = None
    apiserver_cpu_s: float | None = None
    etcd_cpu_s: float | None = None
    driver_cpu_s: float | None = None
    machine_cpu_s: float | None = None  # the whole machine, busy, over the timed interval
    others_cpu_s: float | None = None  # of that, processes not part of the run
    load_avg: float | None = None  # 1-minute load average, the higher of start and end
    api_requests: dict[str, int] = field(default_factory=dict)  # during the timed interval
    scheduler_rss_mb: float | None = None
    apiserver_rss_mb: float | None = None
    gang_check: dict[str, Any] | None = None
    churn_writes: dict[str, int] | None = None
    create_retries: int = 0
    # vcjob: the Job's minAvailable, what ran the controllers, and the milestones
    # (seconds from the Job's create; see pumice.bench.e2e_vcjob)
    job_min_available: int = 0
    controllers: str = ""
    podgroup_created_s: float | None = None
    podgroup_inqueue_s: float | None = None
    first_pod_created_s: float | None = None
    last_pod_created_s: float | None = None
    first_bind_s: float | None = None
    last_bind_s: float | None = None
    controller_pods_per_s: float | None = None
    bind_pods_per_s: float | None = None
    controller_cpu_s: float | None = None
    controller_rss_mb: float | None = None
    problems: list[str] = field(default_factory=list)
    logs: str = ""

    @property
    def valid(self) -> bool:
        return not self.problems


__all__ = ["DEFAULT_K8S", "WORKLOADS", "E2EOptions", "E2EResult"]
