"""A snapshot: everything one scheduling cycle reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from pumice.api.job import JobInfo
from pumice.api.node import NodeTable
from pumice.api.pdb import PdbRecord
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace


@dataclass(slots=True)
class Snapshot:
    """The cluster state one cycle schedules against.

    ``jobs`` holds only the jobs pumice may schedule; jobs it must leave alone (their
    queue does not exist, their PodGroup is missing) are in ``blocked`` with the reason,
    so that they can still be explained.
    """

    space: ResourceSpace
    nodes: NodeTable
    jobs: dict[str, JobInfo]
    queues: dict[str, QueueInfo]
    priority_classes: dict[str, int]
    default_priority: int = 0
    #: The time "now" for this cycle (seconds since the epoch): the latest object
    #: timestamp by default, so a snapshot replays the same way whenever it is run.
    now: float = 0.0
    blocked: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: PodDisruptionBudgets (policy/v1), read by the pdb plugin.
    pdbs: list[PdbRecord] = field(default_factory=list)
