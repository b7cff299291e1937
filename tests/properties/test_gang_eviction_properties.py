"""Invariants of gangpreempt and gangreclaim on random clusters, over several cycles.

Random clusters of running low-priority gangs (some elastic, some with per-role
minimums) filling the nodes, random starving high-priority gangs, and now and then
HyperNodes (racks under a root) with starving gangs held to one rack. Each cycle's
decisions are applied before the next: evicted pods go, bound pods run, podgroups take
their new phase; pipelined pods stay pending (``allocate`` binds them once the victims
are gone). gangpreempt runs with priority, gang, conformance and proportion (priority's
rule decides victims: a lower job priority); gangreclaim across two queues, with
proportion (its share rule decides too) and without it (conformance alone answers, as
Volcano's allow-all test plugin: then the action's own rules are all that stands).

In every cycle:

- a gang eviction (audited with the action's name) happens only for a gang that ends
  the cycle pipelined: its running, bound and pipelined pods reach its minMember;
- no victim job that was whole before the cycle is left below its minMember or a
  role's minimum, unless a whole bundle of it was evicted and none of its pods is left
  in that bundle's domain: without HyperNodes (the domain is the cluster) that is every
  one of its running pods. Within a HyperNode a job's *whole* bundle is its pods there
  (as in Volcano's CreateJobBundles, which is given the domain's candidates only), so a
  job spread over two racks can be left running short in the other one;
- no eviction a rule forbids: in gangpreempt, no victim of another queue or of equal or
  higher priority; in gangreclaim, no victim of the gang's own queue or of a queue
  that is not reclaimable.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import hypernode, node, pod, podgroup, priority_class, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.framework.decisions import Decisions
from pumice.scheduler import Scheduler

PRIORITIES = {"low": 10, "mid": 50, "high": 100}
CYCLES = 3


def scheduler(action: str, topology: bool, share: bool) -> Scheduler:
    """``share``: with proportion, whose share rule also decides gangreclaim's victims;
    without it only conformance does, as Volcano's allow-all test plugin: then the
    action's own rules (other queues, reclaimable ones) are all that keeps victims."""
    tier2 = ["predicates", "proportion", "nodeorder"] if share else ["predicates", "nodeorder"]
    if topology:
        tier2.append("network-topology-aware")
    doc = {
        "actions": f"enqueue, allocate, {action}",
        "tiers": [
            {"plugins": [{"name": n} for n in ("priority", "gang", "conformance")]},
            {"plugins": [{"name": n} for n in tier2]},
        ],
    }
    return Scheduler.create(parse_config(yaml.safe_load(yaml.safe_dump(doc))))


SCHEDULERS = {
    (a, t, s): scheduler(a, bool(t), s)
    for a in ("gangpreempt", "gangreclaim")
    for t in (0, 1)
    for s in (True, False)
}


@dataclass(slots=True)
class Gang:
    queue: str
    priority: int
    minimum: int
    roles: dict[str, int] = field(default_factory=dict)


