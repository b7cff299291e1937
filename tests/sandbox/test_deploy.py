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
from pumice.sandbox.apply import load_manifests

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


def _kubectl(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kubectl", "--kubeconfig", cp.kubeconfig, *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _ok(done: subprocess.CompletedProcess) -> list[str]:
    """The lines ``kubectl apply`` printed, after checking that it succeeded."""
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _newer_deploy(folder: Path) -> Path:
    """A copy of deploy/ as a newer release might ship it: the Queue CRD with one more
    printer column, one more short name and one more field in its schema."""
    newer = folder / "deploy"
    shutil.copytree(DEPLOY, newer)
    crd = newer / "01-crd-queues.yaml"
    text = crd.read_text()
    column = "        - name: AGE\n"
    text = text.replace(column, "        - name: RUNNING\n          type: integer\n"
                        "          jsonPath: .status.running\n" + column, 1)  # fmt: skip
    text = text.replace("shortNames: [q, queue-v1beta1]", "shortNames: [q, queue-v1beta1, vq]")
    crd.write_text(text)
    return newer


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
@pytest.mark.parametrize("how", [["apply"], ["apply", "--server-side"]], ids=["client", "server"])
def test_one_kubectl_apply_installs_deploy_on_a_fresh_cluster(
    control_plane: ControlPlane, how: list[str]
) -> None:
    """As the install instructions say: one `kubectl apply -f deploy/` (or with
    `--server-side`), nothing waited for in between, succeeds and makes every object of
    deploy/; applying again succeeds too and changes nothing."""
    first = _ok(_kubectl(control_plane, *how, "-f", str(DEPLOY)))
    wanted = [m.body for m in load_manifests(DEPLOY)]
    assert len(first) == len(wanted)
    names = []  # kind.group/name, as kubectl get takes them
    for body in wanted:
        group, _, _ = body["apiVersion"].rpartition("/")  # "" for the core group
        names.append(f"{body['kind'].lower()}.{group}".rstrip(".") + "/" + body["metadata"]["name"])
    versions = ["get", "-n", "pumice-system", *names, "-o", "jsonpath={..resourceVersion}"]
    crds = [f"crd/{b['metadata']['name']}" for b in wanted if b["kind"].endswith("Definition")]
    _ok(_kubectl(control_plane, "wait", "--for=condition=Established", "--timeout=60s", *crds))
    made = _ok(_kubectl(control_plane, *versions))[0].split()
    assert len(made) == len(wanted)  # every object is there
    # deploy/ holds no Queue: `pumice run` makes the default one (tests/run)
    assert _ok(_kubectl(control_plane, "get", "queues.scheduling.volcano.sh", "-o", "name")) == []

    again = _ok(_kubectl(control_plane, *how, "-f", str(DEPLOY)))
    assert len(again) == len(wanted)
    if how == ["apply"]:
        assert all(line.endswith(" created") for line in first)
        assert all(line.endswith(" unchanged") for line in again)
    assert _ok(_kubectl(control_plane, *versions))[0].split() == made  # nothing written


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_the_crd_upgrade_of_deploy_readme_keeps_objects_and_rolls_back(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """deploy/README.md's upgrade: a cluster installed with `kubectl apply -f deploy/`
    takes a newer deploy/ with `kubectl apply --server-side -f` (no field conflicts with
    the first install, the same again changes nothing), its Queues and PodGroups are kept
    and served through the new CRD, and applying the older deploy/ the same way rolls
    the CRD back."""
    _ok(_kubectl(control_plane, "apply", "-f", str(DEPLOY)))
    with control_plane.client() as api:
        custom = k8s.CustomObjectsApi(api)
        custom.create_cluster_custom_object(GROUP, VERSION, "queues", default_queue_body("default"))
        custom.create_namespaced_custom_object(
            GROUP, VERSION, "default", "podgroups", _podgroup("kept")
        )
    queues = f"/apis/{GROUP}/{VERSION}/queues"
    assert "RUNNING" not in _columns(control_plane, queues)

    newer = _newer_deploy(tmp_path)
    upgrade = _ok(_kubectl(control_plane, "apply", "--server-side", "-f", str(newer)))
    crd = "customresourcedefinition.apiextensions.k8s.io/queues.scheduling.volcano.sh"
    assert f"{crd} serverside-applied" in upgrade
    assert "RUNNING" in _columns(control_plane, queues)
    assert _ok(_kubectl(control_plane, "get", "vq", "-o", "name")) == [
        "queue.scheduling.volcano.sh/default"
    ]
    assert _ok(_kubectl(control_plane, "get", "pg", "kept", "-o", "name")) == [
        "podgroup.scheduling.volcano.sh/kept"
    ]
    stored = _ok(_kubectl(control_plane, "get", "crd", "queues.scheduling.volcano.sh",
                          "-o", "jsonpath={.status.storedVersions}"))  # fmt: skip
    assert stored == ['["v1beta1"]']
    version = [
        "get",
        "crd",
        "queues.scheduling.volcano.sh",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]
    before = _ok(_kubectl(control_plane, *version))
    _ok(_kubectl(control_plane, "apply", "--server-side", "-f", str(newer)))  # again
    assert _ok(_kubectl(control_plane, *version)) == before  # changed nothing

    _ok(_kubectl(control_plane, "apply", "--server-side", "-f", str(DEPLOY)))  # roll back
    assert "RUNNING" not in _columns(control_plane, queues)
    names = _ok(_kubectl(control_plane, "get", "crd", "queues.scheduling.volcano.sh",
                         "-o", "jsonpath={.spec.names.shortNames}"))  # fmt: skip
    assert names == ['["q","queue-v1beta1"]']
    assert _ok(_kubectl(control_plane, "get", "q", "default", "-o", "name")) == [
        "queue.scheduling.volcano.sh/default"
    ]
