"""The ``vcjob`` workload of ``pumice bench e2e``: one Volcano Job, through the controllers.

The other workloads create pods; this one creates a single ``batch.volcano.sh/v1alpha1``
Job (one task of ``job_pods`` replicas) and times everything that follows from it, as a
user submitting a Job sees it: the Job controller makes the PodGroup, the scheduler's
``enqueue`` admits it (``Inqueue``), the controller then creates the pods, and the
scheduler binds them. Each peer runs its own controllers beside its scheduler, as two
processes: ``pumice controllers`` + ``pumice run`` (or ``pumice run --controllers``, one
process, with ``inline_controllers``), or Volcano's ``vc-controller-manager`` +
``vc-scheduler`` (1.7 runs without its admission webhooks: the Job is written with every
field the mutating webhook would default).

Milestones, seconds from the moment the Job's create was sent (:class:`Milestones`):
PodGroup created and ``Inqueue`` (seen on a watch of PodGroups owned by the Job), first
and last pod created, first and last pod bound (the pods' watch,
:class:`~pumice.bench.e2e_watch.BindWatch`). From them, two rates say where the time
goes: the controller's pods created per second (first to last pod created) and the
scheduler's binds per second (first to last bind). With ``minAvailable`` equal to the
replicas (the default: a gang, what a Volcano Job is for) nothing can be bound before
the last pod exists, so the two phases add up; with ``minAvailable`` 1 binding overlaps
creation, and the bind rate is bounded by the creation rate.

A warm-up Job of one pod, bound before the clock starts, proves both processes up.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pumice.bench import e2e_load as load
from pumice.bench import e2e_peers as peers
from pumice.bench.e2e_watch import WATCH_SECONDS, BindWatch, GroupWatch
from pumice.cluster.kube_client import RESOURCES, ApiUnavailable, KubeClient, status_message

WORKLOAD = "vcjob"
JOB = "bench-job"
TASK = "worker"
WARM_JOB = "warmup"
#: A PodGroup in one of these phases has been admitted by the scheduler's enqueue.
ADMITTED = frozenset({"Inqueue", "Running"})
#: What runs the controllers and the scheduler, by peer, as the report names it.
CONTROLLED_BY = {
    "pumice": "pumice controllers + pumice run",
    "volcano": "vc-controller-manager + vc-scheduler",
}


def job(name: str, scheduler_name: str, replicas: int, min_available: int,
        workload: str | None = WORKLOAD) -> dict[str, Any]:  # fmt: skip
    """A Volcano Job of one task, its pods like the other workloads' (small requests,
    the bench label when ``workload`` is given). Every field Volcano's mutating webhook
    would default is set, so vc-controller-manager runs it without the webhook."""
    template = load.pod("x", scheduler_name, workload or "")
    meta: dict[str, Any] = {"labels": {load.LABEL: workload}} if workload else {}
    spec = template["spec"]
    spec["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": load.NAMESPACE},
        "spec": {
            "schedulerName": scheduler_name,
            "queue": load.QUEUE,
            "minAvailable": min_available,
            "maxRetry": 3,
            "tasks": [
                {
                    "name": TASK,
                    "replicas": replicas,
                    "minAvailable": min(min_available, replicas),
                    "template": {"metadata": meta, "spec": spec},
                }
            ],
        },
    }


def podgroup_name(job_obj: dict[str, Any]) -> str:
    """``<job>-<uid>``: the PodGroup both controllers make for a Job."""
    meta = job_obj.get("metadata") or {}
    return f"{meta.get('name')}-{meta.get('uid')}"


def controller_command(peer: peers.Peer, kubeconfig: Path,
                       binary: Callable[[str], Path]) -> list[str]:  # fmt: skip
    """The command that runs ``peer``'s controllers on their own, configured as the
    schedulers are (client rate 5,000 QPS for Volcano; its default, 50, would be the
    limit)."""
    if peer.name == "pumice":
        import sys

        return [sys.executable, "-m", "pumice.cli", "controllers", "--kubeconfig", str(kubeconfig),
                "--scheduler-name", peer.scheduler_name]  # fmt: skip
    if peer.controller_binary is None:
        raise KeyError(f"{peer.name} runs no controllers")
    return [str(binary(peer.controller_binary)), f"--kubeconfig={kubeconfig}",
            f"--scheduler-name={peer.scheduler_name}", f"--kube-api-qps={peers.QPS}",
            f"--kube-api-burst={peers.QPS}",
            f"--healthz-address=127.0.0.1:{peers.free_port()}"]  # fmt: skip


# -- the PodGroup's side ----------------------------------------------------------------


class PodGroupWatch:
    """When the PodGroup of Job ``job`` was first seen, and first seen admitted
    (monotonic seconds, this process's clock, as the pods' watch)."""

    def __init__(self, client: KubeClient, job: str) -> None:
        self.client = client
        self.job = job
        self.created: float | None = None
        self.admitted: float | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="podgroup-watch", daemon=True)
        self._rv = ""

    def start(self) -> None:
        status, body = self.client.request("GET", RESOURCES["PodGroup"].path(load.NAMESPACE))
        if status != 200:
            raise RuntimeError(f"list podgroups: HTTP {status}: {status_message(body)}")
        for item in body.get("items") or []:
            self._observe(item, time.monotonic())
        self._rv = str(body["metadata"]["resourceVersion"])
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        path = RESOURCES["PodGroup"].path(load.NAMESPACE)
        query = {"watch": True, "resourceVersion": self._rv, "allowWatchBookmarks": True,
                 "timeoutSeconds": WATCH_SECONDS}  # fmt: skip
        try:
            for status, event in self.client.stream(path, query, timeout=WATCH_SECONDS + 60):
                now = time.monotonic()
                if status != 200 or event.get("type") == "ERROR":
                    self.error = f"podgroup watch: HTTP {status}: {status_message(event)}"
                    return
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._observe(event.get("object") or {}, now)
                if self._stop.is_set():
                    return
        except ApiUnavailable as err:
            if not self._stop.is_set():
                self.error = f"podgroup watch broke: {err}"

    def _observe(self, obj: dict[str, Any], now: float) -> None:
        owners = (obj.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("kind") == "Job" and o.get("name") == self.job for o in owners):
            return
        if self.created is None:
            self.created = now
        if self.admitted is None and (obj.get("status") or {}).get("phase") in ADMITTED:
            self.admitted = now


@dataclass(frozen=True, slots=True)
class Milestones:
    """Seconds from the Job's create (see the module docstring); None: not reached."""

    podgroup_created_s: float | None
    podgroup_inqueue_s: float | None
    first_pod_created_s: float | None
    last_pod_created_s: float | None
    first_bind_s: float | None
    last_bind_s: float | None
    controller_pods_per_s: float | None  # pods created, first to last
    bind_pods_per_s: float | None  # pods bound, first to last

    @classmethod
    def of(cls, start: float, pgs: PodGroupWatch, watch: BindWatch) -> Milestones:
        with watch._cond:  # (the watch's own lock: its dicts grow on its thread)
            added = sorted(watch.added.values())
            bound = sorted(watch.bound.values())

        def since(t: float | None) -> float | None:
            return None if t is None else t - start

        def rate(times: list[float]) -> float | None:
            span = times[-1] - times[0] if len(times) > 1 else 0.0
            return (len(times) - 1) / span if span > 0 else None

        return cls(
            since(pgs.created), since(pgs.admitted),
            since(added[0] if added else None), since(added[-1] if added else None),
            since(bound[0] if bound else None), since(bound[-1] if bound else None),
            rate(added), rate(bound),
        )  # fmt: skip


