"""Gangs of other dialects against a real API server: deploy/'s coscheduling CRD serves
scheduler-plugins' PodGroups, pumice's cluster and cache follow them beside Volcano's
PodGroups of the same name, a cycle binds the gang and writes its status as
scheduler-plugins defines it, the shipped ClusterRole allows all of it, and a cluster
that serves none of the gang APIs runs all the same, saying so at the start.

Kubernetes' Workload API cannot be served by a CRD on this API server (see
``test_a_crd_cannot_stand_in_for_the_workload_api``); the Workload dialect is tested
against the in-memory cluster (tests/cluster/test_gang_kinds.py)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import pytest
import yaml
from tests.run import kube_kit as k

from pumice.api.task import TaskStatus
from pumice.cache.cache import SchedulerCache
from pumice.cluster.kube import KubeCluster
from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.run.default_queue import DefaultQueue
from pumice.run.events import EventRecorder
from pumice.run.reload import ConfigWatcher
from pumice.run.report import Reporter
from pumice.run.runner import Runner, RunOptions
from pumice.scheduler import Scheduler

pytestmark = pytest.mark.k8s

COS = RESOURCES["CoschedulingPodGroup"]
COS_CRD = k.CRDS / "01-crd-coscheduling-podgroups.yaml"
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
LABEL = "scheduling.x-k8s.io/pod-group"


def cos_podgroup(client: KubeClient, name: str, min_member: int, **spec) -> dict:
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, **spec},
    }
    return k.ok(client.request("POST", COS.path("default"), body=body))


def cos_pod(client: KubeClient, name: str, group: str, cpu: str = "1") -> dict:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {LABEL: group}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
    }  # fmt: skip
    return k.ok(client.request("POST", RESOURCES["Pod"].path("default"), body=body))


def set_phase(client: KubeClient, name: str, phase: str) -> None:
    path = RESOURCES["Pod"].path("default", name, "status")
    k.ok(client.request("PATCH", path, body={"status": {"phase": phase}},
                        content_type="application/merge-patch+json"))  # fmt: skip


def _wipe(client: KubeClient) -> None:
    k.delete_all(client, COS.path("default"), "coscheduling PodGroups")


@pytest.fixture
def served(kube: tuple[KubeClient, str]) -> Iterator[tuple[KubeClient, str]]:
    """The shared API server (deploy/'s CRDs, coscheduling's included), empty."""
    client, _ = kube
    k.wait_for("coscheduling PodGroups served", lambda: client.request("GET", COS.path())[0] == 200)
    _wipe(client)
    try:
        yield kube
    finally:
        _wipe(client)


def _cycle(cache: SchedulerCache) -> None:
    cache.apply(Scheduler.from_file(None).cycle(cache.snapshot()))


def test_a_coscheduling_gang_is_bound_and_its_status_written(served):
    """Three labelled pods of a coscheduling PodGroup (minMember 3), and a Volcano
    PodGroup of the same name with its own pod: two jobs, both placed; the coscheduling
    PodGroup says Scheduling once bound, then Running with its counts once its pods run,
    and a cycle that changes nothing writes nothing."""
    client, kubeconfig = served
    k.nodes(client, 2, cpu="4")
    cos_podgroup(client, "train", 3)
    for i in range(3):
        cos_pod(client, f"train-{i}", "train")
    k.podgroup(client, "train", 1)
    k.pod(client, "volcano-0", group="train")
    cluster = KubeCluster(KubeClient.from_config(kubeconfig))
    cluster.start()
    try:
        assert cluster.wait_synced(20)
        assert cluster.served("CoschedulingPodGroup")
        assert cluster.get("CoschedulingPodGroup", "default/train") is not None
        assert cluster.get("PodGroup", "default/train") is not None  # (no collision)
        cache = SchedulerCache(cluster)
        snap = cache.snapshot()
        assert sorted(snap.jobs) == ["default/coscheduling:train", "default/train"]
        _cycle(cache)
        k.wait_for("every pod bound", lambda: len(k.bound(client)) == 4)

        def cos_status() -> dict:
            return (k.get(client, "CoschedulingPodGroup", "default/train") or {}).get(
                "status"
            ) or {}

        status = k.wait_for("the coscheduling status", cos_status)
        assert status["phase"] == "Scheduling"
        assert (status["running"], status["succeeded"], status["failed"]) == (0, 0, 0)
        assert status["scheduleStartTime"]
        volcano = k.get(client, "PodGroup", "default/train")
        assert "scheduleStartTime" not in (volcano.get("status") or {})

        for i in range(3):
            set_phase(client, f"train-{i}", "Running")
        k.wait_for("the pods running in the cache", lambda: (
            cache.sync() is not None
            and len(cache.jobs["default/coscheduling:train"].by_status.get(
                TaskStatus.RUNNING, {})) == 3
        ))  # fmt: skip

        def running() -> bool:
            _cycle(cache)
            return cos_status().get("phase") == "Running"

        k.wait_for("the PodGroup Running", running)
        assert cos_status()["running"] == 3
        assert cos_status()["scheduleStartTime"] == status["scheduleStartTime"]
        writes = dict(cluster.stats.writes)
        _cycle(cache)
        _cycle(cache)
        assert cluster.pending_writes() == 0
        assert cluster.stats.writes.get("CoschedulingPodGroup:200", 0) == writes.get(
            "CoschedulingPodGroup:200", 0
        )
    finally:
        cluster.close()


def test_a_waiting_coscheduling_gang_gets_its_event_on_its_own_podgroup(served):
    """A coscheduling gang too big for the nodes waits; the Unschedulable Event with
    its explanation is about the coscheduling PodGroup (its own API group), not about a
    Volcano PodGroup."""
    client, kubeconfig = served
    k.nodes(client, 2, cpu="4")
    cos_podgroup(client, "big", 3)
    for i in range(3):
        cos_pod(client, f"big-{i}", "big", cpu="4")
    cluster = KubeCluster(KubeClient.from_config(kubeconfig))
    cluster.start()
    try:
        assert cluster.wait_synced(20)
        cache = SchedulerCache(cluster)
        reporter = Reporter(cluster, EventRecorder(cluster.create_event, instance="test"))
        decisions = Scheduler.from_file(None).cycle(cache.snapshot())
        assert "default/coscheduling:big" in decisions.pending
        reporter.after_cycle(cache, decisions, cache.apply(decisions))
        (event,) = k.wait_for(
            "an Unschedulable event on the PodGroup",
            lambda: k.events_for(client, "big", "Unschedulable"),
        )
        ref = event["involvedObject"]
        assert (ref["kind"], ref["apiVersion"]) == ("PodGroup", "scheduling.x-k8s.io/v1alpha1")
        assert event["message"] == decisions.pending["default/coscheduling:big"][:1024]
    finally:
        cluster.close()


def test_pods_wait_for_a_missing_coscheduling_podgroup_and_join_it(served):
    """Pods labelled for a PodGroup not created yet are not placed; once it is, the
    gang is bound whole."""
    client, kubeconfig = served
    k.nodes(client, 1, cpu="4")
    for i in range(2):
        cos_pod(client, f"late-{i}", "late")
    with k.running(kubeconfig) as runner:
        k.wait_for("a cycle", lambda: runner.cycles > 1)
        assert k.bound(client) == {}
        snap = runner.cache.snapshot()
        assert "does not exist" in snap.blocked["default/coscheduling:late"]
        cos_podgroup(client, "late", 2)
        k.wait_for("the gang bound", lambda: len(k.bound(client)) == 2)


def test_the_shipped_cluster_role_lets_the_scheduler_watch_and_write_them(rbac_control_plane):
    """With deploy/'s RBAC and CRDs applied, pumice's own identity lists the gang APIs
    (the unserved ones are 404, not 403) and writes a coscheduling PodGroup's status."""
    from pumice.sandbox.apply import apply

    plane = rbac_control_plane
    apply(plane.kubeconfig, [str(k.CRDS)])
    admin = KubeClient.from_config(plane.kubeconfig)
    k.nodes(admin, 1, cpu="4")
    cos_podgroup(admin, "g", 1)
    cos_pod(admin, "g-0", "g")
    client = KubeClient.from_config(
        plane.kubeconfig_for("system:serviceaccount:pumice-system:pumice")
    )
    for kind in ("CoschedulingPodGroup", "Workload", "WorkloadPodGroup", "WorkloadV1alpha2"):
        status, body = client.request("GET", RESOURCES[kind].path())
        assert status in (200, 404), (kind, status, body)
    cluster = KubeCluster(client)
    cluster.start()
    try:
        assert cluster.wait_synced(20)
        # the default Queue (deploy/ holds none), created as pumice run does, by its identity
        assert DefaultQueue(cluster, "default", lambda: True).ensure()
        k.wait_for("the default Queue seen", lambda: cluster.get("Queue", "default"))
        cache = SchedulerCache(cluster)
        _cycle(cache)
        k.wait_for("g-0 bound", lambda: k.bound(admin).get("g-0"))
        k.wait_for("the status written", lambda: (
            (k.get(admin, "CoschedulingPodGroup", "default/g") or {}).get("status") or {}
        ).get("phase") == "Scheduling")  # fmt: skip
        assert not cluster.stats.write_failures
    finally:
        cluster.close()
        admin.close()


