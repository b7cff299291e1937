"""The figures of one end-to-end run, from what is marked just before the clock starts
and just after it stops (:class:`Marks`), and from the watch of binds.

Both workloads of :mod:`pumice.bench.e2e` (plain pods and gangs, and the vcjob
workload of :mod:`pumice.bench.e2e_vcjob`) fill their :class:`E2EResult` with
:func:`fill_figures`, so that their figures are taken alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pumice.bench import e2e_load as load
from pumice.bench.e2e_machine import MachineMark, difference, request_counts
from pumice.bench.e2e_model import E2EResult
from pumice.bench.e2e_proc import CpuMark
from pumice.bench.e2e_watch import BindWatch
from pumice.bench.measure import percentile
from pumice.sandbox.controlplane import ControlPlane


def server_pids(plane: ControlPlane) -> dict[str, int]:
    """Process ids of the plane's ``kube-apiserver`` and ``etcd``, found in ``/proc`` by
    the ports they serve (the pids themselves are the plane's private business)."""
    wanted = {
        "kube-apiserver": f"--secure-port={plane.port}".encode(),
        "etcd": f"http://127.0.0.1:{plane.etcd_port}".encode(),
    }
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or argv[0].endswith(b"setpriv"):
            continue  # (setpriv execs its command: this is a moment before that)
        for name, mark in wanted.items():
            if Path(argv[0].decode(errors="replace")).name == name and mark in argv:
                found[name] = int(entry.name)
    return found


@dataclass(frozen=True, slots=True)
class Marks:
    """CPU of the processes timed, of the machine, and the API server's request
    counters, at one moment (CPU first: it is the one that must be taken at once)."""

    cpu: CpuMark
    machine: MachineMark
    requests: dict[str, float]

    @classmethod
    def take(cls, plane: ControlPlane, pids: dict[str, int]) -> Marks:
        cpu, machine = CpuMark.take(pids), MachineMark.take()
        requests = request_counts(plane.server, str(plane.ca_file), plane.admin_token)
        return cls(cpu, machine, requests)


def fill_figures(
    result: E2EResult,
    made: load.Created,
    pods: int,
    watch: BindWatch,
    before: Marks,
    after: Marks,
) -> None:
    """The run's figures into ``result``: ``made`` is how the timed objects were created
    (``pods`` of them pods), ``watch`` what it saw bound, ``before`` and ``after`` the
    marks taken around the clock."""
    result.bound = len(watch.bound)
    last = watch.last_bind()
    result.create_s = made.finished - made.started
    result.created_per_s = pods / result.create_s if result.create_s > 0 else None
    if last is not None and result.bound:
        result.all_bound_s = last - made.started
        result.pods_per_s = result.bound / result.all_bound_s
        result.tail_s = last - made.finished
    lat = watch.latencies()
    result.latency_p50_s = percentile(lat, 50) if lat else None
    result.latency_p99_s = percentile(lat, 99) if lat else None
    cpu = after.cpu.since(before.cpu)
    result.scheduler_cpu_s = cpu.get("scheduler")
    result.apiserver_cpu_s = cpu.get("kube-apiserver")
    result.etcd_cpu_s = cpu.get("etcd")
    result.driver_cpu_s = cpu.get("driver")
    result.machine_cpu_s = after.machine.busy_s - before.machine.busy_s
    result.others_cpu_s = max(0.0, result.machine_cpu_s - sum(v or 0.0 for v in cpu.values()))
    result.load_avg = max(before.machine.load1, after.machine.load1)
    result.api_requests = difference(after.requests, before.requests)


__all__ = ["Marks", "fill_figures", "server_pids"]
