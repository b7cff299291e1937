"""deploy/ applied on a fresh API server: the CRDs serve Volcano's objects."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client as k8s

from pumice.run.default_queue import default_queue_body
from pumice.sandbox import ControlPlane, apply

pytestmark = pytest.mark.k8s

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"


def _podgroup(name: str, **spec) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 2, "queue": "default", **spec},
    }


def _columns(cp: ControlPlane, path: str) -> list[str]:
    """Column names the server prints for ``path`` (what ``kubectl get`` shows)."""
    request = urllib.request.Request(
        cp.server + path,
        headers={
            "Authorization": f"Bearer {cp.admin_token}",
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io",
        },
    )
    context = ssl.create_default_context(cafile=str(cp.ca_file))
    with urllib.request.urlopen(request, context=context, timeout=10) as resp:
        return [c["name"] for c in json.load(resp)["columnDefinitions"]]


def test_deploy_applies_and_its_crds_serve_podgroups_and_queues(
    control_plane: ControlPlane,
) -> None:
    applied = apply(control_plane.kubeconfig, DEPLOY)
    assert [a.kind for a in applied][:3] == [
        "Namespace",
        "CustomResourceDefinition",
        "CustomResourceDefinition",
    ]
    assert apply(control_plane.kubeconfig, DEPLOY) == applied  # applying again updates in place
    with control_plane.client() as api:
        custom = k8s.CustomObjectsApi(api)
        apps = k8s.AppsV1Api(api)
        assert (
            apps.read_namespaced_deployment("pumice-scheduler", "pumice-system").spec.replicas == 2
        )
        # deploy/ holds no Queue: the scheduler creates the default one (weight 1, reclaimable)
        assert not custom.list_cluster_custom_object(GROUP, VERSION, "queues")["items"]
        custom.create_cluster_custom_object(GROUP, VERSION, "queues", default_queue_body("default"))
        queue = custom.get_cluster_custom_object(GROUP, VERSION, "queues", "default")
        assert queue["spec"] == {"weight": 1, "reclaimable": True}

        # As loose as Volcano's: pumice, not the API server, reports a bad minMember; and
        # fields of newer Volcano versions are kept.
        topology = {"mode": "hard", "highestTierAllowed": 2}
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            "podgroups",
            _podgroup("odd", minMember=-1, networkTopology=topology),
        )
        odd = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", "odd")
        assert odd["spec"]["minMember"] == -1 and odd["spec"]["networkTopology"] == topology

        # status is a subresource: the object's updates leave it alone, /status writes it.
        body = _podgroup("pg")
        body["status"] = {"phase": "Running"}
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", body)
        pg = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", "pg")
        assert "phase" not in pg.get("status", {})
        status = {
            "phase": "Inqueue",
            "running": 0,
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "reason": "NotEnoughResources",
                    "lastTransitionTime": "2024-01-02T03:04:05Z",
                    "transitionID": "abc",
                }
            ],
            "futureField": {"kept": True},
        }
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, "default", "podgroups", "pg", {"status": status}
        )
        pg = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", "pg")
        assert pg["status"] == status

        queue_status = {"state": "Open", "allocated": {"cpu": "2", "memory": "4Gi"}, "running": 1}
        custom.patch_cluster_custom_object_status(
            GROUP, VERSION, "queues", "default", {"status": queue_status}
        )
        custom.patch_cluster_custom_object(
            GROUP,
            VERSION,
            "queues",
            "default",
            {"spec": {"weight": 3}, "status": {"state": "Closed"}},
        )
        queue = custom.get_cluster_custom_object(GROUP, VERSION, "queues", "default")
        assert queue["status"] == queue_status and queue["spec"]["weight"] == 3

        custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "queues",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Queue",
                "metadata": {"name": "child"},
                "spec": {
                    "weight": 0,
                    "parent": "default",
                    "deserved": {"cpu": 4, "nvidia.com/gpu": "2"},
                    "guarantee": {"resource": {"memory": "1Gi"}},
                    "capability": {"cpu": "8"},
                    "dequeueStrategy": "fifo",
                },
            },
        )
        child = custom.get_cluster_custom_object(GROUP, VERSION, "queues", "child")
        assert child["spec"]["deserved"] == {"cpu": 4, "nvidia.com/gpu": "2"}
        assert child["spec"]["dequeueStrategy"] == "fifo"

        assert _columns(control_plane, f"/apis/{GROUP}/{VERSION}/namespaces/default/podgroups") == [
            "Name", "STATUS", "MINMEMBER", "RUNNING", "AGE", "QUEUE",
        ]  # fmt: skip
        assert _columns(control_plane, f"/apis/{GROUP}/{VERSION}/queues") == [
            "Name", "WEIGHT", "STATE", "PARENT", "AGE",
        ]  # fmt: skip


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_one_kubectl_apply_installs_deploy_on_a_fresh_cluster(control_plane: ControlPlane) -> None:
    """As the install instructions say: one `kubectl apply -f deploy/`, nothing waited for
    in between, succeeds; applying again changes nothing and succeeds too."""

    def kubectl_apply() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["kubectl", "--kubeconfig", control_plane.kubeconfig, "apply", "-f", str(DEPLOY)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    first = kubectl_apply()
    assert first.returncode == 0, first.stderr
    assert "customresourcedefinition.apiextensions.k8s.io/queues.scheduling.volcano.sh created" in (
        first.stdout
    )
    again = kubectl_apply()
    assert again.returncode == 0, again.stderr
    assert "created" not in again.stdout and "unchanged" in again.stdout
