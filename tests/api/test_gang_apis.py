"""Reading the gang dialects besides Volcano's: how each maps onto a PodGroup record and
a job, and bad input refused with an error naming object and field."""

from __future__ import annotations

import copy

import pytest
from tests.kit import node, pod, queue

from pumice.api import gang_apis
from pumice.api.parse import parse_pod
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.errors import InputError

COSCHEDULING = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "nginx", "namespace": "ns"},
    "spec": {"minMember": 3, "minResources": {"cpu": "3"}, "scheduleTimeoutSeconds": 10},
}
PODGROUP_V1ALPHA2 = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "PodGroup",
    "metadata": {"name": "pd-1", "namespace": "ns"},
    "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
}
WORKLOAD_V1ALPHA1 = {
    "apiVersion": "scheduling.k8s.io/v1alpha1",
    "kind": "Workload",
    "metadata": {"name": "train", "namespace": "ns"},
    "spec": {
        "podGroups": [
            {"name": "workers", "policy": {"gang": {"minCount": 4}}},
            {"name": "driver", "policy": {"basic": {}}},
        ]
    },
}


def _cos(obj: dict, group: str) -> dict:
    """``obj`` (a pod) labelled to join coscheduling PodGroup ``group``."""
    obj["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": group}
    return obj


def _build(*objects: dict):
    return build_snapshot([SourcedObject(copy.deepcopy(o), "snap.yaml") for o in objects])


def test_a_coscheduling_podgroup_maps_onto_volcano_fields() -> None:
    rec = gang_apis.parse_any_podgroup(COSCHEDULING)
    assert (rec.api, rec.uid, rec.min_member, rec.min_resources, rec.schedule_timeout) == (
        "coscheduling",
        "ns/coscheduling:nginx",
        3,
        {"cpu": 3000.0},
        10.0,
    )
    assert (rec.queue, rec.priority_class, rec.phase) == ("default", "", "Pending")


def test_the_volcano_queue_annotation_is_honoured() -> None:
    obj = copy.deepcopy(PODGROUP_V1ALPHA2)
    obj["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "q1"}
    assert gang_apis.parse_any_podgroup(obj).queue == "q1"
    w = copy.deepcopy(WORKLOAD_V1ALPHA1)
    w["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "q2"}
    assert gang_apis.parse_workload(w).job("workers", "", "default").queue == "q2"


def test_a_basic_group_is_independent_pods_and_a_gang_group_needs_min_count() -> None:
    w = gang_apis.parse_workload(WORKLOAD_V1ALPHA1)
    assert w.groups == {"workers": 4, "driver": None}
    assert w.job("driver", "", "default").min_member == 1
    assert w.job("workers", "", "default").min_member == 4
    basic = copy.deepcopy(PODGROUP_V1ALPHA2)
    basic["spec"]["schedulingPolicy"] = {"basic": {}}
    assert gang_apis.parse_any_podgroup(basic).min_member == 1


def test_job_uids_do_not_collide_across_dialects() -> None:
    """A Volcano PodGroup, a coscheduling PodGroup and a v1alpha2 PodGroup of one name
    are three jobs; a Workload pod group's job names workload, group and replica."""
    volcano = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "nginx", "namespace": "ns"},
        "spec": {"minMember": 1},
    }
    k8s = copy.deepcopy(PODGROUP_V1ALPHA2)
    k8s["metadata"]["name"] = "nginx"
    replica = pod("w-0", ns="ns")
    replica["spec"]["workloadRef"] = {"name": "train", "podGroup": "workers",
                                      "podGroupReplicaKey": "r1"}  # fmt: skip
    snap = _build(queue(), node("n1"), volcano, COSCHEDULING, k8s, WORKLOAD_V1ALPHA1, replica)
    assert sorted(snap.jobs) == [
        "ns/coscheduling:nginx",
        "ns/nginx",
        "ns/podgroup:nginx",
        "ns/workload:train:workers:r1",
    ]
    assert [snap.jobs[u].api for u in sorted(snap.jobs)] == [
        "coscheduling",
        "volcano",
        "workload",
        "workload",
    ]


def test_pods_join_by_label_workload_ref_or_scheduling_group() -> None:
    by_label = _cos(pod("a"), "nginx")
    assert parse_pod(by_label).gang.uid("default") == "default/coscheduling:nginx"
    by_ref = pod("b")
    by_ref["spec"]["workloadRef"] = {"name": "train", "podGroup": "workers"}
    assert parse_pod(by_ref).gang.uid("default") == "default/workload:train:workers"
    by_group = pod("c")
    by_group["spec"]["schedulingGroup"] = {"podGroupName": "pd-1"}
    assert parse_pod(by_group).gang.uid("default") == "default/podgroup:pd-1"
    both = _cos(pod("d", group="vc"), "nginx")
    rec = parse_pod(both)
    assert (rec.group, rec.gang) == ("vc", None)  # (Volcano's annotation wins)


