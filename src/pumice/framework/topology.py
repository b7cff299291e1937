"""A session's view of the network: HyperNode rows of its node table, and sub-jobs.

A job with a network-topology constraint or sub-group policies is placed HyperNode by
HyperNode (:mod:`pumice.actions.topology`); this module holds what that search and the
plugins ask about it, computed once per session:

- the tree's rows in the session's node table (:class:`SessionTopology`), with the
  virtual root :data:`~pumice.api.hypernode.CLUSTER` holding every node (a cluster
  without HyperNodes is a root alone, tier 1, as in Volcano);
- a job's sub-jobs (:class:`SubJob`): the pods each sub-group policy takes, grouped by
  their match-label values, each a gang of ``subGroupSize``, and the job's default
  sub-job holding every other pod (a gang of ``minMember`` when the job has no
  policies, else of one);
- each constraint made effective as Volcano's session makes it: ``highestTierName``
  read as its tier, ``soft`` turned into a limit at the root's tier (a soft job is
  searched tier by tier like a hard one, and the whole cluster is its last domain), a
  sub-group's soft limit bounded by the job's. A tier name the tree does not have
  leaves the job unbounded, as in Volcano, and the cycle says so (``problems``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from pumice.api.hypernode import CLUSTER, HyperNode, Topology
from pumice.api.job import JobInfo
from pumice.api.task import READY_STATUSES, TaskInfo, TaskStatus
from pumice.api.topology_spec import SOFT, NetworkTopology, sub_group_of

if TYPE_CHECKING:
    from pumice.framework.session import Session

#: What a ``hypernode_gradient`` is asked for: where to place a gang, or where to make
#: room for one by eviction (widest domains first).
ALLOCATE_PURPOSE = "allocate"
EVICT_PURPOSE = "evict"


@dataclass(slots=True, eq=False)
class SubJob:
    """A gang inside a job: the pods of one sub-group (or the job's other pods)."""

    uid: str
    #: The policy it belongs to ("" for the default sub-job).
    policy: str
    job: JobInfo
    min_available: int
    #: The constraint as written (None: none).
    topology: NetworkTopology | None
    #: The effective highest tier (None: not constrained).
    limit: int | None = None
    tasks: list[TaskInfo] = field(default_factory=list)
    match_index: int = 0
    #: The lowest HyperNode holding the nodes its tasks hold, or chose this cycle.
    allocated: str = ""

    @property
    def priority(self) -> int:
        return max((t.priority for t in self.tasks), default=0)

    def ready_num(self) -> int:
        return sum(
            1
            for t in self.tasks
            if t.status in READY_STATUSES or (t.status == TaskStatus.PENDING and t.best_effort)
        )

    def pipelined_num(self) -> int:
        return self.ready_num() + sum(1 for t in self.tasks if t.status == TaskStatus.PIPELINED)

    def is_ready(self) -> bool:
        return self.ready_num() >= self.min_available

    def is_pipelined(self) -> bool:
        return self.pipelined_num() >= self.min_available

    def pending(self) -> list[TaskInfo]:
        return [t for t in self.tasks if t.status == TaskStatus.PENDING]

    def placed_nodes(self) -> list[str]:
        from pumice.api.task import ALLOCATED_STATUSES

        return [t.node for t in self.tasks if t.node and t.status in ALLOCATED_STATUSES]


def _root_only(nodes: list[str]) -> Topology:
    return Topology({CLUSTER: HyperNode(CLUSTER, 1, nodes=frozenset(nodes))}, [])


class SessionTopology:
    """The tree against one session's node table, and the jobs' sub-jobs."""

    __slots__ = (
        "_notes",
        "_subjobs",
        "_task_subjob",
        "allocated",
        "domain_of_task",
        "leaf",
        "problems",
        "rows",
        "tree",
    )

    def __init__(self, ssn: Session) -> None:
        tree = ssn.snapshot.topology
        names = ssn.nodes.names
        self.tree = tree if tree is not None else _root_only(list(names))
        self.rows, self.leaf = self.tree.rows(names)
        self._subjobs: dict[str, list[SubJob]] = {}
        self._task_subjob: dict[str, SubJob] = {}
        #: The HyperNode each job holds or chose this cycle, by job uid.
        self.allocated: dict[str, str] = {}
        #: For the node score of a task being placed: the HyperNode its sub-job holds
        #: so far in the try under way (Volcano's ``JobAllocatedHyperNode``).
        self.domain_of_task: dict[str, str] = {}
        #: Why a job's constraint cannot be read against this tree, by job uid (each
        #: also a note of the cycle's decisions).
        self.problems: dict[str, str] = {}
        self._notes = ssn.decisions.notes

    # -- the tree ---------------------------------------------------------------------

    @property
    def root_tier(self) -> int:
        return self.tree.root.tier

    def home_of(self, node: str, ssn: Session) -> str:
        """The lowest-tier HyperNode of ``node`` ("" when it is in none)."""
        i = ssn.nodes.index.get(node)
        return "" if i is None else str(self.leaf[i])

    # -- constraints ------------------------------------------------------------------

    def _limit(self, spec: NetworkTopology | None, bound: int | None, job: JobInfo) -> int | None:
        if spec is None:
            return None
        if spec.mode == SOFT:
            return bound if bound is not None else self.root_tier
        if spec.highest_tier is not None:
            return spec.highest_tier
        tier = self.tree.tier_names.get(spec.highest_tier_name)
        if tier is None:
            # Volcano places such a job with no bound at all; so does pumice, and says so.
            if job.uid not in self.problems:
                known = ", ".join(sorted(self.tree.tier_names)) or "none"
                self.problems[job.uid] = text = (
                    f"PodGroup {job.uid}: networkTopology.highestTierName "
                    f"{spec.highest_tier_name!r} is the tierName of no HyperNode (tier "
                    f"names: {known}); the job is placed as if it had no tier limit"
                )
                self._notes.append(text)
            return None
        return tier

    def unenforced(self, job: JobInfo) -> None:
        """Note, once a cycle, that no plugin enforces networkTopology constraints."""
        key = "<unenforced>"
        if key not in self.problems:
            self.problems[key] = text = (
                f"PodGroup {job.uid} asks for a network topology, but no enabled plugin "
                f"gives HyperNode gradients (network-topology-aware): it and any like it "
                f"are placed as if unconstrained, as in Volcano"
            )
            self._notes.append(text)

    def job_limit(self, job: JobInfo) -> int | None:
        """The effective highest tier of the job as a whole (None: unbounded)."""
        return self._limit(job.network_topology, None, job)

    def constrained(self, job: JobInfo) -> bool:
        """Placed HyperNode by HyperNode: a constraint, or sub-group policies."""
        return bool(job.sub_groups) or job.network_topology is not None

    # -- sub-jobs ---------------------------------------------------------------------

    def subjobs(self, job: JobInfo) -> list[SubJob]:
        """The job's sub-jobs, the default one last (task membership is fixed within a
        session; statuses are read live)."""
        got = self._subjobs.get(job.uid)
        if got is not None:
            return got
        job_limit = self.job_limit(job)
        groups: dict[str, SubJob] = {}
        default: SubJob | None = None
        for task in sorted(job.tasks.values(), key=lambda t: t.uid):
            found = sub_group_of(job.sub_groups, task.labels) if job.sub_groups else None
            if found is None:
                if default is None:
                    default = SubJob(
                        uid=job.uid,
                        policy="",
                        job=job,
                        min_available=1 if job.sub_groups else job.min_available,
                        topology=job.network_topology,
                        limit=job_limit,
                    )
                default.tasks.append(task)
                continue
            policy, values = found
            uid = f"{job.uid}/{policy.name}-{'-'.join(values)}"
            sj = groups.get(uid)
            if sj is None:
                index = int(values[0]) if values[0].lstrip("-").isdigit() else 0
                sj = groups[uid] = SubJob(
                    uid=uid,
                    policy=policy.name,
                    job=job,
                    min_available=policy.size,
                    topology=policy.topology,
                    limit=self._limit(policy.topology, job_limit, job),
                    match_index=index,
                )
            sj.tasks.append(task)
        out = [groups[k] for k in sorted(groups)]
        if default is not None:
            out.append(default)
        for sj in out:
            sj.allocated = self._recover(sj)
            for t in sj.tasks:
                self._task_subjob[t.uid] = sj
        allocated = ""
        for sj in out:
            if sj.allocated:
                allocated = self.tree.lca(allocated, sj.allocated)
        if allocated:
            self.allocated[job.uid] = allocated
        self._subjobs[job.uid] = out
        return out

    def subjob_of(self, job: JobInfo, task: TaskInfo) -> SubJob | None:
        got = self._task_subjob.get(task.uid)
        if got is None and job.uid not in self._subjobs:
            self.subjobs(job)
            got = self._task_subjob.get(task.uid)
        return got

    def _recover(self, sj: SubJob) -> str:
        """The lowest HyperNode holding every node the sub-job's placed tasks are on
        (Volcano keeps its choice in memory and recovers it this way after a restart;
        pumice reads it from the cluster every cycle). Only for a constrained one."""
        if sj.topology is None:
            return ""
        nodes = sj.placed_nodes()
        if not nodes:
            return ""
        best = ""
        for hn in self.tree.hypernodes.values():
            if all(n in hn.nodes for n in nodes) and (
                not best or hn.tier < self.tree.hypernodes[best].tier
            ):
                best = hn.name
        return best

    def subgroups_met(self, job: JobInfo, pipelined: bool) -> bool:
        """Each policy with ``minSubGroups`` has that many sub-groups ready (or
        pipelined): part of the job's readiness (Volcano's ``CheckSubJobReady``)."""
        needs = {p.name: p.min_groups for p in job.sub_groups if p.min_groups}
        if not needs:
            return True
        have: dict[str, int] = {}
        for sj in self.subjobs(job):
            if sj.policy and (sj.is_pipelined() if pipelined else sj.is_ready()):
                have[sj.policy] = have.get(sj.policy, 0) + 1
        return all(have.get(name, 0) >= n for name, n in needs.items())

    def subgroups_exist(self, job: JobInfo) -> str | None:
        """Why the job's pods cannot make ``minSubGroups`` sub-groups of some policy."""
        counts: dict[str, int] = {}
        for sj in self.subjobs(job):
            if sj.policy:
                counts[sj.policy] = counts.get(sj.policy, 0) + 1
        for p in job.sub_groups:
            if counts.get(p.name, 0) < p.min_groups:
                return (
                    f"sub-group policy {p.name!r} needs {p.min_groups} sub-groups and the "
                    f"pods make {counts.get(p.name, 0)}"
                )
        return None

    # -- room made by eviction ----------------------------------------------------------

    def eviction_domain(self, job: JobInfo, task: TaskInfo) -> tuple[np.ndarray | None, str]:
        """Where preempt and reclaim may make room for ``task`` without breaking its
        hard constraints: (None, "") when anywhere; else the rows of the highest
        HyperNode the job's (and the task's sub-job's) limit allows around what they
        hold, or (empty rows, why) when a hard gang holds no HyperNode yet (finding
        one for a whole gang is gang preemption's task, not these actions')."""
        rows: np.ndarray | None = None
        sj = self.subjob_of(job, task)
        bounds: list[tuple[int | None, str, NetworkTopology | None]] = [
            (self.job_limit(job), self.allocated.get(job.uid, ""), job.network_topology)
        ]
        if sj is not None and sj.policy:
            bounds.append((sj.limit, sj.allocated, sj.topology))
        for limit, held, spec in bounds:
            if spec is None or spec.mode == SOFT or limit is None:
                continue
            if not held:
                return np.zeros(0, dtype=np.intp), (
                    f"the gang has a {spec.describe()} and holds no HyperNode yet: "
                    f"preempt and reclaim make room only around what a gang holds"
                )
            top = ""
            for name in self.tree.ancestors(held):
                if self.tree.tier_of(name) > limit:
                    break
                top = name
            inside = self.rows_of(top) if top else np.zeros(0, dtype=np.intp)
            rows = inside if rows is None else np.intersect1d(rows, inside)
        return rows, ""

    def rows_of(self, hypernode: str) -> np.ndarray:
        return self.rows.get(hypernode, np.zeros(0, dtype=np.intp))


def session_topology(ssn: Session) -> SessionTopology:
    """The session's view, made when first asked."""
    topo = ssn.topology
    if topo is None:
        topo = ssn.topology = SessionTopology(ssn)
    return topo


__all__ = ["ALLOCATE_PURPOSE", "EVICT_PURPOSE", "SessionTopology", "SubJob", "session_topology"]
