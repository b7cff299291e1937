"""The fast path decides exactly as the long way and as a per-node reference.

Three ways to run a cycle must give the same decisions: the default (allocate's
per-shape fast path, heaps ordered by sort keys), the vectorized long way (fast path and
sort keys off) and the per-node reference of :mod:`pumice.bench.reference` (plain
Python loops over nodes, heaps ordered by the order functions).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import assert_same_but_bounded, node, pod, podgroup, queue

from pumice.bench import reference
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.load import load_objects
from pumice.framework.fastpath import FastPath
from pumice.scheduler import Scheduler

SCENARIOS = Path(__file__).parents[1] / "scenarios"


def _reference_choose(self: FastPath, task):
    return reference.choose(self.ssn, task) if reference.supported(self.ssn) else None


@contextlib.contextmanager
def mode(name: str) -> Iterator[None]:
    """``fast`` (as shipped), ``vector`` (no fast path, no sort keys) or ``reference``."""
    if name == "fast":
        yield
        return
    choose = _reference_choose if name == "reference" else (lambda self, task: None)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(FastPath, "choose", choose))
        # (and no fit error read from a slot view: the long way explains every miss)
        stack.enter_context(mock.patch.object(FastPath, "no_room", lambda self, task: None))
        for target in (
            "pumice.actions.allocate.job_key",
            "pumice.actions.enqueue.job_key",
            "pumice.actions.backfill.job_key",
        ):
            stack.enter_context(mock.patch(target, lambda ssn: None))
        stack.enter_context(mock.patch("pumice.actions.allocate.task_key", lambda s, t: None))
        yield


def _decisions(objects: list[dict], scheduler: Scheduler) -> dict:
    snapshot = build_snapshot([SourcedObject(o, "test") for o in objects])
    return scheduler.cycle(snapshot).to_json(sessions=False)  # (session ids differ)


def all_modes(objects: list[dict], scheduler: Scheduler) -> dict[str, dict]:
    results = {}
    for name in ("fast", "vector", "reference"):
        with mode(name):
            results[name] = _decisions(objects, scheduler)
    return results


ZONES = ("a", "b", "c")
TAINTS = (
    {"key": "dedicated", "value": "a", "effect": "NoSchedule"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "old", "value": "", "effect": "PreferNoSchedule"},
)


@st.composite
def placements(draw) -> dict:
    spec: dict = {}
    kind = draw(st.sampled_from(["none", "selector", "required", "preferred", "mixed"]))
    if kind in ("selector", "mixed"):
        spec["nodeSelector"] = {"zone": draw(st.sampled_from(ZONES))}
    affinity: dict = {}
    if kind in ("required", "mixed"):
        op = draw(st.sampled_from(["In", "NotIn", "Exists"]))
        expr = {"key": "zone", "operator": op}
        if op != "Exists":
            expr["values"] = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2))
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": [expr]}]
        }
    if kind in ("preferred", "mixed"):
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": draw(st.integers(1, 50)),
                "preference": {
                    "matchExpressions": [
                        {"key": "tier", "operator": "In", "values": [draw(st.sampled_from("xy"))]}
                    ]
                },
            }
        ]
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    tolerations = draw(
        st.lists(
            st.sampled_from(
                [
                    {"key": "dedicated", "operator": "Exists"},
                    {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
                    {"operator": "Exists"},
                ]
            ),
            max_size=2,
            unique_by=str,
        )
    )
    if tolerations:
        spec["tolerations"] = tolerations
    if draw(st.integers(0, 9)) == 0:
        spec["containers"] = [
            {
                "name": "c",
                "ports": [{"containerPort": 80, "hostPort": 8080}],
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
            }
        ]
    return spec


@st.composite
def clusters(draw) -> list[dict]:
    objs = [queue("default", weight=1), queue("other", weight=2)]
    objs.append(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 100,
        }
    )
    n_nodes = draw(st.integers(1, 7))
    gpu_nodes = draw(st.booleans())
    for i in range(n_nodes):
        extra = {"nvidia_gpu": draw(st.sampled_from(["0", "2", "4"]))} if gpu_nodes else {}
        objs.append(
            node(
                f"n{i}",
                cpu=draw(st.sampled_from(["1", "2", "4", "8"])),
                memory=draw(st.sampled_from(["2Gi", "4Gi", "16Gi"])),
                pods=draw(st.sampled_from(["3", "110"])),
                labels={"zone": draw(st.sampled_from(ZONES)), "tier": draw(st.sampled_from("xy"))},
                taints=draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=str)),
                unschedulable=draw(st.integers(0, 9)) == 0,
                **extra,
            )
        )
    for k in range(draw(st.integers(0, 6))):
        objs.append(
            pod(
                f"run-{k}",
                cpu=draw(st.sampled_from(["250m", "500m", "1"])),
                memory=draw(st.sampled_from(["256Mi", "1Gi"])),
                node=f"n{draw(st.integers(0, n_nodes - 1))}",
                terminating=draw(st.integers(0, 3)) == 0,
                scheduler="other",
            )
        )
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 5))
        objs.append(
            podgroup(
                f"g{j}",
                min_member=draw(st.integers(1, size)),
                queue=draw(st.sampled_from(["default", "other"])),
                priority_class=draw(st.sampled_from(["", "high"])),
                created=f"2026-01-01T00:00:0{j}Z",
            )
        )
        shape = draw(placements())
        cpu = draw(st.sampled_from(["250m", "500m", "1", "2"]))
        memory = draw(st.sampled_from(["256Mi", "1Gi", "3Gi"]))
        gpu = draw(st.sampled_from([None, "1"])) if gpu_nodes else None
        for k in range(size):
            p = pod(f"g{j}-w-{k}", cpu=cpu, memory=memory, gpu=gpu, group=f"g{j}")
            if draw(st.integers(0, 4)) == 0:  # now and then a replica of its own shape
                p["spec"].update(draw(placements()))
            else:
                p["spec"].update(shape)
            objs.append(p)
    return objs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_fast_path_vector_path_and_reference_agree(objs: list[dict]) -> None:
    """Random clusters (labels, taints, cordons, releasing pods, GPUs, host ports) and
    gangs of mixed placements: one set of decisions, however it is computed."""
    results = all_modes(objs, Scheduler.from_file(None))
    # (the fast path proves gang turns hopeless; the others try every turn)
    assert_same_but_bounded(results["fast"], results["vector"])
    assert results["vector"] == results["reference"]


SCENARIO_CASES = sorted(p.parent for p in SCENARIOS.rglob("expected.yaml"))


@pytest.mark.parametrize(
    "case", SCENARIO_CASES, ids=[str(c.relative_to(SCENARIOS)) for c in SCENARIO_CASES]
)
def test_scenarios_decide_alike_in_every_mode(case: Path) -> None:
    """Every scenario snapshot gets the same decisions in all three modes."""
    config = case / "config.yaml"
    scheduler = Scheduler.from_file(str(config) if config.exists() else None)
    objects = [s.obj for s in load_objects([str(case / "snapshot.yaml")])]
    results = all_modes(objects, scheduler)
    assert results["fast"] == results["vector"]
    assert results["fast"] == results["reference"]
