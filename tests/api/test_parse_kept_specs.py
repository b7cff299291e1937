"""parse_pod and parse_podgroup take the fields read from an object's spec from the
last object of the same spec: every record must be the one a parse of that object alone
gives, and a bad object must raise the same first error."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pumice.api import parse
from pumice.errors import InputError


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"app": "x"},
            "annotations": {parse.GROUP_ANNOTATION: "pg"},
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {"name": "main", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}
            ],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse, "_POD_SPECS", {})
    monkeypatch.setattr(parse, "_PODGROUP_SPECS", {})


def alone(obj: dict[str, Any]) -> parse.PodRecord:
    """The record of ``obj`` parsed with nothing kept from other pods."""
    kept = dict(parse._POD_SPECS)
    parse._POD_SPECS.clear()
    try:
        return parse.parse_pod(obj)
    finally:
        parse._POD_SPECS.clear()
        parse._POD_SPECS.update(kept)


def test_pods_of_one_spec_parse_as_each_alone() -> None:
    first = pod("a", volumes=[{"name": "scratch", "ephemeral": {}}], priority=5)
    again = copy.deepcopy(first)
    again["metadata"].update(name="b", uid="uid-b", labels={"app": "y"})
    again["metadata"]["annotations"]["volcano.sh/task-spec"] = "worker"
    again["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-01T00:01:00Z"}
        ],
    }
    parse.parse_pod(first)
    got = parse.parse_pod(again)
    assert got == alone(again)
    assert got.claims == ("b-scratch",)  # (the pod's own name, not the first pod's)
    assert got.role == "worker" and got.phase == "Running" and got.scheduled_at > 0


def test_the_request_dicts_are_each_records_own() -> None:
    a = parse.parse_pod(pod("a"))
    b = parse.parse_pod(pod("b"))
    assert a.resreq == b.resreq and a.resreq is not b.resreq
    assert a.init_resreq is not b.init_resreq
    a.resreq["cpu"] = 1.0
    assert parse.parse_pod(pod("c")).resreq == b.resreq


@pytest.mark.parametrize(
    "annotations",
    [
        {"volcano.sh/revocable-zone": "*"},
        {"volcano.sh/preemptable": "true"},
        {"volcano.sh/numa-topology-policy": "single-numa-node"},
    ],
)
def test_annotations_the_spec_is_read_with_are_part_of_it(annotations: dict[str, str]) -> None:
    guaranteed = {
        "containers": [{"name": "main", "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}]
    }
    parse.parse_pod(pod("a", **guaranteed))
    other = pod("b", **guaranteed)
    other["metadata"]["annotations"].update(annotations)
    got = parse.parse_pod(other)
    assert got == alone(other)
    assert got.placement.revocable or got.numa is not None


def test_a_spec_that_differs_only_in_types_is_parsed_again() -> None:
    parse.parse_pod(pod("a", priority=1))
    with pytest.raises(InputError, match=r"spec\.priority"):
        parse.parse_pod(pod("b", priority=True))
    ports = [{"name": "main", "ports": [{"hostPort": 80}]}]
    parse.parse_pod(pod("c", containers=ports))
    with pytest.raises(InputError, match="hostPort"):
        parse.parse_pod(pod("d", containers=[{"name": "main", "ports": [{"hostPort": 80.0}]}]))


def test_a_bad_pod_of_a_known_spec_raises_its_first_error() -> None:
    parse.parse_pod(pod("a"))
    for field, value in (("labels", {"app": ["x"]}), ("creationTimestamp", "yesterday")):
        bad = pod("b")
        bad["metadata"][field] = value
        with pytest.raises(InputError) as kept:
            parse.parse_pod(bad)
        with pytest.raises(InputError) as fresh:
            alone(bad)
        assert str(kept.value) == str(fresh.value)


def podgroup(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {"a": "1"},
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "spec": {
            "minMember": 2,
            "minTaskMember": {"worker": 2},
            "minResources": {"cpu": "4", "requests.memory": "8Gi"},
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def podgroup_alone(obj: dict[str, Any], default_queue: str = parse.DEFAULT_QUEUE) -> Any:
    kept = dict(parse._PODGROUP_SPECS)
    parse._PODGROUP_SPECS.clear()
    try:
        return parse.parse_podgroup(obj, default_queue)
    finally:
        parse._PODGROUP_SPECS.clear()
        parse._PODGROUP_SPECS.update(kept)


def test_podgroups_of_one_spec_parse_as_each_alone() -> None:
    parse.parse_podgroup(podgroup("a"))
    again = podgroup("b")
    again["metadata"].update(namespace="other", labels={"l": "v"})
    again["status"] = {"phase": "Inqueue", "running": 1, "conditions": [{"type": "x"}]}
    got = parse.parse_podgroup(again)
    assert got == podgroup_alone(again)
    assert got.uid == "other/b" and got.phase == "Inqueue" and got.counts == (1, 0, 0)
    assert got.min_resources is not None and got.min_quota is not None
    got.min_resources["cpu"] = 1.0
    got.min_quota["cpu"] = 1.0
    got.min_task_member["worker"] = 1
    assert parse.parse_podgroup(podgroup("c")) == podgroup_alone(podgroup("c"))


def test_the_default_queue_is_part_of_a_podgroup_spec() -> None:
    assert parse.parse_podgroup(podgroup("a")).queue == parse.DEFAULT_QUEUE
    assert parse.parse_podgroup(podgroup("b"), "elsewhere").queue == "elsewhere"


def test_a_podgroup_spec_that_differs_only_in_types_is_parsed_again() -> None:
    parse.parse_podgroup(podgroup("a", minMember=1))
    with pytest.raises(InputError, match=r"spec\.minMember"):
        parse.parse_podgroup(podgroup("b", minMember=True))


def test_a_bad_podgroup_of_a_known_spec_raises_its_first_error() -> None:
    parse.parse_podgroup(podgroup("a"))
    for field, value in (("labels", {"app": ["x"]}), ("creationTimestamp", "yesterday")):
        bad = podgroup("b")
        bad["metadata"][field] = value
        bad["status"] = {"phase": "Nowhere"}
        with pytest.raises(InputError) as kept:
            parse.parse_podgroup(bad)
        with pytest.raises(InputError) as fresh:
            podgroup_alone(bad)
        assert str(kept.value) == str(fresh.value)
