"""Gang objects of other dialects in the in-memory cluster and the cache: PodGroups of
one name in one namespace but of different API groups are two objects and two jobs;
a v1alpha2 PodGroup gets the PodGroupScheduled condition, a coscheduling PodGroup its
phase and counts, each written only when it changes; a Workload served in two versions
is read once."""

from __future__ import annotations

from typing import Any

from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.scheduler import Scheduler


def _node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def _pod(name: str, cpu: str = "1", labels: dict | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels or {},
                     "annotations": spec.pop("annotations", {})},
        "spec": {"schedulerName": "volcano", **spec,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }  # fmt: skip


def _queue() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "default"},
        "spec": {"weight": 1},
    }


def _cos(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


def _k8s_pg(name: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def _volcano_pg(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, "queue": "default"},
    }


def _cycle(cache: SchedulerCache) -> Any:
    return cache.apply(Scheduler.from_file(None).cycle(cache.snapshot()))


def test_three_podgroups_of_one_name_are_three_objects_and_three_jobs() -> None:
    store = MemoryCluster()
    store.create_all([_node("n1", "8"), _queue(), _volcano_pg("train", 1), _cos("train", 2),
                      _k8s_pg("train", 2)])  # fmt: skip
    store.create(_pod("v-0", annotations={"scheduling.k8s.io/group-name": "train"}))
    for i in range(2):
        store.create(_pod(f"c-{i}", labels={"scheduling.x-k8s.io/pod-group": "train"}))
        store.create(_pod(f"k-{i}", schedulingGroup={"podGroupName": "train"}))
    assert [len(store.list(k)) for k in ("PodGroup", "CoschedulingPodGroup",
                                         "WorkloadPodGroup")] == [1, 1, 1]  # fmt: skip
    cache = SchedulerCache(store)
    assert sorted(cache.snapshot().jobs) == [
        "default/coscheduling:train", "default/podgroup:train", "default/train",
    ]  # fmt: skip
    assert len(_cycle(cache).bound) == 5

    # Deleting one leaves the others, and its pods wait for it.
    assert store.delete("CoschedulingPodGroup", "default/train")
    snap = cache.snapshot()
    assert sorted(snap.jobs) == ["default/podgroup:train", "default/train"]
    assert "default/coscheduling:train" in snap.blocked


def test_status_is_written_in_each_dialects_words_and_only_when_it_changes() -> None:
    store = MemoryCluster()
    store.create_all([_node("n1"), _queue(), _cos("c", 2), _k8s_pg("k", 2), _k8s_pg("big", 3)])
    for i in range(2):
        store.create(_pod(f"c-{i}", labels={"scheduling.x-k8s.io/pod-group": "c"}))
        store.create(_pod(f"k-{i}", schedulingGroup={"podGroupName": "k"}))
    for i in range(3):
        store.create(_pod(f"big-{i}", cpu="2", schedulingGroup={"podGroupName": "big"}))
    cache = SchedulerCache(store)
    _cycle(cache)
    cos = store.get("CoschedulingPodGroup", "default/c")["status"]
    assert (cos["phase"], cos["running"], cos["succeeded"], cos["failed"]) == (
        "Scheduling", 0, 0, 0,
    )  # fmt: skip
    started = cos["scheduleStartTime"]
    (cond,) = store.get("WorkloadPodGroup", "default/k")["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupScheduled", "True", "Scheduled",
    )  # fmt: skip
    (cond,) = store.get("WorkloadPodGroup", "default/big")["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupScheduled", "False", "Unschedulable",
    )  # fmt: skip
    assert cond["message"]

    writes = store.stats["status_writes"]
    _cycle(cache)
    _cycle(cache)
    assert store.stats["status_writes"] == writes  # (nothing changed: nothing written)

    for i in range(2):
        store.set_pod_phase(f"default/c-{i}", "Running")
    _cycle(cache)
    cos = store.get("CoschedulingPodGroup", "default/c")["status"]
    assert (cos["phase"], cos["running"], cos["scheduleStartTime"]) == ("Running", 2, started)
    store.set_pod_phase("default/c-0", "Succeeded")
    store.set_pod_phase("default/c-1", "Succeeded")
    _cycle(cache)
    assert store.get("CoschedulingPodGroup", "default/c")["status"]["phase"] == "Finished"


def test_a_workload_served_in_two_versions_is_read_once() -> None:
    """A server serving v1alpha1 and v1alpha2 shows each Workload twice (two kinds):
    the v1alpha1 copy makes the gangs, the other is not read."""
    v1 = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"podGroups": [{"name": "w", "policy": {"gang": {"minCount": 2}}}]},
    }
    v2 = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"podGroupTemplates": [{"name": "w", "schedulingPolicy": {"basic": {}}}]},
    }
    store = MemoryCluster()
    store.create_all([_node("n1"), _queue(), v1])
    store.objects["WorkloadV1alpha2"]["default/train"] = v2
    for i in range(2):
        store.create(_pod(f"t-{i}", workloadRef={"name": "train", "podGroup": "w"}))
    cache = SchedulerCache(store)
    job = cache.snapshot().jobs["default/workload:train:w"]
    assert job.min_available == 2
    store.modify("WorkloadV1alpha2", "default/train", lambda w: None)
    assert cache.snapshot().jobs["default/workload:train:w"].min_available == 2
    assert len(_cycle(cache).bound) == 2
