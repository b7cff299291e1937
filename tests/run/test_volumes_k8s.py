"""Volume binding against a real API server, with kube-controller-manager's PV
controller (``persistentvolume-binder``) doing its half: pumice chooses a PV for each
``WaitForFirstConsumer`` claim and writes its ``claimRef``, the PV controller binds the
claim, and only then is the pod bound, to the node the volume reaches."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.kit import pv as pv_object
from tests.kit import pvc as pvc_object
from tests.kit import storage_class
from tests.run import kube_kit as k

from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.run.runner import RunOptions
from pumice.sandbox import ControlPlane
from pumice.sandbox.nodes import NodeShape, create_node

pytestmark = pytest.mark.k8s


@pytest.fixture
def cluster(
    make_control_plane: Callable[..., ControlPlane],
) -> Iterator[tuple[ControlPlane, KubeClient]]:
    plane = make_control_plane()
    client = KubeClient.from_config(plane.kubeconfig)
    k.install_crds(client)
    k.queue(client, "default")
    for name, zone in (("n1", "a"), ("n2", "b")):
        labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
        create_node(client, name, NodeShape("t", {"cpu": "8", "memory": "16Gi", "pods": "110"},
                                            labels))  # fmt: skip
    try:
        yield plane, client
    finally:
        client.close()


def create(client: KubeClient, obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    ns = obj["metadata"].get("namespace", "default")
    res = RESOURCES[kind]
    body = {key: v for key, v in obj.items() if key != "status"}
    if kind == "PersistentVolumeClaim":
        body["metadata"] = {key: v for key, v in body["metadata"].items() if key != "uid"}
    k.ok(client.request("POST", res.path(ns) if res.namespaced else res.path(), body=body))


def mounting(client: KubeClient, name: str, claim: str, group: str | None = None) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {k.GROUP: group}
    body = {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }  # fmt: skip
    k.ok(client.request("POST", RESOURCES["Pod"].path("default"), body=body))


def claim_volume(client: KubeClient, claim: str) -> str:
    got = k.get(client, "PersistentVolumeClaim", f"default/{claim}") or {}
    if (got.get("status") or {}).get("phase") != "Bound":
        return ""
    return got["spec"].get("volumeName", "")


def pv_node(client: KubeClient, name: str) -> str:
    obj = k.get(client, "PersistentVolume", name) or {}
    terms = obj["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    return terms[0]["matchExpressions"][0]["values"][0]


def test_a_claim_ends_bound_to_the_local_volume_of_its_pods_node(cluster, pv_controller) -> None:
    plane, client = cluster
    pv_controller(plane)
    create(client, storage_class("local"))
    for name, node in (("pv-n1", "n1"), ("pv-n2", "n2")):
        create(client, pv_object(name, "20Gi", node=node))
    create(client, pvc_object("data"))
    mounting(client, "p", "data")
    with k.running(plane.kubeconfig, options=RunOptions(period=0.2)):
        node = k.wait_for("the pod bound", lambda: k.bound(client).get("p"), timeout=60)
        volume = k.wait_for("the claim bound", lambda: claim_volume(client, "data"), 60)
    assert pv_node(client, volume) == node


def test_a_gang_takes_distinct_volumes_or_waits_whole(cluster, pv_controller) -> None:
    plane, client = cluster
    pv_controller(plane)
    create(client, storage_class("local"))
    for i in range(4):
        create(client, pv_object(f"pv-{i}", "20Gi", node=f"n{1 + i % 2}"))
    k.podgroup(client, "train", 4)
    k.podgroup(client, "short", 2)
    for i in range(4):
        create(client, pvc_object(f"train-{i}"))
        mounting(client, f"train-{i}", f"train-{i}", group="train")
    with k.running(plane.kubeconfig, options=RunOptions(period=0.2)):
        k.wait_for("the gang bound", lambda: len(k.bound(client)) == 4, timeout=60)
        volumes = {i: k.wait_for("a claim bound", lambda i=i: claim_volume(client, f"train-{i}"))
                   for i in range(4)}  # fmt: skip
        assert len(set(volumes.values())) == 4
        bound = k.bound(client)
        for i, volume in volumes.items():
            assert bound[f"train-{i}"] == pv_node(client, volume)
        # A second gang finds no volume left: it waits whole, its claims untouched.
        for i in range(2):
            create(client, pvc_object(f"short-{i}"))
            mounting(client, f"short-{i}", f"short-{i}", group="short")
        k.wait_for(
            "the second gang explained",
            lambda: (
                k.events_for(client, "short-0", "FailedScheduling")
                or k.condition(k.get(client, "Pod", "default/short-0") or {}, "PodScheduled")
            ),
        )
    assert "short-0" not in k.bound(client) and "short-1" not in k.bound(client)
    assert claim_volume(client, "short-0") == ""


def test_a_bound_zonal_volume_steers_its_pod(cluster, pv_controller) -> None:
    plane, client = cluster
    pv_controller(plane)
    create(client, pv_object("disk", zone="b", cls="ssd", claim="default/data", driver="pd.csi"))
    create(client, pvc_object("data", cls="ssd", volume="disk"))
    k.wait_for("the claim bound", lambda: claim_volume(client, "data"), timeout=60)
    mounting(client, "p", "data")
    with k.running(plane.kubeconfig, options=RunOptions(period=0.2)):
        assert k.wait_for("the pod bound", lambda: k.bound(client).get("p"), 60) == "n2"


def test_a_bind_that_times_out_is_forgotten_and_tried_again(
    cluster, pv_controller, tmp_path: Path
) -> None:
    plane, client = cluster
    conf = tmp_path / "sched.conf"
    conf.write_text(
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n"
        "- plugins:\n  - name: predicates\n    arguments: {volumebinding.bindTimeoutSeconds: 1}\n"
    )
    create(client, storage_class("local"))
    create(client, pv_object("pv-n1", "20Gi", node="n1"))
    create(client, pvc_object("data"))
    mounting(client, "p", "data")
    with k.running(plane.kubeconfig, config=str(conf), options=RunOptions(period=0.2)) as runner:
        # No PV controller yet: the PV gets its claimRef, the claim stays unbound, and
        # the bind gives up after a second instead of binding a pod that cannot start.
        k.wait_for(
            "a bind that timed out",
            lambda: runner.cluster is not None and runner.cluster.stats.bind_failures,
            timeout=30,
        )
        assert "p" not in k.bound(client)
        ref = (k.get(client, "PersistentVolume", "pv-n1") or {})["spec"].get("claimRef") or {}
        assert ref.get("name") == "data"
        pv_controller(plane)  # the PV controller finishes what was begun
        assert k.wait_for("the pod bound", lambda: k.bound(client).get("p"), timeout=60) == "n1"
    assert claim_volume(client, "data") == "pv-n1"
