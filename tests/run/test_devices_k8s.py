"""Dynamic resource allocation against a real API server: the scheduler's cluster
lists and watches ResourceSlices, DeviceClasses and ResourceClaims, and a bind writes
each claim's ``status.allocation`` and ``reservedFor`` before ``pods/binding`` (or is
not made when it cannot write them).

What the shared API server (Kubernetes 1.25) can and cannot do here: it serves no
``resource.k8s.io`` group, so the test serves ``resource.k8s.io/v1`` through
CustomResourceDefinitions (tests/data/dra/crds.yaml) that accept the objects without
the built-in API's validation; and its Pod has no ``spec.resourceClaims`` (added in
1.26: the server drops the field on create), so a pod cannot name its claims there.
Which claims a pod needs and which devices they get are therefore tested through the
in-memory cluster and ``pumice cycle`` (tests/plugins/test_devices.py); here, what the
scheduler reads from and writes to the API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.plugins.test_devices import GPU_CLASS, claim, gpu_slice
from tests.run import kube_kit as k

from pumice.cache.cache import SchedulerCache
from pumice.cluster.kube import KubeCluster
from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.sandbox import ControlPlane
from pumice.sandbox.nodes import NodeShape, create_node

pytestmark = pytest.mark.k8s

CRDS = Path(__file__).resolve().parents[1] / "data" / "dra" / "crds.yaml"


def serve_dra(client: KubeClient, version: str = "v1") -> None:
    """resource.k8s.io at ``version``, through the test CRDs."""
    for crd in yaml.safe_load_all(CRDS.read_text()):
        crd["spec"]["versions"][0]["name"] = version
        k.ok(client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                            body=crd))  # fmt: skip
    path = f"/apis/resource.k8s.io/{version}/"
    k.wait_for(
        "resource.k8s.io served",
        lambda: all(client.request("GET", path + plural)[0] == 200
                    for plural in ("resourceslices", "deviceclasses", "resourceclaims")),
    )  # fmt: skip


@pytest.fixture
def cluster(
    make_control_plane: Callable[..., ControlPlane], request: pytest.FixtureRequest
) -> Iterator[tuple[ControlPlane, KubeClient]]:
    plane = make_control_plane()
    client = KubeClient.from_config(plane.kubeconfig)
    k.install_crds(client)
    serve_dra(client, getattr(request, "param", "v1"))
    k.queue(client, "default")
    shape = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    for name in ("n0", "n1"):
        create_node(client, name, NodeShape("t", shape, {"kubernetes.io/hostname": name}))
    try:
        yield plane, client
    finally:
        client.close()


def create(client: KubeClient, obj: dict[str, Any]) -> None:
    res = RESOURCES[obj["kind"]]
    ns = obj["metadata"].get("namespace", "default")
    k.ok(client.request("POST", res.path(ns) if res.namespaced else res.path(), body=obj))


def pending_pod(client: KubeClient, name: str) -> dict:
    body = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano",
                 "containers": [{"name": "main", "image": "busybox"}]},
    }  # fmt: skip
    return k.ok(client.request("POST", RESOURCES["Pod"].path("default"), body=body))


@dataclass
class Writes:
    """What a bind writes first (the cluster protocol's BindWrites)."""

    claims: dict[str, dict[str, Any]]
    volumes: dict[str, str] = field(default_factory=dict)
    provision: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    timeout: float = 10.0


ALLOCATION = {
    "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1",
                             "device": "gpu-0"}]},
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
}  # fmt: skip


@pytest.fixture
def kube_cluster(cluster) -> Iterator[tuple[KubeClient, KubeCluster]]:
    plane, client = cluster
    kc = KubeCluster(KubeClient.from_config(plane.kubeconfig))
    kc.start()
    assert kc.wait_synced(30)
    try:
        yield client, kc
    finally:
        kc.close()


def test_the_cache_reads_the_dra_kinds_from_the_api(kube_cluster) -> None:
    client, kc = kube_cluster
    for obj in (GPU_CLASS, gpu_slice("n1", 2), claim("c")):
        create(client, obj)
    cache = SchedulerCache(kc)
    k.wait_for("the DRA objects seen", lambda: len(kc.list("ResourceClaim")) == 1)
    snap = cache.snapshot()
    assert list(snap.records("ResourceClaim")) == ["default/c"]
    [slice_] = snap.records("ResourceSlice").values()
    assert (slice_.node_name, len(slice_.devices)) == ("n1", 2)
    assert list(snap.records("DeviceClass")) == ["gpu.example.com"]


def test_a_claim_is_allocated_and_reserved_before_its_pod_is_bound(kube_cluster) -> None:
    client, kc = kube_cluster
    create(client, claim("c"))
    pod = pending_pod(client, "p")
    k.wait_for(
        "the objects seen",
        lambda: kc.get("Pod", "default/p") and kc.get("ResourceClaim", "default/c"),
    )
    assert kc.bind("default/p", "n1", Writes(claims={"default/c": ALLOCATION}))
    shown = kc.get("ResourceClaim", "default/c") or {}  # (the cache sees it at once)
    assert shown["status"]["allocation"] == ALLOCATION
    assert k.wait_for("the pod bound", lambda: k.bound(client).get("p"), timeout=30) == "n1"
    got = k.get(client, "ResourceClaim", "default/c") or {}
    assert "resource.kubernetes.io/delete-protection" in got["metadata"]["finalizers"]
    status = got["status"]
    assert status["allocation"] == ALLOCATION
    assert status["reservedFor"] == [{"resource": "pods", "name": "p",
                                      "uid": pod["metadata"]["uid"]}]  # fmt: skip


def test_a_claim_that_cannot_be_written_fails_the_bind(kube_cluster) -> None:
    client, kc = kube_cluster
    pending_pod(client, "p")
    k.wait_for("the pod seen", lambda: kc.get("Pod", "default/p"))
    assert kc.bind("default/p", "n1", Writes(claims={"default/gone": ALLOCATION}))
    k.wait_for("the bind given up", lambda: kc.stats.bind_failures)
    assert k.bound(client) == {}
    assert not (kc.get("Pod", "default/p") or {}).get("spec", {}).get("nodeName")


@pytest.mark.parametrize("cluster", ["v1beta1"], indirect=True)
def test_an_older_api_version_is_read_and_written_where_v1_is_not_served(kube_cluster) -> None:
    client, kc = kube_cluster
    old = claim("c")
    old["apiVersion"] = "resource.k8s.io/v1beta1"  # (request fields not under exactly)
    old["spec"]["devices"]["requests"][0] = {"name": "gpu", "deviceClassName": "gpu.example.com"}
    path = "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaims"
    k.ok(client.request("POST", path, body=old))
    pending_pod(client, "p")
    k.wait_for("the v1beta1 claim seen", lambda: kc.get("ResourceClaim", "default/c"))
    k.wait_for("the pod seen", lambda: kc.get("Pod", "default/p"))
    [rec] = SchedulerCache(kc).snapshot().records("ResourceClaim").values()
    assert rec.spec.requests[0].exactly.device_class == "gpu.example.com"
    assert kc.bind("default/p", "n1", Writes(claims={"default/c": ALLOCATION}))
    assert k.wait_for("the pod bound", lambda: k.bound(client).get("p"), timeout=30) == "n1"
    status, got = client.request("GET", f"{path}/c")
    assert status == 200 and got["status"]["allocation"] == ALLOCATION
