"""GPU sharing on a real API server: `pumice run` with Volcano's deviceshare plugin
writes the card it chose on each pod (``volcano.sh/gpu-index``) before it binds the pod,
as the device plugin on the node reads it, and counts the cards written on running pods
when it places the next ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.run import kube_kit as k

from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient
from pumice.run.runner import RunOptions
from pumice.sandbox.nodes import NodeShape, create_node

pytestmark = pytest.mark.k8s

GM, GN, INDEX = "volcano.sh/gpu-memory", "volcano.sh/gpu-number", "volcano.sh/gpu-index"
CONFIG = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: deviceshare
    arguments: {deviceshare.GPUSharingEnable: true}
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


@pytest.fixture
def shared_gpus(kube: tuple[KubeClient, str], tmp_path: Path) -> Iterator[tuple[KubeClient, str]]:
    """One node with 2 cards of 8000 MiB each, shared by memory; the config's path."""
    client, _ = kube
    create_node(client, "gpu-0", NodeShape("g", {"cpu": "16", "memory": "64Gi", "pods": "110",
                                                 GM: "16000", GN: "2"}))  # fmt: skip
    conf = tmp_path / "sched.conf"
    conf.write_text(CONFIG)
    yield client, str(conf)


def gpu_pod(client: KubeClient, name: str, mib: int) -> None:
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "containers": [{
            "name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": "1"}, "limits": {GM: str(mib)}},
        }]},
    }  # fmt: skip
    k.ok(client.request("POST", RESOURCES["Pod"].path("default"), body=body))


def test_each_pod_gets_a_card_written_on_it_before_its_bind(kube, shared_gpus) -> None:
    client, conf = shared_gpus
    gpu_pod(client, "a", 6000)
    with k.running(kube[1], config=conf, options=RunOptions(period=0.2)):
        k.wait_for("a bound", lambda: k.bound(client).get("a"))
        first = k.pods(client)["a"]["metadata"]["annotations"][INDEX]
        # a runs on its card: the next pod of 6000 MiB must get the other card, and a
        # third of 3000 MiB finds no card with that much free (2000 left on each), though
        # the node's total has 4000.
        k.ok(client.request("PATCH", RESOURCES["Pod"].path("default", "a", "status"),
                            body={"status": {"phase": "Running"}},
                            content_type=MERGE_PATCH))  # fmt: skip
        gpu_pod(client, "b", 6000)
        k.wait_for("b bound", lambda: k.bound(client).get("b"))
        gpu_pod(client, "c", 3000)
        k.wait_for(
            "c explained",
            lambda: (
                "no GPU card with 3000 MiB free"
                in str(k.condition(k.pods(client)["c"], "PodScheduled"))
            ),
        )
    pods = k.pods(client)
    assert {first, pods["b"]["metadata"]["annotations"][INDEX]} == {"0", "1"}
    assert "c" not in k.bound(client)
