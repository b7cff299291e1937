"""Skipping a gang turn proven hopeless changes no decision and no explanation.

allocate skips the turn of a job whose pending tasks cannot reach the gang minimum in
the slots the nodes have left (:mod:`pumice.actions.room`). These tests run the same
cycles with the skip turned off (every turn tried) and compare everything a user sees:
binds, pipelined tasks, podgroup conditions, pending reasons. Where a gang has tasks of
several shapes (a parameter server and its workers) the proof is a bound: the decisions
must be the same, and the explanation says "at most N could be placed", N never fewer
than the try managed.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import assert_same_but_bounded, node, pod, podgroup, queue

from pumice.actions import allocate, room
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.scheduler import Scheduler


@contextlib.contextmanager
def counting_skips(enabled: bool) -> Iterator[list[int]]:
    """Count the turns skipped; with ``enabled`` False, skip none (try every turn)."""
    skipped = [0]
    real = allocate.hopeless_turn

    def spy(*args):
        if not enabled:
            return False
        hit = real(*args)
        skipped[0] += hit
        return hit

    with mock.patch.object(allocate, "hopeless_turn", spy):
        yield skipped


def _cycle(objects: list[dict], skip: bool) -> tuple[dict, int]:
    with counting_skips(skip) as skipped:
        snapshot = build_snapshot([SourcedObject(o, "test") for o in objects])
        out = Scheduler.from_file(None).cycle(snapshot).to_json(sessions=False)
    return out, skipped[0]


@st.composite
def crowded(draw, mixed: bool = False) -> list[dict]:
    """Few, fragmented nodes and gangs of one shape each, often too big to fit; two
    queues, so proportion's share refuses tasks part way now and then. CPU requests of
    100m and 300m are not exact in binary floats."""
    objs = [queue("a", weight=1), queue("b", weight=draw(st.integers(1, 3)))]
    n_nodes = draw(st.integers(1, 5))
    gpus = draw(st.booleans())
    for i in range(n_nodes):
        extra = {"nvidia_gpu": draw(st.sampled_from(["1", "2", "4"]))} if gpus else {}
        objs.append(
            node(
                f"n{i}",
                cpu=draw(st.sampled_from(["1", "2", "3", "4"])),
                memory=draw(st.sampled_from(["2Gi", "4Gi", "8Gi"])),
                pods=draw(st.sampled_from(["4", "110"])),
                **extra,
            )
        )
    for k in range(draw(st.integers(0, 4))):
        objs.append(
            pod(
                f"other-{k}",
                cpu=draw(st.sampled_from(["300m", "500m", "1"])),
                memory="512Mi",
                node=f"n{draw(st.integers(0, n_nodes - 1))}",
                terminating=draw(st.integers(0, 3)) == 0,
                scheduler="other",
            )
        )
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 8))
        objs.append(
            podgroup(
                f"g{j}",
                min_member=draw(st.integers(1, size)),
                queue=draw(st.sampled_from(["a", "b"])),
                created=f"2026-01-01T00:00:0{j}Z",
            )
        )
        cpu = draw(st.sampled_from(["100m", "300m", "500m", "1", "2"]))
        memory = draw(st.sampled_from(["256Mi", "1Gi", "3Gi"]))
        gpu = draw(st.sampled_from([None, "1", "2"])) if gpus else None
        ps = draw(st.integers(0, 2)) if mixed else 0
        ps_cpu = draw(st.sampled_from(["300m", "1", "3"]))
        group = objs[-1]
        for k in range(ps):  # a role of another shape, first or last in task order
            group["spec"]["minMember"] += 1
            objs.append(
                pod(
                    f"g{j}-ps-{k}",
                    cpu=ps_cpu,
                    memory="1Gi",
                    group=f"g{j}",
                    role="ps",
                    priority=draw(st.sampled_from([None, 10])),
                )
            )
        for k in range(size):
            objs.append(
                pod(
                    f"g{j}-w-{k}",
                    cpu=cpu,
                    memory=memory,
                    gpu=gpu,
                    group=f"g{j}",
                    role="worker" if ps else None,
                )
            )
    return objs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded())
def test_skipping_hopeless_turns_changes_nothing(objs: list[dict]) -> None:
    tried, _ = _cycle(objs, skip=False)
    skipped, _ = _cycle(objs, skip=True)
    assert skipped == tried


def test_a_gang_too_big_for_the_free_gpus_is_skipped_and_explained() -> None:
    """Three nodes with 8 free GPUs and one busy; a gang of four 8-GPU workers cannot
    start, and says how many of its tasks the free nodes could hold."""
    objs = [queue("default")]
    for i in range(4):
        objs.append(node(f"n{i}", cpu="96", memory="768Gi", nvidia_gpu="8"))
    objs.append(pod("busy", cpu="8", memory="64Gi", gpu="8", node="n3", scheduler="other"))
    objs.append(podgroup("big", min_member=4))
    for k in range(4):
        objs.append(pod(f"big-w-{k}", cpu="8", memory="64Gi", gpu="8", group="big"))
    skipped, n_skipped = _cycle(objs, skip=True)
    tried, _ = _cycle(objs, skip=False)
    assert n_skipped == 1
    assert skipped == tried
    assert not skipped["binds"]
    reason = skipped["pending"]["default/big"]
    assert reason.startswith("gang short: needs 4 tasks, 3 could be placed; task big-w-3:")
    assert "4 insufficient nvidia.com/gpu" in reason


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded(mixed=True))
def test_skipping_mixed_shape_turns_changes_no_decision(objs: list[dict]) -> None:
    tried, _ = _cycle(objs, skip=False)
    skipped, _ = _cycle(objs, skip=True)
    assert_same_but_bounded(skipped, tried)


def test_a_parameter_server_gang_short_of_gpus_is_skipped_and_explained() -> None:
    """A CPU-only parameter server and four 8-GPU workers, all needed, on three free
    GPU nodes: no order of placement completes the gang, so the turn is skipped, with
    the same explanation as the try."""
    objs = [queue("default")]
    for i in range(4):
        objs.append(node(f"n{i}", cpu="96", memory="768Gi", nvidia_gpu="8"))
    objs.append(pod("busy", cpu="8", memory="64Gi", gpu="8", node="n3", scheduler="other"))
    objs.append(podgroup("big", min_member=5))
    objs.append(pod("big-ps-0", cpu="4", memory="16Gi", group="big", role="ps"))
    for k in range(4):
        objs.append(pod(f"big-w-{k}", cpu="8", memory="64Gi", gpu="8", group="big", role="w"))
    skipped, n_skipped = _cycle(objs, skip=True)
    tried, _ = _cycle(objs, skip=False)
    assert n_skipped == 1
    assert_same_but_bounded(skipped, tried)
    assert not skipped["binds"]
    reason = skipped["pending"]["default/big"]
    assert reason.startswith("gang short: needs 5 tasks, at most 4 could be placed; task big-w-3:")
    assert "4 insufficient nvidia.com/gpu" in reason
    assert tried["pending"]["default/big"] == reason.replace("at most ", "")


@st.composite
def crowded_then_freed(draw) -> tuple[list[dict], list[list[str]]]:
    """A crowded cluster with gangs of several shapes, then a few rounds of pods ending
    (by name, some rounds none): the rounds between cycles. Other pods free room; a
    gang's own pod changes what its next turn has to place."""
    objs = draw(crowded(mixed=True))
    names = [o["metadata"]["name"] for o in objs if o["kind"] == "Pod"]
    ending = st.lists(st.sampled_from(names), max_size=2) if names else st.just([])
    rounds = draw(st.lists(ending, max_size=4))
    return objs, rounds


