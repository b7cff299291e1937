"""Numatopologies and ResourceQuotas against a real API server: deploy/'s CRD serves
Numatopologies as Volcano's exporter writes them, and the cluster and the scheduler
cache follow both kinds, so that a cycle of `pumice run` sees them."""

from __future__ import annotations

import pytest
from tests.plugins.test_numa_aware import numatopo
from tests.run import kube_kit as k

from pumice.cache.cache import SchedulerCache
from pumice.cluster.kube import KubeCluster
from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient

pytestmark = pytest.mark.k8s

NUMA = RESOURCES["Numatopology"]
QUOTA = RESOURCES["ResourceQuota"]


def _quota(hard: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "compute", "namespace": "default"},
        "spec": {"hard": hard},
    }


def test_the_cache_follows_numatopologies_and_quotas(kube):
    client, kubeconfig = kube
    k.delete_all(client, NUMA.path(), "Numatopologies")
    k.delete_all(client, QUOTA.path("default"), "ResourceQuotas")
    body = numatopo("n1", free="0-3", allocations=({"uid": "u1", "name": "p", "namespace": "d"},))
    k.ok(client.request("POST", NUMA.path(), body=body))
    k.ok(client.request("POST", QUOTA.path("default"), body=_quota({"requests.cpu": "10"})))
    cluster = KubeCluster(KubeClient.from_config(kubeconfig))
    cluster.start()
    try:
        assert cluster.wait_synced(20)
        cache = SchedulerCache(cluster)
        cache.sync()
        rec = cache.snapshot().records("Numatopology")["n1"]
        assert (rec.cpu_policy, rec.topology_policy) == ("static", "single-numa-node")
        assert rec.resource("cpu").allocatable == frozenset(range(4))
        assert rec.assigned("u1", "", "")
        quota = cache.snapshot().records("ResourceQuota")["default/compute"]
        assert dict(quota.hard)["requests.cpu"] == 10_000  # (millicores)

        free = {"spec": {"numares": {"cpu": {"allocatable": "0-1"}}}}
        k.ok(client.request("PATCH", NUMA.path("", "n1"), body=free, content_type=MERGE_PATCH))

        def cpus() -> frozenset[int]:
            cache.sync()
            got = cache.snapshot().records("Numatopology").get("n1")
            return got.resource("cpu").allocatable if got else frozenset()

        k.wait_for("the new free CPUs", lambda: cpus() == frozenset({0, 1}))
        k.ok(client.request("DELETE", QUOTA.path("default", "compute")))

        def quotas() -> int:
            cache.sync()
            return len(cache.snapshot().records("ResourceQuota"))

        k.wait_for("the quota gone", lambda: quotas() == 0)
    finally:
        cluster.close()
        k.delete_all(client, NUMA.path(), "Numatopologies")


def test_the_crd_keeps_what_the_exporter_writes(kube):
    client, _ = kube
    k.delete_all(client, NUMA.path(), "Numatopologies")
    body = numatopo("n2", reserved="1")
    body["spec"]["podAllocations"] = [
        {
            "uid": "u",
            "name": "p",
            "namespace": "d",
            "containerAllocations": [{"name": "c", "allocations": {"cpu": "0-1"}}],
        }
    ]
    body["spec"]["newerField"] = {"kept": True}
    k.ok(client.request("POST", NUMA.path(), body=body))
    got = k.ok(client.request("GET", NUMA.path("", "n2")))
    assert got["spec"]["podAllocations"] == body["spec"]["podAllocations"]
    assert got["spec"]["cpuDetail"]["7"] == {"numa": 1, "socket": 1, "core": 3}
    assert got["spec"]["newerField"] == {"kept": True}
    bad = numatopo("n3")
    bad["spec"]["cpuDetail"]["0"]["numa"] = -1
    status, _ = client.request("POST", NUMA.path(), body=bad)
    assert status == 422
    k.delete_all(client, NUMA.path(), "Numatopologies")


QUOTA_CONFIG = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: resourcequota
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_pumice_run_admits_no_job_past_its_namespaces_quota(kube, tmp_path):
    """A gang whose minResources would take the namespace past its ResourceQuota stays
    Pending, its pods saying which quota and dimension; one within it runs."""
    client, kubeconfig = kube
    k.nodes(client, 2, cpu="8")
    k.ok(client.request("POST", QUOTA.path("default"), body=_quota({"requests.cpu": "4"})))
    conf = tmp_path / "sched.conf"
    conf.write_text(QUOTA_CONFIG)
    k.podgroup(client, "small", 2, minResources={"cpu": "2"})
    k.podgroup(client, "big", 3, minResources={"cpu": "6"})
    for name, size in (("small", 2), ("big", 3)):
        for i in range(size):
            k.pod(client, f"{name}-{i}", group=name)
    with k.running(kubeconfig, config=str(conf)):
        k.wait_for("the small gang bound", lambda: len(k.bound(client)) == 2)

        def refusal() -> str:  # (why the gang waits, on each of its pods)
            return str((k.condition(k.pods(client)["big-0"], "PodScheduled") or {}).get("message"))

        k.wait_for("the big gang explained", lambda: "ResourceQuota default/compute" in refusal())
        assert "requests.cpu" in refusal()
    assert sorted(k.bound(client)) == ["small-0", "small-1"]
    assert (k.get(client, "PodGroup", "default/big") or {})["status"]["phase"] == "Pending"
