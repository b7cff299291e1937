"""resourcequota: admit a job (Pending -> Inqueue) only while its minResources fit its
namespace's ResourceQuotas.

For each quota of the job's namespace (:mod:`pumice.api.quota`), in name order, and
each resource the quota limits that the job's minResources name: what the quota
controller counts as used (``status.used``), plus the minResources of the jobs of the
namespace admitted earlier in this cycle, plus the job's own must not exceed the
quota's hard limit. A quota resource the job's minResources do not name is not
checked, nor is a job without minResources: as in Volcano, which compares the names
as they are written. Volcano's job controller writes minResources in the quota's own
vocabulary (``requests.cpu`` and ``cpu``, ``limits.memory``, ``pods``, ``count/pods``,
``requests.nvidia.com/gpu``: see :func:`pumice.controllers.job.pods.quota_usage`);
for minResources written by hand with the bare names only, pumice also counts
``requests.<name>`` as ``<name>`` and the other way round, as the API server does.
``limits.*`` are checked only when the minResources name them.

A refusal names the quota and what it would exceed, with the figures:
"ResourceQuota team-a/compute: requests.cpu would be 12 of 10 (this job's
minResources 4, already used 8)".

The vote has no side effect (the job's share is counted by ``job_enqueued``, once it
is admitted), so it is offered as its own ``pure`` form. A namespace without quotas is
permitted outright, as in Volcano (whose permit also ends the vote of the tier).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pumice.api.job import JobInfo
from pumice.api.parse import quota_base
from pumice.api.quantity import format_amount
from pumice.api.quota import RESOURCE_QUOTA, ResourceQuotaRecord
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless

PERMIT, REJECT = 1, -1


def asked(asks: Mapping[str, float], dim: str) -> float | None:
    """What minResources ``asks`` count against the quota resource ``dim`` (None: they
    do not name it)."""
    got = asks.get(dim)
    if got is not None:
        return got
    if dim.startswith("requests."):
        return asks.get(dim[9:])
    if not dim.startswith(("limits.", "count/")):
        return asks.get(f"requests.{dim}")
    return None


class ResourceQuotaPlugin:
    name = "resourcequota"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        #: The cycle's quotas by namespace, each namespace's in name order.
        self._quotas: dict[str, list[ResourceQuotaRecord]] = {}
        #: What the jobs admitted this cycle count, by (quota key, resource).
        self._admitted: dict[tuple[str, str], float] = {}
        self._space_names: Sequence[str] = []

    def on_session_open(self, ssn: Session) -> None:
        ssn.on("job_enqueueable", self.name, self._enqueueable, pure=self._enqueueable)
        ssn.on("job_enqueued", self.name, self._enqueued)

    def on_cycle_open(self, ssn: Session) -> None:
        quotas: dict[str, list[ResourceQuotaRecord]] = {}
        records = ssn.snapshot.records(RESOURCE_QUOTA).values()
        for rec in sorted(records, key=lambda r: (r.namespace, r.name)):
            quotas.setdefault(rec.namespace, []).append(rec)
        self._quotas = quotas
        self._admitted = {}
        self._space_names = ssn.space.names

    # -- the hooks -------------------------------------------------------------------------

    def _enqueueable(self, job: JobInfo) -> int:
        return REJECT if self._excess(job) is not None else PERMIT

    def _enqueued(self, job: JobInfo) -> None:
        quotas = self._quotas.get(job.namespace)
        if not quotas or job.min_resources is None:
            return
        asks = self._asks(job)
        for q in quotas:
            for dim, _hard in q.hard:
                amount = asked(asks, dim)
                if amount is not None:
                    key = (q.key, dim)
                    self._admitted[key] = self._admitted.get(key, 0.0) + amount

    def explain(self, ssn: Session, job: JobInfo) -> str:
        """Which quota the job would exceed, in which resources, with the figures."""
        excess = self._excess(job)
        if excess is None:  # (not refused by this plugin as things stand)
            return "the namespace's ResourceQuotas would be exceeded"
        quota, over = excess
        parts = []
        for dim, total, hard, mine, used, earlier in over:
            base = quota_base(dim)
            text = (
                f"{dim} would be {format_amount(base, total)} of {format_amount(base, hard)} "
                f"(this job's minResources {format_amount(base, mine)}, already used "
                f"{format_amount(base, used)}"
            )
            if earlier:
                text += f", admitted this cycle {format_amount(base, earlier)}"
            parts.append(text + ")")
        return f"ResourceQuota {quota.key}: " + "; ".join(parts)

    # -- the arithmetic ------------------------------------------------------------------

    def _asks(self, job: JobInfo) -> Mapping[str, float]:
        """The job's minResources by name: the PodGroup's own entries, or (a job
        pumice made for a bare pod) its requests."""
        if job.min_quota is not None:
            return job.min_quota
        assert job.min_resources is not None
        names = self._space_names
        return {names[d]: v for d, v in enumerate(job.min_resources.tolist()) if v}

    def _excess(
        self, job: JobInfo
    ) -> tuple[ResourceQuotaRecord, list[tuple[str, float, float, float, float, float]]] | None:
        """The first quota (in name order) ``job`` would exceed, with each resource
        over: (resource, new total, hard, job's, used, admitted this cycle)."""
        quotas = self._quotas.get(job.namespace)
        if not quotas or job.min_resources is None:
            return None
        asks = self._asks(job)
        for q in quotas:
            used = dict(q.used)
            over = []
            for dim, hard in q.hard:
                mine = asked(asks, dim)
                if mine is None:
                    continue
                earlier = self._admitted.get((q.key, dim), 0.0)
                total = used.get(dim, 0.0) + earlier + mine
                if total > hard and not math.isclose(total, hard, rel_tol=1e-9, abs_tol=1e-9):
                    over.append((dim, total, hard, mine, used.get(dim, 0.0), earlier))
            if over:
                return q, over
        return None


__all__ = ["ResourceQuotaPlugin", "asked"]
