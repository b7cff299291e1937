"""Hierarchical DRF (Volcano's drf with ``enableHierarchy``).

Queues sit in a tree named by their *hierarchy* path (``root/eng/ml``) with one weight
per level (``1/2/8``): the ``volcano.sh/hierarchy`` and ``volcano.sh/hierarchy-weights``
annotations when a queue has both, otherwise the path of ``spec.parent`` links and the
queues' weights. Jobs are the leaves. Bottom up, each inner node's allocation is the sum
of its children's, each *unsaturated* child scaled to the smallest dominant share among
them (so a child cannot make its parent look bigger than its siblings allow), and the
node's share is the dominant share of that sum. A leaf is *saturated* when it holds all
it asks for in a resource, or asks for a resource nobody has left.

Queues are ordered by walking their paths from the root: an unsaturated node before a
saturated one, then the smaller share / weight. A task may reclaim from another queue
if, with the task placed and the victim removed, its queue would still come first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from pumice.api.queue import QueueInfo

HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
WEIGHTS_ANNOTATION = "volcano.sh/hierarchy-weights"
ROOT = "root"

Vector = np.ndarray


def queue_paths(queues: Mapping[str, QueueInfo]) -> dict[str, tuple[str, str]]:
    """Queue name -> (hierarchy, weights), as Volcano's ``BuildEffectiveQueueHierarchy``:
    the annotations when a queue has both, else the ``spec.parent`` chain from root."""
    out: dict[str, tuple[str, str]] = {}

    def build(name: str, seen: tuple[str, ...]) -> tuple[str, str]:
        if name in out:
            return out[name]
        q = queues.get(name)
        if q is not None:
            h, w = q.annotations.get(HIERARCHY_ANNOTATION), q.annotations.get(WEIGHTS_ANNOTATION)
            if h and w:
                out[name] = (h, w)
                return out[name]
        if name == ROOT:
            out[name] = (ROOT, "1")
            return out[name]
        if q is None or name in seen:
            out[name] = (f"{ROOT}/{name}", "1/1")  # unknown parent or a cycle
            return out[name]
        ph, pw = build(q.parent or ROOT, (*seen, name))
        out[name] = (f"{ph}/{name}", f"{pw}/{q.weight if q.weight >= 1 else 1}")
        return out[name]

    for name in queues:
        build(name, ())
    return out


@dataclass(slots=True, eq=False)
class HNode:
    name: str
    weight: float
    children: dict[str, HNode] | None = field(default_factory=dict)  # None for a job
    request: Vector | None = None  # a job's total request
    allocated: Vector | None = None
    share: float = 0.0
    saturated: bool = False


class HierarchicalDrf:
    """The tree of one session; ``share_of(alloc)`` is the plugin's dominant share."""

    def __init__(
        self, total: Vector, mask: np.ndarray, share_of: Callable[[Vector], float]
    ) -> None:
        self.total = total
        self.mask = mask  # the dimensions that count (Volcano's Resource)
        self.share_of = share_of
        self.root = HNode(ROOT, 1.0)

    def place(self, job: str, request: Vector, hierarchy: str, weights: str) -> None:
        """Add the path of ``hierarchy`` (creating missing levels) and the job's leaf."""
        paths, ws = hierarchy.split("/"), weights.split("/")
        # Only levels are walked, never a leaf: a job's uid holds a "/" (``ns/name``),
        # a segment of a path never does.
        level = cast(dict[str, HNode], self.root.children)
        for i in range(1, len(paths)):
            child = level.get(paths[i])
            if child is None:
                try:
                    w = float(ws[i]) if i < len(ws) else 1.0
                except ValueError:
                    w = 1.0
                child = HNode(paths[i], max(w, 1.0))
                level[paths[i]] = child
            level = cast(dict[str, HNode], child.children)
        level[job] = HNode(job, 1.0, None, request)

    def update(self, alloc_of: Callable[[str], Vector], total_allocated: Vector) -> None:
        """Recompute allocations, shares and saturation bottom up."""
        demanding = self.mask & (self.total >= 0.1) & (total_allocated < self.total)
        self._update(self.root, alloc_of, demanding)

    def _update(
        self, node: HNode, alloc_of: Callable[[str], Vector], demanding: np.ndarray
    ) -> Vector:
        """Update ``node``'s subtree; returns the node's new allocation."""
        if node.children is None:
            allocated = node.allocated = alloc_of(node.name)
            node.share = self.share_of(allocated)
            request = cast(Vector, node.request)  # a leaf is a job, placed with its request
            node.saturated = self._saturated(allocated, request, demanding)
            return allocated
        mdr = 1.0
        updated: list[tuple[HNode, Vector]] = []
        for child in node.children.values():
            child_alloc = self._update(child, alloc_of, demanding)
            updated.append((child, child_alloc))
            if child.share != 0 and not child.saturated:
                mdr = min(mdr, self.share_of(child_alloc))
        alloc = np.zeros_like(self.total)
        saturated = True
        for child, child_alloc in updated:
            if not child.saturated:
                saturated = False
            if child.share != 0:
                alloc = alloc + (
                    child_alloc if child.saturated else child_alloc * (mdr / child.share)
                )
        node.allocated = alloc
        node.share = self.share_of(alloc)
        node.saturated = saturated
        return alloc

    def _saturated(self, allocated: Vector, request: Vector, demanding: np.ndarray) -> bool:
        for d in np.flatnonzero(self.mask & (allocated >= 0.1)):
            if allocated[d] != 0 and request[d] != 0 and allocated[d] >= request[d]:
                return True
            if not demanding[d] and request[d] != 0:
                return True
        return False

    def compare(self, lpath: str, rpath: str) -> float:
        """Volcano's ``compareQueues``: negative when the left queue goes first."""
        lp, rp = lpath.split("/"), rpath.split("/")
        ln: HNode | None = self.root
        rn: HNode | None = self.root
        depth = min(len(lp), len(rp))
        for i in range(depth):
            if ln is None or rn is None:
                return 0.0
            if not ln.saturated and rn.saturated:
                return -1.0
            if ln.saturated and not rn.saturated:
                return 1.0
            lv, rv = ln.share / ln.weight, rn.share / rn.weight
            if lv != rv:
                return lv - rv
            if i < depth - 1:
                ln = (ln.children or {}).get(lp[i + 1])
                rn = (rn.children or {}).get(rp[i + 1])
        return 0.0