@st.composite
def clusters(draw, action: str) -> tuple[list[dict], dict[str, Gang], bool]:
    """(objects, podgroup uid -> its gang, with HyperNodes)."""
    objs: list[dict] = [priority_class(k, v) for k, v in PRIORITIES.items()]
    queues = ["q1", "q2"] if action == "gangreclaim" or draw(st.booleans()) else ["q1"]
    reclaimable = {q: True for q in queues}
    for q in queues:
        if action == "gangreclaim" and q == "q2":
            reclaimable[q] = draw(st.integers(0, 3)) > 0
        weight = draw(st.integers(1, 3)) + (2 if q == "q1" and action == "gangreclaim" else 0)
        objs.append(queue(q, weight=weight, reclaimable=reclaimable[q]))
    # gangreclaim: mostly q2 runs and q1 (the heavier) waits, so that q1 may reclaim
    runs_in = queues if action == "gangpreempt" else ["q1", "q2", "q2"]
    waits_in = queues if action == "gangpreempt" else ["q1", "q1", "q2"]
    n_nodes = draw(st.integers(1, 4))
    free: dict[str, int] = {}
    for i in range(n_nodes):
        cpus = draw(st.sampled_from([2, 4]))
        free[f"n{i}"] = cpus
        objs.append(node(f"n{i}", cpu=str(cpus), memory="64Gi"))
    topology = n_nodes > 1 and draw(st.booleans())
    if topology:
        racks = [f"n{i}" for i in range(n_nodes)]
        cut = draw(st.integers(1, n_nodes - 1))
        objs.append(hypernode("rack-a", 1, "Node", racks[:cut]))
        objs.append(hypernode("rack-b", 1, "Node", racks[cut:]))
        objs.append(hypernode("root", 2, "HyperNode", ["rack-a", "rack-b"]))
    gangs: dict[str, Gang] = {}
    nodes = list(free)
    for j in range(draw(st.integers(1, 4))):  # running gangs, filling the nodes
        name = f"r{j}"
        cls = draw(st.sampled_from(["low", "low", "mid", "high"]))
        q = draw(st.sampled_from(runs_in))
        size = draw(st.integers(1, 4))
        masters = draw(st.integers(0, 1)) if size > 1 else 0
        placed: list[tuple[str, str]] = []
        for k in range(size):
            spots = [n for n in nodes if free[n] >= 1]
            if not spots:
                break
            at = draw(st.sampled_from(spots))
            free[at] -= 1
            placed.append((at, "master" if k < masters else "worker"))
        if not placed:
            break
        minimum = draw(st.integers(1, len(placed)))  # below the size: elastic
        roles: dict[str, int] = {}
        have = Counter(role for _, role in placed)
        if have["master"] and have["worker"] and draw(st.booleans()):
            roles = {"master": 1, "worker": draw(st.integers(1, have["worker"]))}
            minimum = max(minimum, sum(roles.values()))
        gangs[f"default/{name}"] = Gang(q, PRIORITIES[cls], minimum, roles)
        objs.append(podgroup(name, queue=q, min_member=minimum, min_task_member=roles or None,
                             priority_class=cls, phase="Running"))  # fmt: skip
        for k, (at, role) in enumerate(placed):
            objs.append(pod(f"{name}-{k}", group=name, cpu="1", memory="1Gi", node=at,
                            role=role, priority_class=cls, priority=PRIORITIES[cls]))  # fmt: skip
    for j in range(draw(st.integers(1, 3))):  # starving gangs
        name = f"w{j}"
        cls = draw(st.sampled_from(["mid", "high", "high"]))
        q = draw(st.sampled_from(waits_in))
        size = draw(st.integers(1, 3))
        minimum = draw(st.integers(1, size))
        gangs[f"default/{name}"] = Gang(q, PRIORITIES[cls], minimum)
        pg = podgroup(name, queue=q, min_member=minimum, priority_class=cls,
                      created=f"2026-01-01T00:00:0{j}Z")  # fmt: skip
        if topology and draw(st.booleans()):
            pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
        objs.append(pg)
        cpu = draw(st.sampled_from(["1", "1", "2"]))
        for k in range(size):
            objs.append(pod(f"{name}-{k}", group=name, cpu=cpu, memory="1Gi",
                            priority_class=cls, priority=PRIORITIES[cls]))  # fmt: skip
    return objs, gangs, topology


def _key(o: dict) -> str:
    return f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}"


def _job(o: dict) -> str:
    return "default/" + o["metadata"]["annotations"]["scheduling.k8s.io/group-name"]


def _running(objs: list[dict]) -> dict[str, list[dict]]:
    """Job uid -> its pods on a node."""
    out: dict[str, list[dict]] = {}
    for o in objs:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            out.setdefault(_job(o), []).append(o)
    return out


def _apply(objs: list[dict], d: Decisions) -> list[dict]:
    gone = set(d.evictions)
    out = []
    for o in objs:
        key = _key(o)
        if o["kind"] == "Pod" and key in gone:
            continue
        if o["kind"] == "Pod" and key in d.binds:
            o["spec"]["nodeName"] = d.binds[key]
            o["status"]["phase"] = "Running"
        elif o["kind"] == "PodGroup" and key in d.podgroups and d.podgroups[key].phase:
            o["status"]["phase"] = d.podgroups[key].phase
        out.append(o)
    return out


def _whole(gang: Gang, pods: list[dict]) -> bool:
    roles = Counter(p["metadata"]["annotations"].get("volcano.sh/task-spec") for p in pods)
    return len(pods) >= gang.minimum and all(roles[r] >= n for r, n in gang.roles.items())