# -- one run ----------------------------------------------------------------------------


def run_on(plane: Any, client: KubeClient, kubeconfig: Path, peer: peers.Peer, options: Any,
           result: Any, workdir: Path, say: Callable[[str], None]) -> None:  # fmt: skip
    """The vcjob workload on a fresh control plane (``options``: E2EOptions,
    ``result``: the E2EResult to fill)."""
    from pumice.bench.e2e_figures import Marks, fill_figures, server_pids
    from pumice.bench.e2e_proc import peak_rss_mb
    from pumice.sandbox.binaries import find_binary
    from pumice.sandbox.nodes import create_nodes

    apply_crds(kubeconfig, peers.crd_files(peer, options.k8s_dir))
    load.ensure_queue(client)
    started = time.monotonic()
    nodes = create_nodes(client, options.nodes, workers=options.clients)
    say(f"{len(nodes)} nodes in {time.monotonic() - started:.1f}s")
    pods, minimum = options.job_pods, result.job_min_available
    error = load.create_one(client, job(WARM_JOB, peer.scheduler_name, 1, 1, workload=None))
    if error is not None:
        result.problems.append(f"warm-up Job: {error}")
        return

    conf = options.volcano_dir() / "volcano-scheduler.conf"
    cmd = peers.command(peer, kubeconfig, workdir, find_binary,
                        conf if conf.is_file() else None)  # fmt: skip
    procs: dict[str, subprocess.Popen[bytes]] = {}
    pgs = watch = None
    try:
        if options.inline_controllers and peer.name == "pumice":
            result.controllers = "pumice run --controllers"
            procs["scheduler"] = peers.start([*cmd, "--controllers"], workdir / "pumice.log")
        else:
            result.controllers = CONTROLLED_BY.get(peer.name, peer.name)
            ctl = controller_command(peer, kubeconfig, find_binary)
            procs["controllers"] = peers.start(ctl, workdir / f"{peer.name}-controllers.log")
            procs["scheduler"] = peers.start(cmd, workdir / f"{peer.name}.log")
        result.startup_s, why = load.wait_bound(
            client, f"{WARM_JOB}-{TASK}-0", procs, options.startup_timeout, "warm-up Job's pod"
        )
        if why is not None:
            result.problems.append(why)
            return
        say(f"{peer.name} and its controllers up in {result.startup_s:.1f}s")
        watch = BindWatch(client, WORKLOAD, {})
        watch.start()
        pgs = PodGroupWatch(client, JOB)
        pgs.start()
        servers = server_pids(plane)
        pids = {name: p.pid for name, p in procs.items()} | {"driver": os.getpid(), **servers}
        before = Marks.take(plane, pids)
        made = load.Created(started=time.monotonic())
        status, body = client.request(
            "POST", RESOURCES["Job"].path(load.NAMESPACE),
            body=job(JOB, peer.scheduler_name, pods, minimum),
        )  # fmt: skip
        made.finished = time.monotonic()
        if status not in (200, 201):
            result.problems.append(f"Job {JOB}: HTTP {status}: {status_message(body)}")
            return
        made.created = 1
        # Pods come only once the PodGroup is Inqueue, well after this: the gang
        # check learns the group before its first pod.
        group = podgroup_name(body)
        watch.groups[group] = GroupWatch(minimum)
        done = watch.wait(pods, options.run_timeout(WORKLOAD) - (time.monotonic() - made.started))
        after = Marks.take(plane, pids)
        fill_figures(result, made, pods, watch, before, after)
        marks = Milestones.of(made.started, pgs, watch)
        for name, value in asdict(marks).items():
            setattr(result, name, value)
        _pod_figures(result, marks, pods)
        cpu = after.cpu.since(before.cpu)
        result.controller_cpu_s = cpu.get("controllers")
        if not done:
            result.problems.append(f"{result.bound} of {pods} pods bound by the timeout")
        for name, proc in procs.items():
            if proc.poll() is not None:
                result.problems.append(f"{name} exited with code {proc.returncode}")
        watch.settle(quiet=1.0, timeout=3.0)
        check = watch.gang_check()
        result.gang_check = asdict(check) | {"violations": check.violations}
        if check.violations:
            result.problems.append(f"the Job's gang was partly bound "
                                   f"(early: {len(check.early)}, at the end: "
                                   f"{len(check.partial_at_end)})")  # fmt: skip
        result.scheduler_rss_mb = peak_rss_mb(procs["scheduler"].pid)
        if "controllers" in procs:
            result.controller_rss_mb = peak_rss_mb(procs["controllers"].pid)
        if "kube-apiserver" in servers:
            result.apiserver_rss_mb = peak_rss_mb(servers["kube-apiserver"])
        for seen in (watch, pgs):
            if seen.error:
                result.problems.append(seen.error)
    finally:
        for w in (watch, pgs):
            if w is not None:
                w.stop()
        for proc in procs.values():
            peers.stop(proc)


