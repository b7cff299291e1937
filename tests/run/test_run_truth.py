"""What `pumice run` reports about a real cluster must be true: finished pods wait for
nothing, a Queue's status follows what it holds (down to zero), invalid objects are
said to be invalid and why, and the cluster's story survives an API server outage."""

from __future__ import annotations

import json

import pytest
from tests.run import kube_kit as k
from tests.run.test_run_metrics import samples, value

from pumice.cli import main
from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient
from pumice.run.dump import write_dump
from pumice.run.metrics import SchedulerMetrics

pytestmark = pytest.mark.k8s


def _finish(client: KubeClient, name: str, phase: str = "Succeeded") -> None:
    """What a kubelet writes when a pod's containers end."""
    k.ok(
        client.request(
            "PATCH",
            RESOURCES["Pod"].path("default", name, "status"),
            body={"status": {"phase": phase}},
            content_type=MERGE_PATCH,
        )
    )


def _queue_status(client: KubeClient, name: str = "default") -> dict:
    return (k.get(client, "Queue", name) or {}).get("status") or {}


def test_a_finished_gang_whose_podgroup_is_gone_is_not_a_pending_job(kube):
    """A completed job's PodGroup deleted (Volcano's controller does it): its
    Succeeded and Failed pods wait for nothing, so no pending job, in the decisions and
    in the metrics; a group whose pod still waits is one, named as missing."""
    client, kubeconfig = kube
    k.nodes(client, 1, cpu="4")
    k.gang(client, "done", 3, cpu="1")
    k.pod(client, "lost-0", group="lost", cpu="1")  # (its group never existed)
    metrics = SchedulerMetrics(process_metrics=False)
    with k.running(kubeconfig, metrics=metrics) as runner:
        k.wait_for("the gang bound", lambda: len(k.bound(client)) == 3)
        _finish(client, "done-0")
        _finish(client, "done-1")
        _finish(client, "done-2", "Failed")
        k.ok(client.request("DELETE", RESOURCES["PodGroup"].key_path("default/done")))
        k.wait_for(
            "the cache to see the finished pods without their PodGroup",
            lambda: "default/done" in runner.cache.orphans
            and all(t.status.name in ("SUCCEEDED", "FAILED")
                    for t in runner.cache.orphans["default/done"].values()),
        )  # fmt: skip
        k.pod(client, "later", cpu="1")  # (a cycle after that: it binds this pod)
        k.wait_for("the later pod bound", lambda: "later" in k.bound(client))
        pending = runner.last_decisions.pending
        assert "default/done" not in pending
        assert "PodGroup default/lost does not exist" in pending["default/lost"]
        assert value(samples(metrics), "pumice_pending_jobs") == 1.0
        assert "default/done" not in runner.cache.snapshot().blocked


def test_queue_status_follows_what_it_holds_down_to_zero(kube):
    """A Queue's status.allocated loses a resource once nothing holds it (a merge patch
    alone would keep its last value), and bare pods that finished are a completed job,
    not a running one, without Volcano's controllers."""
    client, kubeconfig = kube
    k.nodes(client, 1, cpu="4")
    k.pod(client, "bare", cpu="1", memory="1Gi")
    with k.running(kubeconfig) as runner:
        runner.reporter.queue_period = 0.1
        k.wait_for(
            "the queue to show the pod",
            lambda: (
                _queue_status(client).get("allocated", {}).get("cpu") in ("1", "1000m")
                and _queue_status(client).get("running") == 1
            ),
        )
        assert _queue_status(client)["allocated"].get("memory") == "1Gi"
        _finish(client, "bare")
        k.wait_for(
            "the queue to show the pod finished",
            lambda: (
                _queue_status(client).get("running") == 0
                and _queue_status(client).get("completed") == 1
            ),
        )
        assert not _queue_status(client).get("allocated")


def test_invalid_objects_are_said_invalid_and_why(kube, tmp_path, capsys):
    """A PodGroup the API server accepts but pumice cannot read (minMember -1): its
    pods' explanation says it is invalid and why (not that it does not exist), and it
    shows the Pending phase (with the reason) in `kubectl get podgroup`, as does one
    whose queue is missing; a pod refused for a bad quantity gets PodScheduled=False
    naming the field."""
    client, kubeconfig = kube
    k.nodes(client, 1, cpu="4")
    k.podgroup(client, "neg", -1)
    k.pod(client, "neg-0", group="neg", cpu="1")
    k.podgroup(client, "lost", 1, queue="nowhere")
    k.pod(client, "lost-0", group="lost", cpu="1")
    k.pod(client, "huge", cpu="1e400")
    with k.running(kubeconfig) as runner:
        k.wait_for(
            "the pods explained",
            lambda: (
                runner.last_decisions is not None
                and {"default/neg", "default/lost"} <= set(runner.last_decisions.pending)
            ),
        )
        why = runner.last_decisions.pending["default/neg"]
        assert "does not exist" not in why
        assert "PodGroup default/neg is invalid" in why and "spec.minMember" in why
        assert "spec.minMember" in runner.last_decisions.skipped["PodGroup default/neg"]

        def phase(name: str) -> dict:
            return (k.get(client, "PodGroup", f"default/{name}") or {}).get("status") or {}

        k.wait_for("the invalid PodGroup Pending", lambda: phase("neg").get("phase") == "Pending")
        assert (
            k.condition(k.get(client, "PodGroup", "default/neg"), "Unschedulable")["reason"]
            == "InvalidSpec"
        )
        k.wait_for(
            "the queueless PodGroup Pending", lambda: phase("lost").get("phase") == "Pending"
        )
        assert (
            "queue 'nowhere' does not exist"
            in (k.condition(k.get(client, "PodGroup", "default/lost"), "Unschedulable")["message"])
        )
        k.wait_for(
            "the bad pod's condition",
            lambda: k.condition(k.pods(client)["huge"], "PodScheduled"),
        )
        cond = k.condition(k.pods(client)["huge"], "PodScheduled")
        assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
        assert "spec.containers[0].resources.requests.cpu" in cond["message"]
        assert k.events_for(client, "neg", "InvalidSpec")
        dump = write_dump(runner.cluster, str(tmp_path))
        run_says = dict(runner.last_decisions.pending)

    # The dump replays: the invalid objects skipped as run skipped them, and said so.
    assert main(["cycle", str(dump)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["skipped"]) == {"PodGroup default/neg", "Pod default/huge"}
    assert out["pending"]["default/neg"] == run_says["default/neg"]
    assert main(["cycle", str(dump), "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "Skipped" in table and "PodGroup default/neg" in table and "spec.minMember" in table
