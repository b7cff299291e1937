"""A cycle that repeats the last one's decisions decides what a fresh cycle would.

Two copies of one cluster (an in-memory store watched by a scheduler cache) go through
the same random events: jobs arriving (gangs, minResources against queue capabilities,
an SLA waiting time on some), pods starting and ending, evicted pods leaving, nodes
joining, the clock moving, and cycles, often several in a row with nothing in between.
One copy's scheduler repeats a cycle on an unchanged cluster, and renews one living
session from cycle to cycle; the other opens a new session for every cycle, and runs
without enqueue's shortcut for a backlog none of which can be admitted (it
serves every Pending job in order). Every cycle's decisions and explanations must be
the same, under Volcano's
default configuration and under one with preemption, reclaim, sla and cdp, whose
answers depend on the clock.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, pod, podgroup, queue

from pumice.actions import enqueue
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.conf.config import parse_config
from pumice.extensions import load_registries
from pumice.framework.decisions import Decisions
from pumice.run.cycle_record import CycleRecord
from pumice.scheduler import Scheduler

CLOCKED = conf(
    "enqueue, allocate, preempt, reclaim, backfill",
    ["priority", "gang", "conformance", {"name": "sla"}, "cdp"],
    ["drf", "predicates", "proportion", "nodeorder", "binpack"],
)

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z, the kit's timestamps


def scheduler_for(config: str | None, plugins_dir: Path | None = None) -> Scheduler:
    if config is None:
        return Scheduler.from_file(None, plugins_dir)
    return Scheduler.create(parse_config(yaml.safe_load(config)), *load_registries(plugins_dir))


class Counted(CycleRecord):
    """``pumice run``'s cycle record, counting the repeated cycles of its world."""

    def __init__(self, world: World) -> None:
        super().__init__()
        self.world = world

    def cycle_repeated(self, last: CycleRecord) -> None:
        self.world.repeated += 1
        super().cycle_repeated(last)


class World:
    """One copy of the cluster, its cache and its scheduler."""

    def __init__(self, scheduler: Scheduler, clock: list[float], *, plain: bool = False) -> None:
        self.plain = plain  # enqueue serves every Pending job in order
        self.store = MemoryCluster(clock=lambda: clock[0])
        self.cache = SchedulerCache(self.store, clock=lambda: clock[0])
        self.scheduler = scheduler
        self.repeated = 0
        self.last: CycleRecord | None = None

    def cycle(self) -> dict[str, Any]:
        record = Counted(self)
        if self.plain:
            with mock.patch.object(enqueue, "_refuse_all", lambda *_args: False):
                decisions = self.scheduler.cycle(self.cache.snapshot(), record)
        else:
            decisions = self.scheduler.cycle(self.cache.snapshot(), record)
        self.cache.apply(decisions)
        return _plain(decisions)


def _plain(decisions: Decisions) -> dict[str, Any]:
    """The decisions as JSON, with the notes; a condition's transitionID names the
    session that decided it, which a repeated cycle does not open."""
    out = decisions.to_json(sessions=False)
    out["notes"] = list(decisions.notes)
    return out


def gang_job(n: int, size: int, cpu: int, min_member: int, q: str, sla: int | None, prio: int):
    group = podgroup(
        f"j{n}",
        min_member=min_member,
        queue=q,
        phase="Pending",
        min_resources={"cpu": str(cpu * min_member)},
    )
    if sla is not None:
        group["metadata"]["annotations"] = {"sla-waiting-time": f"{sla}s"}
    pods = []
    for i in range(size):
        p = pod(f"j{n}-{i}", cpu=str(cpu), memory="1Gi", group=f"j{n}", priority=prio)
        p["metadata"]["annotations"]["volcano.sh/cooldown-time"] = "20s"
        p["metadata"]["labels"] = {"app": APPS[n % len(APPS)]}  # (what budgets select)
        pods.append(p)
    return [group, *pods]


#: The app labels of the jobs' pods, which disruption budgets select.
APPS = ("web", "batch")


