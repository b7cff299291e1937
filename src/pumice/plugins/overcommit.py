"""overcommit: admit jobs (Pending -> Inqueue) while their minimum resources, added to
those of jobs already admitted, fit the cluster's idle resources times a factor.

The factor (``overcommit-factor``, default 1.2) lets a little more in than fits, so that
jobs are ready to go when resources free up.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.resources import ResourceSpace, Vector
from pumice.api.verdicts import Verdicts
from pumice.conf.arguments import Arguments
from pumice.framework.limits import amounts
from pumice.framework.said import Said
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless

DEFAULT_FACTOR = 1.2


class OvercommitPlugin:
    name = "overcommit"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ("overcommit-factor", "overcommit-factor.*")

    def __init__(self, arguments: Arguments) -> None:
        # As in Volcano, a factor below 1.0 falls back to the default.
        factor = arguments.get_float("overcommit-factor", DEFAULT_FACTOR)
        self.factor = factor if factor >= 1.0 else DEFAULT_FACTOR
        self.per_resource: dict[str, float] = {}
        self._lists: tuple[list[float], list[float]] = ([], [])
        self._share_names: list[tuple[int, str]] = []
        self._share_dims: list[int] = []
        #: The resource space the factors and dimensions above were worked out for.
        self._space: ResourceSpace | None = None
        self._factors = np.zeros(0)
        #: What the cluster can take at the factor (``idle``, and as floats), and the
        #: bytes of what it was worked out from (what is in use, the total).
        self.idle = np.zeros(0)
        self._idle_list: list[float] = []
        self._idle_dims = np.zeros(0)  # (idle in the shared dimensions)
        self._idle_of = b""
        #: The node table's log and position (``NodeTable.origin``) and the total's
        #: bytes ``idle`` was last found for: while neither moved, no node's use did.
        self._idle_at: tuple[list[int], int, bytes] | None = None
        #: The shared dimensions as an index array, and ``inqueue`` in them for the
        #: ``_lists`` it was taken with (see ``refuses``).
        self._dims_index = np.zeros(0, dtype=np.intp)
        self._inq_dims: tuple[object, np.ndarray, bytes] | None = None
        #: ``refuses``' last answer: the rows and dimensions it was asked with (kept
        #: alive, compared by identity), the bytes of ``inqueue`` and ``idle`` in those
        #: dimensions, and the answer.
        self._refused: tuple[np.ndarray, np.ndarray, tuple[bytes, bytes], np.ndarray] | None
        self._refused = None
        self._idle_dims_bytes = b""
        #: The cluster's part of a refusal by the resources short, for ``_parts_for``
        #: (the ``_lists`` it was worked out with).
        self._parts: dict[tuple[int, ...], tuple[str, str]] = {}
        self._parts_for: object = None
        for key in arguments:
            if key.startswith("overcommit-factor."):
                f = arguments.get_float(key, self.factor)
                self.per_resource[key.removeprefix("overcommit-factor.")] = (
                    f if f >= 1.0 else self.factor
                )

    def on_session_open(self, ssn: Session) -> None:
        def enqueueable(job: JobInfo) -> int:
            if job.min_resources is None:
                return 1
            # inqueue + minResources <= idle, in the shared dimensions the job asks for.
            want = job.min_resources.tolist()
            inq, idle = self._lists
            for k in self._share_dims:
                if want[k] > 0 and not inq[k] + want[k] <= idle[k]:
                    return -1
            return 1

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                self.inqueue += job.min_resources
                self._lists = (self.inqueue.tolist(), self._lists[1])

        def refuses(wants: np.ndarray) -> np.ndarray:
            """enqueueable's rejection, for rows of minResources at once (read-only).

            A waiting backlog hands the same rows (read-only, replaced when the jobs
            change) from cycle to cycle: the answer is kept with the rows, the
            dimensions and the figures it was found with, and stands while they do."""
            dims = self._dims_index
            lists = self._lists
            kept = self._inq_dims
            if kept is None or kept[0] is not lists:  # (``_lists`` is replaced as it moves)
                inq = self.inqueue[dims]
                kept = self._inq_dims = (lists, inq, inq.tobytes())
            inq, idle = kept[1], self._idle_dims
            figures = (kept[2], self._idle_dims_bytes)
            last = self._refused
            if last is not None and last[0] is wants and last[1] is dims and last[2] == figures:
                return last[3]
            w = wants[:, dims]
            refused = ((w > 0) & (inq + w > idle)).any(axis=1)
            refused.setflags(write=False)
            self._refused = (wants, dims, figures, refused)
            return refused

        ssn.on("job_enqueueable", self.name, enqueueable, pure=enqueueable, refuses=refuses)
        ssn.on("job_enqueued", self.name, enqueued)

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's figures: what the cluster can take at the factor, and what the
        jobs already admitted ask."""
        space = ssn.space
        if self._space is not space:  # (the factors and dimensions follow the space)
            self._space = space
            factors = np.full(space.size, self.factor)
            for name, f in self.per_resource.items():
                if name in space.index:
                    factors[space.index[name]] = f
            self._factors = factors
            self._share_dims = np.flatnonzero(space.share).tolist()
            self._dims_index = np.array(self._share_dims, dtype=np.intp)
            self._share_names = [(k, space.names[k]) for k in self._share_dims]
            self._idle_of = b""
            self._idle_at = None
        # What the cluster can take follows from its total and what is in use alone:
        # kept while both are the same floats (a cycle that started or ended no pod).
        # What is in use is not summed again while the node table's log says no node
        # changed since the last cycle (the session's copy has changed nothing yet).
        nodes = ssn.nodes
        total_bytes = ssn.total.tobytes()
        origin = nodes.origin if not nodes.changes else None
        at = self._idle_at
        if (
            at is None
            or origin is None
            or at[0] is not origin[0]
            or at[1] != origin[1]
            or at[2] != total_bytes
        ):
            used = nodes.used.sum(axis=0) if len(nodes) else space.zeros()
            figures = used.tobytes() + total_bytes
            if figures != self._idle_of:
                self._idle_of = figures
                self.idle = np.where(space.share, ssn.total * self._factors - used, np.inf)
                self._idle_list = self.idle.tolist()
                self._idle_dims = self.idle[self._share_dims]
                self._idle_dims_bytes = self._idle_dims.tobytes()
            self._idle_at = None if origin is None else (origin[0], origin[1], total_bytes)
        self.inqueue = ssn.snapshot.job_ledger().inqueue_total(ssn.queues)
        # Plain floats, asked once per pending job: idle is fixed for the cycle (the
        # array and the list are never written) and inqueue changes only when a job is
        # admitted.
        self._lists = (self.inqueue.tolist(), self._idle_list)

    def explain(self, ssn: Session, job: JobInfo) -> str:
        """Which resources the cluster is short of for admitting ``job``, at which
        factor, with the figures: the job's minResources, those of the jobs already
        admitted, and what the cluster can take at the factor (its total times the
        factor, less what is in use)."""
        return self._say(
            "", ssn.space, ssn.snapshot.verdicts, self._lists, self._share_names,
            job.min_resources, job.verdicts,
        )  # fmt: skip

    def explain_later(self, ssn: Session, job: JobInfo, head: str = "") -> Said:
        """``head`` and :meth:`explain`, said when read: the figures it quotes are the
        cycle's as they stand now (``_lists`` is replaced, never changed, when a job is
        admitted; a job's minResources are replaced with its PodGroup)."""
        return Said(
            self._say, head, ssn.space, ssn.snapshot.verdicts, self._lists,
            self._share_names, job.min_resources, job.verdicts,
        )  # fmt: skip

    def explain_each(self, ssn: Session, head: str = "") -> Callable[[JobInfo], str]:
        """:meth:`explain_later` for many jobs refused on the same figures: the
        figures captured once, now; the function returned says ``head`` and the
        refusal of any job given to it, whenever it is called (a job's minResources
        are replaced with its PodGroup, never changed)."""
        facts = (
            head, ssn.space, ssn.snapshot.verdicts, self._lists, self._share_names
        )  # fmt: skip
        say = self._say

        def each(job: JobInfo) -> str:
            return say(*facts, job.min_resources, job.verdicts)

        return each

    def _say(
        self,
        lead: str,
        space: ResourceSpace,
        verdicts: Verdicts,
        lists: tuple[list[float], list[float]],
        share_names: list[tuple[int, str]],
        min_resources: Vector | None,
        job_verdicts: Verdicts,
    ) -> str:
        """``lead``, then :meth:`explain` on the figures given. Said for many refused
        jobs: the part about the cluster is kept in the snapshot's verdicts while its
        figures stand, the job's own part in the job's; and, for one set of figures, the
        cluster's part per set of short resources without comparing the stamp."""
        inq, idle = lists
        if min_resources is None:
            short = tuple([k for k, _name in share_names if inq[k] > idle[k]])
        else:
            want = min_resources.tolist()
            short = tuple([k for k, _name in share_names if inq[k] + want[k] > idle[k]])
        if self._parts_for is not lists:  # (other figures: a job was admitted since)
            self._parts_for, self._parts = lists, {}
        head_tail = self._parts.get(short)
        if head_tail is None:
            stamp = (self.factor, self.per_resource, space.names, inq, idle)
            key = (_CLUSTER_PART, short)
            head_tail = verdicts.recall(key, stamp)
            if head_tail is None:
                head_tail = verdicts.keep(key, stamp, self._cluster_part(space, short, lists))
            self._parts[short] = head_tail
        head, tail = head_tail
        if min_resources is None:
            return lead + head + tail
        asked = (short, min_resources.tobytes())
        asks = job_verdicts.recall(_JOB_PART, asked)
        if asks is None:
            asks = job_verdicts.keep(
                _JOB_PART,
                asked,
                f"this job's minResources ({amounts(space, min_resources, short)}) plus ",
            )
        return lead + head + asks + tail

    def _cluster_part(
        self, space: ResourceSpace, short: tuple[int, ...], lists: tuple[list[float], list[float]]
    ) -> tuple[str, str]:
        """The sentence around the job's figures, for a job short in ``short``: which
        factor holds in which resources, and the cluster's figures (``lists``: what
        the jobs admitted ask, what the cluster can take)."""
        inq, idle = lists
        by_factor: dict[float, list[str]] = {}
        for k in short:
            name = space.names[k]
            by_factor.setdefault(self.per_resource.get(name, self.factor), []).append(name)
        where = ", ".join(f"factor {f:g} in {', '.join(ns)}" for f, ns in by_factor.items())
        head = f"cluster would be overcommitted beyond {where}: "
        which = "that factor" if len(by_factor) <= 1 else "those factors"
        tail = (
            f"those of the jobs already admitted ({amounts(space, inq, short)}) "
            f"exceed what the cluster can take at {which} "
            f"({amounts(space, idle, short)}: its total times the factor, less what is "
            f"in use)"
        )
        return head, tail


#: Snapshot verdicts key (with the resources the job is short of): the cluster's part of
#: a refusal, stamped with the figures it quotes.
_CLUSTER_PART = "overcommit.cluster"
#: ``JobInfo.verdicts`` key: the job's part of a refusal (stamped with its request and
#: the resources it is short of).
_JOB_PART = "overcommit.job"
