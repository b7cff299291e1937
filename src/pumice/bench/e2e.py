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
from dataclasses import asdict
from pathlib import Path

from pumice.bench import e2e_load as load
from pumice.bench import e2e_peers as peers
from pumice.bench.e2e_churn import NodeChurn
from pumice.bench.e2e_figures import Marks, fill_figures, server_pids
from pumice.bench.e2e_machine import wait_quiet
from pumice.bench.e2e_model import E2EOptions, E2EResult
from pumice.bench.e2e_proc import peak_rss_mb
from pumice.bench.e2e_watch import BindWatch
from pumice.cluster.kube_client import KubeClient
from pumice.sandbox.apply import apply
from pumice.sandbox.binaries import find_binary
from pumice.sandbox.controlplane import ControlPlane

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
    crds = peers.crd_files(peer, options.k8s_dir)
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
        before = Marks.take(plane, pids)
        made = load.create_all(client, objects, options.clients)
        say(f"{made.created} objects created in {made.finished - made.started:.1f}s")
        done = watch.wait(
            len(pods), options.run_timeout(workload) - (time.monotonic() - made.started)
        )
        after = Marks.take(plane, pids)
        fill_figures(result, made, len(pods), watch, before, after)
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


__all__ = [
    "run_e2e",
    "run_one",
    "runs",
    "summary",
]