def _pod_figures(result: Any, marks: Milestones, pods: int) -> None:
    """The pods-side figures of the table, for pods the controller creates: *created/s*
    is the controller's rate, *create s* the Job's create to the last pod created, the
    tail the last pod created to the last bind."""
    result.created_per_s = marks.controller_pods_per_s
    result.create_s = marks.last_pod_created_s
    if marks.last_bind_s is not None and marks.last_pod_created_s is not None:
        result.tail_s = marks.last_bind_s - marks.last_pod_created_s


def apply_crds(kubeconfig: Path, files: list[Path]) -> None:
    from pumice.sandbox.apply import apply

    if files:
        apply(kubeconfig, files)


# -- the report -------------------------------------------------------------------------

HEADER = ("scheduler + controllers", "nodes / pods", "minAvailable", "runs", "pods/s",
          "PodGroup created s", "Inqueue s", "first pod s", "last pod s", "first bind s",
          "all bound s", "controller pods/s", "binds/s", "controller CPU s",
          "scheduler CPU s", "API server CPU s", "valid")  # fmt: skip


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table_rows(results: list[Any]) -> list[list[str]]:
    return [
        [r.controllers or r.scheduler, f"{r.nodes:,} / {r.pods:,}",
         f"{r.job_min_available:,}", str(r.run),
         _num(r.pods_per_s, 0), _num(r.podgroup_created_s, 2), _num(r.podgroup_inqueue_s, 2),
         _num(r.first_pod_created_s, 2), _num(r.last_pod_created_s, 2),
         _num(r.first_bind_s, 2), _num(r.all_bound_s, 2), _num(r.controller_pods_per_s, 0),
         _num(r.bind_pods_per_s, 0), _num(r.controller_cpu_s), _num(r.scheduler_cpu_s),
         _num(r.apiserver_cpu_s), "yes" if r.valid else "NO"]
        for r in results
    ]  # fmt: skip


__all__ = [
    "JOB",
    "WORKLOAD",
    "Milestones",
    "PodGroupWatch",
    "controller_command",
    "job",
    "podgroup_name",
    "run_on",
    "table_rows",
]
