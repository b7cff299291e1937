"""What one cycle decided: the output of ``pumice cycle`` and the input of the cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class PodGroupUpdate:
    phase: str
    conditions: list[dict[str, Any]] = field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(slots=True)
class Decisions:
    """Binds and evictions to carry out, and the status to report.

    ``pipelined`` tasks are promised a node whose resources are being released; they are
    not bound this cycle. ``pending`` explains, for every job left waiting, what stands
    in its way. ``audit`` records each eviction and pipelining with who allowed it.
    """

    binds: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)
    pipelined: dict[str, str] = field(default_factory=dict)
    podgroups: dict[str, PodGroupUpdate] = field(default_factory=dict)
    pending: dict[str, str] = field(default_factory=dict)
    audit: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: For a cycle that repeated the last one's decisions (see
    #: :meth:`pumice.scheduler.Scheduler.cycle`): the stamp of the cluster state both
    #: were decided on. None for a cycle that ran.
    repeat_of: int | None = None

    def repeated(self) -> Decisions:
        """These decisions again, for a cycle that decides the same: new containers,
        the same (read-only) records in them."""
        return Decisions(
            binds=dict(self.binds),
            evictions=list(self.evictions),
            pipelined=dict(self.pipelined),
            podgroups=dict(self.podgroups),
            pending=dict(self.pending),
            audit=list(self.audit),
            notes=list(self.notes),
        )

    def to_json(self, sessions: bool = True) -> dict[str, Any]:
        """The decisions as JSON. ``sessions=False`` leaves out each condition's
        ``transitionID`` (the session that decided it), to compare the decisions of
        different sessions (a repeated cycle keeps the session that decided); the
        conditions are then copies."""
        conditions = (
            (lambda cs: cs)
            if sessions
            else (lambda cs: [{k: x for k, x in c.items() if k != "transitionID"} for c in cs])
        )
        return {
            "binds": dict(sorted(self.binds.items())),
            "evictions": sorted(self.evictions),
            "pipelined": dict(sorted(self.pipelined.items())),
            "podgroups": {
                k: {"phase": v.phase, "conditions": conditions(v.conditions)}
                for k, v in sorted(self.podgroups.items())
            },
            "pending": dict(sorted(self.pending.items())),
            "audit": self.audit,
        }
