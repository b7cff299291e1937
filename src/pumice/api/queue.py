"""Queues."""

from __future__ import annotations

from dataclasses import dataclass, field

from pumice.api.resources import Vector

OPEN = "Open"


@dataclass(slots=True, frozen=True)
class NodeGroupAffinity:
    """A Queue's ``spec.affinity``: the node groups (values of the node label
    ``volcano.sh/nodegroup-name``) its pods must, or would rather, run in or stay out of.
    Read by the nodegroup plugin; the lists keep the spec's order (the preferred list's
    order may rank the groups)."""

    required: tuple[str, ...] = ()
    preferred: tuple[str, ...] = ()
    anti_required: tuple[str, ...] = ()
    anti_preferred: tuple[str, ...] = ()


@dataclass(slots=True, eq=False)
class QueueInfo:
    """A Volcano Queue.

    ``capability`` is +inf in every dimension the queue does not limit; ``deserved`` is
    None when the spec does not set it (proportion computes it from the weights);
    ``guarantee`` is 0 where unset.
    """

    name: str
    weight: int
    capability: Vector
    deserved: Vector | None
    guarantee: Vector
    reclaimable: bool = True
    parent: str | None = None
    state: str = OPEN
    creation: float = 0.0
    annotations: dict[str, str] = field(default_factory=dict)
    has_capability: bool = False
    #: ``spec.priority``: queues of higher priority are served (and spared) first.
    priority: int = 0
    #: ``spec.affinity`` (None: not set, which a queue tree may fill from an ancestor).
    affinity: NodeGroupAffinity | None = None

    @property
    def uid(self) -> str:
        return self.name

    def is_open(self) -> bool:
        return self.state == OPEN
