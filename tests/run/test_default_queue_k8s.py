"""pumice run creates the default Queue, as vc-scheduler does: on a cluster of its own,
where no Queue exists, installed before or after pumice starts; only while it leads."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import pytest
from tests.run import kube_kit as k

from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.run.reload import ConfigWatcher
from pumice.run.runner import Runner, RunOptions
from pumice.scheduler import Scheduler

pytestmark = pytest.mark.k8s


class _Switch:
    """An elector the test turns on; counts how often the runner asked."""

    def __init__(self) -> None:
        self.leading = False
        self.asked = 0

    def start(self) -> None: ...

    def is_leader(self) -> bool:
        self.asked += 1
        return self.leading

    def stop(self, release: bool = True) -> None: ...


def _runner(kubeconfig: str, elector: _Switch | None = None, **options) -> Runner:
    runner = Runner(
        KubeClient.from_config(kubeconfig),
        ConfigWatcher(None, Scheduler.from_file),
        Scheduler.from_file(None),
        RunOptions(period=0.1, **options),
        elector=elector,
    )
    # (relist an unserved kind every second, not every 30 s, so the test is short)
    runner.cluster.informers["Queue"].backoff = (0.2, 1.0)
    runner.cluster.informers["PodGroup"].backoff = (0.2, 1.0)
    return runner


@contextlib.contextmanager
def _on_a_thread(runner: Runner) -> Iterator[Runner]:
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        k.wait_for("the runner's caches to sync", lambda: runner.cache is not None)
        yield runner
    finally:
        runner.stop.set()
        thread.join(20)
        assert not thread.is_alive(), "the runner did not stop"


def _queues(client: KubeClient) -> dict[str, dict]:
    status, body = client.request("GET", RESOURCES["Queue"].path())
    if status != 200:
        return {}
    return {q["metadata"]["name"]: q for q in body["items"]}


def test_a_cluster_with_no_queue_gets_the_default_one_once_its_crd_is_installed(
    control_plane, caplog
):
    caplog.set_level(logging.INFO, logger="pumice")
    client = KubeClient.from_config(control_plane.kubeconfig)
    k.nodes(client, 1)
    k.pod(client, "p")  # names no queue: it goes to the default one
    with _on_a_thread(_runner(control_plane.kubeconfig)) as runner:
        assert not runner.cluster.served("Queue")
        k.install_crds(client)  # after pumice started, as `kubectl apply -f deploy/` may
        queue = k.wait_for("the default Queue", lambda: _queues(client).get("default"))
        assert queue["spec"]["weight"] == 1 and queue["spec"]["reclaimable"] is True
        k.wait_for("p bound to the node", lambda: k.bound(client).get("p"))
    created = [r.getMessage() for r in caplog.records if "created the default Queue" in
               r.getMessage()]  # fmt: skip
    assert len(created) == 1, created
    client.close()


def test_only_the_leader_creates_the_queue_and_an_existing_one_is_left_alone(control_plane):
    client = KubeClient.from_config(control_plane.kubeconfig)
    k.install_crds(client)
    k.queue(client, "default", weight=5)
    elector = _Switch()
    with _on_a_thread(_runner(control_plane.kubeconfig, elector, default_queue="batch")):
        asked = elector.asked
        k.wait_for("ten turns of the loop", lambda: elector.asked > asked + 10)
        assert set(_queues(client)) == {"default"}, "a standby created a Queue"
        elector.leading = True
        queue = k.wait_for("the leader's Queue", lambda: _queues(client).get("batch"))
        assert queue["spec"] == {"weight": 1, "reclaimable": True}
        assert _queues(client)["default"]["spec"]["weight"] == 5
    client.close()