def _budget(n: int, app: str, max_unavailable: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"budget-{n}", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": max_unavailable},
    }


JOB = st.tuples(
    st.just("job"),
    st.integers(1, 4),  # pods
    st.integers(1, 6),  # cpu each
    st.integers(0, 3),  # min member (capped by pods)
    st.sampled_from(["a", "b"]),
    st.one_of(st.none(), st.integers(5, 60)),
    st.sampled_from([0, 10]),
)
#: The annotation naming a pod's PodGroup.
GROUP_KEY = "scheduling.k8s.io/group-name"
#: A Volcano Job's PodGroup as its controller makes it: Pending, no pods until admitted
#: (the pods come with a later "pods" event, admitted or not).
GROUP = st.tuples(
    st.just("group"),
    st.integers(1, 4),  # minMember
    st.integers(1, 6),  # cpu each
    st.sampled_from(["a", "b"]),
)
OPS = st.lists(
    st.one_of(
        JOB,
        GROUP,
        st.tuples(st.just("pods"), st.integers(0, 50)),
        st.tuples(st.just("cycle"), st.integers(1, 3)),
        st.tuples(st.just("tick"), st.sampled_from([1.0, 5.0, 30.0])),
        st.tuples(st.just("run"), st.integers(0, 50)),
        st.tuples(st.just("end"), st.integers(0, 50)),
        st.tuples(st.just("reap")),
        st.tuples(st.just("node"), st.sampled_from(["4", "8"])),
        st.tuples(st.just("budget"), st.sampled_from(APPS), st.integers(0, 2)),
    ),
    min_size=4,
    max_size=30,
)


def _apply(op: tuple, world: World, n: int, now: float) -> None:
    store = world.store
    kind = op[0]
    if kind == "job":
        _, size, cpu, min_member, q, sla, prio = op
        job = gang_job(n, size, cpu, max(1, min(min_member, size)), q, sla, prio)
        job[0]["metadata"]["creationTimestamp"] = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)
        )
        store.create_all(job)
    elif kind == "group":
        _, size, cpu, q = op
        group = podgroup(f"g{n}", min_member=size, queue=q, phase="Pending",
                         min_resources={"cpu": str(cpu * size)})  # fmt: skip
        group["metadata"]["creationTimestamp"] = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)
        )
        store.create(group)
    elif kind == "pods":  # a group's pods come (whether or not it was admitted)
        have = {p["metadata"]["annotations"].get(GROUP_KEY) for p in store.list("Pod")}
        bare = sorted(
            g["metadata"]["name"]
            for g in store.list("PodGroup")
            if g["metadata"]["name"].startswith("g") and g["metadata"]["name"] not in have
        )
        if bare:
            name = bare[op[1] % len(bare)]
            g = store.get("PodGroup", f"default/{name}")
            size = g["spec"]["minMember"]
            cpu = int(g["spec"]["minResources"]["cpu"]) // size
            store.create_all(
                [pod(f"{name}-{i}", cpu=str(cpu), memory="1Gi", group=name) for i in range(size)]
            )
    elif kind in ("run", "end"):
        bound = sorted(
            f"default/{p['metadata']['name']}"
            for p in store.list("Pod")
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        )
        if bound:
            key = bound[op[1] % len(bound)]
            if kind == "run":
                store.set_pod_phase(key, "Running")
            else:
                store.delete("Pod", key)
    elif kind == "reap":
        for p in store.list("Pod"):
            if p["metadata"].get("deletionTimestamp"):
                store.delete("Pod", f"default/{p['metadata']['name']}")
    elif kind == "node":
        store.create(node(f"n-extra-{n}", cpu=op[1], memory="64Gi"))
    elif kind == "budget":
        store.create(_budget(n, op[1], op[2]))


