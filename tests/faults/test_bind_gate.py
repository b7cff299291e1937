"""A bind whose answer never came is retried, but only while this replica may still
write: a retry after the lease was lost could land after another replica placed the
pod, or others on its node (found by the leader-partition scenario)."""

from __future__ import annotations

import time

import pytest

from pumice.cluster.kube import KubeCluster
from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.faults.proxy import BindFault
from pumice.faults.scenarios import Bench, make_gang

pytestmark = pytest.mark.k8s


def _bind_once_unanswered(bench: Bench, gate_closes: bool) -> tuple[KubeCluster, object]:
    """Bind g-0 through a proxy that cuts the first bind's connection unanswered (not
    forwarded); with ``gate_closes``, the gate shuts once that has happened."""
    proxy = bench.proxy(BindFault(1, 0))
    proxy.on_bind = lambda n: proxy.bind_faults.clear()  # only the first is cut
    client = KubeClient.from_config(
        proxy.kubeconfig(bench.workdir / "gate.kubeconfig", bench.plane.admin_token)
    )

    def gate() -> bool:
        return not (gate_closes and proxy.injected)

    cluster = KubeCluster(client, kinds=("Node", "Pod"), may_write=gate)
    cluster.start()
    assert cluster.wait_synced(20)
    make_gang(bench.client, "g", "default", 1, "1")
    deadline = time.monotonic() + 10
    while "default/g-0" not in cluster.objects["Pod"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cluster.bind("default/g-0", "node-000")
    assert cluster.drain_binds(20)
    cluster.close()
    return cluster, proxy


def _node_of(bench: Bench) -> str | None:
    _, body = bench.client.request("GET", RESOURCES["Pod"].path("default", "g-0"))
    return body["spec"].get("nodeName")


def test_a_leader_retries_a_bind_that_got_no_answer(bench):
    cluster, proxy = _bind_once_unanswered(bench, gate_closes=False)
    assert _node_of(bench) == "node-000"
    assert [(b.pod, b.status) for b in proxy.binds] == [("default/g-0", 201)]
    assert cluster.stats.binds == 1


def test_a_replica_that_lost_its_lease_sends_no_retry(bench):
    cluster, proxy = _bind_once_unanswered(bench, gate_closes=True)
    assert _node_of(bench) is None
    assert proxy.binds == []  # nothing reached the server
    assert cluster.stats.bind_failures == {"not_leader": 1}
