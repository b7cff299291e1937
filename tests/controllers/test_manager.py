"""The controller manager: when it says a step would do nothing (the simulator then
skips the step), and that it never says so while an event or a requeue waits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pumice.cluster.memory import MemoryCluster
from pumice.cluster.protocol import WatchEvent
from pumice.controllers.manager import Manager
from pumice.controllers.store import MemoryStore


class Counter:
    """Reconciles ConfigMaps, asking to run again after ``again`` seconds."""

    name = "counter"
    kinds = ("ConfigMap",)

    def __init__(self, again: float | None = None) -> None:
        self.again = again
        self.seen: list[str] = []

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        return (event.key,)

    def resync(self) -> Iterable[str]:
        return ()

    def reconcile(self, key: str) -> float | None:
        self.seen.append(key)
        return self.again


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def test_idle_only_when_a_step_would_reconcile_nothing() -> None:
    now = [0.0]
    store = MemoryStore(MemoryCluster(clock=lambda: now[0]))
    counter = Counter(again=10.0)
    mgr = Manager(store, [counter])
    assert not mgr.idle()  # (the first step lists what exists)
    assert mgr.step() == 0
    assert mgr.idle()

    store.create(configmap("a"))
    assert not mgr.idle()
    assert mgr.step() == 1
    assert mgr.idle()
    assert mgr.next_due() == 10.0

    now[0] = 9.0
    assert mgr.idle()
    now[0] = 10.0
    assert not mgr.idle()  # the requeue is due
    assert mgr.step() == 1
    assert counter.seen == ["default/a", "default/a"]
    assert mgr.idle()


def test_events_of_kinds_no_controller_watches_leave_it_idle() -> None:
    store = MemoryStore(MemoryCluster())
    mgr = Manager(store, [Counter()])
    mgr.step()
    store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})
    assert mgr.idle()
    assert mgr.step() == 0
