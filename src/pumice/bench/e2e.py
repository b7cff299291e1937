"""``pumice bench e2e``: pumice, kube-scheduler and Volcano against a real API server.

The in-memory scenarios time the scheduling core; this benchmark times the whole
scheduler as a user runs it: a separate OS process talking to a real kube-apiserver
(and etcd) over HTTPS, with informers, binds and status writes, side by side with
kube-scheduler and Volcano's vc-scheduler doing the same work on the same machine.

One *run* is one scheduler on one workload, on a fresh control plane of its own
(:mod:`pumice.sandbox.controlplane`):

1. set-up, not timed: the PodGroup CRDs and the ``default`` Queue (schedulers that read
   them), ``nodes`` fake nodes (:func:`pumice.sandbox.nodes.create_nodes`), the gangs'
   PodGroups; then the scheduler is started and is *up* once it has bound a warm-up pod
   (which is not counted); with ``churn``, node churn starts;
2. the clock: a watch on the benchmark's pods is opened, then the pods are created by
   ``clients`` parallel clients as fast as the API server takes them; the run ends
   when every pod is seen bound, or at the timeout;
3. figures (:class:`E2EResult`): first create to last bind (``all_bound_s``), bound pods
   per second of it (``pods_per_s``, as kube-scheduler's scheduler_perf counts), last
   create to last bind (``tail_s``: what the scheduler adds after the API server has
   taken the last pod), CPU seconds of the scheduler, the API server, etcd and this
   process over the timed interval, and peak resident sets (``VmHWM``).

Workloads: ``basic``, ``pods`` plain pods (for Volcano each gets a PodGroup of
minMember 1, created on the clock just before its pod, since Volcano's job controller,
which would make it, is not running; pumice takes a pod without a group as a job of
one); ``gangs``, ``gangs`` PodGroups of minMember
``gang_size`` with that many pods each, checked on the watch for partly bound gangs
(:mod:`pumice.bench.e2e_watch` says exactly what is checked). kube-scheduler has no
gangs and is skipped there. ``churn`` rewrites node statuses and labels during the run
(:mod:`pumice.bench.e2e_churn`). ``vcjob``, not run unless asked for: one
``batch.volcano.sh`` Job of ``job_pods`` pods through each peer's own controllers
(:mod:`pumice.bench.e2e_vcjob`); kube-scheduler has no Job controller and is skipped.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pumice.bench import e2e_load as load
from pumice.bench import e2e_peers as peers
from pumice.bench.e2e_churn import NodeChurn
from pumice.bench.e2e_machine import MachineMark, difference, request_counts, wait_quiet
from pumice.bench.e2e_proc import CpuMark, peak_rss_mb
from pumice.bench.e2e_watch import BindWatch, percentile
from pumice.cluster.kube_client import KubeClient
from pumice.documents import read_file
from pumice.errors import InputError
from pumice.sandbox.apply import apply
from pumice.sandbox.binaries import find_binary
from pumice.sandbox.controlplane import ControlPlane

WORKLOADS = ("basic", "gangs", "vcjob")
#: Where the shared binaries and Volcano's files are looked for when not given.
DEFAULT_K8S = Path(os.environ.get("PUMICE_K8S_DIR", "/work/shared/k8s"))
REPO = Path(__file__).resolve().parents[3]


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


# -- the control plane ------------------------------------------------------------------


@contextmanager
def control_plane(workdir: Path) -> Iterator[ControlPlane]:
    """A fresh etcd + kube-apiserver keeping its files in ``workdir``, stopped after."""
    plane = ControlPlane(workdir=workdir)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


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


def crd_files(peer: peers.Peer, k8s_dir: Path) -> list[Path]:
    """The CRD files for ``peer``: pumice's own (the files of ``deploy/`` holding only
    CRDs) when this is a source tree that has them, else Volcano's (the same API)."""
    volcano = sorted((k8s_dir / "volcano-1.7" / "crds").glob("*.yaml"))
    if peer.crds == "pumice":
        return [p for p in sorted((REPO / "deploy").glob("*.y*ml")) if _only_crds(p)] or volcano
    return volcano if peer.crds == "volcano" else []


def _only_crds(path: Path) -> bool:
    try:
        docs = read_file(path)
    except InputError:
        return False
    return bool(docs) and all(
        isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition" for d in docs
    )


# -- one run ----------------------------------------------------------------------------


