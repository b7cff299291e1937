"""Tests for the kubelet and job-controller model: start, run, end, evict, restart."""

from __future__ import annotations

from pumice.cluster.memory import MemoryCluster
from pumice.sim.clock import Clock
from pumice.sim.kubelet import Kubelet
from pumice.sim.metrics import Metrics
from pumice.sim.workload import GPU, JobSpec, QueueSpec, TaskSpec

GiB = float(2**30)


def _setup(job: JobSpec, startup: float = 5.0, grace: float = 30.0, on_admission=False):
    clock = Clock()
    store = MemoryCluster(clock=lambda: clock.now)
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", GPU: "8"}},
        }
    )
    metrics = Metrics({"cpu": 64000.0, "memory": 256 * GiB, GPU: 8.0}, [QueueSpec("q")])
    changes: list[float] = []
    kubelet = Kubelet(
        store,
        clock,
        metrics,
        on_change=lambda: changes.append(clock.now),
        startup_delay=startup,
        grace=grace,
        pods_on_admission=on_admission,
    )
    kubelet.schedule_arrival(job)
    return clock, store, metrics, kubelet, changes


def _job(**kw) -> JobSpec:
    base = dict(
        name="j",
        namespace="default",
        queue="q",
        arrival=10.0,
        duration=100.0,
        tasks=(TaskSpec("worker", 2, {"cpu": 1000.0, GPU: 1.0}),),
        min_available=2,
    )
    base.update(kw)
    return JobSpec(**base)


def _run_until(clock: Clock, kubelet: Kubelet, t: float) -> None:
    while len(clock) and clock.peek() <= t:
        _, ev = clock.pop()
        kubelet.handle(ev)


def _bind_all(store: MemoryCluster, kubelet: Kubelet) -> None:
    for key in [k for k, p in store.objects["Pod"].items() if not p["spec"].get("nodeName")]:
        assert store.bind(key, "n1")
    kubelet.sync()


def test_pod_lifecycle_and_job_end():
    """Arrival creates group and pods; bound pods run after the startup delay for the
    duration; the job then ends and its objects are deleted."""
    job = _job()
    clock, store, metrics, kubelet, changes = _setup(job)
    _run_until(clock, kubelet, 10.0)
    assert set(store.objects["Pod"]) == {"default/j-worker-0", "default/j-worker-1"}
    assert store.get("PodGroup", "default/j")["status"]["phase"] == "Pending"
    assert changes == [10.0]
    clock.now = 12.0
    _bind_all(store, kubelet)
    _run_until(clock, kubelet, 17.0)
    assert store.get("Pod", "default/j-worker-0")["status"]["phase"] == "Running"
    _run_until(clock, kubelet, 1000.0)
    assert not store.objects["Pod"] and not store.objects["PodGroup"]
    rec = metrics.jobs["default/j"]
    assert (rec.submit, rec.start, rec.running_at, rec.end) == (10.0, 12.0, 17.0, 117.0)
    assert rec.wait == 2.0 and rec.completion == 107.0
    assert metrics.used.sum() == 0.0


def test_failing_job_ends_early_with_failed_pods():
    """A job whose outcome is fail ends after end_fraction of its duration."""
    job = _job(outcome="fail", end_fraction=0.25)
    clock, store, metrics, kubelet, _ = _setup(job)
    _run_until(clock, kubelet, 10.0)
    _bind_all(store, kubelet)
    w = store.watch(("Pod",))
    _run_until(clock, kubelet, 1000.0)
    phases = {e.obj["status"]["phase"] for e in w.drain() if e.type == "MODIFIED"}
    assert "Failed" in phases and "Succeeded" not in phases
    assert metrics.jobs["default/j"].end == 10.0 + 5.0 + 25.0


def test_evicted_job_restarts_and_counts_lost_work():
    """Evicting one pod terminates the whole job; after the grace period its pods are
    created again (group back to Pending); the restart and lost work are counted."""
    job = _job()
    clock, store, metrics, kubelet, _ = _setup(job, grace=30.0)
    _run_until(clock, kubelet, 10.0)
    _bind_all(store, kubelet)
    _run_until(clock, kubelet, 55.0)  # running since 15
    clock.now = 55.0
    store.update_podgroup_status("default/j", "Running")
    assert store.evict("default/j-worker-0", "preempted")
    kubelet.sync()
    other = store.get("Pod", "default/j-worker-1")
    assert other["metadata"]["deletionTimestamp"] == 55.0  # the rest of the gang goes too
    _run_until(clock, kubelet, 85.0)
    pods = store.objects["Pod"]
    assert set(pods) == {"default/j-worker-0", "default/j-worker-1"}
    assert all(not p["spec"].get("nodeName") for p in pods.values())  # new, pending pods
    assert store.get("PodGroup", "default/j")["status"]["phase"] == "Pending"
    rec = metrics.jobs["default/j"]
    assert (rec.restarts, rec.evictions, rec.lost) == (1, 1, 80.0)  # 2 pods x 40 s
    assert metrics.used.sum() == 0.0
    clock.now = 90.0
    _bind_all(store, kubelet)
    _run_until(clock, kubelet, 1000.0)
    assert rec.end == 90.0 + 5.0 + 100.0
    assert rec.start == 12.0 or rec.start is not None


def test_pods_are_created_when_the_podgroup_is_admitted():
    """As Volcano's job controller: a job waiting for admission has a PodGroup and no
    pods; admission (Inqueue) creates them; a restart after an eviction sends the group
    back to Pending and the pods come again only with the next admission."""
    job = _job()
    clock, store, _metrics, kubelet, _changes = _setup(job, on_admission=True)
    _run_until(clock, kubelet, 10.0)
    assert set(store.objects["PodGroup"]) == {"default/j"}
    assert not store.objects["Pod"]
    kubelet.sync()
    assert not store.objects["Pod"]  # nothing admitted yet
    store.update_podgroup_status("default/j", "Inqueue", ())
    kubelet.sync()
    assert set(store.objects["Pod"]) == {"default/j-worker-0", "default/j-worker-1"}
    _bind_all(store, kubelet)
    _run_until(clock, kubelet, 20.0)
    assert store.evict("default/j-worker-0", "test")
    kubelet.sync()
    _run_until(clock, kubelet, 100.0)  # grace periods over: the pods are gone
    assert store.objects["PodGroup"]["default/j"]["status"]["phase"] == "Pending"
    assert not store.objects["Pod"]
    store.update_podgroup_status("default/j", "Inqueue", ())
    kubelet.sync()
    assert len(store.objects["Pod"]) == 2