def test_a_gang_takes_its_pods_priority_class() -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
          "metadata": {"name": "high"}, "value": 1000}  # fmt: skip
    member = _cos(pod("a", ns="ns"), "nginx")
    member["spec"]["priorityClassName"] = "high"
    job = _build(queue(), node("n1"), pc, COSCHEDULING, member).jobs["ns/coscheduling:nginx"]
    assert (job.priority_class, job.priority) == ("high", 1000)


def test_a_missing_queue_says_which_annotation_to_set() -> None:
    obj = copy.deepcopy(COSCHEDULING)
    obj["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "nope"}
    snap = _build(queue(), node("n1"), obj)
    assert (
        "set the scheduling.volcano.sh/queue-name annotation of the PodGroup"
        in (snap.blocked["ns/coscheduling:nginx"])
    )


def test_a_missing_pod_group_of_a_workload_is_named() -> None:
    stray = pod("a", ns="ns")
    stray["spec"]["workloadRef"] = {"name": "train", "podGroup": "leader"}
    snap = _build(queue(), node("n1"), WORKLOAD_V1ALPHA1, stray)
    assert snap.blocked["ns/workload:train:leader"] == (
        "Workload ns/train has no pod group 'leader' (it has driver, workers); fix "
        "spec.workloadRef.podGroup of its pods"
    )


def test_the_same_podgroup_twice_is_refused() -> None:
    with pytest.raises(InputError, match="appears twice"):
        _build(queue(), COSCHEDULING, COSCHEDULING)


def _with(base: dict, path: str, value) -> dict:
    obj = copy.deepcopy(base)
    *parents, last = path.split(".")
    at = obj
    for p in parents:
        at = at.setdefault(p, {}) if not p.isdigit() else at[int(p)]
    if value is None:
        del at[last]
    else:
        at[last] = value
    return obj


BAD = [
    (_with(COSCHEDULING, "spec.minMember", -1), "PodGroup ns/nginx", "spec.minMember"),
    (
        _with(COSCHEDULING, "spec.scheduleTimeoutSeconds", "soon"),
        "PodGroup ns/nginx",
        "spec.scheduleTimeoutSeconds",
    ),
    (_with(COSCHEDULING, "spec.minResources", {"cpu": "lots"}), "PodGroup ns/nginx",
     "spec.minResources.cpu"),
    (_with(PODGROUP_V1ALPHA2, "spec.schedulingPolicy", None), "PodGroup ns/pd-1",
     "spec.schedulingPolicy"),
    (_with(PODGROUP_V1ALPHA2, "spec.schedulingPolicy.basic", {}), "PodGroup ns/pd-1",
     "spec.schedulingPolicy"),
    (_with(PODGROUP_V1ALPHA2, "spec.schedulingPolicy.gang", {}), "PodGroup ns/pd-1",
     "spec.schedulingPolicy.gang.minCount"),
    (_with(PODGROUP_V1ALPHA2, "spec.schedulingPolicy.gang.minCount", 0), "PodGroup ns/pd-1",
     "spec.schedulingPolicy.gang.minCount"),
    (_with(WORKLOAD_V1ALPHA1, "spec.podGroups", []), "Workload ns/train", "spec.podGroups"),
    (_with(WORKLOAD_V1ALPHA1, "spec.podGroups.1.name", "workers"), "Workload ns/train",
     "spec.podGroups[1].name"),
    (_with(WORKLOAD_V1ALPHA1, "spec.podGroups.0.policy", None), "Workload ns/train",
     "spec.podGroups[0].policy"),
    (_with(WORKLOAD_V1ALPHA1, "apiVersion", "scheduling.k8s.io/v1beta1"), "Workload ns/train",
     "apiVersion"),
    (_with(pod("a"), "spec.workloadRef", {"name": "train"}), "Pod default/a",
     "spec.workloadRef.podGroup"),
    (_with(pod("a"), "spec.schedulingGroup", {}), "Pod default/a",
     "spec.schedulingGroup.podGroupName"),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "name", "field"), BAD, ids=[b[2] for b in BAD])
def test_bad_input_names_object_and_field(obj: dict, name: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        _build(queue(), obj)
    assert (err.value.obj, err.value.field, err.value.file) == (name, field, "snap.yaml")


def test_a_podgroup_of_a_group_pumice_does_not_read_is_skipped_with_a_note() -> None:
    """Coscheduling's old group (scheduling.sigs.k8s.io) is not read: its PodGroups are
    skipped, and the note names the apiVersion."""
    old = _with(COSCHEDULING, "apiVersion", "scheduling.sigs.k8s.io/v1alpha1")
    snap = _build(queue(), old)
    assert not snap.jobs
    assert any("PodGroup of scheduling.sigs.k8s.io/v1alpha1" in n for n in snap.notes)


def test_a_workload_of_another_group_is_skipped_not_refused() -> None:
    """pumice's own simulator workloads are ``kind: Workload`` too (``pumice.io``): a
    snapshot that holds one skips it, with a note."""
    sim = {"apiVersion": "pumice.io/v1alpha1", "kind": "Workload", "metadata": {"name": "w"}}
    snap = _build(queue(), node("n1"), sim)
    assert "skipped 1 object of kind Workload" in snap.notes
