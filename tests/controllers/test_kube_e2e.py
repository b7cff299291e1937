"""pumice's controllers and scheduler on a real API server, with the sandbox's fake
kubelet: a Deployment's pods get one PodGroup, a two-task Volcano Job runs to
Completed, a closed queue admits nothing new, deleting a Job removes its pods and
PodGroup (kube-controller-manager's garbage collector), an invalid Job is refused with
its reason, and ``pumice controllers`` runs as a process and stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from tests.run import kube_kit as k

from pumice.cli import main
from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.controllers import registry
from pumice.run.runner import RunOptions
from pumice.sandbox import ControlPlane
from pumice.sandbox.kubelet import DURATION_ANNOTATION, FakeKubelet

pytestmark = pytest.mark.k8s

GROUP = "scheduling.k8s.io/group-name"


@pytest.fixture(scope="module")
def plane(k8s_binaries: None) -> Iterator[ControlPlane]:
    """One API server for the module: pumice's CRDs, four 4-cpu nodes and their kubelet."""
    cp = ControlPlane().start()
    client = KubeClient.from_config(cp.kubeconfig)
    k.install_crds(client)
    k.wait_for(
        "the Job and Command CRDs",
        lambda: all(
            client.request("GET", RESOURCES[kind].path())[0] == 200 for kind in ("Job", "Command")
        ),
    )
    nodes = k.nodes(client, 4, cpu="4", memory="8Gi")
    kubelet = FakeKubelet(client, nodes, startup_delay=0.1)
    kubelet.start()
    assert kubelet.wait_synced(20)
    try:
        yield cp
    finally:
        kubelet.stop()
        client.close()
        cp.stop()


@pytest.fixture
def pumice(plane: ControlPlane) -> Iterator[Any]:
    """pumice run --controllers (every controller) on a thread for the test."""
    options = RunOptions(period=0.2, controllers=registry.ALL)
    with k.running(plane.kubeconfig, options=options) as runner:
        yield runner


def vcjob(ns: str, name: str, *, duration: str | None = "1s", **spec: Any) -> dict:
    """A two-task Job (a master and two workers, 1 cpu each), as Volcano's examples."""

    def task(name: str, replicas: int) -> dict:
        meta = {"annotations": {DURATION_ANNOTATION: duration}} if duration else {}
        container = {"name": name, "image": "busybox",
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}  # fmt: skip
        return {"name": name, "replicas": replicas,
                "template": {"metadata": meta, "spec": {"containers": [container],
                                                        "restartPolicy": "Never"}}}  # fmt: skip

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minAvailable": 3, "schedulerName": "volcano",
                 "tasks": [task("master", 1), task("worker", 2)], **spec},
    }  # fmt: skip


def submit(client: KubeClient, job: dict) -> dict:
    ns = job["metadata"]["namespace"]
    return k.ok(client.request("POST", RESOURCES["Job"].path(ns), body=job))


def phase(client: KubeClient, key: str) -> str:
    job = k.get(client, "Job", key) or {}
    return ((job.get("status") or {}).get("state") or {}).get("phase", "")


def listed(client: KubeClient, kind: str, ns: str) -> list[dict]:
    return k.ok(client.request("GET", RESOURCES[kind].path(ns)))["items"]


def test_a_two_task_job_runs_to_completed(pumice: Any, admin: KubeClient, ns: str) -> None:
    """The controller makes the PodGroup, the scheduler admits it, the controller makes
    the pods, the scheduler binds them, the kubelet runs them to success: Completed."""
    submit(admin, vcjob(ns, "tf"))
    key = f"{ns}/tf"
    k.wait_for("the job Completed", lambda: phase(admin, key) == "Completed", timeout=60)
    job = k.get(admin, "Job", key)
    assert job["status"]["succeeded"] == 3
    pods = {p["metadata"]["name"]: p for p in listed(admin, "Pod", ns)}
    assert sorted(pods) == ["tf-master-0", "tf-worker-0", "tf-worker-1"]
    assert all(p["status"]["phase"] == "Succeeded" for p in pods.values())
    assert all(p["spec"]["nodeName"] for p in pods.values())
    owners = {p["metadata"]["ownerReferences"][0]["uid"] for p in pods.values()}
    assert owners == {job["metadata"]["uid"]}
    phases = [c["status"] for c in job["status"]["conditions"]]
    assert phases[0] == "Pending" and phases[-1] == "Completed" and "Running" in phases


