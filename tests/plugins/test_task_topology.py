"""task-topology: the job annotations read as Volcano reads them (its
topology_test.go cases), the weight argument, and orders and scores that follow the
buckets."""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.framework.fastpath import FastPath, for_session
from pumice.plugins.task_topology import Topology, read_topology
from pumice.scheduler import Scheduler

AFF, ANTI, ORDER = (
    "volcano.sh/task-topology-affinity",
    "volcano.sh/task-topology-anti-affinity",
    "volcano.sh/task-topology-task-order",
)
SIX = {"ps": 2, "worker": 2, "chief": 1, "evaluator": 1}


def job_with(annotations: dict[str, str] | None, roles: dict[str, int]):
    pg = podgroup("job1", min_member=1)
    if annotations is not None:
        pg["metadata"]["annotations"] = annotations
    objs = [queue(), pg]
    for role, n in roles.items():
        objs += [pod(f"job1-{role}-{i}", group="job1", role=role) for i in range(n)]
    snap = build_snapshot([SourcedObject(o, "t") for o in objs])
    return snap.jobs["default/job1"]


def test_correct_annotation() -> None:
    job = job_with(
        {AFF: "ps,worker;ps,chief", ANTI: "ps;worker,chief", ORDER: "ps,worker,chief,evaluator"},
        SIX,
    )
    assert read_topology(job) == (
        Topology(
            (("ps", "worker"), ("ps", "chief")),
            (("ps",), ("worker", "chief")),
            ("ps", "worker", "chief", "evaluator"),
        ),
        "",
    )


def test_role_names_with_dashes() -> None:
    roles = {"ps-some": 2, "worker-another-some": 2, "chief-kk": 1, "evaluator-tt": 1}
    job = job_with(
        {
            AFF: "ps-some,worker-another-some;ps-some,chief-kk",
            ANTI: "ps-some;worker-another-some,chief-kk",
            ORDER: "ps-some,worker-another-some,chief-kk,evaluator-tt",
        },
        roles,
    )
    topology, why = read_topology(job)
    assert why == "" and topology is not None
    assert topology.affinity == (("ps-some", "worker-another-some"), ("ps-some", "chief-kk"))


def test_no_annotation() -> None:
    assert read_topology(job_with(None, SIX)) == (None, "")


@pytest.mark.parametrize(
    ("annotations", "roles", "why"),
    [
        (
            {AFF: "$%GF$^trtqwrg^", ANTI: "ps;worker,chief;#@FGEW^vfa897bgs;;", ORDER: "ps,,"},
            SIX,
            "task $%GF$^trtqwrg^ do not exist in job <default/job1>",
        ),
        (
            {AFF: "ps,worker", ANTI: "ps", ORDER: "ps,worker,chief"},
            {"ps": 2, "worker": 2},
            "task chief do not exist in job <default/job1>",
        ),
        (
            {AFF: "ps,worker", ANTI: "ps,ps", ORDER: "ps,worker"},
            {"ps": 2, "worker": 2},
            "task ps is duplicate in job <default/job1>",
        ),
    ],
)
def test_invalid_annotations_are_ignored_with_the_reason(annotations, roles, why) -> None:
    assert read_topology(job_with(annotations, roles)) == (None, why)


def test_redundant_punctuation_keeps_empty_names() -> None:
    job = job_with(
        {
            AFF: "ps,worker;ps,,chief,;",
            ANTI: "ps;worker,chief;;;",
            ORDER: "ps,worker,chief,evaluator,,,",
        },
        SIX,
    )
    topology, why = read_topology(job)
    assert why == "" and topology is not None
    assert topology.affinity == (("ps", "worker"), ("ps", "", "chief", ""), ("",))
    assert topology.anti_affinity == (("ps",), ("worker", "chief"), ("",), ("",), ("",))
    assert topology.order == ("ps", "worker", "chief", "evaluator", "", "", "")


@pytest.mark.parametrize("value", ["heavy", -1, 1.5])
def test_bad_weight_is_refused_naming_the_key(value: object) -> None:
    config = conf(
        "allocate", [{"name": "task-topology", "arguments": {"task-topology.weight": value}}]
    )
    with pytest.raises(InputError) as err:
        Scheduler.create(parse_config(yaml.safe_load(config)))
    assert err.value.field is not None and err.value.field.endswith("task-topology.weight")


CONF = conf("allocate", ["priority", "gang"], ["predicates", "nodeorder", "task-topology"])