def _racks(objs: list[dict]) -> dict[str, set[str]]:
    """Tier-1 HyperNode -> its nodes (the generator's racks hold nodes by name)."""
    return {
        o["metadata"]["name"]: {m["selector"]["exactMatch"]["name"] for m in o["spec"]["members"]}
        for o in objs
        if o["kind"] == "HyperNode" and o["spec"]["tier"] == 1
    }


def _within(p: dict, domain: str, racks: dict[str, set[str]]) -> bool:
    """Is pod ``p`` on a node of ``domain`` (a rack, or anything else: the cluster)?"""
    return domain not in racks or p["spec"]["nodeName"] in racks[domain]


def check_cycle(action: str, objs: list[dict], gangs: dict[str, Gang], d: Decisions) -> None:
    pods = {_key(o): o for o in objs if o["kind"] == "Pod"}
    before = _running(objs)
    records = [r for r in d.audit if r["action"] == action and r["kind"] == "evict"]
    evicted = set(d.evictions)
    assert len(evicted) == len(d.evictions), "a pod evicted twice"
    assert {r["victim"] for r in records} == evicted, "evictions and their audit differ"
    for r in records:
        job, victim = gangs[r["preemptor"]], pods[r["victim"]]
        # the gang that evicted ends pipelined: running + bound + pipelined >= minMember
        mine = [
            k
            for k, p in pods.items()
            if _job(p) == r["preemptor"]
            and (p["spec"].get("nodeName") or k in d.binds or k in d.pipelined)
        ]
        assert len(mine) >= job.minimum, (
            f"{r['victim']} evicted for {r['preemptor']}, not pipelined"
        )
        assert victim["spec"].get("nodeName"), f"{r['victim']} was not running"
        other = gangs[_job(victim)]
        if action == "gangpreempt":
            assert other.queue == job.queue, f"{r['victim']} of another queue"
            assert other.priority < job.priority, (
                f"{r['victim']} (priority {other.priority}) evicted for {job.priority}"
            )
        else:
            assert other.queue != job.queue, f"{r['victim']} of the reclaimer's own queue"
            q = next(
                o for o in objs if o["kind"] == "Queue" and o["metadata"]["name"] == other.queue
            )
            assert q["spec"]["reclaimable"], f"{r['victim']} of non-reclaimable {other.queue}"
    # no victim job left broken, unless a whole bundle of it went (in the domain)
    racks = _racks(objs)
    whole: dict[str, set[str]] = {}
    for r in records:
        if r["bundle"] == "whole":
            whole.setdefault(_job(pods[r["victim"]]), set()).add(r["domain"])
    for uid in {_job(pods[k]) for k in evicted}:
        # as the session saw the job: running, and bound earlier in the cycle
        had = before.get(uid, []) + [pods[k] for k in d.binds if _job(pods[k]) == uid]
        left = [p for p in had if _key(p) not in evicted]
        if not _whole(gangs[uid], had) or _whole(gangs[uid], left):
            continue
        still = [p for p in before.get(uid, []) if _key(p) not in evicted]
        if not still:  # every running pod of it went: the whole job was the bundle
            continue
        emptied = [d for d in whole.get(uid, ()) if not any(_within(p, d, racks) for p in still)]
        assert emptied, (
            f"{uid} (minMember {gangs[uid].minimum}, roles {gangs[uid].roles}) left with "
            f"{sorted(_key(p) for p in left)} after {sorted(evicted)}"
        )


def run_cycles(action: str, case, share: bool = True) -> None:
    objs, gangs, topology = case
    sched = SCHEDULERS[(action, int(topology), share)]
    for _ in range(CYCLES):
        d = sched.cycle(build_snapshot([SourcedObject(o, "test") for o in objs]))
        check_cycle(action, objs, gangs, d)
        objs = _apply(objs, d)
        if not (d.binds or d.evictions):
            break


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters("gangpreempt"))
def test_gangpreempt_invariants(case) -> None:
    run_cycles("gangpreempt", case)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters("gangreclaim"), st.booleans())
def test_gangreclaim_invariants(case, share) -> None:
    run_cycles("gangreclaim", case, share)
