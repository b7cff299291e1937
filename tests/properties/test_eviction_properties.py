"""Invariants of preempt and reclaim on random clusters.

Preempt never evicts a pod of equal or higher priority; reclaim never takes from a
queue that is not reclaimable nor below a queue's guarantee; nothing is evicted unless
the preemptor is placed (pipelined), on the victim's node, and, across jobs, its job
becomes pipelined; pods of kube-system and of system-critical classes are never
evicted; a job that preempt or reclaim could not help says so.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, pod, podgroup, priority_class, queue, run

from pumice.api.parse import resources

PRIORITIES = {"p10": 10, "p100": 100, "p1000": 1000, "system-cluster-critical": 50}


def config(share: str, dry_run: bool = False) -> str:
    text = conf(
        "enqueue, allocate, preempt, reclaim",
        ["priority", "gang", "conformance", share],
        ["predicates", "nodeorder"],
    )
    if dry_run:
        text += (
            "configurations:\n- name: preempt\n  arguments:\n"
            "    enableTopologyAwarePreemption: true\n"
        )
    return text


@st.composite
def clusters(draw):
    objs: list[dict] = [priority_class(k, v) for k, v in PRIORITIES.items()]
    queues = {}
    for name in ("q1", "q2"):
        q = queue(
            name,
            weight=draw(st.integers(1, 3)),
            reclaimable=draw(st.booleans()),
            guarantee={"cpu": str(draw(st.integers(0, 3)))} if draw(st.booleans()) else None,
        )
        q["spec"]["deserved"] = {"cpu": str(draw(st.integers(1, 6))), "memory": "64Gi"}
        if draw(st.booleans()):  # a cap that evictions elsewhere in the queue may not lift
            q["spec"]["capability"] = {"cpu": str(draw(st.integers(2, 6))), "memory": "64Gi"}
        queues[name] = q
        objs.append(q)
    n_nodes = draw(st.integers(1, 2))
    for i in range(n_nodes):
        objs.append(node(f"n{i}", cpu=draw(st.sampled_from(["2", "4"])), memory="64Gi"))
    n_running = draw(st.integers(1, 4))
    running = []
    for j in range(n_running):  # running jobs, filling the nodes
        cls = draw(st.sampled_from(["p10", "p10", "p100", "p1000", "system-cluster-critical"]))
        ns = draw(st.sampled_from(["default", "default", "kube-system"]))
        running.append((f"r{j}", ns, cls))
        objs.append(
            podgroup(
                f"r{j}",
                ns=ns,
                queue=draw(st.sampled_from(list(queues))),
                min_member=draw(st.integers(0, 1)),
                priority_class=cls,
                phase="Running",
            )
        )
    k = 0
    for i in range(n_nodes):
        cpus = int(objs[len(PRIORITIES) + len(queues) + i]["status"]["allocatable"]["cpu"])
        for _ in range(draw(st.integers(cpus - 1, cpus))):
            name, ns, cls = running[draw(st.integers(0, n_running - 1))]
            objs.append(pod(f"{name}-{k}", ns=ns, group=name, cpu="1", node=f"n{i}",
                            priority_class=cls))  # fmt: skip
            k += 1
    for j in range(draw(st.integers(1, 3))):  # waiting jobs
        cls = draw(st.sampled_from(["p10", "p100", "p1000", "p1000"]))
        size = draw(st.integers(1, 2))
        objs.append(
            podgroup(
                f"w{j}",
                queue=draw(st.sampled_from(list(queues))),
                min_member=draw(st.integers(1, size)),
                priority_class=cls,
            )
        )
        never = draw(st.booleans()) and draw(st.booleans())
        for k in range(size):
            extra = {"preemptionPolicy": "Never"} if never else {}
            objs.append(
                pod(
                    f"w{j}-{k}",
                    group=f"w{j}",
                    cpu=draw(st.sampled_from(["1", "2"])),
                    priority_class=cls,
                    **extra,
                )
            )
    return objs


def _index(objs):
    pods = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objs
            if o["kind"] == "Pod"}  # fmt: skip
    groups = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objs
              if o["kind"] == "PodGroup"}  # fmt: skip
    queues = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Queue"}
    return pods, groups, queues


def _job_of(pod_obj) -> str:
    return (
        f"{pod_obj['metadata']['namespace']}/"
        + pod_obj["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
    )


def _cpu(pod_obj) -> float:
    return resources(pod_obj["spec"]["containers"][0]["resources"]["requests"], "r")["cpu"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from(["proportion", "capacity"]), st.booleans())
def test_eviction_invariants(objs, share, dry_run) -> None:
    d = run(objs, config(share, dry_run))
    pods, groups, queues = _index(objs)
    evicted = set(d.evictions)
    assert len(evicted) == len(d.evictions), "a pod evicted twice"
    assert not evicted & set(d.binds), "a pod both evicted and bound"
    records = {r["victim"]: r for r in d.audit if r["kind"] == "evict"}
    assert set(records) == evicted, "every eviction has exactly one audit record"
    for key in evicted:
        victim, rec = pods[key], records[key]
        # conformance: never kube-system, never system-critical
        assert victim["metadata"]["namespace"] != "kube-system", key
        assert victim["spec"].get("priorityClassName") != "system-cluster-critical", key
        assert victim["status"]["phase"] == "Running", key
        # the preemptor was placed, on the victim's node: a node that did not work out
        # gave its evictions back
        assert rec["task"] in d.pipelined, f"{key} evicted for {rec['task']}, not placed"
        assert victim["spec"]["nodeName"] == d.pipelined[rec["task"]], (
            f"{key} evicted on {victim['spec']['nodeName']} for {rec['task']}, "
            f"pipelined onto {d.pipelined[rec['task']]}"
        )
        preemptor = pods[rec["task"]]
        job = rec["preemptor"]
        if rec["victim_job"] != job:
            # across jobs: the preemptor job ends pipelined (gang minimum placed)
            placed = sum(1 for p in (*d.pipelined, *d.binds) if _job_of(pods[p]) == job)
            assert placed >= groups[job]["spec"]["minMember"], f"{job} not pipelined"
        if rec["action"] == "preempt":
            vp = PRIORITIES[victim["spec"]["priorityClassName"]]
            pp = PRIORITIES[preemptor["spec"]["priorityClassName"]]
            assert vp < pp, f"{key} (priority {vp}) evicted for priority {pp}"
        else:
            vq = groups[_job_of(victim)]["spec"]["queue"]
            assert queues[vq]["spec"]["reclaimable"], f"{key} taken from non-reclaimable {vq}"
    # a job that preempt or reclaim could not help, and that nothing was placed for,
    # says so in its pending reason
    placed_jobs = {_job_of(pods[p]) for p in (*d.pipelined, *d.binds)}
    for r in d.audit:
        if r["kind"] == "failed" and r["preemptor"] not in placed_jobs:
            reason = d.pending.get(r["preemptor"], "")
            assert f"{r['action']} could not help: {r['reason']}" in reason, (r, reason)
    # reclaim never takes a queue below its guarantee
    running = Counter()
    taken = Counter()
    for key, p in pods.items():
        if p["status"]["phase"] != "Running":
            continue
        q = groups[_job_of(p)]["spec"]["queue"]
        running[q] += _cpu(p)
        if key in evicted and records[key]["action"] == "reclaim":
            taken[q] += _cpu(p)
    # (what the queue holds after the cycle: evictions in it, preemption within the queue
    # included, are lost; what its own jobs were given in exchange is gained)
    for q, amount in taken.items():
        g = queues[q]["spec"].get("guarantee", {}).get("resource", {}).get("cpu", "0")
        lost = sum(_cpu(pods[k]) for k in evicted if groups[_job_of(pods[k])]["spec"]["queue"] == q)
        given = sum(
            _cpu(pods[p])
            for p in (*d.pipelined, *d.binds)
            if groups[_job_of(pods[p])]["spec"]["queue"] == q
        )
        held = running[q] - lost + given
        assert held >= float(g) * 1000 - 1e-6 or amount == 0, f"{q} below guarantee"
