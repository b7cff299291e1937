"""Start estimates beside the pending jobs, against a real API server: `pumice queue
pending --eta` (a forecast run here, or the running scheduler's), the endpoint's
``?eta=1``, and run times `pumice run` learns from the pods that finish."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from tests.run import kube_kit as k

from pumice.cli import main
from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient
from pumice.visibility.eta import RunForecast

pytestmark = pytest.mark.k8s

PATH = "/apis/visibility/v1/queues/default/pendingjobs"


def _iso(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


def _running_pod(
    client: KubeClient, name: str, node: str, started: float, *, cpu: str, deadline: int | None
) -> None:
    """A pod of its own group, on ``node``, running since ``started``."""
    k.podgroup(client, name, 1)
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "nodeName": node,
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }  # fmt: skip
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    body = {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": f"{name}-0", "namespace": "default",
                         "annotations": {k.GROUP: name}}}  # fmt: skip
    k.ok(client.request("POST", RESOURCES["Pod"].path("default"), body=body))
    _status(client, f"{name}-0", {"phase": "Running", "startTime": _iso(started)})


def _status(client: KubeClient, pod: str, status: dict[str, Any]) -> None:
    k.ok(client.request("PATCH", RESOURCES["Pod"].path("default", pod, "status"),
                        body={"status": status}, content_type=MERGE_PATCH))  # fmt: skip


@pytest.fixture
def behind_a_deadline(kube: tuple[KubeClient, str]) -> tuple[KubeClient, str]:
    """One 4-CPU node held by a pod that started 100 s ago with a 600 s deadline; a
    4-CPU job waiting for it."""
    client, kubeconfig = kube
    (node,) = k.nodes(client, 1, cpu="4")
    _running_pod(client, "busy", node, time.time() - 100, cpu="4",
                 deadline=600)  # fmt: skip
    k.podgroup(client, "waiter", 1)
    k.pod(client, "waiter-0", group="waiter", cpu="4")
    return client, kubeconfig


def _waiter(items: list[dict[str, Any]]) -> dict[str, Any]:
    (item,) = [i for i in items if i["name"] == "waiter"]
    return item


def test_queue_pending_eta_forecasts_here_from_the_clusters_objects(
    behind_a_deadline: tuple[KubeClient, str], capsys
) -> None:
    client, kubeconfig = behind_a_deadline
    argv = ["queue", "pending", "default", "--kubeconfig", kubeconfig, "--eta"]
    assert main([*argv, "--format", "json"]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert body["source"] == "local-cycle"
    item = _waiter(body["items"])
    # the deadline frees the node 500 s after the pod's start was set (less the
    # seconds this test took to get here)
    assert 400 < item["eta"] <= 501
    assert "activeDeadlineSeconds" in item["assumption"]
    assert "no new arrivals" in item["assumption"]
    assert body["forecast"]["stepChosen"] == "auto: 1 nodes" and body["forecast"]["step"] == 1.0
    assert k.bound(client) == {"busy-0": k.pods(client)["busy-0"]["spec"]["nodeName"]}
    # as a table: the estimate and its assumption beside the reason
    assert main([*argv, "--eta-step", "60"]) == 0
    out = capsys.readouterr().out
    assert "starts in" in out and "assumption" in out and "activeDeadlineSeconds" in out
    assert "step 60 s (given)" in out
    assert main([*argv, "--eta-step", "0"]) == 2
    assert "--eta-step" in capsys.readouterr().err


@pytest.fixture
def server(behind_a_deadline: tuple[KubeClient, str]) -> Iterator[str]:
    kubeconfig = behind_a_deadline[1]
    with k.pumice_run(kubeconfig) as url:
        k.wait_for("the pending list", lambda: k.get_json(url + PATH)[0] == 200, timeout=60)
        yield url


def test_the_endpoint_answers_with_the_last_forecast(server: str, capsys) -> None:
    _, body = k.wait_for(
        "the estimates",
        lambda: (got := k.get_json(server + PATH + "?eta=1"))[0] == 200 and got,
        timeout=60,
    )
    item = _waiter(body["items"])
    assert 400 < item["eta"] <= 501
    assert "activeDeadlineSeconds" in item["assumption"]
    info = body["forecast"]
    assert info["stepChosen"] == "auto: 1 nodes" and info["cycles"] >= 1
    assert info["ageSeconds"] >= 0 and info["computedAt"].endswith("Z")
    # the same list without ?eta=1 has no estimates
    plain = k.get_json(server + PATH)[1]
    assert "forecast" not in plain and "eta" not in _waiter(plain["items"])
    assert main(["queue", "pending", "--server", server, "--eta", "--format", "json"]) == 0
    asked = orjson.loads(capsys.readouterr().out)
    assert asked["source"] == "scheduler"
    assert "activeDeadlineSeconds" in _waiter(asked["items"])["assumption"]


@pytest.fixture
def learning(kube: tuple[KubeClient, str]) -> tuple[KubeClient, str, float]:
    """A pod that says nothing of its end holds the only node, a job waits for it, and
    three jobs of the queue finished, after 100, 200 and 300 s."""
    client, kubeconfig = kube
    (name,) = k.nodes(client, 1, cpu="4")
    now = time.time()
    _running_pod(client, "long", name, now, cpu="4", deadline=None)
    k.podgroup(client, "waiter", 1)
    k.pod(client, "waiter-0", group="waiter", cpu="4")
    for i, seconds in enumerate((100, 200, 300)):
        _running_pod(client, f"done{i}", name, now - 1000, cpu="0", deadline=None)
        _status(client, f"done{i}-0", {
            "phase": "Succeeded",
            "containerStatuses": [{"name": "main", "image": "busybox", "imageID": "",
                                   "ready": False, "restartCount": 0,
                                   "state": {"terminated": {
                                       "exitCode": 0,
                                       "startedAt": _iso(now - 1000),
                                       "finishedAt": _iso(now - 1000 + seconds)}}}],
        })  # fmt: skip
    return client, kubeconfig, now


def test_the_scheduler_learns_run_times_from_the_pods_that_finish(
    learning: tuple[KubeClient, str, float],
) -> None:
    _client, kubeconfig, now = learning
    with k.running(kubeconfig) as runner:
        forecast = RunForecast(max_age=3600.0)
        runner.between_cycles.append(forecast.turn)
        k.wait_for(
            "the run times learned",
            lambda: (
                forecast.finished is not None
                and forecast.finished.durations.estimate("default") == 250.0
            ),
        )
        got = k.wait_for(
            "a forecast",
            lambda: (last := forecast.background.latest()[0]) is not None and last,
            timeout=60,
        )
    est = got.estimates["default/waiter"]
    assert est.start is not None
    # the long pod ends at its queue's p75 (250 s) after its start
    assert now + 240 <= est.start <= now + 252
    assert "learned run time" in est.assumption
    assert "p75 of the last 3 finished jobs" in est.assumption


def test_queue_pending_eta_here_learns_from_the_finished_pods_still_listed(
    learning: tuple[KubeClient, str, float], capsys
) -> None:
    _client, kubeconfig, _now = learning
    argv = ["queue", "pending", "--kubeconfig", kubeconfig, "--eta", "--format", "json"]
    assert main(argv) == 0
    item = _waiter(orjson.loads(capsys.readouterr().out)["items"])
    # 250 s after the long pod's start, less the seconds this test took to get here
    assert 150 < item["eta"] <= 251
    assert "learned run time" in item["assumption"]
