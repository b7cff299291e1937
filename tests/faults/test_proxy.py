"""The fault proxy against a real API server: what it forwards, what it injects."""

from __future__ import annotations

import threading
import time

import pytest

from pumice.cluster.kube_client import RESOURCES, ApiUnavailable, KubeClient
from pumice.faults.proxy import BindFault
from pumice.faults.scenarios import Bench, make_gang

pytestmark = pytest.mark.k8s


def _client(bench: Bench, *faults: BindFault) -> tuple[KubeClient, object]:
    proxy = bench.proxy(*faults)
    path = proxy.kubeconfig(bench.workdir / "p.kubeconfig", bench.plane.admin_token)
    return KubeClient.from_config(path), proxy


def _bind(client: KubeClient, pod: str, node: str) -> int:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    return client.request("POST", RESOURCES["Pod"].path("default", pod, "binding"), body=body)[0]


def _node_of(bench: Bench, pod: str) -> str | None:
    _, body = bench.client.request("GET", RESOURCES["Pod"].path("default", pod))
    return body["spec"].get("nodeName")


def test_a_bind_refused_before_the_server_leaves_the_pod_unbound(bench):
    client, proxy = _client(bench, BindFault(2, 409))
    make_gang(bench.client, "g", "default", 2, "1")
    assert _bind(client, "g-0", "node-000") == 201
    assert _bind(client, "g-1", "node-001") == 409  # the second bind: refused by the proxy
    assert (_node_of(bench, "g-0"), _node_of(bench, "g-1")) == ("node-000", None)
    assert [(b.pod, b.status) for b in proxy.binds] == [("default/g-0", 201)]
    assert proxy.injected == {"bind 409 (not forwarded)": 1}
    client.close()


def test_a_bind_answered_500_after_landing_binds_the_pod(bench):
    client, proxy = _client(bench, BindFault(1, 500, before=False))
    make_gang(bench.client, "g", "default", 1, "1")
    assert _bind(client, "g-0", "node-002") == 500
    assert _node_of(bench, "g-0") == "node-002"
    assert [(b.pod, b.node, b.status) for b in proxy.binds] == [("default/g-0", "node-002", 201)]
    client.close()


def test_dropped_watches_end_the_stream(bench):
    client, proxy = _client(bench)
    ended = threading.Event()

    def watching() -> None:
        try:
            for _ in client.stream(RESOURCES["Pod"].path(), {"watch": "true"}, timeout=30):
                pass
        except ApiUnavailable:
            pass
        ended.set()

    threading.Thread(target=watching, daemon=True).start()
    deadline = time.monotonic() + 10
    while proxy.drop_watches() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ended.wait(10)
    assert proxy.injected["watch drop"] == 1
    client.close()


def test_a_partition_holds_requests_unanswered_until_healed(bench):
    client, proxy = _client(bench)
    assert client.request("GET", RESOURCES["Node"].path())[0] == 200
    proxy.partition()
    threading.Timer(0.5, proxy.heal).start()
    with pytest.raises(ApiUnavailable):
        client.request("GET", RESOURCES["Node"].path(), timeout=10)
    assert client.request("GET", RESOURCES["Node"].path())[0] == 200  # healed
    client.close()
