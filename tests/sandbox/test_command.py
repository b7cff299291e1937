"""`pumice sandbox`: refusals before anything starts (no binaries, bad counts), the
manifests it takes from deploy/, and a real start: the lines it prints, a kubeconfig
that works, Ready nodes, a pod bound there that runs, the shared-GPU example scheduled
by pumice run, the Volcano Job example run by pumice run --controllers, and a clean stop
on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.run import kube_kit as k

from pumice.cli import main
from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.controllers.registry import ALL
from pumice.run.default_queue import default_queue_body
from pumice.run.runner import RunOptions
from pumice.sandbox import apply
from pumice.sandbox.command import CONFIGS, DEFAULT_QUEUE, EXAMPLES, pumice_manifests

ROOT = Path(__file__).resolve().parents[2]


def _no_binaries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PUMICE_K8S_BIN", str(empty))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setenv("PATH", str(empty))  # no etcd, no kube-apiserver


def test_without_binaries_it_exits_2_and_says_how_to_get_them(monkeypatch, tmp_path, capsys):
    _no_binaries(monkeypatch, tmp_path)
    assert main(["sandbox", "--dir", str(tmp_path / "sb")]) == 2
    err = capsys.readouterr().err
    assert "kube-apiserver not found" in err
    for hint in (
        "PUMICE_K8S_BIN",
        "setup-envtest",
        "KUBEBUILDER_ASSETS",
        "apt-get install etcd-server",
    ):
        assert hint in err
    assert not (tmp_path / "sb").exists()  # refused before anything was made


def test_the_installed_command_exits_2_too(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "KUBEBUILDER_ASSETS"}
    env.update(PUMICE_K8S_BIN=str(empty), PATH=str(empty))
    done = subprocess.run(
        [sys.executable, "-m", "pumice.cli", "sandbox", "--dir", str(tmp_path / "sb")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "PUMICE_K8S_BIN" in done.stderr and "etcd-server" in done.stderr


@pytest.mark.parametrize(
    "argv, field",
    [
        (["--nodes", "-1"], "--nodes"),
        (["--shared-gpu-nodes", "-2"], "--shared-gpu-nodes"),
        (["--port", "70000"], "--port"),
    ],
)
def test_bad_arguments_exit_2(argv, field, capsys, tmp_path):
    assert main(["sandbox", "--dir", str(tmp_path), *argv]) == 2
    assert field in capsys.readouterr().err


def test_it_applies_the_crds_of_deploy_and_a_default_queue():
    objects = list(pumice_manifests(ROOT / "deploy"))
    kinds = [o["kind"] for o in objects]
    assert kinds.count("CustomResourceDefinition") >= 2
    assert {o["spec"]["names"]["kind"] for o in objects if o["kind"] != "Queue"} >= {
        "PodGroup", "Queue",
    }  # fmt: skip
    assert {"Deployment", "Namespace"}.isdisjoint(kinds)  # the scheduler itself is not
    # deploy/ holds no Queue (one `kubectl apply -f deploy/` must work before the Queue CRD
    # is served): the sandbox applies its own default Queue, as pumice run would create it
    assert "Queue" not in kinds
    assert default_queue_body("default") == DEFAULT_QUEUE


def test_a_sandbox_starts_runs_a_pod_and_stops_on_sigterm(k8s_binaries, tmp_path):
    folder = tmp_path / "sb"
    with socket.socket() as s:  # a port free now, for --port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", "sandbox", "--dir", str(folder), "--port", str(port),
         "--nodes", "2", "--gpu-nodes", "1", "--shared-gpu-nodes", "1",
         "--startup-delay", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("Ctrl-C" in line for line in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        out = "".join(lines)
        assert "Ctrl-C" in out, (out, proc.poll())
        kubeconfig = folder / "kubeconfig"
        assert f"kube-apiserver at https://127.0.0.1:{port};" in out
        assert f"pumice run --kubeconfig {kubeconfig}" in out
        assert f"export KUBECONFIG={kubeconfig}; kubectl get pods -w" in out
        assert "kube-controller-manager: Deployments" in out  # (the binary is beside the others)

        client = KubeClient.from_config(str(kubeconfig))
        nodes = k.ok(client.request("GET", RESOURCES["Node"].path()))["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == [
            "cpu-000", "cpu-001", "gpu-000", "shared-gpu-000"
        ]  # fmt: skip
        assert k.get(client, "Queue", "default") is not None
        k.pod(client, "hello")
        k.ok(client.request("POST", RESOURCES["Pod"].path("default", "hello", "binding"), body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "hello"},
            "target": {"kind": "Node", "name": "gpu-000"},
        }))  # fmt: skip
        k.wait_for(
            "the pod Running",
            lambda: (
                (k.get(client, "Pod", "default/hello") or {}).get("status", {}).get("phase")
                == "Running"
            ),
        )
        # kube-controller-manager runs: a Deployment gets its pod
        labels = {"app": "web"}
        k.ok(client.request("POST", "/apis/apps/v1/namespaces/default/deployments", body={
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            }},
        }))  # fmt: skip
        k.wait_for(
            "the Deployment's pod",
            lambda: [n for n, p in k.pods(client).items()
                     if (p["metadata"].get("labels") or {}).get("app") == "web"],
            timeout=60,
        )  # fmt: skip
        # the shared-GPU example, as docs/sandbox.md tells it: four pods on card 0, two on 1
        apply(str(kubeconfig), EXAMPLES / "shared-gpu.yaml")
        with k.running(str(kubeconfig), config=str(CONFIGS / "deviceshare.yaml")):
            k.wait_for(
                "the inference pods bound",
                lambda: sum(n.startswith("infer-") for n in k.bound(client)) == 6,
                timeout=60,
            )
        cards = sorted(
            p["metadata"]["annotations"]["volcano.sh/gpu-index"]
            for n, p in k.pods(client).items()
            if n.startswith("infer-")
        )
        assert cards == ["0", "0", "0", "0", "1", "1"]
        # the Volcano Job example, as docs/controllers.md runs it: pumice run --controllers
        apply(str(kubeconfig), EXAMPLES / "job.yaml")
        with k.running(str(kubeconfig), options=RunOptions(period=0.2, controllers=ALL)):
            k.wait_for(
                "the Job Running",
                lambda: (k.get(client, "Job", "default/train") or {})
                .get("status", {}).get("state", {}).get("phase") == "Running",
                timeout=60,
            )  # fmt: skip
        assert sorted(n for n in k.bound(client) if n.startswith("train-")) == [
            "train-master-0", "train-worker-0", "train-worker-1",
        ]  # fmt: skip
        client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert "stopping" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (folder / "kube-apiserver.log").is_file()  # kept for reading after a stop


def test_a_second_sandbox_on_the_same_dir_is_refused(tmp_path, capsys):
    import fcntl

    folder = tmp_path / "sb"
    folder.mkdir()
    with (folder / ".lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code = main(["sandbox", "--dir", str(folder)])
    err = capsys.readouterr().err
    if "not found" in err:
        pytest.skip("no binaries: the directory is locked only once they are found")
    assert code == 2
    assert "another pumice sandbox is running" in err
