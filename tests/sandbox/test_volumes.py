"""The sandbox's local volumes against a real kube-apiserver, with no controller
manager: pumice run places a pod whose claim fits a static local PV on that PV's node,
and one whose claim fits none on a node where the provisioner then makes one; the
provisioner binds both claims (the PV controller's part), the pods end Running with
their claims Bound, and a static PV whose claim is deleted is Available again.

Every check polls with a deadline: nothing asserts how long something took.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from tests.run import kube_kit as k

from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.run.reload import ConfigWatcher
from pumice.run.runner import Runner, RunOptions
from pumice.sandbox.command import install_pumice
from pumice.sandbox.kubelet import FakeKubelet, owner
from pumice.sandbox.nodes import CPU_NODE, create_nodes
from pumice.sandbox.volumes import CLASS, LocalProvisioner, create_storage
from pumice.scheduler import Scheduler

pytestmark = pytest.mark.k8s

_ids = itertools.count()


@pytest.fixture
def client(control_plane) -> Iterator[KubeClient]:
    c = KubeClient.from_config(str(control_plane.kubeconfig))
    yield c
    c.close()


def _create(client: KubeClient, kind: str, obj: dict[str, Any], namespace: str = "") -> None:
    k.ok(client.request("POST", RESOURCES[kind].path(namespace), body=obj))


def _claim(name: str, size: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": CLASS,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }


def _pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }


def _reaches(pv: dict[str, Any], node: str) -> bool:
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    return any(node in e["values"] for t in terms for e in t["matchExpressions"])


def test_pods_with_local_claims_run_with_their_claims_bound(control_plane, client, tmp_path):
    n = next(_ids)
    prefix, ns = f"lv{n}-", f"volumes-{n}"
    assert install_pumice(control_plane.kubeconfig, tmp_path / "manifests.yaml") is not None
    _create(client, "Namespace", {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": ns}})  # fmt: skip
    nodes = create_nodes(client, 2, CPU_NODE, prefix=prefix)
    assert create_storage(client, nodes, per_node=1, size="100Gi") >= 2
    _create(client, "PersistentVolumeClaim", _claim("small", "10Gi"), ns)  # a static PV fits
    _create(client, "PersistentVolumeClaim", _claim("big", "500Gi"), ns)  # none fits: provision
    _create(client, "Pod", _pod("uses-small", "small"), ns)
    _create(client, "Pod", _pod("uses-big", "big"), ns)

    runner = Runner(
        KubeClient.from_config(str(control_plane.kubeconfig)),
        ConfigWatcher(None, Scheduler.from_file),
        Scheduler.from_file(None),
        RunOptions(period=0.2),
    )
    thread = threading.Thread(target=runner.run, daemon=True)
    with (
        FakeKubelet(client, nodes, startup_delay=0.05, grace_cap=0.2),
        LocalProvisioner(client, owner(nodes), resync=1.0) as provisioner,
    ):
        thread.start()
        try:
            for pod in ("uses-small", "uses-big"):
                k.wait_for(
                    f"{pod} Running",
                    lambda pod=pod: (
                        (k.get(client, "Pod", f"{ns}/{pod}") or {}).get("status", {}).get("phase")
                        == "Running"
                    ),
                    timeout=30,
                )
        finally:
            runner.stop.set()
            thread.join(20)
        assert not thread.is_alive(), "the runner did not stop"
        placed = {}
        for pod, claim in (("uses-small", "small"), ("uses-big", "big")):
            obj = k.get(client, "Pod", f"{ns}/{pod}")
            pvc = k.get(client, "PersistentVolumeClaim", f"{ns}/{claim}")
            assert pvc["status"]["phase"] == "Bound"
            pv = k.get(client, "PersistentVolume", pvc["spec"]["volumeName"])
            assert pv["status"]["phase"] == "Bound"
            assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
            assert _reaches(pv, obj["spec"]["nodeName"])
            placed[claim] = pv["metadata"]["name"]
        assert placed["small"] in {f"{node}-local-0" for node in nodes}  # the static one
        assert (
            placed["big"]
            == f"pvc-{k.get(client, 'PersistentVolumeClaim', f'{ns}/big')['metadata']['uid']}"
        )
        assert provisioner.provisioned == 1 and provisioner.bound == 2

        # the static PV comes back once its pod and claim are gone
        k.force_delete(client, f"{ns}/uses-small")
        k.ok(client.request("DELETE", RESOURCES["PersistentVolumeClaim"].key_path(f"{ns}/small")))
        k.wait_for(
            "the static PV Available again",
            lambda: (
                (pv := k.get(client, "PersistentVolume", placed["small"]))
                and pv["status"].get("phase") == "Available"
                and not pv["spec"].get("claimRef")
            ),
            timeout=30,
        )