def _objects(
    peer: peers.Peer, workload: str, options: E2EOptions
) -> tuple[list[dict], list[dict], dict[str, int]]:
    """(PodGroups made in set-up, objects made on the clock, PodGroup -> minMember).

    A plain pod for Volcano gets its PodGroup on the clock, created just before the pod
    by the same client: with Volcano's job controller running, that PodGroup would be
    made when the pod appears, so its cost is part of scheduling a pod there. A gang's
    PodGroup is made in set-up, as a job's is before its pods."""
    name = peer.scheduler_name
    if workload == "basic":
        width = len(str(options.pods - 1))
        names = [f"basic-{i:0{width}d}" for i in range(options.pods)]
        if peer.group_per_pod:
            pods = [load.pod(n, name, workload, group=n) for n in names]
            pgs = [load.podgroup(n, 1) for n in names]
            return [], load.interleave(pgs, pods), {n: 1 for n in names}
        return [], [load.pod(n, name, workload) for n in names], {}
    gw, pw = len(str(options.gangs - 1)), len(str(options.gang_size - 1))
    groups = {f"gang-{g:0{gw}d}": options.gang_size for g in range(options.gangs)}
    pods = [load.pod(f"{g}-{i:0{pw}d}", name, workload, group=g) for g in groups
            for i in range(options.gang_size)]  # fmt: skip
    return [load.podgroup(g, m) for g, m in groups.items()], pods, groups


def run_one(peer: peers.Peer, workload: str, options: E2EOptions, index: int,
            workdir: Path) -> E2EResult:  # fmt: skip
    """One scheduler on one workload on a fresh control plane (see the module)."""
    say = options.log or (lambda line: None)
    count = options.pod_count(workload)
    result = E2EResult(
        workload, peer.name, index, options.nodes, count, churn=options.churn,
        gangs=options.gangs if workload == "gangs" else 0,
        gang_size=options.gang_size if workload == "gangs" else 0,
        logs=str(workdir),
    )  # fmt: skip
    if workload == "vcjob":
        result.job_min_available = options.job_min_available or options.job_pods
    workdir.mkdir(parents=True, exist_ok=True)
    if options.quiet is not None:
        cores = wait_quiet(options.quiet)
        say(f"machine busy {cores:.2f} cores before the run")
    with control_plane(workdir / "controlplane") as plane:
        kubeconfig = Path(plane.kubeconfig)
        client = KubeClient.from_config(str(kubeconfig), pool_size=options.clients + 8)
        try:
            _run_on(plane, client, kubeconfig, peer, workload, options, result, workdir, say)
        finally:
            client.close()
    return result


def _run_on(plane: ControlPlane, client: KubeClient, kubeconfig: Path, peer: peers.Peer,
            workload: str, options: E2EOptions, result: E2EResult, workdir: Path,
            say: Callable[[str], None]) -> None:  # fmt: skip
    from pumice.sandbox.nodes import create_nodes

    if workload == "vcjob":
        from pumice.bench import e2e_vcjob

        e2e_vcjob.run_on(plane, client, kubeconfig, peer, options, result, workdir, say)
        return
    crds = crd_files(peer, options.k8s_dir)
    if crds:
        apply(kubeconfig, crds)
        load.ensure_queue(client)
    started = time.monotonic()
    nodes = create_nodes(client, options.nodes, workers=options.clients)
    say(f"{len(nodes)} nodes in {time.monotonic() - started:.1f}s")
    groups_setup, objects, groups = _objects(peer, workload, options)
    pods = [o for o in objects if o["kind"] == "Pod"]
    if groups_setup:
        made = load.create_all(client, groups_setup, options.clients)
        result.problems += made.errors[:5]
        say(f"{made.created} podgroups in {made.finished - made.started:.1f}s")
    warm = load.pod("warmup", peer.scheduler_name, "warmup", group="warmup" if peer.crds else None)
    warm["metadata"]["labels"] = {}
    if peer.crds:
        load.create_one(client, load.podgroup("warmup", 1))
    load.create_one(client, warm)

    conf = options.volcano_dir() / "volcano-scheduler.conf"
    cmd = peers.command(peer, kubeconfig, workdir, find_binary,
                        conf if conf.is_file() else None)  # fmt: skip
    proc = peers.start(cmd, workdir / f"{peer.name}.log")
    churn = None
    watch = None
    try:
        result.startup_s, why = load.wait_bound(
            client, "warmup", {"scheduler": proc}, options.startup_timeout
        )
        if why is not None:
            result.problems.append(why)
            return
        say(f"{peer.name} up in {result.startup_s:.1f}s")
        if options.churn:
            churn = NodeChurn(client, nodes, period=options.churn_period)
            churn.start()
        watch = BindWatch(client, workload, groups)
        watch.start()
        servers = server_pids(plane)
        pids = {"scheduler": proc.pid, "driver": os.getpid(), **servers}
        before = _Marks.take(plane, pids)
        made = load.create_all(client, objects, options.clients)
        say(f"{made.created} objects created in {made.finished - made.started:.1f}s")
        done = watch.wait(
            len(pods), options.run_timeout(workload) - (time.monotonic() - made.started)
        )
        after = _Marks.take(plane, pids)
        _figures(result, made, len(pods), watch, before, after)
        if not done:
            result.problems.append(f"{result.bound} of {len(pods)} pods bound by the timeout")
        if proc.poll() is not None:
            result.problems.append(f"scheduler exited with code {proc.returncode}")
        watch.settle(quiet=1.0, timeout=3.0)
        if groups and workload == "gangs":
            check = watch.gang_check()
            result.gang_check = asdict(check) | {"violations": check.violations}
            if check.violations:
                result.problems.append(
                    f"{check.violations} gangs partly bound "
                    f"(early: {len(check.early)}, at the end: {len(check.partial_at_end)})"
                )
        result.scheduler_rss_mb = peak_rss_mb(proc.pid)
        if "kube-apiserver" in servers:
            result.apiserver_rss_mb = peak_rss_mb(servers["kube-apiserver"])
        result.create_retries = made.retries
        result.problems += made.errors[:5]
        if watch.error:
            result.problems.append(watch.error)
    finally:
        if churn is not None:
            stats = churn.stop()
            result.churn_writes = asdict(stats)
        if watch is not None:
            watch.stop()
        peers.stop(proc)


