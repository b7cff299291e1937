"""The sandbox's fake kubelet against a real kube-apiserver: bound pods turn Running,
then Succeeded after their duration annotation; pods of other nodes are left alone; a
graceful delete completes after the (capped) grace period; and, end to end, pumice run
schedules a gang of 4 whose pods then run and succeed.

Durations are short (startup 0.05 s, runs of 0.3 s, grace capped at 0.2 s) and every
check polls with a deadline: nothing asserts how long something took.
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
from pumice.sandbox.kubelet import ATTEMPTS, DURATION_ANNOTATION, FakeKubelet, pod_duration
from pumice.sandbox.nodes import CPU_NODE, create_nodes
from pumice.scheduler import Scheduler

pytestmark = pytest.mark.k8s

_ids = itertools.count()


@pytest.fixture
def client(control_plane) -> Iterator[KubeClient]:
    c = KubeClient.from_config(str(control_plane.kubeconfig))
    yield c
    c.close()


@pytest.fixture
def names() -> tuple[str, str]:
    """A node prefix and a namespace of this test's own (the control plane may be shared)."""
    n = next(_ids)
    return f"fk{n}-", f"sandbox-{n}"


def _namespace(client: KubeClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    status, answer = client.request("POST", RESOURCES["Namespace"].path(), body=body)
    assert status in (201, 409), answer


def _pod(
    client: KubeClient,
    namespace: str,
    name: str,
    *,
    duration: str | None = None,
    group: str | None = None,
    cpu: str = "1",
) -> dict[str, Any]:
    annotations = {}
    if duration is not None:
        annotations[DURATION_ANNOTATION] = duration
    if group is not None:
        annotations[k.GROUP] = group
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}},
            ],
        },
    }  # fmt: skip
    return k.ok(client.request("POST", RESOURCES["Pod"].path(namespace), body=body))