@contextlib.contextmanager
def walking_afresh() -> Iterator[None]:
    """Every turn works out what it knows of the gang's tasks again, and every mixed
    turn walks them again, as if nothing had been kept."""
    real_walk, real_facts = room._walk, room._gang_facts

    def walk_afresh(ssn, job, *args):
        job.verdicts.forget(room._WALK)
        return real_walk(ssn, job, *args)

    def facts_afresh(ssn, job, *args):
        job.verdicts.forget(room._FACTS)
        return real_facts(ssn, job, *args)

    with (
        mock.patch.object(room, "_walk", walk_afresh),
        mock.patch.object(room, "_gang_facts", facts_afresh),
    ):
        yield


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded_then_freed())
def test_a_kept_walk_explains_a_waiting_mixed_gang_as_a_new_walk(case) -> None:
    """What a turn knows of a gang's tasks, and the walk of a mixed turn, are kept with
    the job from cycle to cycle. Two copies of one cluster go through the same cycles,
    pods ending in between (other pods, or a gang's own); one keeps what it knows, the
    other works it out every turn again: every cycle decides and explains the same."""
    objs, rounds = case
    worlds = []
    for _ in range(2):
        store = MemoryCluster()
        store.create_all(copy.deepcopy(objs))
        worlds.append((store, SchedulerCache(store), Scheduler.from_file(None)))
    for gone in [[], *rounds]:
        said = []
        for k, (store, cache, scheduler) in enumerate(worlds):
            for name in dict.fromkeys(gone):
                store.delete("Pod", f"default/{name}")
            with walking_afresh() if k else contextlib.nullcontext():
                decisions = scheduler.cycle(cache.snapshot())
            cache.apply(decisions)
            said.append(decisions.to_json(sessions=False))
        assert said[0] == said[1]
