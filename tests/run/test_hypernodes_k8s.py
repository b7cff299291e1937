"""HyperNodes against a real API server: deploy/'s CRD serves them, the cluster and the
scheduler cache follow them (created, changed, a node relabelled, deleted), the shipped
ClusterRole lets the scheduler watch them, and a cluster without the CRD runs all the
same, saying so at the start and taking the CRD in when it is installed later."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import pytest
import yaml
from tests.run import kube_kit as k

from pumice.cache.cache import SchedulerCache
from pumice.cluster.kube import KubeCluster
from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient
from pumice.run.reload import ConfigWatcher
from pumice.run.runner import Runner, RunOptions
from pumice.sandbox.nodes import NodeShape, create_node
from pumice.scheduler import Scheduler

pytestmark = pytest.mark.k8s

HN = RESOURCES["HyperNode"]
CRD = k.CRDS / "01-crd-hypernodes.yaml"
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def rack_node(client: KubeClient, name: str, rack: str) -> None:
    shape = NodeShape("rack", {"cpu": "4", "memory": "8Gi", "pods": "110"}, {"rack": rack})
    create_node(client, name, shape)


def hypernode(client: KubeClient, name: str, tier: int, *members: dict) -> dict:
    body = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": list(members)},
    }
    return k.ok(client.request("POST", HN.path(), body=body))


def by_label(rack: str) -> dict:
    return {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": rack}}}}


def by_name(kind: str, name: str) -> dict:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def members(cache: SchedulerCache) -> dict[str, list[str]]:
    """Each HyperNode's nodes in the cache's tree, after taking in what arrived."""
    cache.sync()
    topo = cache.topology
    return {} if topo is None else {h.name: sorted(h.nodes) for h in topo.real()}


def _wipe_hypernodes(client: KubeClient) -> None:
    k.delete_all(client, HN.path(), "HyperNodes")


@pytest.fixture
def served(kube: tuple[KubeClient, str]) -> Iterator[tuple[KubeClient, str]]:
    """The shared API server (deploy/'s CRDs, HyperNode's included) with no HyperNode."""
    client, _ = kube
    k.wait_for("HyperNodes served", lambda: client.request("GET", HN.path())[0] == 200)
    _wipe_hypernodes(client)
    try:
        yield kube
    finally:
        _wipe_hypernodes(client)


def test_the_crd_refuses_what_volcanos_refuses(served):
    client, _ = served
    bad = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "bad"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {}}]},
    }
    status, body = client.request("POST", HN.path(), body=bad)
    assert status == 422 and "ExactMatch or RegexMatch or LabelMatch" in body["message"]
    bad["spec"] = {"tier": 1, "members": [by_name("Switch", "n1")]}
    status, body = client.request("POST", HN.path(), body=bad)
    assert status == 422 and "spec.members[0].type" in body["message"]
    # Fields of newer Volcano versions are kept.
    good = hypernode(client, "s0", 1, {**by_name("Node", "n1"), "weight": 2})
    assert good["spec"]["members"][0]["weight"] == 2


def test_the_cluster_and_cache_follow_hypernodes_and_node_labels(served):
    client, _ = served
    rack_node(client, "n1", "a")
    rack_node(client, "n2", "a")
    rack_node(client, "n3", "b")
    hypernode(client, "rack-a", 1, by_label("a"))
    cluster = KubeCluster(KubeClient.from_config(served[1]))
    cluster.start()
    try:
        assert cluster.wait_synced(20)
        assert cluster.served("HyperNode")
        cache = SchedulerCache(cluster)
        assert members(cache) == {"rack-a": ["n1", "n2"]}  # listed at the start

        hypernode(client, "rack-b", 1, by_label("b"))
        hypernode(client, "spine", 2, by_name("HyperNode", "rack-a"),
                  by_name("HyperNode", "rack-b"))  # fmt: skip
        k.wait_for("the new HyperNodes in the cache", lambda: members(cache) == {
            "rack-a": ["n1", "n2"], "rack-b": ["n3"], "spine": ["n1", "n2", "n3"],
        })  # fmt: skip
        assert cache.snapshot().topology.span(["n1", "n3"]) == "spine"

        k.ok(client.request("PATCH", RESOURCES["Node"].path("", "n2"), content_type=MERGE_PATCH,
                            body={"metadata": {"labels": {"rack": "b"}}}))  # fmt: skip
        k.wait_for("n2 in rack-b", lambda: members(cache).get("rack-b") == ["n2", "n3"])
        assert members(cache)["rack-a"] == ["n1"]

        only_a = {"spec": {"members": [by_name("HyperNode", "rack-a")]}}
        k.ok(client.request("PATCH", HN.path("", "spine"), body=only_a, content_type=MERGE_PATCH))
        k.wait_for("the spine over rack-a alone", lambda: members(cache).get("spine") == ["n1"])

        k.ok(client.request("DELETE", HN.path("", "rack-b")))
        k.wait_for("rack-b gone", lambda: "rack-b" not in members(cache))
        assert cluster.get("HyperNode", "rack-b") is None
        _wipe_hypernodes(client)
        k.wait_for("no tree", lambda: cache.snapshot().topology is None)
        assert cluster.list("HyperNode") == []
    finally:
        cluster.close()


def test_pumice_run_reports_a_bad_hypernode_and_schedules_the_rest(served, caplog):
    client, kubeconfig = served
    caplog.set_level(logging.INFO, logger="pumice")
    rack_node(client, "n1", "a")
    hypernode(client, "rack-a", 1, by_label("a"))
    hypernode(client, "zz", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "zz"}}})
    hypernode(client, "loop-1", 3, by_name("HyperNode", "loop-2"))
    hypernode(client, "loop-2", 4, by_name("HyperNode", "loop-1"))
    k.pod(client, "p")
    with k.running(kubeconfig) as runner:
        k.wait_for("p bound", lambda: k.bound(client).get("p") == "n1")
        k.wait_for("the tree", lambda: runner.cache.topology is not None)
        assert sorted(h.name for h in runner.cache.topology.real()) == ["rack-a", "zz"]
    lines = [r.getMessage() for r in caplog.records]
    assert any("skipped by pumice" in line and "cycle: loop-1 -> loop-2 -> loop-1" in line
               for line in lines), lines  # fmt: skip
    assert any("HyperNodes: HyperNode zz: nodes matching /zz/ matches no node" in line
               for line in lines), lines  # fmt: skip
    assert not any("HyperNodes are not installed" in line for line in lines)


def test_the_shipped_cluster_role_lets_the_scheduler_watch_hypernodes(rbac_control_plane):
    cp = rbac_control_plane
    from pumice.sandbox.apply import apply

    apply(cp.kubeconfig, [str(k.CRDS)])
    admin = KubeClient.from_config(cp.kubeconfig)
    rack_node(admin, "n1", "a")
    hypernode(admin, "rack-a", 1, by_label("a"))
    with k.running(cp.kubeconfig_for("system:serviceaccount:pumice-system:pumice")) as runner:
        assert runner.cluster.served("HyperNode")
        k.wait_for("the tree", lambda: runner.cache.topology is not None)
        hypernode(admin, "rack-b", 1, by_label("b"))
        k.wait_for("rack-b seen", lambda: runner.cluster.get("HyperNode", "rack-b"))
    admin.close()


def _install_crds(client: KubeClient, *, hypernodes: bool) -> None:
    for path in sorted(k.CRDS.glob("01-crd-*.yaml")):
        if (path == CRD) == hypernodes:
            crd = yaml.safe_load(path.read_text())
            status, body = client.request("POST", CRDS_PATH, body=crd)
            assert status in (201, 409), body


def test_without_the_crd_pumice_runs_says_so_and_takes_it_in_later(control_plane, caplog):
    caplog.set_level(logging.INFO, logger="pumice")
    client = KubeClient.from_config(control_plane.kubeconfig)
    _install_crds(client, hypernodes=False)
    k.wait_for("the Queue CRD", lambda: client.request("GET", RESOURCES["Queue"].path())[0] == 200)
    assert client.request("GET", HN.path())[0] == 404
    k.queue(client, "default")
    rack_node(client, "n1", "a")
    k.pod(client, "p")
    runner = Runner(
        KubeClient.from_config(control_plane.kubeconfig),
        ConfigWatcher(None, Scheduler.from_file),
        Scheduler.from_file(None),
        RunOptions(period=0.2),
    )
    # (relist an unserved kind every second, not every 30 s, so the test is short)
    runner.cluster.informers["HyperNode"].backoff = (0.2, 1.0)
    with _on_a_thread(runner):
        k.wait_for("p bound", lambda: k.bound(client).get("p") == "n1")
        assert not runner.cluster.served("HyperNode")
        assert runner.cache.topology is None
        lines = [r.getMessage() for r in caplog.records]
        (said,) = [line for line in lines if "HyperNodes are not installed" in line]
        assert "as if the cluster had no HyperNodes" in said

        _install_crds(client, hypernodes=True)
        k.wait_for("HyperNodes served", lambda: client.request("GET", HN.path())[0] == 200)
        hypernode(client, "rack-a", 1, by_label("a"))
        k.wait_for("the tree", lambda: runner.cache.topology is not None, timeout=30)
        assert sorted(runner.cache.topology.hypernodes["rack-a"].nodes) == ["n1"]
        assert runner.cluster.served("HyperNode")
    lines = [r.getMessage() for r in caplog.records]
    assert any("HyperNodes are served now" in line for line in lines)
    client.close()


@contextlib.contextmanager
def _on_a_thread(runner: Runner) -> Iterator[Runner]:
    """A runner made here on a thread for the block (as kube_kit.running does)."""
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        k.wait_for("the runner's caches to sync", lambda: runner.cache is not None)
        yield runner
    finally:
        runner.stop.set()
        thread.join(20)
        assert not thread.is_alive(), "the runner did not stop"