def _worlds(
    config: str | None,
    *,
    repeat_first: bool = True,
    plain: bool = True,
    plugins_dir: Path | None = None,
) -> tuple[World, World, list[float]]:
    """Two copies of the cluster: the first scheduled by one living session that
    repeats unchanged cycles (or, without ``repeat_first``, runs every cycle), the
    second by a new session for every cycle (``plain``: without enqueue's shortcut).
    ``plugins_dir`` adds the plugins its modules list (see docs/plugins.md)."""
    clock = [START]
    repeat = dataclasses.replace(scheduler_for(config, plugins_dir), repeat=repeat_first)
    fresh = dataclasses.replace(repeat, repeat=False, living=False)
    worlds = (World(repeat, clock), World(fresh, clock, plain=plain))
    for w in worlds:
        w.store.create_all(
            [
                queue("a", weight=2, capability={"cpu": "10"}),
                queue("b", weight=1),
                node("n1", cpu="8", memory="64Gi"),
                node("n2", cpu="4", memory="64Gi", labels={"pool": "reserved"}),
            ]
        )
    return worlds[0], worlds[1], clock


REPEATS: Counter[str] = Counter()


def check_same(config: str | None, label: str, ops: list[tuple], **worlds: Any) -> None:
    repeat, fresh, clock = _worlds(config, **worlds)
    for n, op in enumerate(ops):
        if op[0] == "tick":
            clock[0] += op[1]
            continue
        if op[0] == "cycle":
            for turn in range(op[1]):
                assert repeat.cycle() == fresh.cycle(), f"op {n}, turn {turn}"
            continue
        _apply(op, repeat, n, clock[0])
        _apply(op, fresh, n, clock[0])
    assert fresh.repeated == 0
    REPEATS[label] += repeat.repeated


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_repeated_cycles_decide_as_fresh_ones_default_config(ops):
    check_same(None, "default", ops)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_repeated_cycles_decide_as_fresh_ones_with_clocked_plugins(ops):
    check_same(CLOCKED, "clocked", ops)


def test_an_unchanged_backlog_is_repeated_until_its_sla_expires():
    """A job its queue's capability refuses for now waits; cycles with nothing new
    repeat the refusal; once its SLA waiting time has passed, a fresh cycle admits it."""
    repeat, fresh, clock = _worlds(CLOCKED)
    for w in (repeat, fresh):
        w.store.create_all(gang_job(0, 2, 1, 2, "a", None, 0))
    assert repeat.cycle() == fresh.cycle()  # binds j0: 2 cpu of queue a's 10
    for w in (repeat, fresh):
        job = gang_job(1, 3, 3, 3, "a", 30, 0)  # 9 cpu more: past the capability
        job[0]["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        w.store.create_all(job)
    for _ in range(2):  # j0's podgroup turns Running; then j0 is settled
        assert repeat.cycle() == fresh.cycle()
    first = repeat.cycle()
    assert first == fresh.cycle()
    assert first["pending"]["default/j1"].startswith("not enqueued: proportion")
    before = repeat.repeated
    for _ in range(3):
        clock[0] += 5
        again = repeat.cycle()
        assert again == fresh.cycle()
        assert again == first
    assert repeat.repeated == before + 3
    clock[0] += 30  # past the job's 30 s waiting time: sla admits it
    after = repeat.cycle()
    assert after == fresh.cycle()
    assert repeat.repeated == before + 3
    assert after["podgroups"]["default/j1"]["phase"] == "Inqueue"


def test_a_new_event_ends_the_repeat():
    """An arriving job is decided by a fresh cycle."""
    repeat, fresh, _clock = _worlds(None)
    for w in (repeat, fresh):
        w.store.create_all(gang_job(1, 3, 4, 3, "a", None, 0))
    for _ in range(4):  # the refusal's status is written, then nothing changes
        assert repeat.cycle() == fresh.cycle()
    assert repeat.repeated == 2
    for w in (repeat, fresh):
        w.store.create_all(gang_job(2, 1, 1, 1, "b", None, 0))
    out = repeat.cycle()
    assert out == fresh.cycle()
    assert repeat.repeated == 2
    assert "default/j2-0" in out["binds"] or "default/j2" in out["podgroups"]
