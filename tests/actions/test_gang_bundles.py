"""Victim bundles of gangpreempt and gangreclaim, and their dry run.

Ported from Volcano's ``pkg/scheduler/actions/utils/bundle_test.go`` (bundle
classification, ROI ordering, allowed-task filtering) and ``simulate_test.go`` (which
pending tasks the gang makes room for, where the dry run places them, and that a failed
run gives its evictions back). The bundle cases build real PodGroups and pods and open
a session on them, then call :mod:`pumice.actions.gang_eviction` as the actions do; the
dry-run cases run the action, since pumice has no separate plan builder.

Volcano's test plugin allows every candidate; the configurations here have ``priority``
(the victims' priority is lower) decide for gangpreempt.
"""

from __future__ import annotations

import math

import numpy as np
import yaml
from tests.kit import conf, node, pod, podgroup, priority_class, queue, run

from pumice.actions.gang_eviction import (
    SAFE,
    WHOLE,
    Bundle,
    allowed_bundles,
    job_bundles,
    roi,
    sort_bundles,
)
from pumice.api.job import JobInfo
from pumice.api.task import TaskInfo
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.framework.session import Session
from pumice.framework.topology import session_topology
from pumice.scheduler import Scheduler

PREEMPT = conf(
    "enqueue, allocate, gangpreempt",
    ["priority", "gang", "conformance"],
    ["predicates", "proportion", "nodeorder"],
)
# Without gang, a running job with pending pods is starving (priority's rule): the only
# way to have gangpreempt act for a job that is already ready.
NO_GANG = conf(
    "enqueue, allocate, gangpreempt",
    ["priority", "conformance"],
    ["predicates", "proportion", "nodeorder"],
)
PRIO = [priority_class("high", 100), priority_class("low", 10)]


def session(objs: list[dict]) -> Session:
    sched = Scheduler.create(parse_config(yaml.safe_load(PREEMPT)))
    return sched.open(build_snapshot([SourcedObject(o, "test") for o in objs]))


def labelled(p: dict, **labels: str) -> dict:
    p["metadata"]["labels"] = labels
    return p


def running_job(
    name: str,
    tasks: list[tuple[str, int, dict]],
    *,
    min_member: int,
    min_task_member: dict | None = None,
    sub_groups: list[dict] | None = None,
) -> list[dict]:
    """A Running PodGroup and its running pods ``(name, priority, labels)``, one 8-cpu
    node each (role from a ``role`` key of the labels)."""
    pg = podgroup(name, min_member=min_member, min_task_member=min_task_member, phase="Running")
    if sub_groups:
        pg["spec"]["subGroupPolicy"] = sub_groups
    objs = [queue("default"), *PRIO, pg]
    for pname, prio, labels in tasks:
        labels = dict(labels)
        role = labels.pop("role", None)
        objs.append(node(f"node-{pname}", cpu="8"))
        p = pod(pname, group=name, node=f"node-{pname}", priority=prio, role=role)
        objs.append(labelled(p, **labels))
    return objs


def bundles_of(objs: list[dict], job: str, local: list[str]) -> list[Bundle]:
    ssn = session(objs)
    victim = ssn.jobs[f"default/{job}"]
    tasks = [victim.tasks[f"default/{n}"] for n in local]
    return job_bundles(ssn, session_topology(ssn), victim, tasks)


def names(b: Bundle) -> list[str]:
    return [t.name for t in b.tasks]


def shape(bundles: list[Bundle]) -> list[tuple[int, list[str]]]:
    return [(b.kind, names(b)) for b in bundles]


# -- CreateJobBundles --------------------------------------------------------------------


def test_surplus_above_the_gang_and_role_minimum_is_safe_the_rest_whole() -> None:
    """TestCreateJobBundles_SafeAndWhole: minMember 3 and worker minimum 3 with five
    running workers: the two lowest-priority ones are safe, three are whole."""
    tasks = [(n, i, {"role": "worker"}) for i, n in enumerate("abcde")]
    objs = running_job("pg", tasks, min_member=3, min_task_member={"worker": 3})
    got = bundles_of(objs, "pg", list("edcba"))
    assert shape(got) == [(SAFE, ["a", "b"]), (WHOLE, ["c", "d", "e"])]


def test_without_role_minimums_only_the_gang_minimum_counts() -> None:
    """TestCreateJobBundles_NoTaskMinAvailableTreatsAllRolesAsUnconstrained."""
    tasks = [(n, i, {"role": "worker"}) for i, n in enumerate("abcd")]
    got = bundles_of(running_job("pg", tasks, min_member=2), "pg", list("abcd"))
    assert shape(got) == [(SAFE, ["a", "b"]), (WHOLE, ["c", "d"])]


