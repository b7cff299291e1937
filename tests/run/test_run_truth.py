"""What `pumice run` reports about a real cluster must be true: finished pods wait for
nothing, a Queue's status follows what it holds (down to zero), invalid objects are
said to be invalid and why, and the cluster's story survives an API server outage."""

from __future__ import annotations

import json
import logging

import pytest
from tests.run import kube_kit as k
from tests.run.test_run_metrics import samples, value

from pumice.cli import main
from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient
from pumice.run.dump import write_dump
from pumice.run.leader import LeaderElector
from pumice.run.metrics import SchedulerMetrics
from pumice.run.runner import RunOptions
from pumice.sandbox.apply import apply

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


def test_an_outage_is_said_twice_and_its_events_survive(kube, shared_plane, caplog):
    """An API server outage is one WARNING when it starts and one summary when it ends
    (not a line per informer and retry), and the Events recorded meanwhile (a bind's
    `Scheduled` just before it) are posted once the server answers."""
    client, kubeconfig = kube
    k.nodes(client, 1, cpu="4")
    k.pod(client, "a", cpu="1")
    caplog.set_level(logging.DEBUG, logger="pumice")
    with k.running(kubeconfig) as runner:
        k.wait_for("a bound", lambda: "a" in k.bound(client))
        pod = runner.cluster.get("Pod", "default/a")
        outages = runner.client.reachability.outages
        shared_plane.stop_apiserver()
        runner.events.record("Pod", pod, "Normal", "Scheduled", "said during the outage")
        k.wait_for(
            "informers to fail more than once",
            lambda: sum(inf.reconnects for inf in runner.cluster.informers.values()) > 20,
        )
        assert runner.cluster.outbox.waiting() >= 1  # (a's own Scheduled may wait too)
        shared_plane.start_apiserver()
        k.wait_for(
            "the event posted",
            lambda: any(e["message"] == "said during the outage" for e in k.events(client)),
            timeout=30,
        )
        k.wait_for("the outage over", lambda: not runner.client.reachability.down)
        k.wait_for("a's Scheduled event", lambda: k.events_for(client, "a", "Scheduled"))
        assert runner.client.reachability.outages == outages + 1
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    down = [r for r in said if "is not answering" in r.getMessage()]
    back = [r for r in said if "answers again after" in r.getMessage()]
    assert len(down) == 1 and len(back) == 1, [r.getMessage() for r in said]
    assert "requests failed meanwhile" in back[0].getMessage()
    assert not [r for r in said if r.name == "pumice.informer"]
    assert not [r for r in said if "lost lease" in r.getMessage()]


def test_a_refused_config_outside_a_pod_is_logged_not_an_event_on_no_object(
    kube, tmp_path, monkeypatch, caplog
):
    """Outside a cluster there is no scheduler Pod: an Event would name an object that
    does not exist, so the refusal is the log line alone."""
    monkeypatch.delenv("POD_NAME", raising=False)
    client, kubeconfig = kube
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    with k.running(kubeconfig, config=str(conf)) as runner:
        conf.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gangg\n')
        k.wait_for("the refusal", lambda: runner.config.refusals == 1)
        k.pod(client, "after")  # (a cycle after the refusal: its writes are out)
        k.wait_for("a cycle", lambda: runner.last_decisions is not None)
        k.wait_for("writes settled", lambda: runner.cluster.pending_writes() == 0)
    assert not [e for e in k.events(client) if e["reason"] == "ConfigRefused"]
    assert any("config refused" in r.getMessage() and "gangg" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_a_quiet_start_and_a_clean_stop_warn_of_nothing(kube, caplog):
    """With leader election and the controllers, a start on a cluster without the
    optional APIs (DRA, metrics, Workloads) and a clean stop log no WARNING: the APIs
    not served are one INFO line, the stop steps down from the lease (not "lost" it),
    and no connection is discarded for want of room in the pool."""
    client, kubeconfig = kube
    k.nodes(client, 1, cpu="4")
    caplog.set_level(logging.INFO)
    elector_client = KubeClient.from_config(kubeconfig)
    # (Long enough that a loaded machine missing a renewal by a second does not make
    # the lease lost: a clean stop is what is checked.)
    elector = LeaderElector(
        elector_client, namespace="default", name="pumice-truth", identity="truth",
        lease_duration=15.0, renew_deadline=10.0, retry_period=0.2,
    )  # fmt: skip
    options = RunOptions(period=0.2, controllers=("podgroup", "queue", "job"))
    with k.running(kubeconfig, options=options, elector=elector) as runner:
        for i in range(8):
            k.pod(client, f"p{i}", cpu="100m", memory="100Mi")
        k.wait_for("the pods bound", lambda: len(k.bound(client)) == 8)
        assert runner.controllers is not None
    elector_client.close()
    messages = [(r.levelno, r.name, r.getMessage()) for r in caplog.records]
    warned = [m for m in messages if m[0] >= logging.WARNING]
    assert not warned, warned
    served = [m for m in messages if m[1] == "pumice.run" and "not served by" in m[2]]
    assert len(served) == 1 and "ResourceClaim" in served[0][2]
    assert any("stepped down from lease" in m[2] for m in messages)


def test_a_refused_bind_is_a_warning_with_the_reason(rbac_control_plane, caplog):
    """A bind the API server refuses (here: RBAC without pods/binding) is logged as a
    WARNING naming the pod, the node and the server's answer."""
    cp = rbac_control_plane
    admin = KubeClient.from_config(cp.kubeconfig)
    apply(cp.kubeconfig, [str(k.CRDS)])
    path = "/apis/rbac.authorization.k8s.io/v1/clusterroles/pumice-scheduler"
    role = k.ok(admin.request("GET", path))
    for rule in role["rules"]:
        rule["resources"] = [r for r in rule.get("resources", []) if r != "pods/binding"]
    k.ok(admin.request("PUT", path, body=role))
    k.nodes(admin, 1, cpu="4")
    k.pod(admin, "p", cpu="1")
    caplog.set_level(logging.INFO)
    with k.running(cp.kubeconfig_for("system:serviceaccount:pumice-system:pumice")) as runner:
        k.wait_for("a refused bind", lambda: runner.cluster.stats.bind_failures)
    assert "forbidden" in runner.cluster.stats.bind_failures
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    (said,) = {m for m in warned if "bind of default/p" in m}
    assert "HTTP 403" in said and " to node-000 " in said
    admin.close()