def test_without_annotated_jobs_the_fast_path_and_sort_keys_stay() -> None:
    """A cycle whose jobs carry no topology keeps allocate's per-shape caches and the
    task sort keys: the plugin costs nothing to the pods it does not concern."""
    sched = Scheduler.create(parse_config(yaml.safe_load(CONF)))
    objs = [queue(), podgroup("pg"), pod("p", group="pg"), node("n1")]
    ssn = sched.open(build_snapshot([SourcedObject(o, "t") for o in objs]))
    assert for_session(ssn).enabled
    assert all(k is not None for k in ssn.hooks.facets("task_order", "key"))


def test_affine_roles_share_a_node_and_other_jobs_spread() -> None:
    """Two jobs alike but for the annotation: the annotated one's pods are drawn
    together, the other's spread (nodeorder)."""
    together = podgroup("tf", min_member=3)
    together["metadata"]["annotations"] = {AFF: "ps,worker"}
    objs = [queue(), together, podgroup("plain", min_member=3)]
    objs += [pod("tf-ps-0", group="tf", role="ps")]
    objs += [pod(f"tf-worker-{i}", group="tf", role="worker") for i in range(2)]
    objs += [pod(f"plain-worker-{i}", group="plain", role="worker") for i in range(3)]
    objs += [node(f"n{i}", "8", "16Gi") for i in range(1, 7)]
    d = run(objs, CONF)
    tf = {d.binds[f"default/tf-{r}"] for r in ("ps-0", "worker-0", "worker-1")}
    plain = {d.binds[f"default/plain-worker-{i}"] for i in range(3)}
    assert len(tf) == 1
    assert len(plain) == 3


def test_task_order_puts_bucket_pods_first() -> None:
    """In-bucket pods go before the job's others: with room for one pod, the ps pod
    (in a bucket) is placed, not the evaluator (named first, in no bucket)."""
    pg = podgroup("job1", min_member=1)
    pg["metadata"]["annotations"] = {ANTI: "ps"}
    objs = [queue(), pg, node("n1", "3")]
    objs += [pod("job1-a-evaluator-0", group="job1", role="evaluator", cpu="2")]
    objs += [pod("job1-ps-0", group="job1", role="ps", cpu="2")]
    assert run(objs, CONF).binds == {"default/job1-ps-0": "n1"}


# -- the fast path agrees with the long way ------------------------------------------------

SCORERS = conf(
    "allocate, backfill",
    ["priority", "gang"],
    [
        "predicates",
        "nodeorder",
        "binpack",
        {"name": "task-topology", "arguments": {"task-topology.weight": 3}},
        {"name": "nodegroup", "enablePredicate": False},
        {
            "name": "resource-strategy-fit",
            "arguments": {
                "resources": {"nvidia.com/gpu": {"type": "MostAllocated", "weight": 2}},
                "sra": {"enable": True, "resources": "nvidia.com/gpu", "weight": 1},
            },
        },
    ],
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from(["2", "4", "8"]), st.sampled_from([None, "2", "4"])),
        min_size=1,
        max_size=5,
    ),
    jobs=st.lists(
        st.tuples(
            st.sampled_from([None, "ps,worker", "worker", "ps;worker"]),
            st.sampled_from([None, "ps", "ps,worker"]),
            st.integers(1, 3),
            st.sampled_from(["1", "2"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_fast_path_and_long_way_decide_alike(nodes, jobs) -> None:
    objs: list[dict] = [queue()]
    for i, (cpu, gpu) in enumerate(nodes):
        extra = {"nvidia_gpu": gpu} if gpu else {}
        objs.append(node(f"n{i}", cpu, "16Gi", labels={"volcano.sh/nodegroup-name": "g"}, **extra))
    q = queue()
    q["spec"]["affinity"] = {
        "nodeGroupAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["g"]}
    }
    objs[0] = q
    for j, (aff, anti, workers, cpu, gpu) in enumerate(jobs):
        pg = podgroup(f"j{j}", min_member=1)
        ann = {}
        if aff:
            ann[AFF] = aff
        if anti:
            ann[ANTI] = anti
        pg["metadata"]["annotations"] = ann
        objs.append(pg)
        objs.append(pod(f"j{j}-ps-0", group=f"j{j}", role="ps", cpu=cpu))
        for w in range(workers):
            objs.append(
                pod(
                    f"j{j}-worker-{w}",
                    group=f"j{j}",
                    role="worker",
                    cpu=cpu,
                    gpu="1" if gpu else None,
                )
            )
    sched = Scheduler.create(parse_config(yaml.safe_load(SCORERS)))
    out = {}
    for name in ("fast", "long"):
        with contextlib.ExitStack() as stack:
            if name == "long":  # (no per-shape caches: every choice made over all nodes)
                stack.enter_context(mock.patch.object(FastPath, "choose", lambda s, t: None))
            snap = build_snapshot([SourcedObject(o, "t") for o in objs])
            out[name] = sched.cycle(snap).to_json(sessions=False)
    assert out["fast"] == out["long"]