def test_a_job_already_below_its_minimum_is_all_safe() -> None:
    """TestCreateJobBundles_JobNotReadyShortCircuitsAllSafe: two running of minMember 10,
    whatever its sub-groups: nothing more to break."""
    policy = [{"name": "g", "subGroupSize": 3, "minSubGroups": 2, "matchLabelKeys": ["sg"]}]
    tasks = [("a", 0, {"sg": "1"}), ("b", 1, {"sg": "1"})]
    got = bundles_of(running_job("pg", tasks, min_member=10, sub_groups=policy), "pg", ["a", "b"])
    assert shape(got) == [(SAFE, ["a", "b"])]
    assert np.all(got[0].whole_job == 0)  # a safe bundle breaks nothing


def pairs_policy(minimum: int, name: str = "g", size: int = 2, **extra) -> dict:
    return {"name": name, "subGroupSize": size, "minSubGroups": minimum,
            "matchLabelKeys": ["sg"], **extra}  # fmt: skip


def test_sub_group_slack_caps_the_safe_evictions() -> None:
    """TestCreateJobBundles_SubJobGroupSlackCapsSafe: three ready sub-groups of two,
    two required: the job could lose two tasks, the policy only one sub-group."""
    tasks = [
        ("t1a", 100, {"sg": "1"}), ("t1b", 101, {"sg": "1"}),
        ("t2a", 102, {"sg": "2"}), ("t2b", 103, {"sg": "2"}),
        ("t3a", 104, {"sg": "3"}), ("t3b", 105, {"sg": "3"}),
    ]  # fmt: skip
    objs = running_job("pg", tasks, min_member=4, sub_groups=[pairs_policy(2)])
    got = bundles_of(objs, "pg", ["t1a", "t2a", "t3a"])
    assert shape(got) == [(SAFE, ["t1a"]), (WHOLE, ["t2a", "t3a"])]


def test_an_already_broken_sub_group_may_lose_more() -> None:
    """TestCreateJobBundles_AlreadyBrokenSubJobIsSubjectToFurtherEviction: sg 1 has lost
    a pod already; the two ready sub-groups are exactly the two required."""
    tasks = [
        ("sj1a", 1, {"sg": "1"}),
        ("sj2a", 2, {"sg": "2"}), ("sj2b", 3, {"sg": "2"}),
        ("sj3a", 4, {"sg": "3"}), ("sj3b", 5, {"sg": "3"}),
    ]  # fmt: skip
    objs = running_job("pg", tasks, min_member=3, sub_groups=[pairs_policy(2)])
    got = bundles_of(objs, "pg", ["sj1a", "sj2a", "sj3a"])
    assert shape(got) == [(SAFE, ["sj1a"]), (WHOLE, ["sj2a", "sj3a"])]


def test_role_and_sub_group_minimums_both_hold() -> None:
    """TestCreateJobBundles_MixedLegacyAndSubJobBothEnforced: the master (no role
    minimum, its policy one sub-group to spare) is safe; the worker is whole on the
    worker minimum of 5 alone, its sub-group being broken already."""
    masters = {"matchLabels": {"kind": "master"}}
    workers = {"matchLabels": {"kind": "worker"}}
    policies = [
        pairs_policy(1, name="m-g", size=1, labelSelector=masters),
        pairs_policy(2, name="w-g", size=2, labelSelector=workers),
    ]
    m = {"role": "master", "kind": "master"}
    w = {"role": "worker", "kind": "worker"}
    tasks = [
        ("m1", 0, {**m, "sg": "1"}), ("m2", 10, {**m, "sg": "2"}),
        ("w1a", 1, {**w, "sg": "1"}),
        ("w2a", 11, {**w, "sg": "2"}), ("w2b", 12, {**w, "sg": "2"}),
        ("w3a", 13, {**w, "sg": "3"}), ("w3b", 14, {**w, "sg": "3"}),
    ]  # fmt: skip
    objs = running_job(
        "pg", tasks, min_member=5, min_task_member={"worker": 5}, sub_groups=policies
    )
    got = bundles_of(objs, "pg", ["m1", "w1a"])
    assert shape(got) == [(SAFE, ["m1"]), (WHOLE, ["w1a"])]


