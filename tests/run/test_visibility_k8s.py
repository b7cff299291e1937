"""The pending jobs of `pumice run` against a real API server: the visibility endpoint
beside /metrics, and `pumice queue pending` asking it or, without a server, running one
cycle on the cluster's objects."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from tests.run import kube_kit as k

from pumice.cli import main
from pumice.cluster.kube_client import RESOURCES, KubeClient

pytestmark = pytest.mark.k8s

PATH = "/apis/visibility/v1/queues/default/pendingjobs"


@pytest.fixture
def backlog(kube: tuple[KubeClient, str]) -> tuple[KubeClient, str]:
    """Two 4-CPU nodes; a gang of two that fits; two 5-CPU jobs no node can hold, the
    high-priority one created last."""
    client, kubeconfig = kube
    pc = RESOURCES["PriorityClass"]
    k.ok(client.request("POST", pc.path(), body={
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "urgent"}, "value": 1000}))  # fmt: skip
    k.nodes(client, 2, cpu="4")
    k.gang(client, "fits", 2, cpu="1")
    k.podgroup(client, "low", 1)
    k.pod(client, "low-0", group="low", cpu="5")
    k.podgroup(client, "high", 1, priorityClassName="urgent")
    k.pod(client, "high-0", group="high", cpu="5", priority_class="urgent")
    return client, kubeconfig


@pytest.fixture
def server(backlog: tuple[KubeClient, str]) -> Iterator[str]:
    """`pumice run` scheduling the backlog, its /metrics address's URL."""
    client, kubeconfig = backlog
    with k.pumice_run(kubeconfig) as url:
        k.wait_for("the gang bound", lambda: len(k.bound(client)) == 2, timeout=60)
        yield url


def test_the_endpoint_lists_the_queue_in_the_order_the_scheduler_tries_it(server: str) -> None:
    status, body = k.wait_for(
        "the pending list",
        lambda: (got := k.get_json(server + PATH))[0] == 200 and len(got[1]["items"]) == 2 and got,
    )
    assert body["source"] == "scheduler" and body["queue"] == "default"
    assert body["total"] == 2 and body["stages"] == {"allocate": 2}
    items = body["items"]
    assert [(i["name"], i["positionInQueue"], i["positionInCluster"]) for i in items] == [
        ("high", 1, 1),
        ("low", 2, 2),
    ]
    assert items[0]["priority"] == 1000
    assert "can never fit" in items[0]["reason"] and "cpu 5" in items[0]["reason"]
    # a page, every queue, and what is not there
    status, page = k.get_json(server + PATH + "?limit=1&offset=1")
    assert status == 200 and [i["name"] for i in page["items"]] == ["low"]
    assert page["total"] == 2 and page["offset"] == 1
    status, every = k.get_json(server + "/apis/visibility/v1/pendingjobs")
    assert status == 200 and [i["name"] for i in every["items"]] == ["high", "low"]
    assert "queue" not in every
    assert k.get_json(server + "/apis/visibility/v1/queues/nobody/pendingjobs")[1]["total"] == 0
    assert k.get_json(server + PATH + "?limit=many")[0] == 400
    assert k.get_json(server + "/apis/visibility/v1/elsewhere")[0] == 404


def test_queue_pending_asks_the_scheduler(server: str, capsys) -> None:
    k.wait_for("the pending list", lambda: len(k.get_json(server + PATH)[1]["items"]) == 2)
    assert main(["queue", "pending", "default", "--server", server, "--format", "json"]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert body["source"] == "scheduler"
    assert [i["name"] for i in body["items"]] == ["high", "low"]
    assert main(["queue", "pending", "default", "--server", server]) == 0
    out = capsys.readouterr().out
    assert out.index("default/high") < out.index("default/low")
    assert "running scheduler's last cycle" in out


def test_without_a_server_one_cycle_runs_here_and_says_so(
    backlog: tuple[KubeClient, str], capsys
) -> None:
    client, kubeconfig = backlog
    argv = ["queue", "pending", "--kubeconfig", kubeconfig]
    assert main([*argv, "default", "--format", "json"]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert body["source"] == "local-cycle"
    # nothing was scheduled yet: the gang fits and is not listed; the two others wait
    assert [(i["name"], i["stage"]) for i in body["items"]] == [
        ("high", "allocate"),
        ("low", "allocate"),
    ]
    assert k.bound(client) == {}  # (nothing written)
    assert main([*argv, "default"]) == 0
    assert "computed here by one scheduling cycle" in capsys.readouterr().out
    # a server that does not answer: said, then the same here
    dead = f"http://127.0.0.1:{k.free_port()}"
    assert main([*argv, "default", "--server", dead, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert "cannot reach the scheduler" in err
    assert orjson.loads(out)["source"] == "local-cycle"
    # a queue the cluster does not have: one line, exit 2
    assert main([*argv, "nobody"]) == 2
    assert "Queue nobody" in capsys.readouterr().err
