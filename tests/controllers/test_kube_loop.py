"""The controller loop on a real API server, with a tiny controller of the tests' own:
resync of what existed, reconciles on events, requeues on the clock, leadership, the
garbage collector's cascade, and ``pumice run --controllers``."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from tests.run import kube_kit as k

from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient
from pumice.cluster.protocol import DELETED, WatchEvent
from pumice.controllers import registry
from pumice.controllers.kube_store import KubeStore
from pumice.controllers.loop import ControllerLoop
from pumice.run.runner import RunOptions
from pumice.sandbox import ControlPlane

pytestmark = pytest.mark.k8s

SOURCE = "mirror.test/source"
TICKS = "mirror.test/ticks"


class MirrorController:
    """A ConfigMap labelled ``mirror.test/source`` gets a copy ``<name>-copy`` (owned by
    it, data kept equal); one annotated ``mirror.test/ticks`` counts up to 3, a tick
    every 0.2 s (a requeue with no event in between)."""

    name = "mirror"
    kinds = ("ConfigMap",)

    def __init__(self, store: Any) -> None:
        self.store = store

    def _wanted(self, obj: Any) -> bool:
        return SOURCE in ((obj.get("metadata") or {}).get("labels") or {})

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        return (event.key,) if event.type != DELETED and self._wanted(event.obj) else ()

    def resync(self) -> Iterable[str]:
        return [f"{o['metadata']['namespace']}/{o['metadata']['name']}"
                for o in self.store.list("ConfigMap") if self._wanted(o)]  # fmt: skip

    def reconcile(self, key: str) -> float | None:
        src = self.store.get("ConfigMap", key)
        if src is None:
            return None
        meta = src["metadata"]
        copy_key = f"{key}-copy"
        copy = self.store.get("ConfigMap", copy_key)
        data = dict(src.get("data") or {})
        if copy is None:
            self.store.create({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"{meta['name']}-copy", "namespace": meta["namespace"],
                             "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                  "name": meta["name"], "uid": meta["uid"]}]},
                "data": data,
            })  # fmt: skip
        elif (copy.get("data") or {}) != data:
            self.store.patch("ConfigMap", copy_key, {"data": {**{k: None for k in
                             copy.get("data") or {}}, **data}})  # fmt: skip
        ticks = (meta.get("annotations") or {}).get(TICKS)
        if ticks is not None and int(ticks) < 3:
            self.store.patch(
                "ConfigMap", key, {"metadata": {"annotations": {TICKS: str(int(ticks) + 1)}}}
            )
            return 0.2
        return None


@pytest.fixture(scope="module")
def plane(k8s_binaries: None) -> Iterator[ControlPlane]:
    cp = ControlPlane().start()
    client = KubeClient.from_config(cp.kubeconfig)
    k.install_crds(client)
    client.close()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny controller, registered under the name ``mirror``."""
    monkeypatch.setitem(registry.CONTROLLERS, "mirror",
                        registry.Entry(__name__, "MirrorController", "tests"))  # fmt: skip


@pytest.fixture
def run_loop(plane: ControlPlane, mirror: None) -> Iterator[Any]:
    loops: list[tuple[ControllerLoop, threading.Thread]] = []

    def start(**kw: Any) -> ControllerLoop:
        store = KubeStore(KubeClient.from_config(plane.kubeconfig),
                          may_write=kw.get("may_run", lambda: True))  # fmt: skip
        loop = ControllerLoop(store, ("mirror",), idle=0.2, **kw)
        loops.append((loop, loop.start_thread()))
        return loop

    yield start
    for loop, thread in loops:
        loop.stop.set()
        thread.join(10)
        assert not thread.is_alive(), "the controller loop did not stop"
        loop.store.close()


def source(client: KubeClient, ns: str, name: str, *, ticks: bool = False, **data: str) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {SOURCE: "yes"}}
    if ticks:
        meta["annotations"] = {TICKS: "0"}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}
    return k.ok(client.request("POST", RESOURCES["ConfigMap"].path(ns), body=body))


def data_of(client: KubeClient, key: str) -> dict | None:
    obj = k.get(client, "ConfigMap", key)
    return None if obj is None else obj.get("data") or {}


def test_resync_events_and_requeues(run_loop: Any, admin: KubeClient, ns: str) -> None:
    """What existed before the loop started is reconciled once it has synced; a new
    object and a change reach the controller as events; a requeue comes back on the
    clock with no event in between."""
    source(admin, ns, "old", a="1")
    loop = run_loop()
    k.wait_for("old's copy", lambda: data_of(admin, f"{ns}/old-copy") == {"a": "1"})
    source(admin, ns, "new", ticks=True, b="2")
    k.wait_for("new's copy", lambda: data_of(admin, f"{ns}/new-copy") == {"b": "2"})
    k.ok(admin.request("PATCH", RESOURCES["ConfigMap"].key_path(f"{ns}/old"),
                       body={"data": {"a": "3"}}, content_type=MERGE_PATCH))  # fmt: skip
    k.wait_for("the change copied", lambda: data_of(admin, f"{ns}/old-copy") == {"a": "3"})
    k.wait_for("three ticks", lambda: k.get(admin, "ConfigMap", f"{ns}/new")["metadata"]
               ["annotations"][TICKS] == "3")  # fmt: skip
    assert loop.manager is not None and loop.manager.reconciles["mirror"] >= 6


def test_only_the_leader_reconciles(run_loop: Any, admin: KubeClient, ns: str) -> None:
    """A standby writes nothing; once it leads it reconciles everything once (what
    happened while it stood by included)."""
    leading = threading.Event()
    loop = run_loop(may_run=leading.is_set)
    k.wait_for("the caches to sync", loop.store.synced)
    source(admin, ns, "waits", a="1")
    k.wait_for("the loop to see it", lambda: loop.store.get("ConfigMap", f"{ns}/waits"))
    assert loop.manager is None
    assert data_of(admin, f"{ns}/waits-copy") is None
    leading.set()
    k.wait_for("the copy, once leading", lambda: data_of(admin, f"{ns}/waits-copy") == {"a": "1"})
    leading.clear()
    k.wait_for("the manager dropped", lambda: loop.manager is None)


def test_deleting_the_owner_removes_the_copy(
    run_loop: Any, admin: KubeClient, ns: str, plane: ControlPlane, garbage_collector: Any
) -> None:
    """The store deletes in the background propagation: with the garbage collector
    (kube-controller-manager) running, what the object owns goes too."""
    garbage_collector(plane)
    loop = run_loop()
    source(admin, ns, "owner", a="1")
    k.wait_for("the copy", lambda: data_of(admin, f"{ns}/owner-copy") == {"a": "1"})
    assert loop.store.delete("ConfigMap", f"{ns}/owner")
    k.wait_for("the copy collected", lambda: k.get(admin, "ConfigMap", f"{ns}/owner-copy")
               is None, timeout=60)  # fmt: skip


def test_pumice_run_with_controllers(plane: ControlPlane, admin: KubeClient, ns: str,
                                     mirror: None) -> None:  # fmt: skip
    """``pumice run --controllers`` runs them beside the scheduler and stops them with it."""
    options = RunOptions(period=0.2, controllers=("mirror",))
    with k.running(plane.kubeconfig, options=options) as runner:
        source(admin, ns, "inrun", a="1")
        k.wait_for("the copy", lambda: data_of(admin, f"{ns}/inrun-copy") == {"a": "1"})
        thread = runner._controllers_thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive()
