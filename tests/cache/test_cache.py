"""Tests for the scheduler cache: incremental snapshots equal rebuilt ones; decisions
are carried out through the cluster protocol."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
from tests.kit import node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cache.load import load_objects
from pumice.cluster.memory import MemoryCluster
from pumice.scheduler import Scheduler

EXAMPLE = Path(__file__).parents[2] / "src" / "pumice" / "examples" / "gpu-cluster.yaml"


def _decide(snapshot):
    return Scheduler.from_file(None).cycle(snapshot).to_json(sessions=False)


def _rebuilt(store: MemoryCluster):
    objs = []
    for kind in ("Node", "Pod", "PodGroup", "Queue", "PriorityClass"):
        objs += [SourcedObject(copy.deepcopy(o)) for o in store.list(kind)]
    return build_snapshot(objs)


def _same(a, b) -> None:
    assert a.space.names == b.space.names
    assert a.nodes.names == b.nodes.names
    for attr in ("idle", "used", "releasing", "pipelined", "nonzero"):
        assert np.array_equal(getattr(a.nodes, attr), getattr(b.nodes, attr)), attr
    assert sorted(a.jobs) == sorted(b.jobs)
    for uid, ja in a.jobs.items():
        jb = b.jobs[uid]
        assert (ja.phase, ja.min_available, ja.queue, ja.priority) == (
            jb.phase,
            jb.min_available,
            jb.queue,
            jb.priority,
        )
        assert np.array_equal(ja.allocated, jb.allocated)
        assert {t: (x.status, x.node) for t, x in ja.tasks.items()} == {
            t: (x.status, x.node) for t, x in jb.tasks.items()
        }
    assert sorted(a.blocked) == sorted(b.blocked)
    # The cache's per-queue sums, kept job by job, equal sums taken afresh.
    (na, qa), (nb, qb) = a.job_ledger().matrices(a.queues), b.job_ledger().matrices(b.queues)
    assert na == nb
    for field in ("jobs", "allocated", "pending", "inqueue", "elastic"):
        assert np.array_equal(getattr(qa, field), getattr(qb, field)), field


def test_cache_snapshot_decides_like_build_snapshot():
    """The example cluster gives the same decisions through the cache as through
    ``pumice cycle``'s snapshot builder."""
    objects = [s.obj for s in load_objects([str(EXAMPLE)])]
    store = MemoryCluster()
    store.create_all(copy.deepcopy(objects))
    cache = SchedulerCache(store)
    _same(cache.snapshot(), build_snapshot([SourcedObject(o) for o in objects]))
    assert _decide(cache.snapshot()) == _decide(build_snapshot([SourcedObject(o) for o in objects]))


def test_incremental_updates_match_a_rebuild():
    """After binds, phase changes, evictions and deletions, the incrementally kept
    snapshot equals one rebuilt from the store's objects."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", nvidia_gpu="8"), node("n2", nvidia_gpu="8")])
    cache = SchedulerCache(store)
    store.create(podgroup("g", min_member=2, phase="Pending"))
    for i in range(3):
        store.create(pod(f"g-w-{i}", group="g", gpu="4"))
    store.create(pod("loner"))
    snap = cache.snapshot()
    _same(snap, _rebuilt(store))
    decisions = Scheduler.from_file(None).cycle(snap)
    applied = cache.apply(decisions)
    assert len(applied.bound) >= 2 and not applied.refused
    _same(cache.snapshot(), _rebuilt(store))
    store.set_pod_phase("default/g-w-0", "Running")
    store.evict("default/g-w-1")
    store.delete("Pod", "default/loner")
    _same(cache.snapshot(), _rebuilt(store))
    store.delete("Pod", "default/g-w-1")
    store.set_pod_phase("default/g-w-0", "Succeeded")
    _same(cache.snapshot(), _rebuilt(store))


def test_snapshots_are_independent():
    """A cycle changes its snapshot; the next snapshot is untouched by it."""
    store = MemoryCluster()
    store.create_all(
        [queue("default"), node("n1"), podgroup("g", min_member=1), pod("a", group="g")]
    )
    cache = SchedulerCache(store)
    first = cache.snapshot()
    Scheduler.from_file(None).cycle(first)
    second = cache.snapshot()
    assert second.jobs["default/g"].tasks["default/a"].node is None
    assert np.array_equal(second.nodes.idle, second.nodes.allocatable)


def test_stale_bind_is_refused_not_raised():
    """A bind for a pod deleted in between is reported as refused."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1"), podgroup("g"), pod("a", group="g")])
    cache = SchedulerCache(store)
    decisions = Scheduler.from_file(None).cycle(cache.snapshot())
    store.delete("Pod", "default/a")
    applied = cache.apply(decisions)
    assert applied.refused == ["default/a"]


