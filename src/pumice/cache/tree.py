"""The HyperNode tree the scheduler cache hands to every snapshot, kept between syncs.

The tree (``Snapshot.topology``) is built from the HyperNode records and the nodes'
names and labels, and kept from snapshot to snapshot: it is built again only when a
HyperNode changes or a node is added, removed or relabelled (a status write of a
HyperNode, or a node's heartbeat, keeps it). A tree that would lie (a cycle of
members, a HyperNode with two parents) raises, or with a ``report`` is reported there
and repaired (see :func:`pumice.api.hypernode.build_topology`).

Contract: the cache marks the tree :attr:`HyperNodeTree.stale` when nodes come, go or
change labels, hands it HyperNode events (:meth:`HyperNodeTree.take`), and calls
:meth:`HyperNodeTree.build` at the end of a sync when it is stale.
"""

from __future__ import annotations

from pumice.api.hypernode import NodeFacts, Topology, build_topology
from pumice.cache.records import BadObject, Records
from pumice.cluster.protocol import DELETED, WatchEvent
from pumice.errors import InputError

HYPERNODE_API_VERSION = "topology.volcano.sh/v1alpha1"


class HyperNodeTree:
    """The tree over ``records``' nodes; ``report``: where a HyperNode the tree was
    repaired around is told (None: a tree that would lie raises), ``invalid``: the
    cache's table of objects left out, where those HyperNodes are said while they are
    so."""

    def __init__(self, records: Records, report: BadObject | None, invalid: dict[str, str]) -> None:
        self.records = records
        self.report = report
        self.invalid = invalid
        #: The tree handed to every snapshot (None: no HyperNodes).
        self.topology: Topology | None = None
        #: Due to be built again at the end of the sync.
        self.stale = True
        #: HyperNodes the tree was repaired around (not their parse): said per build.
        self.bad: set[str] = set()

    def take(self, ev: WatchEvent) -> bool:
        """A HyperNode's event: True when the tree is due to be built again (False:
        the object was not held, or only its status moved, as Volcano's controller
        writes ``status.nodeCount``)."""
        hypernodes_r = self.records.hypernodes_r
        if ev.type == DELETED:
            if hypernodes_r.pop(ev.key, None) is None:
                return False
        else:
            old = hypernodes_r.get(ev.key)
            if self.records.record("HyperNode", ev.key, ev.obj) == old:
                return False  # (the same spec)
        self.stale = True
        return True

    def build(self) -> None:
        """The tree over the nodes as they are now; with ``report``, a HyperNode that
        would make it lie is reported there and repaired around."""
        self.stale = False
        hypernodes_r = self.records.hypernodes_r
        if not hypernodes_r:  # (most clusters: no need to look at the nodes)
            self.topology = None
            return
        records = [hypernodes_r[k] for k in sorted(hypernodes_r)]
        nodes_r = self.records.nodes_r
        facts = [NodeFacts(name, spec.labels) for name, spec in sorted(nodes_r.items())]
        on_bad = self._bad_hypernode if self.report is not None else None
        for name in self.bad:
            self.invalid.pop(f"HyperNode {name}", None)  # (said again below if still)
        self.bad = set()
        try:
            self.topology = build_topology(records, facts, on_bad=on_bad)
        except InputError:
            self.stale = True  # (raised again by the next sync until fixed)
            raise

    def _bad_hypernode(self, what: str, message: str) -> None:
        """build_topology's report (``what`` is "HyperNode <name>") as a bad object."""
        assert self.report is not None
        name = what.removeprefix("HyperNode ")
        obj = {"apiVersion": HYPERNODE_API_VERSION, "kind": "HyperNode", "metadata": {"name": name}}
        self.bad.add(name)
        self.report("HyperNode", name, obj, InputError(message, obj=what))


__all__ = ["HYPERNODE_API_VERSION", "HyperNodeTree"]
