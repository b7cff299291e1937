"""Gangs of every dialect (coscheduling PodGroups, Kubernetes Workloads and PodGroups)
through ``pumice cycle``'s snapshot builder and the incremental scheduler cache: the
same gang decides alike in every dialect, the cache decides as a rebuilt snapshot, and
pods whose group is missing wait until it comes."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cache.load import load_objects
from pumice.cluster.memory import MemoryCluster
from pumice.cluster.protocol import store_kind
from pumice.scheduler import Scheduler

ROOT = Path(__file__).parents[1] / "scenarios" / "gang-apis"
DIALECTS = ("volcano", "coscheduling", "workload-v1alpha1", "workload-v1alpha2")
CASES = sorted(p for p in ROOT.iterdir() if (p / "volcano").is_dir())
SNAPSHOTS = sorted(p.parent for p in ROOT.rglob("snapshot.yaml"))


def _objects(case: Path) -> list[dict]:
    return [s.obj for s in load_objects([str(case / "snapshot.yaml")])]


def _decide(snapshot) -> dict:
    return Scheduler.from_file(None).cycle(snapshot).to_json(sessions=False)


_UID = re.compile(r"default/(?:coscheduling:|podgroup:|workload:)?([a-z0-9-]+)(?::workers)?")


def _gang(uid: str) -> str:
    """The gang's name in a job uid of any dialect."""
    m = _UID.fullmatch(uid)
    assert m, uid
    return m.group(1)


