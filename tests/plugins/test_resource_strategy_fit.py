"""resource-strategy-fit: Volcano's unit cases for its arguments and scores, and what
pumice refuses that Volcano silently drops."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from tests.kit import conf, node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.arguments import Arguments
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.plugins.resource_strategy_fit import (
    LEAST,
    MOST,
    ResourceStrategyFitPlugin,
    Strategy,
    strategy_for,
)
from pumice.scheduler import Scheduler

SRC = "volcano pkg/scheduler/plugins/resource-strategy-fit"


def plugin(args: dict) -> ResourceStrategyFitPlugin:
    return ResourceStrategyFitPlugin(Arguments(args, "plugin resource-strategy-fit"))


# -- arguments (resource_strategy_fit_test.go, Test_calculateWeight) -----------------------


def test_weights_and_strategies_as_configured() -> None:
    """test1 and test2: the plugin weight (10 when absent) and each resource's type."""
    res = {"cpu": {"type": MOST, "weight": 1}, "memory": {"type": LEAST, "weight": 2}}
    for args in ({"resourceStrategyFitWeight": 10, "resources": res}, {"resources": res}):
        p = plugin(args)
        assert p.weight == 10
        assert p.strategies == {"cpu": Strategy(MOST, 1), "memory": Strategy(LEAST, 2)}


def test_no_resources_means_cpu_and_memory_least_allocated() -> None:
    """test3."""
    p = plugin({"resourceStrategyFitWeight": 10})
    assert p.strategies == {"cpu": Strategy(LEAST, 1), "memory": Strategy(LEAST, 1)}