def test_missing_queue_and_podgroup_are_blocked_with_reasons():
    """Jobs whose queue or PodGroup is missing are blocked, as build_snapshot does."""
    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1"),
            podgroup("g", queue="nope"),
            pod("a", group="g"),
            pod("b", group="missing"),
        ]
    )
    snap = SchedulerCache(store).snapshot()
    assert "queue 'nope' does not exist" in snap.blocked["default/g"]
    assert "PodGroup default/missing does not exist" in snap.blocked["default/missing"]


def test_a_cycle_touching_a_shared_job_is_repaired():
    """Running jobs are shared with the snapshot, not copied; if a cycle changes one
    anyway (an eviction tried), the cache rebuilds it from what the cluster said."""
    from pumice.api.task import TaskStatus
    from pumice.framework.decisions import Decisions
    from pumice.framework.session import Session

    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1"),
            podgroup("g", phase="Running"),
            pod("a", group="g", node="n1"),
        ]
    )
    cache = SchedulerCache(store)
    snap = cache.snapshot()
    Session(snap, Scheduler.from_file(None).config)  # (what writes into it opens one)
    job = snap.jobs["default/g"]
    assert job is cache.jobs["default/g"]  # shared: nothing for a cycle to do
    task = job.tasks["default/a"]
    job.update_status(task, TaskStatus.RELEASING)  # what a statement's evict does
    job.note = "tried"
    cache.apply(Decisions())
    fresh = cache.snapshot()
    assert fresh.jobs["default/g"].tasks["default/a"].status == TaskStatus.RUNNING
    assert fresh.jobs["default/g"].note == ""
    _same(fresh, _rebuilt(store))


