"""Helpers for tests that run pumice against a real API server: objects, waiting, and
a runner on a thread."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient
from pumice.run.reload import ConfigWatcher
from pumice.run.runner import Runner, RunOptions
from pumice.sandbox.nodes import NodeShape, create_nodes
from pumice.scheduler import Scheduler

GROUP = "scheduling.k8s.io/group-name"
CRDS = Path(__file__).resolve().parents[2] / "deploy"


def wait_for(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def delete_all(client: KubeClient, path: str, what: str) -> None:
    """Delete every object at the collection ``path`` and wait until none is left (a
    test's objects of a kind that other tests share the API server with)."""
    status, body = client.request("DELETE", path)
    assert status in (200, 404), body
    wait_for(f"no {what}", lambda: not ok(client.request("GET", path))["items"])


def ok(result: tuple[int, Any]) -> Any:
    status, body = result
    assert status in (200, 201), f"HTTP {status}: {body}"
    return body


def install_crds(client: KubeClient) -> None:
    """pumice's own PodGroup and Queue CRDs from deploy/, then wait for them."""
    for path in sorted(CRDS.glob("01-crd-*.yaml")):
        crd = yaml.safe_load(path.read_text())
        status, body = client.request(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd
        )
        assert status in (201, 409), body
    wait_for(
        "the CRDs to be served",
        lambda: (
            client.request("GET", RESOURCES["PodGroup"].path())[0] == 200
            and client.request("GET", RESOURCES["Queue"].path())[0] == 200
        ),
    )


def queue(client: KubeClient, name: str = "default", **spec: Any) -> dict:
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True, **spec},
    }
    return ok(client.request("POST", RESOURCES["Queue"].path(), body=body))


def podgroup(
    client: KubeClient, name: str, min_member: Any, *, namespace: str = "default", **spec: Any
) -> dict:
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "queue": "default", **spec},
    }
    return ok(client.request("POST", RESOURCES["PodGroup"].path(namespace), body=body))


def pod(
    client: KubeClient,
    name: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    group: str | None = None,
    namespace: str = "default",
    scheduler: str = "volcano",
    priority_class: str | None = None,
    grace: int | None = None,
) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if group:
        meta["annotations"] = {GROUP: group}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            },
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    return ok(client.request("POST", RESOURCES["Pod"].path(namespace), body=body))


def gang(client: KubeClient, name: str, size: int, *, min_member: int | None = None, **kw) -> list:
    podgroup(client, name, size if min_member is None else min_member)
    return [pod(client, f"{name}-{i}", group=name, **kw) for i in range(size)]


def nodes(client: KubeClient, count: int, cpu: str = "4", memory: str = "8Gi", **kw) -> list:
    shape = NodeShape("test", {"cpu": cpu, "memory": memory, "pods": "110"})
    return create_nodes(client, count, shape, **kw)


def pods(client: KubeClient, namespace: str = "default") -> dict[str, dict]:
    body = ok(client.request("GET", RESOURCES["Pod"].path(namespace)))
    return {p["metadata"]["name"]: p for p in body["items"]}


def bound(client: KubeClient, namespace: str = "default") -> dict[str, str]:
    return {n: p["spec"]["nodeName"] for n, p in pods(client, namespace).items()
            if p["spec"].get("nodeName")}  # fmt: skip


def get(client: KubeClient, kind: str, key: str) -> dict | None:
    status, body = client.request("GET", RESOURCES[kind].key_path(key))
    return body if status == 200 else None


def events(client: KubeClient, namespace: str = "default") -> list[dict]:
    return ok(client.request("GET", RESOURCES["Event"].path(namespace)))["items"]


def events_for(client: KubeClient, name: str, reason: str, namespace: str = "default") -> list:
    return [e for e in events(client, namespace)
            if e["involvedObject"].get("name") == name and e["reason"] == reason]  # fmt: skip


def condition(obj: dict, type_: str) -> dict | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return c
    return None


def force_delete(client: KubeClient, key: str) -> None:
    """What a kubelet does at the end of a graceful deletion."""
    client.request("DELETE", RESOURCES["Pod"].key_path(key), body={"gracePeriodSeconds": 0})


def set_node_status(client: KubeClient, name: str, patch: dict) -> None:
    ok(client.request("PATCH", RESOURCES["Node"].path("", name, "status"), body=patch,
                      content_type=MERGE_PATCH))  # fmt: skip


@contextlib.contextmanager
def running(
    kubeconfig: str,
    *,
    config: str | None = None,
    options: RunOptions | None = None,
    elector: Any = None,
    metrics: Any = None,
) -> Iterator[Runner]:
    """pumice run on a thread for the duration of the block; stops it cleanly."""
    client = KubeClient.from_config(kubeconfig)
    runner = Runner(
        client,
        ConfigWatcher(config, Scheduler.from_file),
        Scheduler.from_file(config),
        options or RunOptions(period=0.2),
        elector=elector,
        metrics=metrics,
    )
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        wait_for("the runner's caches to sync", lambda: runner.cache is not None)
        yield runner
    finally:
        runner.stop.set()
        thread.join(20)
        assert not thread.is_alive(), "the runner did not stop"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> tuple[int, Any]:
    """(status, the decoded JSON body) of a GET; an error's body as text; (0, "") when
    nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


@contextlib.contextmanager
def pumice_run(kubeconfig: str, *args: str) -> Iterator[str]:
    """``pumice run`` in a child process on ``kubeconfig`` (a 200 ms period, ``args``
    added), its metrics address's URL; terminated on the way out."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", "run", "--kubeconfig", kubeconfig,
         "--schedule-period", "200ms", "--metrics-address", f"127.0.0.1:{port}", *args],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(20)