def test_a_sub_group_of_a_policy_without_minimum_is_safe() -> None:
    """Derived from bundle.go CreateJobBundles and job_info.go SetPodGroup (a policy
    without minSubGroups has MinSubJobs 0, so each of its ready sub-groups is surplus):
    beside a policy that needs its one sub-group, the spare pair's task goes safe."""
    policies = [
        pairs_policy(1, name="need", size=1, labelSelector={"matchLabels": {"kind": "a"}}),
        {"name": "spare", "subGroupSize": 2, "matchLabelKeys": ["sg"],
         "labelSelector": {"matchLabels": {"kind": "b"}}},
    ]  # fmt: skip
    tasks = [("a1", 0, {"kind": "a", "sg": "1"}),
             ("b1", 1, {"kind": "b", "sg": "1"}), ("b2", 2, {"kind": "b", "sg": "1"})]  # fmt: skip
    objs = running_job("pg", tasks, min_member=1, sub_groups=policies)
    got = bundles_of(objs, "pg", ["b1"])
    assert shape(got) == [(SAFE, ["b1"])]


# -- ApplyAllowedTasks ------------------------------------------------------------------


def three_tasks() -> tuple[Session, JobInfo, list[TaskInfo]]:
    objs = running_job("pg", [("t1", 1, {}), ("t2", 2, {}), ("t3", 3, {})], min_member=1)
    ssn = session(objs)
    job = ssn.jobs["default/pg"]
    return ssn, job, [job.tasks[f"default/{n}"] for n in ("t1", "t2", "t3")]


def cpu(ssn: Session, millis: float) -> np.ndarray:
    return ssn.space.vector({"cpu": millis})


def test_allowed_tasks_shrink_a_safe_bundle_and_drop_a_partial_whole_one() -> None:
    """TestApplyAllowedTasks_WholeAtomicAndSafeShrink: of safe {t1, t2} only t1 is
    allowed, of whole {t3} nothing: one safe bundle of t1 is left, its resources t1's."""
    ssn, job, (t1, t2, t3) = three_tasks()
    safe = Bundle(SAFE, job, [t1, t2], t1.resreq + t2.resreq, ssn.space.zeros())
    whole = Bundle(WHOLE, job, [t3], t3.resreq.copy(), t1.resreq + t2.resreq + t3.resreq)
    got = allowed_bundles([safe, whole], {id(t1)})
    assert shape(got) == [(SAFE, ["t1"])]
    assert np.array_equal(got[0].local, t1.resreq)
    assert allowed_bundles([whole], {id(t3)})[0] is whole  # whole and all allowed: kept


# -- SortBundlesForPreempt / ForReclaim, ROI ----------------------------------------------


def bundle(ssn: Session, job: JobInfo, task: TaskInfo, kind: int, local: float, whole: float):
    zero = ssn.space.zeros()
    return Bundle(kind, job, [task], cpu(ssn, local), zero if kind == SAFE else cpu(ssn, whole))


def test_roi_is_what_a_bundle_frees_towards_the_need_over_what_it_breaks() -> None:
    ssn, job, (t1, _, _) = three_tasks()
    need = cpu(ssn, 1000)
    assert roi(bundle(ssn, job, t1, SAFE, 1000, 0), need) == math.inf
    assert roi(bundle(ssn, job, t1, WHOLE, 1000, 4000), need) == 0.25
    # what it frees beyond the need does not count, what it breaks does
    assert roi(bundle(ssn, job, t1, WHOLE, 3000, 4000), need) == 0.25


def test_safe_bundles_first_then_the_higher_return() -> None:
    """TestSortBundlesForPreempt_TypePriorityAndROI: the safe bundle first (though of
    the higher-priority job), then the whole bundle breaking 2 cpus for 1, then the one
    breaking 4."""
    objs = running_job("low", [("w1", 1, {}), ("w2", 1, {})], min_member=1)
    objs += running_job("high", [("s1", 10, {})], min_member=1)[1 + len(PRIO) :]
    ssn = session(objs)
    low, high = ssn.jobs["default/low"], ssn.jobs["default/high"]
    low.priority, high.priority = 1, 10
    w1, w2, s1 = low.tasks["default/w1"], low.tasks["default/w2"], high.tasks["default/s1"]
    low_roi = bundle(ssn, low, w1, WHOLE, 1000, 4000)
    safe = bundle(ssn, high, s1, SAFE, 1000, 0)
    high_roi = bundle(ssn, low, w2, WHOLE, 1000, 2000)
    got = sort_bundles(
        [low_roi, safe, high_roi], cpu(ssn, 1000), lambda a, b: a.job.priority < b.job.priority
    )
    assert [b.tasks[0].name for b in got] == ["s1", "w2", "w1"]