def test_podgroup_spec_change_after_status_writes_is_taken_in():
    """Status writes are read without parsing the spec again; a change of the spec made
    in place afterwards is still seen (the cache compares with what it parsed)."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1"), podgroup("g", min_member=1)])
    store.create(pod("a", group="g"))
    cache = SchedulerCache(store)
    store.update_podgroup_status("default/g", "Running", ())
    assert cache.snapshot().jobs["default/g"].phase == "Running"

    def grow(obj):
        obj["spec"]["minMember"] = 3

    store.modify("PodGroup", "default/g", grow)
    snap = cache.snapshot()
    assert snap.jobs["default/g"].min_available == 3
    assert snap.jobs["default/g"].phase == "Running"
    _same(snap, _rebuilt(store))


def test_a_claim_recorded_in_a_pods_status_after_its_creation_is_taken_in():
    """The resource-claim controller records a template claim in the pod's status after
    the pod was created (on a cluster, and in a simulation): the cache reads it, and
    the pod is bound with the claim's devices instead of waiting for ever."""
    from tests.plugins.test_devices import GPU_CLASS, claim, gpu_slice, template, using

    store = MemoryCluster()
    store.create_all([queue("default"), node("n1"), GPU_CLASS, gpu_slice("n1", 1),
                      template("one-gpu")])  # fmt: skip
    store.create(using("p", template_name="one-gpu", group="g"))
    store.create(podgroup("g", min_member=1))
    cache = SchedulerCache(store)
    scheduler = Scheduler.from_file(None)
    decisions = scheduler.cycle(cache.snapshot())
    assert decisions.binds == {}
    assert "waiting for ResourceClaim gpu" in decisions.pending["default/g"]
    made = claim("p-gpu-x")
    store.create(made)

    def record(obj):
        obj["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]

    store.modify("Pod", "default/p", record)
    snap = cache.snapshot()
    [ref] = snap.jobs["default/g"].tasks["uid-p"].device_claims
    assert ref.claim_name == "p-gpu-x"
    assert scheduler.cycle(snap).binds == {"default/p": "n1"}
    _same(cache.snapshot(), _rebuilt(store))


def test_snapshots_share_queues_a_cycle_cannot_change():
    """Snapshots lend the cache's queues uncopied: their spec vectors are read-only, so
    a session that tried to change one in place would fail loudly instead of changing
    what every later snapshot sees; a cycle leaves the queues as they were."""
    import pytest

    store = MemoryCluster()
    store.create_all([
        node("n1", cpu="8", memory="16Gi"),
        queue("q", weight=2, capability={"cpu": "4"}, guarantee={"cpu": "1"}),
        podgroup("g", min_member=1, queue="q"),
        pod("p", cpu="1", memory="1Gi", group="g"),
    ])  # fmt: skip
    cache = SchedulerCache(store)
    snap = cache.snapshot()
    q = snap.queues["q"]
    before = (q.capability.copy(), q.guarantee.copy())
    for vector in (q.capability, q.guarantee):
        with pytest.raises(ValueError, match="read-only"):
            vector[0] = 123.0
    decisions = Scheduler.from_file(None).cycle(snap)
    assert decisions.binds == {"default/p": "n1"}
    cache.apply(decisions)
    after = cache.snapshot().queues["q"]
    assert np.array_equal(after.capability, before[0])
    assert np.array_equal(after.guarantee, before[1])


def _count_rebuilds(cache: SchedulerCache, monkeypatch) -> list[int]:
    calls: list[int] = []
    real = cache._rebuild

    def counted() -> None:
        calls.append(1)
        real()

    monkeypatch.setattr(cache, "_rebuild", counted)
    return calls


def test_node_heartbeats_cost_nothing_and_label_changes_apply_in_place(monkeypatch):
    """Kubelets rewrite node status every few minutes and autoscalers move labels: an
    update that changes nothing the scheduler reads leaves the model as it was, and a
    label, taint or capacity change is taken in without rebuilding the model; either
    way the snapshot equals one rebuilt from the objects."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", cpu="4"), node("n2", cpu="4")])
    sel = pod("picky", cpu="1", nodeSelector={"pool": "gpu"})
    store.create(sel)
    cache = SchedulerCache(store)
    rebuilds = _count_rebuilds(cache, monkeypatch)
    table = cache.nodes

    def heartbeat(n):
        n["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                      "lastHeartbeatTime": "2026-01-01T00:10:00Z"}]  # fmt: skip
        n["status"]["images"] = [{"names": ["busybox"]}]

    store.modify("Node", "n1", heartbeat)
    before = cache.changes
    cache.sync()
    assert cache.nodes is table and cache.changes == before  # nothing moved
    assert _decide(cache.snapshot())["binds"] == {}
    # The autoscaler labels n2 and doubles n1: the next cycle places the pod on n2.
    store.modify("Node", "n2", lambda n: n["metadata"]["labels"].update(pool="gpu"))
    store.modify("Node", "n1", lambda n: n["status"]["allocatable"].update(cpu="8"))
    snap = cache.snapshot()
    _same(snap, _rebuilt(store))
    assert np.array_equal(snap.nodes.allocatable, _rebuilt(store).nodes.allocatable)
    assert _decide(snap)["binds"] == {"default/picky": "n2"}
    # A taint keeps new work off a node, in place too.
    store.modify("Node", "n2", lambda n: n["spec"].update(
        taints=[{"key": "maint", "effect": "NoSchedule"}]))  # fmt: skip
    snap = cache.snapshot()
    assert _decide(snap)["binds"] == {}
    assert rebuilds == []
    # A node added is a new row: that rebuilds (rarely).
    store.create(node("n3", cpu="4", labels={"pool": "gpu"}))
    assert _decide(cache.snapshot())["binds"] == {"default/picky": "n3"}
    assert rebuilds == [1]


def test_bad_objects_are_reported_and_skipped_when_asked():
    """With ``on_bad``, a malformed object is reported once and left out, an update
    that breaks an object removes it, and the rest is still scheduled; a queue whose
    parents form a cycle is left out with a reason for its jobs."""
    store = MemoryCluster()
    store.create_all([
        queue("default"), node("n1", cpu="4"),
        podgroup("neg", min_member=-1), pod("ok", cpu="1"),
    ])  # fmt: skip
    seen: list[tuple[str, str, str]] = []
    cache = SchedulerCache(store, on_bad=lambda kind, key, obj, err: seen.append(
        (kind, key, err.render())))  # fmt: skip
    assert [(k, key) for k, key, _ in seen] == [("PodGroup", "default/neg")]
    assert "minMember" in seen[0][2]
    assert _decide(cache.snapshot())["binds"] == {"default/ok": "n1"}
    store.create(pod("bad-cpu", cpu="-2"))
    snap = cache.snapshot()
    assert seen[-1][:2] == ("Pod", "default/bad-cpu") and "cpu" in seen[-1][2]
    assert "default/bad-cpu" not in cache.tasks
    for name, parent in (("a", "b"), ("b", "a")):
        q = queue(name)
        q["spec"]["parent"] = parent
        store.create(q)
    store.create(podgroup("in-a", min_member=1, queue="a"))
    snap = cache.snapshot()
    assert {k for k, _, _ in seen[-1:]} == {"Queue"}
    assert "cycle" in snap.blocked["default/in-a"]


def test_a_queue_status_write_does_not_rebuild_the_model(monkeypatch):
    """pumice run writes each Queue's allocated resources and podgroup counts; those
    writes come back as watch events and must not rebuild the model, while a change of
    the queue's spec does."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", cpu="4")])
    cache = SchedulerCache(store)
    rebuilds = _count_rebuilds(cache, monkeypatch)
    store.modify("Queue", "default", lambda q: q.setdefault("status", {}).update(
        allocated={"cpu": "2"}, running=1))  # fmt: skip
    cache.sync()
    assert rebuilds == []
    store.modify("Queue", "default", lambda q: q["spec"].update(weight=5))
    cache.sync()
    assert rebuilds == [1] and cache.queues["default"].weight == 5


def test_a_status_is_written_only_when_it_differs_from_what_the_cluster_says():
    """A cycle's status for a PodGroup is written when it differs from the status the
    cluster has in what users read (phase, counts, each condition's type, status,
    reason and message), not when only the session that decided it changed; a condition
    another client wrote without a field differs from one that has it, even empty."""
    from pumice.framework.decisions import Decisions, PodGroupUpdate

    store = MemoryCluster()
    store.create_all([queue("default"), node("n1"), podgroup("g", min_member=2)])
    cache = SchedulerCache(store)

    def condition(session: str, **fields: str) -> dict[str, str]:
        return {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                "message": "2/2 tasks in gang unschedulable", "transitionID": session,
                **fields}  # fmt: skip

    def apply(*conditions: dict[str, str], running: int = 0) -> int:
        update = PodGroupUpdate("Pending", list(conditions), running=running)
        cache.apply(Decisions(podgroups={"default/g": update}))
        cache.sync()
        return store.stats["status_writes"]

    assert apply(condition("s1")) == 1
    assert apply(condition("s2")) == 1  # (only the deciding session differs)
    assert apply(condition("s3", message="1/2 tasks in gang unschedulable")) == 2
    assert apply(condition("s4", message="1/2 tasks in gang unschedulable"), running=1) == 3
    assert apply() == 4
    assert apply() == 4

    def others_write(obj):  # (another client's condition, without a reason)
        obj["status"]["running"] = 0
        obj["status"]["conditions"] = [{"type": "Unschedulable", "status": "True",
                                        "message": "2/2 tasks in gang unschedulable"}]  # fmt: skip

    store.modify("PodGroup", "default/g", others_write)
    cache.sync()
    unreasoned = condition("s5")
    del unreasoned["reason"]
    assert apply(unreasoned) == 4  # (no reason on either side)
    assert apply(condition("s6", reason="")) == 5  # ("" is not "no reason")
    assert store.get("PodGroup", "default/g")["status"]["conditions"][0]["reason"] == ""


def test_a_snapshot_keeps_the_jobs_it_was_taken_with():
    """A snapshot's jobs are the ones of the cluster when it was taken: jobs that come,
    go or are made anew afterwards (a cycle's binds taken in) are the next snapshot's."""
    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1"),
            podgroup("g", min_member=1),
            pod("a", group="g"),
            podgroup("h", min_member=1),
        ]
    )
    cache = SchedulerCache(store)
    first = cache.snapshot()
    kept = dict(first.jobs)
    cache.apply(Scheduler.from_file(None).cycle(first))
    store.create(podgroup("late", min_member=1))
    store.delete("PodGroup", "default/h")
    second = cache.snapshot()
    assert first.jobs == kept  # (the same job objects, none came or went)
    assert "default/late" in second.jobs and "default/h" not in second.jobs
    assert second.jobs["default/g"].tasks["default/a"].node == "n1"


def test_nodes_left_out_follow_the_cluster_from_snapshot_to_snapshot():
    """A node whose pods came to request more than its allocatable is left out of the
    next snapshot, and taken back once they are gone; snapshots in between, with no
    node changed, leave out the same nodes."""
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", cpu="4"), node("n2", cpu="4")])
    cache = SchedulerCache(store)
    assert cache.snapshot().nodes.left_out == {}
    other = pod("big", cpu="6", node="n1", phase="Running")
    other["spec"]["schedulerName"] = "someone-else"
    store.create(other)
    first, second = cache.snapshot(), cache.snapshot()
    assert list(first.nodes.left_out) == list(second.nodes.left_out) == ["n1"]
    assert second.nodes.names == ["n2"]
    store.delete("Pod", "default/big")
    assert cache.snapshot().nodes.left_out == {}