@dataclass(frozen=True, slots=True)
class _Marks:
    """CPU of the processes timed, of the machine, and the API server's request
    counters, at one moment (CPU first: it is the one that must be taken at once)."""

    cpu: CpuMark
    machine: MachineMark
    requests: dict[str, float]

    @classmethod
    def take(cls, plane: ControlPlane, pids: dict[str, int]) -> _Marks:
        cpu, machine = CpuMark.take(pids), MachineMark.take()
        requests = request_counts(plane.server, str(plane.ca_file), plane.admin_token)
        return cls(cpu, machine, requests)


def _figures(
    result: E2EResult,
    made: load.Created,
    pods: int,
    watch: BindWatch,
    before: _Marks,
    after: _Marks,
) -> None:
    result.bound = len(watch.bound)
    last = watch.last_bind()
    result.create_s = made.finished - made.started
    result.created_per_s = pods / result.create_s if result.create_s > 0 else None
    if last is not None and result.bound:
        result.all_bound_s = last - made.started
        result.pods_per_s = result.bound / result.all_bound_s
        result.tail_s = last - made.finished
    lat = watch.latencies()
    result.latency_p50_s = percentile(lat, 0.5)
    result.latency_p99_s = percentile(lat, 0.99)
    cpu = after.cpu.since(before.cpu)
    result.scheduler_cpu_s = cpu.get("scheduler")
    result.apiserver_cpu_s = cpu.get("kube-apiserver")
    result.etcd_cpu_s = cpu.get("etcd")
    result.driver_cpu_s = cpu.get("driver")
    result.machine_cpu_s = after.machine.busy_s - before.machine.busy_s
    result.others_cpu_s = max(0.0, result.machine_cpu_s - sum(v or 0.0 for v in cpu.values()))
    result.load_avg = max(before.machine.load1, after.machine.load1)
    result.api_requests = difference(after.requests, before.requests)


# -- the whole benchmark ----------------------------------------------------------------


def runs(options: E2EOptions) -> list[tuple[str, peers.Peer]]:
    """(workload, scheduler) pairs in the order they run; kube-scheduler skips gangs and
    the Volcano Job (it has neither)."""
    out = []
    for workload in options.workloads:
        for name in options.schedulers:
            peer = peers.PEERS[name]
            if workload == "gangs" and not peer.gangs:
                continue
            if workload == "vcjob" and not peer.jobs:
                continue
            out.append((workload, peer))
    return out


def run_e2e(options: E2EOptions) -> list[E2EResult]:
    """Every (workload, scheduler) pair ``options.runs`` times, one run at a time, in
    rounds (each round runs every pair once)."""
    results = []
    packed = options.k8s_dir / "bin"
    if packed.is_dir() and not os.environ.get("PUMICE_K8S_BIN"):
        os.environ["PUMICE_K8S_BIN"] = str(packed)  # where find_binary looks first
    base = options.workdir
    temp = None
    if base is None:
        temp = tempfile.TemporaryDirectory(prefix="pumice-e2e-")
        base = Path(temp.name)
    try:
        for i in range(options.runs):  # round by round: a slow minute hits every scheduler
            for workload, peer in runs(options):
                tag = f"{workload}-{peer.name}-{i + 1}"
                if options.log:
                    options.log(f"{tag}: starting")
                r = run_one(peer, workload, options, i + 1, base / tag)
                if options.log:
                    options.log(f"{tag}: {summary(r)}")
                results.append(r)
    finally:
        if temp is not None:
            temp.cleanup()
    return results


def summary(r: E2EResult) -> str:
    if r.pods_per_s is None:
        return "; ".join(r.problems) or "no pod bound"
    text = f"{r.bound}/{r.pods} bound, {r.pods_per_s:.0f} pods/s, all bound {r.all_bound_s:.1f}s"
    return text + ("" if r.valid else "; " + "; ".join(r.problems))


__all__ = ["WORKLOADS", "E2EOptions", "E2EResult", "run_e2e", "run_one", "runs", "summary"]