def two_jobs(first: str = "ja", second: str = "jb"):
    objs = running_job(first, [("a", 1, {})], min_member=1)
    objs += [podgroup(second, min_member=1, phase="Running"), node("node-b", cpu="8"),
             pod("b", group=second, node="node-b", priority=1)]  # fmt: skip
    ssn = session(objs)
    ja, jb = ssn.jobs[f"default/{first}"], ssn.jobs[f"default/{second}"]
    return ssn, ja, jb, ja.tasks["default/a"], jb.tasks["default/b"]


def test_the_victim_order_goes_before_the_return() -> None:
    """TestSortBundlesForReclaim_UsesQueueOrderThenROI (first half) and
    TestSortBundlesForPreempt_UsesVictimJobOrder: the order the victim function gives
    wins over a better return."""
    ssn, ja, jb, a, b = two_jobs()
    ba = bundle(ssn, ja, a, WHOLE, 1000, 4000)
    bb = bundle(ssn, jb, b, WHOLE, 1000, 2000)
    need = cpu(ssn, 1000)
    by_name = lambda x, y: x.job.uid < y.job.uid  # noqa: E731 (qa before qb)
    assert sort_bundles([bb, ba], need, by_name)[0] is ba
    by_uid_desc = lambda x, y: x.job.uid > y.job.uid  # noqa: E731
    ba2 = bundle(ssn, ja, a, WHOLE, 1000, 2000)
    assert sort_bundles([ba2, bb], need, by_uid_desc)[0] is bb


def test_without_a_victim_order_the_higher_return_first_then_the_job_uid() -> None:
    """TestSortBundlesForReclaim_UsesQueueOrderThenROI (second half) and
    TestSortBundlesForReclaim_DeterministicTieBreaker."""
    ssn, ja, jb, a, b = two_jobs()
    need = cpu(ssn, 1000)
    never = lambda x, y: False  # noqa: E731
    c = bundle(ssn, ja, a, WHOLE, 1000, 4000)
    d = bundle(ssn, jb, b, WHOLE, 1000, 2000)
    assert sort_bundles([c, d], need, never) == [d, c]
    tie_a = bundle(ssn, ja, a, WHOLE, 1000, 2000)
    tie_b = bundle(ssn, jb, b, WHOLE, 1000, 2000)
    assert sort_bundles([tie_b, tie_a], need, never) == [tie_a, tie_b]


# -- simulate.go: which tasks the gang makes room for, and the dry run -----------------------


def victims_cluster(gang: list[dict], victims: int, *, idle_node: bool = False) -> list[dict]:
    """``victims`` low-priority one-task jobs, each filling its own 1-cpu node."""
    objs = [queue("default"), *PRIO, *gang]
    for i in range(victims):
        objs.append(node(f"n{i}", cpu="1"))
        objs.append(podgroup(f"v{i}", min_member=1, phase="Running", priority_class="low"))
        objs.append(pod(f"v{i}-0", cpu="1", group=f"v{i}", node=f"n{i}", priority=10,
                        priority_class="low", created=f"2026-01-01T00:00:0{i}Z"))  # fmt: skip
    if idle_node:
        objs.append(node("z-idle", cpu="1"))
    return objs


def gang(size: int, minimum: int, running: int = 0, cpu: str = "1") -> list[dict]:
    objs: list[dict] = [podgroup("g", min_member=minimum, priority_class="high")]
    if running:
        objs.append(node("busy", cpu=str(running)))
    for k in range(size):
        on = "busy" if k < running else None
        objs.append(pod(f"g-{k}", cpu=cpu, group="g", node=on, priority=100,
                        priority_class="high"))  # fmt: skip
    return objs


def test_a_gang_starting_up_makes_room_for_all_its_pending_tasks() -> None:
    """TestCollectPendingTasksForJobStartup_WorksheetOrder (and the Success and
    WithVictimIncludesEvictAndPipeline cases: evictions and the pipelined tasks form
    the plan): a gang of three, none running, needs room for all three."""
    d = run(victims_cluster(gang(3, 3), victims=3), PREEMPT)
    assert sorted(d.evictions) == ["default/v0-0", "default/v1-0", "default/v2-0"]
    assert sorted(d.pipelined) == ["default/g-0", "default/g-1", "default/g-2"]
    assert d.binds == {}


