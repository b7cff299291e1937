"""One control plane per test worker for the `pumice run` tests, wiped between tests.

Starting etcd and kube-apiserver takes seconds, a test of pumice run well under one:
each worker starts one API server and every test gets it emptied of what tests create
(nodes, pods, podgroups, queues, priority classes, events, leases), with pumice's CRDs
already served. Tests that need an API server of their own (RBAC) use the
``rbac_control_plane`` fixture instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.run import kube_kit as k

from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.sandbox import ControlPlane

#: Collections emptied before each test: (kind, namespaced).
_WIPE = ("Pod", "PodGroup", "Node", "Queue", "Event", "Lease", "PodDisruptionBudget")


@pytest.fixture(scope="session")
def shared_plane(k8s_binaries: None) -> Iterator[ControlPlane]:
    plane = ControlPlane().start()
    client = KubeClient.from_config(plane.kubeconfig)
    k.install_crds(client)
    client.close()
    try:
        yield plane
    finally:
        plane.stop()


def _wipe(client: KubeClient) -> None:
    for kind in _WIPE:
        res = RESOURCES[kind]
        path = res.path("default") if res.namespaced else res.path()
        status, body = client.request("DELETE", path, query={"gracePeriodSeconds": 0})
        assert status in (200, 404), f"emptying {kind}: HTTP {status}: {body}"
    pcs = k.ok(client.request("GET", RESOURCES["PriorityClass"].path()))["items"]
    for pc in pcs:
        name = pc["metadata"]["name"]
        if not name.startswith("system-"):
            client.request("DELETE", RESOURCES["PriorityClass"].path("", name))
    k.wait_for(
        "an empty cluster",
        lambda: all(
            not k.ok(client.request("GET", RESOURCES[kind].path()))["items"]
            for kind in ("Pod", "Node", "PodGroup", "Queue")
        ),
    )


@pytest.fixture
def kube(shared_plane: ControlPlane) -> Iterator[tuple[KubeClient, str]]:
    """An admin client and kubeconfig of an empty cluster with the `default` Queue."""
    client = KubeClient.from_config(shared_plane.kubeconfig)
    _wipe(client)
    k.queue(client, "default")
    try:
        yield client, shared_plane.kubeconfig
    finally:
        client.close()
