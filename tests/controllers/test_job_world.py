"""A small world for the Job controller's tests: a MemoryCluster on a virtual clock, the
controller under a Manager, a stand-in for the scheduler (admit a PodGroup, or run
pumice's own Scheduler over a SchedulerCache of the same cluster) and a kubelet that
moves pods Pending -> Running -> Succeeded/Failed. Other test_job_* modules import it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from tests.kit import node, queue

from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.controllers.job.controller import JobController
from pumice.controllers.manager import Manager
from pumice.controllers.store import MemoryStore
from pumice.scheduler import Scheduler

JOBS = Path(__file__).parents[1] / "data" / "jobs"
TEST_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nTEST-ONLY\n-----END RSA PRIVATE KEY-----\n",
    "ssh-rsa AAAATESTONLY\n",
)


def fixed_keygen() -> tuple[str, str]:
    """A fixed, fake key pair: fast and repeatable (never a real key)."""
    return TEST_KEY


def manifest(name: str) -> dict[str, Any]:
    """The first document of ``tests/data/jobs/<name>.yaml``."""
    return next(yaml.safe_load_all((JOBS / f"{name}.yaml").read_text()))


def job_yaml(text: str) -> dict[str, Any]:
    return yaml.safe_load(text)


class World:
    """The cluster, the controller and the stand-ins (see the module docstring)."""

    def __init__(self, *, nodes: int = 4, cpu: str = "8", queues: tuple = ("default",)) -> None:
        self.t = 1_767_225_600.0  # 2026-01-01T00:00:00Z
        self.cluster = MemoryCluster(clock=lambda: self.t)
        self.store = MemoryStore(self.cluster)
        for q in queues:
            self.cluster.create(queue(q) if isinstance(q, str) else q)
        for i in range(nodes):
            self.cluster.create(node(f"n{i}", cpu=cpu, memory="32Gi"))
        self.ctl = JobController(self.store, keygen=fixed_keygen)
        self.mgr = Manager(self.store, [self.ctl])
        self._cache: SchedulerCache | None = None

    # -- driving ----------------------------------------------------------------------

    def step(self) -> int:
        return self.mgr.step()

    def submit(self, job: dict[str, Any]) -> str:
        made = self.store.create(job)
        assert made is not None
        self.step()
        return f"{made['metadata']['namespace']}/{made['metadata']['name']}"

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self.step()

    def until_due(self) -> None:
        """Move the clock to the next requeue the manager holds, and step."""
        due = self.mgr.next_due()
        assert due is not None, "nothing is due"
        self.t = max(self.t, due)
        self.step()

    def admit(self, key: str, phase: str = "Inqueue") -> None:
        """What the scheduler's enqueue does: the job's PodGroup turns ``phase``."""
        pg = self.podgroup(key)
        assert pg is not None, f"{key} has no PodGroup"
        ns = pg["metadata"]["namespace"]
        self.store.patch(
            "PodGroup", f"{ns}/{pg['metadata']['name']}", {"status": {"phase": phase}},
            subresource="status",
        )  # fmt: skip
        self.step()

    def schedule(self, cycles: int = 1) -> None:
        """Cycles of pumice's own scheduler (enqueue, allocate) over this cluster."""
        if self._cache is None:
            self._cache = SchedulerCache(self.cluster, clock=lambda: self.t)
        sched = Scheduler.from_file(None)
        for _ in range(cycles):
            self._cache.apply(sched.cycle(self._cache.snapshot()))
            self.step()

    # -- the kubelet ------------------------------------------------------------------

    def set_phase(
        self, pod_key: str, phase: str, *, exit_code: int | None = None, restarts: int = 0
    ) -> None:
        def change(pod: dict[str, Any]) -> None:
            status = pod.setdefault("status", {})
            status["phase"] = phase
            cs: dict[str, Any] = {"name": "c", "restartCount": restarts}
            if exit_code is not None:
                cs["state"] = {"terminated": {"exitCode": exit_code}}
            status["containerStatuses"] = [cs]

        assert self.cluster.modify("Pod", pod_key, change), pod_key
        self.step()

    def run_all(self, key: str) -> None:
        """Every Pending pod of the job runs (bound or not: the kubelet is lenient)."""
        for p in self.pods(key):
            if (p.get("status") or {}).get("phase") == "Pending":
                self.set_phase(_k(p), "Running")

    def finish_all(self, key: str, task: str | None = None, phase: str = "Succeeded") -> None:
        for p in self.pods(key):
            mine = task is None or p["metadata"]["annotations"]["volcano.sh/task-spec"] == task
            if mine and p["status"]["phase"] in ("Pending", "Running"):
                self.set_phase(_k(p), phase, exit_code=0 if phase == "Succeeded" else 1)

    # -- reading ----------------------------------------------------------------------

    def job(self, key: str) -> dict[str, Any] | None:
        return self.store.get("Job", key)

    def phase(self, key: str) -> str:
        job = self.job(key)
        assert job is not None
        return ((job.get("status") or {}).get("state") or {}).get("phase", "")

    def status(self, key: str) -> dict[str, Any]:
        job = self.job(key)
        assert job is not None
        return job.get("status") or {}

    def podgroup(self, key: str) -> dict[str, Any] | None:
        job = self.job(key)
        if job is None:
            return None
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        return self.store.get("PodGroup", f"{ns}/{name}-{job['metadata']['uid']}")

    def pods(self, key: str) -> list[dict[str, Any]]:
        ns, name = key.split("/")
        return [
            p
            for p in self.store.list("Pod")
            if p["metadata"]["namespace"] == ns
            and (p["metadata"].get("annotations") or {}).get("volcano.sh/job-name") == name
        ]

    def pod_names(self, key: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.pods(key))

    def events(self, key: str) -> list[dict[str, Any]]:
        ns, name = key.split("/")
        return [
            e
            for e in self.store.list("Event")
            if e["involvedObject"]["name"] == name and e["involvedObject"]["namespace"] == ns
        ]

    def command(self, key: str, action: str, name: str = "") -> None:
        job = self.job(key)
        assert job is not None
        ns, jname = key.split("/")
        self.store.create(
            {
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {"name": name or f"{jname}-{action.lower()}", "namespace": ns},
                "action": action,
                "target": {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": jname,
                    "uid": job["metadata"]["uid"],
                },
            }
        )
        self.step()


def _k(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def test_world_kubelet_moves_a_pod():
    """The stand-in kubelet changes a pod's phase and exit code, and the controller
    hears of it."""
    w = World()
    key = w.submit(manifest("mpi-example"))
    w.admit(key)
    first = w.pods(key)[0]
    w.set_phase(_k(first), "Failed", exit_code=3)
    pod = w.store.get("Pod", _k(first))
    assert pod is not None
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    assert w.status(key)["failed"] == 1