def test_a_crd_cannot_stand_in_for_the_workload_api(control_plane):
    """Why deploy/ ships no Workload CRD: a CRD in scheduling.k8s.io needs the approval
    annotation, and even with it the built-in group answers 404 for its versions."""
    client = KubeClient.from_config(control_plane.kubeconfig)
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.scheduling.k8s.io"},
        "spec": {
            "group": "scheduling.k8s.io",
            "scope": "Namespaced",
            "names": {"kind": "Workload", "plural": "workloads", "listKind": "WorkloadList"},
            "versions": [{
                "name": "v1alpha1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object",
                                               "x-kubernetes-preserve-unknown-fields": True}},
            }],
        },
    }  # fmt: skip
    status, body = client.request("POST", CRDS_PATH, body=crd)
    assert status == 422 and "api-approved.kubernetes.io" in body["message"]
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, stand-in"}
    k.ok(client.request("POST", CRDS_PATH, body=crd))

    def established() -> bool:
        got = k.ok(client.request("GET", f"{CRDS_PATH}/workloads.scheduling.k8s.io"))
        conditions = (got.get("status") or {}).get("conditions") or ()
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    k.wait_for("the CRD established", established)
    k.wait_for("its APIService", lambda: client.request(
        "GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.scheduling.k8s.io"
    )[0] == 200)  # fmt: skip
    assert client.request("GET", RESOURCES["Workload"].path())[0] == 404
    assert client.request("GET", RESOURCES["PriorityClass"].path())[0] == 200