def test_a_running_gang_makes_room_for_its_next_sub_job_only() -> None:
    """TestCollectPendingTasksForRunningJob_FirstWorksheetSubJobOnly: a ready gang (one
    running, minMember 1) with two more pods in sub-groups of one: room is made for
    the first sub-group by match index (sg 1, pod g-2) alone, one victim. (Without
    gang, whose starving rule would leave a ready job alone.)"""
    objs = gang(3, 1, running=1)
    objs[0]["spec"]["subGroupPolicy"] = [
        {"name": "one", "subGroupSize": 1, "matchLabelKeys": ["sg"]}
    ]
    g0, g1, g2 = (o for o in objs if o["kind"] == "Pod")
    labelled(g0, sg="0"), labelled(g1, sg="2"), labelled(g2, sg="1")
    d = run(victims_cluster(objs, victims=2), NO_GANG)
    assert len(d.evictions) == 1
    assert list(d.pipelined) == ["default/g-2"]


def test_victims_that_free_too_little_are_not_evicted() -> None:
    """TestBuildNominationPlanInDomain_NoFeasibleNode: nothing idle, and the victims'
    cpu short of the gang's need: no plan, nothing evicted, and the gang says why."""
    d = run(victims_cluster(gang(3, 3), victims=2), PREEMPT)
    assert d.evictions == [] and d.pipelined == {}
    assert "gangpreempt could not help" in d.pending["default/g"]
    assert "free too little" in d.pending["default/g"]


def test_a_failed_dry_run_gives_its_evictions_back() -> None:
    """TestBuildNominationPlanInDomain_PipelineFailureRollsBackEviction: the two victims
    free 2 cpus in total, but on two nodes: the gang's 2-cpu pod fits neither, so the
    tentative evictions are undone."""
    d = run(victims_cluster(gang(1, 1, cpu="2"), victims=2), PREEMPT)
    assert d.evictions == [] and d.pipelined == {}
    assert "find no nodes even with the victims gone" in d.pending["default/g"]


def test_the_dry_run_prefers_idle_nodes_to_released_ones() -> None:
    """TestBuildNominationPlanInDomain_PrefersIdleNodeOverFutureIdle and
    TestPickBestNodeForTask_PrefersIdleGroup / _FallsBackFutureIdleGroup: the idle node
    (named to sort last) takes the first pod; the second goes where a victim is
    evicted."""
    d = run(victims_cluster(gang(2, 2), victims=1, idle_node=True), PREEMPT)
    assert d.evictions == ["default/v0-0"]
    assert d.pipelined == {"default/g-0": "z-idle", "default/g-1": "n0"}


# -- IsJobPreemptableForGangEviction ---------------------------------------------------------


def test_a_podgroup_labelled_not_preemptable_is_not_a_victim() -> None:
    """Derived from util.go IsJobPreemptableForGangEviction and job_info.go
    extractPreemptable (annotation, then label): a victim PodGroup labelled
    volcano.sh/preemptable: false keeps its pod."""
    objs = victims_cluster(gang(1, 1), victims=1)
    pg = next(o for o in objs if o["kind"] == "PodGroup" and o["metadata"]["name"] == "v0")
    pg["metadata"]["labels"] = {"volcano.sh/preemptable": "false"}
    d = run(objs, PREEMPT)
    assert d.evictions == []


# -- gangreclaim.go: ssn.Preemptive(queue, pending) ----------------------------------------


RECLAIM = conf(
    "enqueue, allocate, gangreclaim",
    ["priority", "gang", "conformance"],
    ["predicates", "proportion", "nodeorder"],
)


def test_a_queue_reclaims_only_if_its_share_holds_all_the_pending_tasks() -> None:
    """Derived from gangreclaim.go reclaimJobInDomains (``ssn.Preemptive(queue,
    pending)`` over every pending task of a gang starting up) and proportion.go
    queueAllocatable (the candidates' requests summed). q1 deserves 2.5 of 5 cpus; its
    gang asks 2 x 1.5 cpus. One sub-group of one pod is its minimum, so a plan placing
    only the first would do, but Volcano refuses before planning: nothing is evicted."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="5", memory="64Gi")]
    for i in range(4):
        objs.append(podgroup(f"v{i}", queue="q2", min_member=1, phase="Running"))
        objs.append(pod(f"v{i}-0", group=f"v{i}", node="n1", cpu="1", memory="1Gi"))
    pg = podgroup("r", queue="q1", min_member=1)
    pg["spec"]["subGroupPolicy"] = [
        {"name": "one", "subGroupSize": 1, "minSubGroups": 1, "matchLabelKeys": ["sg"]}
    ]
    objs.append(pg)
    objs += [labelled(pod(f"r-{k}", group="r", cpu="1500m"), sg=str(k)) for k in range(2)]
    d = run(objs, RECLAIM)
    assert d.evictions == []
    assert "gangreclaim could not help: queue q1 may not reclaim" in d.pending["default/r"]