def _bind(client: KubeClient, namespace: str, name: str, node: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    k.ok(client.request("POST", RESOURCES["Pod"].path(namespace, name, "binding"), body=body))


def _phase(client: KubeClient, namespace: str, name: str) -> str | None:
    obj = k.get(client, "Pod", f"{namespace}/{name}")
    return None if obj is None else (obj.get("status") or {}).get("phase")


@pytest.fixture
def kubelet(client: KubeClient, names: tuple[str, str]) -> Iterator[FakeKubelet]:
    prefix, namespace = names
    _namespace(client, namespace)
    create_nodes(client, 2, CPU_NODE, prefix=prefix)
    fake = FakeKubelet(client, prefix=prefix, startup_delay=0.05, grace_cap=0.2)
    fake.start()
    assert fake.wait_synced(20)
    yield fake
    fake.stop()


def test_a_bound_pod_runs_then_succeeds_after_its_duration(client, names, kubelet):
    prefix, ns = names
    _pod(client, ns, "job-0", duration="0.3s")
    _bind(client, ns, "job-0", f"{prefix}000")
    running = k.wait_for(
        "the pod Running",
        lambda: (
            (p := k.get(client, "Pod", f"{ns}/job-0"))
            and p["status"].get("phase") in ("Running", "Succeeded")
            and p
        ),
    )
    k.wait_for("the pod Succeeded", lambda: _phase(client, ns, "job-0") == "Succeeded")
    done = k.get(client, "Pod", f"{ns}/job-0")
    assert running["status"]["startTime"]
    assert done["status"]["startTime"] == running["status"]["startTime"]
    assert k.condition(done, "Ready")["status"] == "False"
    assert k.condition(done, "PodScheduled")["status"] == "True"  # the binding's, kept
    (container,) = done["status"]["containerStatuses"]
    assert container["name"] == "main"
    assert container["state"]["terminated"]["exitCode"] == 0
    assert kubelet.stats.started == 1 and kubelet.stats.succeeded == 1
    assert kubelet.stats.errors == 0


def test_a_pod_without_a_duration_runs_until_deleted(client, names, kubelet):
    prefix, ns = names
    _pod(client, ns, "server")
    _bind(client, ns, "server", f"{prefix}001")
    pod = k.wait_for(
        "the pod Running",
        lambda: (
            (p := k.get(client, "Pod", f"{ns}/server"))
            and p["status"].get("phase") == "Running"
            and p
        ),
    )
    assert k.condition(pod, "Ready")["status"] == "True"
    (container,) = pod["status"]["containerStatuses"]
    assert container["ready"] is True and "running" in container["state"]
    # Another pod, bound later and short-lived, finishes while this one keeps running.
    _pod(client, ns, "short", duration="0.2s")
    _bind(client, ns, "short", f"{prefix}001")
    k.wait_for("the short pod Succeeded", lambda: _phase(client, ns, "short") == "Succeeded")
    assert _phase(client, ns, "server") == "Running"


def test_pods_of_nodes_it_does_not_own_are_left_alone(client, names, kubelet):
    prefix, ns = names
    other = create_nodes(client, 1, CPU_NODE, prefix=f"not-{prefix}")[0]
    _pod(client, ns, "theirs", duration="0.1s")
    _bind(client, ns, "theirs", other)
    _pod(client, ns, "unbound", duration="0.1s")
    _pod(client, ns, "ours", duration="0.1s")
    _bind(client, ns, "ours", f"{prefix}000")
    k.wait_for("our pod Succeeded", lambda: _phase(client, ns, "ours") == "Succeeded")
    # Ours was bound last and has finished: the others were seen and skipped long ago.
    assert _phase(client, ns, "theirs") == "Pending"
    assert _phase(client, ns, "unbound") == "Pending"
    assert kubelet.stats.seen == 1


def test_a_graceful_delete_completes_after_the_capped_grace(client, names, kubelet):
    prefix, ns = names
    _pod(client, ns, "victim")
    _bind(client, ns, "victim", f"{prefix}000")
    k.wait_for("the pod Running", lambda: _phase(client, ns, "victim") == "Running")
    # An eviction as the scheduler makes it: a delete with the pod's grace period (30 s).
    status, body = client.request("DELETE", RESOURCES["Pod"].path(ns, "victim"), body={})
    assert status == 200 and body["metadata"]["deletionTimestamp"], body
    assert body["metadata"]["deletionGracePeriodSeconds"] == 30
    k.wait_for("the pod gone", lambda: k.get(client, "Pod", f"{ns}/victim") is None)
    # (The kubelet counts its delete when the answer reaches it, which can be after the
    # API server has already dropped the pod.)
    k.wait_for("the delete counted", lambda: kubelet.stats.deleted == 1)
    assert kubelet.stats.deleted == 1
    # A pod deleted before it even started goes the same way, and never turns Running.
    _pod(client, ns, "early")
    _bind(client, ns, "early", f"{prefix}001")
    k.ok(client.request("DELETE", RESOURCES["Pod"].path(ns, "early"), body={}))
    k.wait_for("the early pod gone", lambda: k.get(client, "Pod", f"{ns}/early") is None)
    k.wait_for("its deletion counted", lambda: kubelet.stats.deleted + kubelet.stats.gone >= 2)
    assert kubelet.stats.errors == 0


def test_a_pod_replaced_under_the_same_name_is_treated_as_new(client, names, kubelet):
    prefix, ns = names
    _pod(client, ns, "again")
    _bind(client, ns, "again", f"{prefix}000")
    k.wait_for("the first pod Running", lambda: _phase(client, ns, "again") == "Running")
    k.force_delete(client, f"{ns}/again")
    k.wait_for("the first pod gone", lambda: k.get(client, "Pod", f"{ns}/again") is None)
    _pod(client, ns, "again", duration="0.2s")
    _bind(client, ns, "again", f"{prefix}001")
    k.wait_for("the second pod Succeeded", lambda: _phase(client, ns, "again") == "Succeeded")
    assert kubelet.stats.errors == 0


def test_a_pod_running_when_the_kubelet_starts_keeps_its_start_and_ends_on_time(client, names):
    prefix, ns = names
    _namespace(client, ns)
    nodes = create_nodes(client, 1, CPU_NODE, prefix=prefix)
    _pod(client, ns, "long", duration="4s")
    _bind(client, ns, "long", nodes[0])
    with FakeKubelet(client, nodes, startup_delay=0.05) as first:
        k.wait_for("the pod Running", lambda: _phase(client, ns, "long") == "Running")
    started = k.get(client, "Pod", f"{ns}/long")["status"]["startTime"]
    assert first.stats.succeeded == 0
    with FakeKubelet(client, nodes, startup_delay=0.05) as second:
        k.wait_for("the pod Succeeded", lambda: _phase(client, ns, "long") == "Succeeded")
    done = k.get(client, "Pod", f"{ns}/long")
    assert done["status"]["startTime"] == started  # not started a second time
    assert second.stats.started == 0 and second.stats.succeeded == 1


def test_the_duration_annotation():
    def pod(**annotations: str) -> dict[str, Any]:
        return {"metadata": {"name": "p", "annotations": annotations}}

    assert pod_duration(pod()) is None
    assert pod_duration(pod(**{DURATION_ANNOTATION: "90s"})) == 90.0
    assert pod_duration(pod(**{DURATION_ANNOTATION: "5m"})) == 300.0
    assert pod_duration(pod(**{DURATION_ANNOTATION: "1h30m"})) == 5400.0
    assert pod_duration(pod(**{DURATION_ANNOTATION: "0.3s"})) == pytest.approx(0.3)
    assert pod_duration(pod(**{DURATION_ANNOTATION: "12"})) == 12.0
    assert pod_duration(pod(**{DURATION_ANNOTATION: "soon"})) is None  # logged, runs on
    # The simulator's annotation is read too, so its manifests behave alike here.
    assert pod_duration(pod(**{"pumice.sim/duration": "2m"})) == 120.0
    both = {DURATION_ANNOTATION: "1s", "pumice.sim/duration": "2m"}
    assert pod_duration(pod(**both)) == 1.0


def test_pumice_run_schedules_a_gang_whose_pods_then_run_and_succeed(
    control_plane, client, names, tmp_path
):
    prefix, ns = names
    applied = install_pumice(control_plane.kubeconfig, tmp_path / "manifests.yaml")
    assert applied is not None and applied >= 3  # two CRDs and the default Queue
    _namespace(client, ns)
    nodes = create_nodes(client, 4, CPU_NODE, prefix=prefix)
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {"minMember": 4, "queue": "default"},
    }
    k.ok(client.request("POST", RESOURCES["PodGroup"].path(ns), body=pg))
    for i in range(4):  # 24 of a node's 32 cpu: one pod per node
        _pod(client, ns, f"train-{i}", duration="0.5s", group="train", cpu="24")

    # The runner closes the client it is given when it stops: one of its own.
    runner = Runner(
        KubeClient.from_config(str(control_plane.kubeconfig)),
        ConfigWatcher(None, Scheduler.from_file),
        Scheduler.from_file(None),
        RunOptions(period=0.2),
    )
    thread = threading.Thread(target=runner.run, daemon=True)
    with FakeKubelet(client, nodes, startup_delay=0.05, grace_cap=0.2) as fake:
        thread.start()
        try:
            k.wait_for(
                "the gang's pods Succeeded",
                lambda: all(_phase(client, ns, f"train-{i}") == "Succeeded" for i in range(4)),
                timeout=30,
            )
            # What pumice writes for a gang whose pods all succeeded.
            group = k.wait_for(
                "the podgroup Completed",
                lambda: (
                    (g := k.get(client, "PodGroup", f"{ns}/train"))
                    and g["status"].get("phase") == "Completed"
                    and g
                ),
            )
        finally:
            runner.stop.set()
            thread.join(20)
        assert not thread.is_alive(), "the runner did not stop"
    placed = {(k.get(client, "Pod", f"{ns}/train-{i}") or {})["spec"]["nodeName"] for i in range(4)}
    assert placed == set(nodes)  # all four placed, one per node
    assert fake.stats.started == 4 and fake.stats.succeeded == 4
    assert fake.stats.errors == 0
    assert group["status"]["succeeded"] == 4


def test_a_bound_pod_starts_after_an_outage_however_long(client, names, control_plane):
    """The API server down when a bound pod is due to start: the kubelet keeps trying
    (with a doubling backoff) past any fixed number of attempts, and the pod is Running
    once the server answers again."""
    prefix, ns = names
    _namespace(client, ns)
    create_nodes(client, 1, CPU_NODE, prefix=prefix)
    with FakeKubelet(client, prefix=prefix, startup_delay=1.0, retry_delay=0.05) as fake:
        assert fake.wait_synced(20)
        _pod(client, ns, "late")
        _bind(client, ns, "late", f"{prefix}000")
        k.wait_for("the kubelet to take the pod in", lambda: fake.stats.seen == 1)
        control_plane.stop_apiserver()
        k.wait_for("more attempts than a fixed limit", lambda: fake.stats.retries > ATTEMPTS + 1)
        control_plane.start_apiserver()
        k.wait_for("the pod Running", lambda: _phase(client, ns, "late") == "Running", timeout=40)
        assert fake.stats.started == 1
