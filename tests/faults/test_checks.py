"""The checks find what they promise to find, in a real API server's objects."""

from __future__ import annotations

import pytest

from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES
from pumice.faults.checks import check_cluster
from pumice.faults.proxy import BindRecord
from pumice.faults.scenarios import Bench, make_gang

pytestmark = pytest.mark.k8s


def _bind(bench: Bench, pod: str, node: str) -> BindRecord:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    status, _ = bench.client.request(
        "POST", RESOURCES["Pod"].path("default", pod, "binding"), body=body
    )
    return BindRecord(f"default/{pod}", node, status)


def _status(bench: Bench, kind: str, name: str, status: dict, ns: str = "") -> None:
    path = RESOURCES[kind].path(ns, name, "status")
    code, body = bench.client.request(
        "PATCH", path, body={"status": status}, content_type=MERGE_PATCH
    )
    assert code == 200, body


def _found(bench: Bench, binds: list[BindRecord]) -> list[tuple[str, str]]:
    return [(v.check, v.message) for v in check_cluster(bench.client, binds)]


def test_a_whole_gang_with_true_statuses_passes(bench):
    make_gang(bench.client, "g", "q1", 2, "1")
    binds = [_bind(bench, "g-0", "node-000"), _bind(bench, "g-1", "node-001")]
    _status(bench, "PodGroup", "g", {"phase": "Running"}, "default")
    _status(bench, "Queue", "q1", {"allocated": {"cpu": "2", "memory": "1Gi"}, "running": 1})
    _status(bench, "Queue", "default", {"allocated": {}})
    assert _found(bench, binds) == []


def test_half_a_gang_and_untrue_statuses_are_found(bench):
    make_gang(bench.client, "g", "q1", 3, "1")
    binds = [_bind(bench, "g-0", "node-000")]
    _status(bench, "PodGroup", "g", {"phase": "Running"}, "default")
    _status(bench, "Queue", "q1", {"allocated": {"cpu": "3", "memory": "512Mi"}})
    assert sorted(_found(bench, binds)) == [
        ("gangs whole", "default/g: 1 of minMember 3 bound"),
        ("queue status", "q1: allocated cpu 3, bound pods 1"),
        ("queue status", "q1: running 0, podgroups Running 1"),
    ]


def test_a_bind_no_proxy_saw_and_an_overfull_node_are_found(bench):
    make_gang(bench.client, "big", "default", 2, "3")
    binds = [_bind(bench, "big-0", "node-003")]
    _bind(bench, "big-1", "node-003")  # behind the proxies' backs, and 6 CPUs on a 4-CPU node
    _status(bench, "PodGroup", "big", {"phase": "Running"}, "default")
    found = _found(bench, binds)
    assert ("bound once", "default/big-1: on node-003 with no bind seen") in found
    assert ("nodes within capacity", "node-003: cpu 6 > 4") in found
    twice = [*binds, BindRecord("default/big-0", "node-002", 201)]
    assert ("bound once", "default/big-0: bound 2 times (['node-003', 'node-002'])") in _found(
        bench, twice
    )
