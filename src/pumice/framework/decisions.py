"""What one cycle decided: the output of ``pumice cycle`` and the input of the cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pumice.framework.said import Reasons


@dataclass(slots=True)
class PodGroupUpdate:
    phase: str
    conditions: list[dict[str, Any]] = field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(slots=True)
class PreBind:
    """What must be written before a pod's binding, so that what it attaches is ready
    for it on its node (kube-scheduler's PreBind): volumes and devices chosen in the
    session, and annotations a node agent reads.

    ``volumes``: claim key -> the PersistentVolume chosen for it (its ``claimRef`` is
    set, the PV controller completes the binding); ``provision``: claim key -> the node
    a provisioner is to create its volume for (``volume.kubernetes.io/selected-node``);
    ``claims``: DRA ResourceClaim key -> the ``status.allocation`` to write (and the pod
    added to ``reservedFor``); ``annotations``: merged into the pod's own.
    """

    volumes: dict[str, str] = field(default_factory=dict)
    provision: dict[str, str] = field(default_factory=dict)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    #: How long the bind may wait for the PV controller to bind ``volumes`` and
    #: ``provision`` (Volcano's ``volumebinding.bindTimeoutSeconds``).
    timeout: float = 600.0


@dataclass(slots=True)
class Waiting:
    """A job in the line of waiting jobs (see :mod:`pumice.framework.waiting`); why it
    waits is ``Decisions.pending[uid]``. Read-only once the cycle has closed (not
    frozen: a cycle makes one per waiting job, and a frozen one costs ten times as
    much to make)."""

    uid: str
    queue: str
    priority: int
    #: The stage that stopped it this cycle (:data:`pumice.framework.status.STAGES`).
    stage: str


@dataclass(slots=True)
class Carried:
    """The podgroup updates a living session's cycle carried, unchanged, from the last
    one (the status of its parked jobs, see :mod:`pumice.framework.parking`): the
    entries of ``Decisions.podgroups`` from ``start`` on, ``end`` being its length once
    they were put back (nothing is added after them, and they are read-only).

    Each of them is the very update the previous cycle of the same session
    (``after``) reported for the job, and the job has not changed since the snapshot
    that cycle was decided on, stamped ``stamp`` here: a caller that carried out the
    previous cycle's decisions (and compared all its status), with no change since
    the snapshot, knows what these say (see :mod:`pumice.cache.apply`)."""

    start: int
    end: int
    stamp: int
    #: The session that decided these decisions, and the one before it.
    session: str
    after: str | None


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
    #: Job uid -> why it waits, read as sentences (see :mod:`pumice.framework.said`).
    pending: Reasons = field(default_factory=Reasons)
    audit: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Objects the snapshot left out because pumice cannot read them
    #: (``Kind namespace/name`` -> what is wrong): ``Snapshot.skipped``.
    skipped: dict[str, str] = field(default_factory=dict)
    #: Pod key -> what is written before its bind (only pods that attach something).
    prebind: dict[str, PreBind] = field(default_factory=dict)
    #: For a cycle that repeated the last one's decisions (see
    #: :meth:`pumice.scheduler.Scheduler.cycle`): the stamp of the cluster state both
    #: were decided on. None for a cycle that ran.
    repeat_of: int | None = None
    #: Every job left waiting, in the order the scheduler tries them (see
    #: :func:`pumice.framework.waiting.line_up`).
    waiting: list[Waiting] = field(default_factory=list)
    #: The podgroup updates carried from the last cycle (see :class:`Carried`); None
    #: when the cycle carried none (a session opened afresh, a repeated cycle).
    carried: Carried | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.pending, Reasons):  # (a plain mapping given)
            self.pending = Reasons(self.pending)

    def repeated(self) -> Decisions:
        """These decisions again, for a cycle that decides the same: new containers,
        the same (read-only) records in them."""
        return Decisions(
            binds=dict(self.binds),
            evictions=list(self.evictions),
            pipelined=dict(self.pipelined),
            podgroups=dict(self.podgroups),
            pending=self.pending.copy(),
            audit=list(self.audit),
            notes=list(self.notes),
            skipped=dict(self.skipped),
            prebind=dict(self.prebind),
            waiting=self.waiting,  # (read-only)
        )

    def prebind_of(self, pod: str) -> PreBind:
        """``pod``'s pre-bind writes, made empty on first ask."""
        got = self.prebind.get(pod)
        if got is None:
            got = self.prebind[pod] = PreBind()
        return got

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
        out = {
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
        out.update(self._prebind_json())
        if self.skipped:
            out["skipped"] = dict(sorted(self.skipped.items()))
        return out

    def _prebind_json(self) -> dict[str, Any]:
        """What binds write first, by what they write to (keys present only when some
        bind writes it): ``volumes`` (claim -> PV), ``provision`` (claim -> node),
        ``claims`` (ResourceClaim -> allocation), ``annotations`` (pod -> annotations)."""
        volumes: dict[str, str] = {}
        provision: dict[str, str] = {}
        claims: dict[str, dict[str, Any]] = {}
        annotations: dict[str, dict[str, str]] = {}
        for pod, pre in self.prebind.items():
            volumes.update(pre.volumes)
            provision.update(pre.provision)
            claims.update((k, v) for k, v in pre.claims.items() if v)
            if pre.annotations:
                annotations[pod] = dict(sorted(pre.annotations.items()))
        found: dict[str, dict[str, Any]] = {
            "volumes": volumes, "provision": provision, "claims": claims,
            "annotations": annotations,
        }  # fmt: skip
        return {k: dict(sorted(v.items())) for k, v in found.items() if v}
