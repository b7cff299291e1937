""" "Can never fit" is kept from cycle to cycle for a waiting job, and must follow every
change that could cure it: a node growing, labels moving to a bigger node, a queue's
capability set. Each cycle of the scheduler cache (which keeps the answer) is compared
with a cycle on a snapshot built afresh from the same objects (which keeps nothing)."""

from __future__ import annotations

import copy

from tests.kit import node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.scheduler import Scheduler

SCHEDULER = Scheduler.from_file(None)


def _fresh(store: MemoryCluster) -> dict:
    objs = []
    for kind in ("Node", "Pod", "PodGroup", "Queue", "PriorityClass"):
        objs += [SourcedObject(copy.deepcopy(o)) for o in store.list(kind)]
    return Scheduler.from_file(None).cycle(build_snapshot(objs)).to_json(sessions=False)


def _pending(cache: SchedulerCache, store: MemoryCluster) -> dict[str, str]:
    out = SCHEDULER.cycle(cache.snapshot()).to_json(sessions=False)
    assert out == _fresh(store)
    assert out["binds"] == {}  # (nothing placed: the cluster stays as built)
    return out["pending"]


def _never(pending: dict[str, str]) -> dict[str, str]:
    """The jobs said to be impossible, with the impossible part of the sentence."""
    return {uid: why.split(";")[0] for uid, why in pending.items() if "never" in why}


def test_never_fits_follows_nodes_labels_and_queue_capability() -> None:
    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1", cpu="8"),
            node("n2", cpu="4", labels={"zone": "a"}),
            podgroup("big"),
            pod("big-0", cpu="16", group="big"),
            podgroup("picky"),
            pod("picky-0", cpu="6", group="picky", nodeSelector={"zone": "a"}),
            podgroup("gang", min_member=3),
            *(pod(f"gang-{i}", cpu="5", group="gang") for i in range(3)),
            pod("filler", cpu="4", node="n1", scheduler="other"),
            pod("filler-2", cpu="4", node="n2", scheduler="other"),
        ]
    )
    cache = SchedulerCache(store)
    first = _never(_pending(cache, store))
    assert first == {
        "default/big": "task big-0 can never fit: asks cpu 16, the largest node has 8",
        "default/picky": (
            "task picky-0 can never fit: asks cpu 6, the largest node matching its "
            "nodeSelector has 4"
        ),
        "default/gang": (
            "the gang can never run whole: its 3 tasks ask cpu 15 at least, all nodes "
            "together have 12"
        ),
    }
    assert _never(_pending(cache, store)) == first  # (nothing changed: kept)

    # The label moves to the 8-cpu node: picky could run there one day.
    def relabel(labels: dict):
        def change(n: dict) -> None:
            n["metadata"]["labels"] = labels

        return change

    store.modify("Node", "n2", relabel({}))
    store.modify("Node", "n1", relabel({"zone": "a"}))
    assert set(_never(_pending(cache, store))) == {"default/big", "default/gang"}

    # n2 grows to 16 cpu: big fits it, and the gang fits the cluster.
    store.modify("Node", "n2", lambda n: n["status"]["allocatable"].update({"cpu": "16"}))
    assert _never(_pending(cache, store)) == {}

    # The queue is given a capability below big's request: never again, for the queue.
    def cap(q: dict) -> None:
        q["spec"]["capability"] = {"cpu": "10"}

    store.modify("Queue", "default", cap)
    assert _never(_pending(cache, store)) == {
        "default/big": (
            "task big-0 can never fit: asks cpu 16, its queue default's capability is cpu 10"
        ),
        "default/gang": (
            "the gang can never run whole: its 3 tasks ask at least cpu 15, its queue "
            "default's capability is cpu 10"
        ),
    }