def _neutral(out: dict) -> dict:
    """Decisions with every job uid turned into its gang's name, and the reasons without
    the words that name the dialect's objects."""
    pending = {}
    for uid, reason in out["pending"].items():
        reason = re.sub(r"(PodGroup|Workload) \S+( \([a-z0-9.-]+\))?", "GROUP", reason)
        # (The Workload API calls the gang's minimum minCount.)
        reason = re.sub(r"fix .* of its pods", "fix its pods", reason)
        pending[_gang(uid)] = reason.replace("minCount is", "minMember is")
    return {
        "binds": out["binds"],
        "pipelined": out["pipelined"],
        "evictions": out["evictions"],
        "pending": pending,
        "phases": {_gang(uid): pg["phase"] for uid, pg in out["podgroups"].items()},
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_dialect_decides_as_the_volcano_podgroup(case: Path) -> None:
    """Binds, pipelined pods, podgroup phases and the explanations of waiting gangs are
    the same in every dialect as for the Volcano PodGroup."""

    def decide(dialect: str) -> dict:
        snapshot = build_snapshot(load_objects([str(case / dialect / "snapshot.yaml")]))
        return _neutral(_decide(snapshot))

    want = decide("volcano")
    for dialect in DIALECTS[1:]:
        assert decide(dialect) == want, dialect


@pytest.mark.parametrize("case", SNAPSHOTS, ids=[str(c.relative_to(ROOT)) for c in SNAPSHOTS])
def test_the_cache_decides_as_the_snapshot_builder(case: Path) -> None:
    objects = _objects(case)
    store = MemoryCluster()
    store.create_all(copy.deepcopy(objects))
    snap = SchedulerCache(store).snapshot()
    built = build_snapshot([SourcedObject(o) for o in objects])
    assert sorted(snap.jobs) == sorted(built.jobs)
    assert snap.blocked == built.blocked
    for uid, job in snap.jobs.items():
        other = built.jobs[uid]
        assert (job.api, job.phase, job.priority, job.queue, job.schedule_timeout) == (
            other.api,
            other.phase,
            other.priority,
            other.queue,
            other.schedule_timeout,
        )
    assert _decide(snap) == _decide(built)


def _split(case: Path) -> tuple[list[dict], list[dict]]:
    """A case's objects: the group objects (PodGroups, Workloads), and all others."""
    objects = _objects(case)
    groups = [o for o in objects if o["kind"] in ("PodGroup", "Workload")]
    return groups, [o for o in objects if o not in groups]


@pytest.mark.parametrize("dialect", DIALECTS[1:])
def test_pods_wait_for_their_group_and_join_it_when_it_comes(dialect: str) -> None:
    """Pods created before their group wait, with a reason naming the missing object;
    the group's arrival makes them one gang, placed whole; its deletion makes them wait
    again (and a Workload's pod group job goes with its last pod)."""
    groups, others = _split(ROOT / "queue-annotation" / dialect)
    store = MemoryCluster()
    store.create_all(copy.deepcopy(others))
    cache = SchedulerCache(store)
    snap = cache.snapshot()
    (uid,) = snap.blocked
    assert "does not exist" in snap.blocked[uid]
    assert ("Workload default/train" if dialect == "workload-v1alpha1" else "PodGroup") in (
        snap.blocked[uid]
    )
    assert not snap.jobs and not _decide(snap)["binds"]

    store.create_all(copy.deepcopy(groups))
    snap = cache.snapshot()
    assert not snap.blocked and list(snap.jobs) == [uid]
    job = snap.jobs[uid]
    assert (job.api, job.queue, job.min_available, len(job.tasks)) == (
        "coscheduling" if dialect == "coscheduling" else "workload",
        "q1",
        2,
        2,
    )
    applied = cache.apply(Scheduler.from_file(None).cycle(snap))
    assert sorted(p for p, _ in applied.bound) == ["default/train-0", "default/train-1"]
    assert cache.snapshot().jobs[uid].phase == "Running"

    for g in groups:
        store.delete(store_kind(g), f"default/{g['metadata']['name']}")
    snap = cache.snapshot()
    assert uid in snap.blocked and uid not in snap.jobs
    for o in others:
        if o["kind"] == "Pod":
            store.delete("Pod", f"default/{o['metadata']['name']}")
    snap = cache.snapshot()
    assert not snap.blocked and not snap.jobs


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_admitted_gang_stays_admitted_in_every_dialect(dialect: str) -> None:
    """A gang admitted but not placed (too few pods yet) is Inqueue in the next cycle:
    Volcano's PodGroup by its status, the others by the cache's memory (their status is
    not written); the pod that completes it is then placed with the others."""
    groups, others = _split(ROOT / "too-few-pods" / dialect)
    store = MemoryCluster()
    store.create_all(copy.deepcopy(groups + others))
    cache = SchedulerCache(store)
    applied = cache.apply(Scheduler.from_file(None).cycle(cache.snapshot()))
    assert applied.phases and not applied.bound
    (job,) = cache.snapshot().jobs.values()
    assert job.phase == "Inqueue"
    third = copy.deepcopy(next(o for o in others if o["kind"] == "Pod"))
    third["metadata"]["name"] = "train-2"
    third["metadata"]["uid"] = "default-train-2"
    store.create(third)
    applied = cache.apply(Scheduler.from_file(None).cycle(cache.snapshot()))
    assert len(applied.bound) == 3


def test_a_workload_spec_change_remakes_its_gangs() -> None:
    """A v1alpha1 Workload whose pod group changes minCount: its gang is made again
    with its pods (the cache agrees with a rebuilt snapshot)."""
    groups, others = _split(ROOT / "too-few-pods" / "workload-v1alpha1")
    store = MemoryCluster()
    store.create_all(copy.deepcopy(groups + others))
    cache = SchedulerCache(store)
    uid = "default/workload:train:workers"
    assert cache.snapshot().jobs[uid].min_available == 3

    def two(w: dict) -> None:
        w["spec"]["podGroups"][0]["policy"]["gang"]["minCount"] = 2

    store.modify("Workload", "default/train", two)
    snap = cache.snapshot()
    assert (snap.jobs[uid].min_available, len(snap.jobs[uid].tasks)) == (2, 2)
    assert len(Scheduler.from_file(None).cycle(snap).binds) == 2


def test_replica_keys_are_separate_gangs() -> None:
    """Pods of one v1alpha1 pod group with two replica keys are two gangs, each of
    minCount pods: a replica short of pods waits, the complete one is placed."""
    groups, others = _split(ROOT / "too-few-pods" / "workload-v1alpha1")
    pods = [o for o in others if o["kind"] == "Pod"]
    for p, key in zip(pods, ("r1", "r2"), strict=True):
        p["spec"]["workloadRef"]["podGroupReplicaKey"] = key
    extra = copy.deepcopy(pods[0])
    extra["metadata"].update(name="train-2", uid="default-train-2")
    extra2 = copy.deepcopy(pods[0])
    extra2["metadata"].update(name="train-3", uid="default-train-3")
    objects = groups + others + [extra, extra2]
    out = _decide(build_snapshot([SourcedObject(o) for o in copy.deepcopy(objects)]))
    assert sorted(out["binds"]) == ["default/train-0", "default/train-2", "default/train-3"]
    assert "minCount is 3" in out["pending"]["default/workload:train:workers:r2"]
    store = MemoryCluster()
    store.create_all(copy.deepcopy(objects))
    assert _decide(SchedulerCache(store).snapshot()) == out