def test_a_deployments_pods_get_one_podgroup(pumice: Any, admin: KubeClient, ns: str) -> None:
    """Three pods of one ReplicaSet (as a Deployment makes them) share one PodGroup,
    named for the ReplicaSet, owned by it; each pod is annotated with it and bound."""
    rs = k.ok(admin.request("POST", RESOURCES["ReplicaSet"].path(ns), body={
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-7d9f", "namespace": ns},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }))  # fmt: skip
    ref = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-7d9f",
        "uid": rs["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for i in range(3):
        body = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"web-7d9f-{i}", "namespace": ns, "labels": {"app": "web"},
                         "ownerReferences": [ref]},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "c", "image": "nginx",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
        }  # fmt: skip
        k.ok(admin.request("POST", RESOURCES["Pod"].path(ns), body=body))
    k.wait_for("all three bound", lambda: len(k.bound(admin, ns)) == 3, timeout=60)
    (pg,) = listed(admin, "PodGroup", ns)
    assert pg["metadata"]["name"] == f"podgroup-{rs['metadata']['uid']}"
    assert pg["spec"]["minMember"] == 1
    assert pg["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    groups = {p["metadata"]["annotations"][GROUP] for p in listed(admin, "Pod", ns)}
    assert groups == {pg["metadata"]["name"]}


def test_a_closed_queue_admits_nothing_new(
    pumice: Any, plane: ControlPlane, admin: KubeClient, ns: str, capsys: Any
) -> None:
    """`pumice queue close` (a CloseQueue Command) closes the queue; a Job submitted to
    it afterwards is refused, and a gang of plain pods in it is never bound, while the
    same gang in the default queue is."""
    name = f"closing-{ns}"
    k.queue(admin, name)
    k.wait_for("the queue Open", lambda: (k.get(admin, "Queue", name) or {})
               .get("status", {}).get("state") == "Open")  # fmt: skip
    assert main(["queue", "close", name, "--kubeconfig", plane.kubeconfig]) == 0
    k.wait_for("the queue Closed", lambda: (k.get(admin, "Queue", name) or {})
               .get("status", {}).get("state") == "Closed")  # fmt: skip
    capsys.readouterr()
    submit(admin, vcjob(ns, "late", queue=name))
    k.wait_for("the job refused", lambda: "refused" in ((k.get(admin, "Job", f"{ns}/late") or {})
               .get("status", {}).get("state", {}).get("message", "")))  # fmt: skip
    k.podgroup(admin, "shut", 1, namespace=ns, queue=name)
    k.pod(admin, "shut-0", group="shut", namespace=ns, cpu="100m")
    k.podgroup(admin, "open", 1, namespace=ns, queue="default")
    k.pod(admin, "open-0", group="open", namespace=ns, cpu="100m")
    k.wait_for("the default queue's pod bound", lambda: "open-0" in k.bound(admin, ns))
    cycles = pumice.cycles
    k.wait_for("a few more cycles", lambda: pumice.cycles >= cycles + 3)
    assert "shut-0" not in k.bound(admin, ns)
    assert k.get(admin, "PodGroup", f"{ns}/shut")["status"].get("phase", "Pending") == "Pending"
    assert [p["metadata"]["name"] for p in listed(admin, "Pod", ns)] == ["open-0", "shut-0"]


def test_deleting_a_job_removes_its_pods_and_podgroup(
    pumice: Any, plane: ControlPlane, admin: KubeClient, ns: str, garbage_collector: Any
) -> None:
    """With the garbage collector running, a deleted Job's pods and PodGroup (owned by
    it) go too, and the controller does not make them again."""
    garbage_collector(plane)
    submit(admin, vcjob(ns, "doomed", duration=None))
    key = f"{ns}/doomed"
    k.wait_for("the job Running", lambda: phase(admin, key) == "Running", timeout=60)
    assert len(listed(admin, "Pod", ns)) == 3 and len(listed(admin, "PodGroup", ns)) == 1
    status, body = admin.request("DELETE", RESOURCES["Job"].key_path(key),
                                 body={"propagationPolicy": "Background"})  # fmt: skip
    assert status == 200, body
    k.wait_for("pods and podgroup gone", lambda: not listed(admin, "Pod", ns)
               and not listed(admin, "PodGroup", ns), timeout=60)  # fmt: skip
    assert k.get(admin, "Job", key) is None


def test_an_invalid_job_is_refused_with_its_reason(pumice: Any, admin: KubeClient, ns: str) -> None:
    """Volcano's own example of a Job its webhook denies (minAvailable above the
    replicas): it stays Pending with the reason, gets a Warning Event, and nothing else
    is created."""
    path = "tests/data/jobs/minAvailable-webhook-deny.yaml"
    with open(os.path.join(os.path.dirname(__file__), "..", "..", path)) as f:
        job = yaml.safe_load(f)
    job["metadata"]["namespace"] = ns
    submit(admin, job)
    key = f"{ns}/{job['metadata']['name']}"
    k.wait_for("the refusal", lambda: (k.get(admin, "Job", key) or {}).get("status", {})
               .get("state", {}).get("message"))  # fmt: skip
    state = k.get(admin, "Job", key)["status"]["state"]
    assert state["phase"] == "Pending"
    assert "minAvailable" in state["message"]
    events = k.wait_for("a Warning event", lambda: [
        e for e in k.events(admin, ns) if e["involvedObject"]["name"] == job["metadata"]["name"]
        and e["type"] == "Warning"])  # fmt: skip
    assert "minAvailable" in events[0]["message"]
    assert listed(admin, "Pod", ns) == [] and listed(admin, "PodGroup", ns) == []


def test_pumice_controllers_as_a_process(plane: ControlPlane, admin: KubeClient, ns: str) -> None:
    """`pumice controllers` reconciles (here: a bare pod gets its PodGroup), answers
    /healthz, and stops on SIGTERM with exit status 0."""
    with socket.socket() as s:  # a port free now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", "controllers", "--kubeconfig", plane.kubeconfig,
         "--controllers", "podgroup,queue", "--leader-elect",
         "--lock-object-namespace", ns, "--healthz-address", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        pod = k.pod(admin, "bare", namespace=ns, cpu="100m")
        pg = f"{ns}/podgroup-{pod['metadata']['uid']}"
        k.wait_for("the bare pod's PodGroup", lambda: k.get(admin, "PodGroup", pg), timeout=60)
        lease = k.get(admin, "Lease", f"{ns}/pumice-controllers")
        assert lease is not None and lease["spec"]["holderIdentity"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            assert resp.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "caches synced" in err and "stopped" in err


def fail(client: KubeClient, pod: dict) -> None:
    """What a kubelet reports when a pod's container exits 1."""
    name = pod["spec"]["containers"][0]["name"]
    status = {"status": {"phase": "Failed", "containerStatuses": [{
        "name": name, "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}}  # fmt: skip
    k.ok(client.request("PATCH", RESOURCES["Pod"].key_path(
        f"{pod['metadata']['namespace']}/{pod['metadata']['name']}", "status"),
        body=status, content_type="application/merge-patch+json"))  # fmt: skip


def running_pods(client: KubeClient, ns: str, n: int, seen: set[str]) -> list[dict]:
    """``n`` pods Running, not terminating, none of them one already failed."""
    pods = [
        p
        for p in listed(client, "Pod", ns)
        if p["status"].get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
        and p["metadata"]["uid"] not in seen
    ]
    return pods if len(pods) == n else []


def test_restart_job_counts_retries_until_max_retry_then_failed(
    pumice: Any, admin: KubeClient, ns: str
) -> None:
    """Under PodFailed -> RestartJob, each failure restarts the whole job with new pods
    and one more retry; the failure that reaches maxRetry leaves it Failed."""
    job = vcjob(ns, "flaky", duration=None, maxRetry=2,
                policies=[{"event": "PodFailed", "action": "RestartJob"}])  # fmt: skip
    submit(admin, job)
    key = f"{ns}/flaky"
    failed: set[str] = set()
    retries = []
    for _ in range(4):
        pods = k.wait_for("the job's pods running", lambda: phase(admin, key) == "Failed" or
                          running_pods(admin, ns, 3, failed), timeout=60)  # fmt: skip
        if pods is True:
            break
        retries.append(k.get(admin, "Job", key)["status"].get("retryCount", 0))
        failed.update(p["metadata"]["uid"] for p in pods)
        fail(admin, pods[0])
        k.wait_for("the restart", lambda: phase(admin, key) in ("Restarting", "Failed")
                   or k.get(admin, "Job", key)["status"].get("retryCount", 0) > retries[-1],
                   timeout=60)  # fmt: skip
    k.wait_for("the job Failed", lambda: phase(admin, key) == "Failed", timeout=60)
    assert retries == [0, 1]
    assert k.get(admin, "Job", key)["status"]["retryCount"] == 2


def test_task_completed_completes_the_job(pumice: Any, admin: KubeClient, ns: str) -> None:
    """Volcano's MPI pattern: the master finishes, TaskCompleted -> CompleteJob, and the
    workers (which would run on) are stopped: the job is Completed."""
    job = vcjob(ns, "mpi", duration=None)
    master = job["spec"]["tasks"][0]
    master["template"]["metadata"] = {"annotations": {DURATION_ANNOTATION: "2s"}}
    master["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    submit(admin, job)
    key = f"{ns}/mpi"
    k.wait_for("the job Completed", lambda: phase(admin, key) == "Completed", timeout=60)
    pods = {p["metadata"]["name"]: p for p in listed(admin, "Pod", ns)}
    assert pods["mpi-master-0"]["status"]["phase"] == "Succeeded"
    k.wait_for(
        "the workers stopped",
        lambda: all(p["metadata"]["name"] == "mpi-master-0" for p in listed(admin, "Pod", ns)),
        timeout=60,
    )


def test_suspend_and_resume(pumice: Any, plane: ControlPlane, admin: KubeClient, ns: str,
                            capsys: Any) -> None:  # fmt: skip
    """`pumice job suspend` aborts the job (its pods go, the Job stays); `pumice job
    resume` brings it back to Running with new pods."""
    submit(admin, vcjob(ns, "long", duration=None))
    key = f"{ns}/long"
    k.wait_for("the job Running", lambda: phase(admin, key) == "Running", timeout=60)
    first = {p["metadata"]["uid"] for p in listed(admin, "Pod", ns)}
    cli = ["--kubeconfig", plane.kubeconfig, "-n", ns]
    assert main(["job", "suspend", "long", *cli]) == 0
    k.wait_for("the job Aborted", lambda: phase(admin, key) == "Aborted", timeout=60)
    k.wait_for("its pods gone", lambda: not listed(admin, "Pod", ns), timeout=60)
    assert main(["job", "resume", "long", *cli]) == 0
    k.wait_for("the job Running again", lambda: phase(admin, key) == "Running", timeout=60)
    again = {p["metadata"]["uid"] for p in listed(admin, "Pod", ns)}
    assert len(again) == 3 and not again & first
    assert listed(admin, "Command", ns) == []  # (consumed)
    capsys.readouterr()
