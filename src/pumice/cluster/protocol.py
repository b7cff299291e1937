"""What pumice needs from a cluster, and nothing more.

The cache (:mod:`pumice.cache.cache`) is the only caller. It lists objects once, then
follows watch events, and carries out a cycle's decisions through :meth:`Cluster.bind`,
:meth:`Cluster.evict` and :meth:`Cluster.update_podgroup_status`. Objects are
Kubernetes-shaped dicts (``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status``);
keys are ``namespace/name`` for namespaced kinds and ``name`` otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

ADDED: Literal["ADDED"] = "ADDED"
MODIFIED: Literal["MODIFIED"] = "MODIFIED"
DELETED: Literal["DELETED"] = "DELETED"

#: The kinds the scheduler reads (Volcano's informers). HyperNodes
#: (``topology.volcano.sh``, cluster-scoped) describe the network; a cluster without
#: their CRD has none.
KINDS = (
    "Node",
    "Pod",
    "PodGroup",
    "Queue",
    "PriorityClass",
    "PodDisruptionBudget",
    "HyperNode",
)
#: Kinds keyed ``namespace/name``: the scheduler's, and those the controllers read and
#: write (:mod:`pumice.controllers`).
NAMESPACED = frozenset(
    {
        "Pod",
        "PodGroup",
        "PodDisruptionBudget",
        "Job",
        "Command",
        "Service",
        "Secret",
        "ConfigMap",
        "ReplicaSet",
        "StatefulSet",
        "Deployment",
        "BatchJob",
        "Event",
    }
)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change: ``obj`` is the object after the change (before it, for DELETED).

    Watchers must treat ``obj`` as read-only: the store may hand the same dict to
    several watchers and change it later (a watcher that needs a value keeps a copy).
    """

    type: str  # ADDED | MODIFIED | DELETED
    kind: str
    key: str
    obj: Mapping[str, Any]


def condition_key(conditions: Iterable[Mapping[str, Any]]) -> tuple:
    """Conditions without their per-cycle fields (transition id and time), to tell a
    real change of a status from a rewrite."""
    return tuple(
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conditions
    )


def object_key(kind: str, obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced kinds, ``name`` otherwise."""
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    if kind in NAMESPACED:
        return f"{meta.get('namespace') or 'default'}/{name}"
    return name


class Watch(Protocol):
    """A subscription: events queue up until :meth:`drain` hands them over, in order."""

    def drain(self) -> list[WatchEvent]: ...

    def close(self) -> None: ...


class Cluster(Protocol):
    """The cluster as the scheduler sees it.

    Contracts:

    - ``list`` returns the current objects of a kind, sorted by key (deterministic).
    - ``watch`` returns a subscription that receives every later change of the given
      kinds, in the order they happened; ``list`` then ``watch`` with no change in between
      misses nothing.
    - ``bind`` sets a pending pod's node; binding a pod that is gone or already bound is
      refused with ``False`` (a stale decision), never an exception.
    - ``evict`` starts a graceful deletion (the pod turns terminating and keeps its node
      until the kubelet releases it); evicting a pod that is gone or already terminating
      returns ``False``.
    - ``update_podgroup_status`` writes phase and conditions; a missing podgroup is
      ignored (``False``).
    """

    def list(self, kind: str) -> list[Mapping[str, Any]]: ...

    def watch(self, kinds: Sequence[str] = KINDS) -> Watch: ...

    def bind(self, pod_key: str, node: str) -> bool: ...

    def evict(self, pod_key: str, reason: str = "") -> bool: ...

    def update_podgroup_status(
        self,
        key: str,
        phase: str,
        conditions: Sequence[Mapping[str, Any]] = (),
        *,
        running: int = 0,
        succeeded: int = 0,
        failed: int = 0,
    ) -> bool: ...
