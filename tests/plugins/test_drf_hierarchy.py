"""Hierarchical DRF: queue paths, weighted shares between subtrees, reclaim by share."""

from __future__ import annotations

from collections import Counter

from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.api.queue import QueueInfo
from pumice.plugins.drf_hierarchy import queue_paths

ALLOCATE = conf(
    "enqueue, allocate",
    ["priority", "gang"],
    [{"name": "drf", "enableHierarchy": True}, "predicates"],
)
RECLAIM = conf(
    "reclaim",
    ["priority", "gang", "conformance", {"name": "drf", "enableHierarchy": True}],
    ["predicates"],
)


def annotated(name: str, hierarchy: str, weights: str) -> dict:
    q = queue(name)
    q["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": hierarchy,
        "volcano.sh/hierarchy-weights": weights,
    }
    return q


def jobs(*, running: bool = False, n: int = 8, min_b: int = 1) -> list[dict]:
    objs = [node("n1", cpu="8", memory="64Gi")]
    for name, q, m in (("ja", "qa", 1), ("jb", "qb", min_b)):
        objs.append(
            podgroup(name, queue=q, min_member=m, phase="Running" if running else "Inqueue")
        )
        on = "n1" if running and name == "ja" else None
        objs += [pod(f"{name}-{i}", group=name, cpu="1", memory="1Gi", node=on) for i in range(n)]
    return objs


def _q(name: str, parent: str | None = None, weight: int = 1, annotations=None) -> QueueInfo:
    import numpy as np

    return QueueInfo(
        name=name, weight=weight, capability=np.zeros(3), deserved=None, guarantee=np.zeros(3),
        parent=parent, annotations=annotations or {},
    )  # fmt: skip


def test_paths_from_annotations_or_parents() -> None:
    qs = {
        "root": _q("root"),
        "eng": _q("eng", weight=4),
        "ml": _q("ml", parent="eng", weight=0),
        "x": _q(
            "x",
            annotations={"volcano.sh/hierarchy": "root/y", "volcano.sh/hierarchy-weights": "1/9"},
        ),
    }
    paths = queue_paths(qs)
    assert paths["root"] == ("root", "1")
    assert paths["eng"] == ("root/eng", "1/4")
    assert paths["ml"] == ("root/eng/ml", "1/4/1")
    assert paths["x"] == ("root/y", "1/9")


def test_weights_split_the_cluster_between_subtrees() -> None:
    """Weights 1 and 3 under root: the queues get 2 and 6 of 8 cpu."""
    objs = [annotated("qa", "root/a", "1/1"), annotated("qb", "root/b", "1/3"), *jobs()]
    got = Counter(k.split("-")[0] for k in run(objs, ALLOCATE).binds)
    assert got == {"default/ja": 2, "default/jb": 6}


def test_parent_links_give_the_same_tree() -> None:
    objs = [
        queue("root"),
        queue("qa", weight=1, parent="root"),
        queue("qb", weight=3, parent="root"),
    ]
    got = Counter(k.split("-")[0] for k in run(objs + jobs(), ALLOCATE).binds)
    assert got == {"default/ja": 2, "default/jb": 6}


def test_reclaim_takes_from_the_queue_above_its_weighted_share() -> None:
    """qa holds all 8 cpu; qb's gang of four takes four back."""
    objs = [annotated("qa", "root/a", "1/1"), annotated("qb", "root/b", "1/3")]
    d = run(objs + jobs(running=True, min_b=4), RECLAIM)
    assert len(d.evictions) == 4 and all(e.startswith("default/ja-") for e in d.evictions)
    assert len(d.pipelined) == 4