@pytest.mark.parametrize("pattern", ["*", "cloudml.gpu**", "cloudml.*.gpu", "*.com/gpu"])
def test_a_pattern_volcano_drops_is_refused_naming_it(pattern: str) -> None:
    """test4-test7: Volcano logs and ignores these patterns; pumice refuses them."""
    with pytest.raises(InputError) as err:
        plugin({"resources": {pattern: {"type": MOST, "weight": 2}}})
    assert err.value.field == f"arguments.resources.{pattern}"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"resourceStrategyFitWeight": "heavy"}, "arguments.resourceStrategyFitWeight"),
        ({"resourceStrategyFitWeight": -1}, "arguments.resourceStrategyFitWeight"),
        ({"resources": {"cpu": {"type": "Most"}}}, "arguments.resources.cpu.type"),
        ({"resources": {"cpu": {"weight": -2}}}, "arguments.resources.cpu.weight"),
        ({"resources": "cpu"}, "arguments.resources"),
        ({"sra": {"enable": "yes"}}, "arguments.sra.enable"),
        ({"sra": {"enable": True, "weight": "a"}}, "arguments.sra.weight"),
        (
            {"sra": {"enable": True, "resources": "x/t4", "resourceWeight": {"x/t4": -1}}},
            "arguments.sra.resourceWeight.x/t4",
        ),
        (
            {
                "proportional": {
                    "enable": True,
                    "resources": "nvidia.com/gpu",
                    "resourceProportion": {"nvidia.com/gpu.cpu": "four"},
                }
            },
            "arguments.proportional.resourceProportion.nvidia.com/gpu.cpu",
        ),
    ],
)
def test_bad_values_are_refused_naming_the_key(args: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        plugin(args)
    assert err.value.field == field


def test_sra_and_proportional_arguments() -> None:
    """sra_test.go, TestArguments."""
    p = plugin(
        {
            "sra": {
                "enable": True,
                "resources": "nvidia.com/t4, nvidia.com/a10",
                "weight": 3,
                "resourceWeight": {"nvidia.com/t4": 1, "nvidia.com/a10": 2},
            },
            "proportional": {
                "enable": True,
                "resources": "nvidia.com/t4, nvidia.com/a10",
                "resourceProportion": {
                    "nvidia.com/t4.cpu": 3,
                    "nvidia.com/t4.memory": 6,
                    "nvidia.com/a10.cpu": 4,
                    "nvidia.com/a10.memory": 8,
                },
            },
        }
    )
    assert p.sra_weight == 3 and p.sra == {"nvidia.com/t4": 1, "nvidia.com/a10": 2}
    assert p.proportional == {"nvidia.com/t4": (3.0, 6.0), "nvidia.com/a10": (4.0, 8.0)}


def test_longest_prefix_wins_and_exact_name_first() -> None:
    """Test_findResourceConfigWithPrefix."""
    most3, least1 = Strategy(MOST, 3), Strategy(LEAST, 1)
    assert strategy_for("nvidia.com/gpu", {"nvidia.com/gpu": most3, "nvidia.com/*": least1}) == (
        most3
    )
    table = {
        "cloudml.gpu/tensorflow/*": Strategy(MOST, 3),
        "cloudml.gpu/*": Strategy(LEAST, 2),
        "cloudml/*": Strategy(MOST, 1),
    }
    assert strategy_for("cloudml.gpu/tensorflow/v2", table) == Strategy(MOST, 3)
    assert strategy_for("example.com/foo", {"nvidia.com/gpu/*": most3}) is None
    assert strategy_for("any.resource", {}) is None


# -- scores (TestResourceStrategyFitPlugin, sra_test.go TestNode) ---------------------------


def scores(objs: list[dict], args: dict) -> dict[str, dict[str, float]]:
    """Every pending pod's score on every node, from the plugin's node_order function."""
    config = conf("allocate", [{"name": "resource-strategy-fit", "arguments": args}])
    sched = Scheduler.create(parse_config(yaml.safe_load(config)))
    ssn = sched.open(build_snapshot([SourcedObject(o, "t") for o in objs]))
    (fn,) = ssn.hooks.flat("node_order")
    rows = np.arange(len(ssn.nodes))
    out = {}
    for job in ssn.jobs.values():
        for t in job.tasks.values():
            ctx = fn.context(t, rows)
            got = fn.rows(t, rows, ctx)
            one = [fn.one(t, i, ctx) for i in rows.tolist()]
            assert got.tolist() == one  # (the fast path's per-row form agrees to the bit)
            out[t.name] = dict(zip(ssn.nodes.names, got.tolist(), strict=True))
    return out


def gpu_pods() -> list[dict]:
    def p(name, cpu, mem, **extra):
        obj = pod(name, group="pg1", cpu=cpu, memory=mem)
        obj["spec"]["containers"][0]["resources"]["requests"].update(extra)
        return obj

    return [
        queue(),
        podgroup("pg1", min_member=4),
        p("p1", "1", "1Gi"),
        p("p2", "1.5", "0Gi", **{"nvidia.com/t4": "2"}),
        p("p3", "2", "4Gi", **{"nvidia.com/a10": "2"}),
        p("p4", "3", "4Gi", **{"nvidia.com/t4": "1", "nvidia.com/a10": "3"}),
        node("n1", "32", "64Gi", pods="10"),
        node("n2", "8", "16Gi", pods="10", **{"nvidia.com/t4": "16"}),
        node("n3", "8", "16Gi", pods="10", **{"nvidia.com/a10": "16"}),
        node("n4", "8", "16Gi", pods="10", **{"nvidia.com/t4": "8", "nvidia.com/a10": "16"}),
    ]


def test_sra_scores_match_volcanos_case_one() -> None:
    """sra_test.go, TestNode, case1."""
    got = scores(
        gpu_pods(),
        {
            "resourceStrategyFitWeight": 0,
            "sra": {
                "enable": True,
                "resources": "nvidia.com/t4, nvidia.com/a10",
                "weight": 5,
                "resourceWeight": {"nvidia.com/t4": 2, "nvidia.com/a10": 3},
            },
        },
    )
    assert got["p1"] == {"n1": 500, "n2": 300, "n3": 200, "n4": 0}
    assert got["p2"] == {"n1": 0, "n2": 300, "n3": 0, "n4": 0}
    assert got["p3"] == {"n1": 0, "n2": 0, "n3": 200, "n4": 0}
    assert got["p4"] == {"n1": 0, "n2": 0, "n3": 0, "n4": 0}


def test_strategy_and_sra_scores_add_up_as_in_volcanos_case_four() -> None:
    """sra_test.go, TestNode, case4 (case3 is the same without the SRA part)."""
    args = {
        "resourceStrategyFitWeight": 8,
        "resources": {
            "nvidia.com/t4": {"type": MOST, "weight": 3},
            "cpu": {"type": LEAST, "weight": 1},
        },
        "sra": {
            "enable": True,
            "resources": "nvidia.com/t4",
            "weight": 5,
            "resourceWeight": {"nvidia.com/t4": 2},
        },
    }
    got = scores(gpu_pods(), args)
    want = {
        "p1": {"n1": 1275, "n2": 700, "n3": 1200, "n4": 700},
        "p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
        "p3": {"n1": 750, "n2": 600, "n3": 1100, "n4": 600},
        "p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200},
    }
    for name, row in want.items():
        assert got[name] == pytest.approx(row, abs=1e-8), name
    args["sra"]["weight"] = 0
    got = scores(gpu_pods(), args)
    assert got["p1"] == pytest.approx({"n1": 775, "n2": 700, "n3": 700, "n4": 700})
    assert got["p3"] == pytest.approx({"n1": 750, "n2": 600, "n3": 600, "n4": 600})


def test_pod_annotations_choose_the_strategy_and_bad_weights_score_nothing() -> None:
    """TestScore's pod-level cases: a pod's MostAllocated beats the configured default;
    weights that are not JSON score 0."""

    def objs(weights: str) -> list[dict]:
        p = pod("p", group="pg", cpu="100m", memory="100")
        p["metadata"]["annotations"].update(
            {
                "volcano.sh/resource-strategy-scoring-type": MOST,
                "volcano.sh/resource-strategy-weight": weights,
            }
        )
        used = pod("u", group="busy", cpu="200m", memory="200", node="n1")
        return [queue(), podgroup("pg"), podgroup("busy"), p, used, node("n1", "500m", "500")]

    assert scores(objs('{"cpu": 1, "memory": 2}'), {})["p"] == {"n1": pytest.approx(600)}
    assert scores(objs("invalid-json"), {})["p"] == {"n1": 0}
    assert scores(objs('{"cpu": 2}'), {})["p"] == {"n1": pytest.approx(600)}


def test_proportional_refusal_is_explained() -> None:
    rates = {"nvidia.com/gpu.cpu": 4, "nvidia.com/gpu.memory": 4}
    args = {
        "proportional": {"enable": True, "resources": "nvidia.com/gpu", "resourceProportion": rates}
    }
    config = conf("allocate", ["predicates", {"name": "resource-strategy-fit", "arguments": args}])
    objs = [
        queue(),
        podgroup("pg"),
        pod("t", group="pg", cpu="10", memory="10G"),
        node("n1", "30", "30G", nvidia_gpu="6"),
    ]
    sched = Scheduler.create(parse_config(yaml.safe_load(config)))
    d = sched.cycle(build_snapshot([SourcedObject(o, "t") for o in objs]))
    assert d.binds == {}
    assert "1 proportional of resource nvidia.com/gpu check failed" in d.pending["default/pg"]