def _install_volcano_crds(client: KubeClient) -> None:
    for path in sorted(k.CRDS.glob("01-crd-*.yaml")):
        if path != COS_CRD:
            status, body = client.request("POST", CRDS_PATH, body=yaml.safe_load(path.read_text()))
            assert status in (201, 409), body


@contextlib.contextmanager
def _on_a_thread(runner: Runner) -> Iterator[None]:
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        k.wait_for("the runner's caches to sync", lambda: runner.cache is not None)
        yield
    finally:
        runner.stop.set()
        thread.join(20)
        assert not thread.is_alive()


def test_without_the_gang_apis_run_starts_and_says_so(control_plane, caplog):
    """No coscheduling CRD, no Workload API: pumice run schedules Volcano's gangs, says
    at the start that the gang APIs are not installed, and takes the coscheduling CRD
    in when it is installed later."""
    caplog.set_level(logging.INFO, logger="pumice")
    client = KubeClient.from_config(control_plane.kubeconfig)
    _install_volcano_crds(client)
    k.wait_for("the Queue CRD", lambda: client.request("GET", RESOURCES["Queue"].path())[0] == 200)
    assert client.request("GET", COS.path())[0] == 404
    k.queue(client, "default")
    k.nodes(client, 1, cpu="4")
    k.pod(client, "p")
    runner = Runner(
        KubeClient.from_config(control_plane.kubeconfig),
        ConfigWatcher(None, Scheduler.from_file),
        Scheduler.from_file(None),
        RunOptions(period=0.2),
    )
    runner.cluster.informers["CoschedulingPodGroup"].backoff = (0.2, 1.0)
    with _on_a_thread(runner):
        k.wait_for("p bound", lambda: k.bound(client).get("p"))
        lines = [r.getMessage() for r in caplog.records]
        (said,) = [line for line in lines if line.startswith("gang APIs not installed")]
        for api in ("scheduling.x-k8s.io/v1alpha1 podgroups", "scheduling.k8s.io/v1alpha1 "
                    "workloads", "scheduling.k8s.io/v1alpha2 podgroups"):  # fmt: skip
            assert api in said
        assert "pods of that dialect wait" in said

        k.ok(client.request("POST", CRDS_PATH, body=yaml.safe_load(COS_CRD.read_text())))
        k.wait_for("the CRD served", lambda: client.request("GET", COS.path())[0] == 200)
        cos_podgroup(client, "g", 1)
        cos_pod(client, "g-0", "g")
        k.wait_for("g-0 bound", lambda: k.bound(client).get("g-0"), timeout=30)
        lines = [r.getMessage() for r in caplog.records]
        assert any(line.startswith("gang APIs served: scheduling.x-k8s.io") for line in lines)
