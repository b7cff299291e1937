"""GPU sharing in the simulator: pods sharing cards by memory are counted on their cards
in later cycles (the annotations their bind wrote), and the what-if compares the same
jobs with shared and whole cards."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from pumice.cli import main
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.scheduler import Scheduler
from pumice.sim import gpu_sharing
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import Simulation, node_allocatable
from pumice.sim.workload import JobSpec, QueueSpec, TaskSpec, Workload

GiB = float(2**30)
GM, GN = "volcano.sh/gpu-memory", "volcano.sh/gpu-number"
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "pumice" / "examples"
CONFIG = EXAMPLES / "configs" / "deviceshare.yaml"


def _share_node(name: str, cards: int, card_mib: int) -> dict:
    return node_object(name, {"cpu": 96000.0, "memory": 768 * GiB, GM: float(cards * card_mib),
                              GN: float(cards)})  # fmt: skip


def _job(name: str, arrival: float, duration: float, mib: float) -> JobSpec:
    req = {"cpu": 1000.0, "memory": GiB, GM: mib}
    return JobSpec(
        name=name,
        namespace="default",
        queue="q",
        arrival=arrival,
        duration=duration,
        tasks=(TaskSpec("main", 1, req),),
        min_available=1,
    )


def _scheduler() -> Scheduler:
    return Scheduler.create(parse_config(yaml.safe_load(CONFIG.read_text())))


def test_cards_taken_in_earlier_cycles_are_counted() -> None:
    """Two cards of 80 GiB; three pods of 48 GiB arriving a minute apart, each bound in
    its own cycle. Their sum fits the node's GPU memory, but no card holds two: the third
    waits for the first to end, because later cycles read the cards the earlier binds
    wrote (volcano.sh/gpu-index)."""
    w = Workload(
        jobs=(_job("a", 0.0, 600.0, 49152), _job("b", 60.0, 600.0, 49152),
              _job("c", 120.0, 600.0, 49152)),
        queues=(QueueSpec("q"),),
    )  # fmt: skip
    sim = Simulation([_share_node("s0", 2, 81920)], w, _scheduler())
    r = sim.run()
    a, b, c = (r.metrics.jobs[f"default/{n}"] for n in "abc")
    assert a.start is not None and b.start is not None and c.start is not None
    assert b.start < a.end and c.start >= a.end


def test_whole_cards_raise_each_share_to_a_card() -> None:
    w = Workload(jobs=(_job("a", 0.0, 60.0, 10240), _job("b", 0.0, 60.0, 81920)),
                 queues=(QueueSpec("q"),))  # fmt: skip
    allocs = node_allocatable([_share_node("s0", 8, 81920)])
    shared, whole = gpu_sharing.variants(["shared", "whole"], w, allocs)
    assert shared == ("shared", w)
    assert [j.tasks[0].requests[GM] for j in whole[1].jobs] == [81920, 81920]


def test_whole_cards_need_cards_of_one_size() -> None:
    allocs = node_allocatable([_share_node("s0", 8, 81920), _share_node("s1", 4, 40960)])
    with pytest.raises(InputError, match="differ in memory"):
        gpu_sharing.card_memory(allocs)
    with pytest.raises(InputError, match="share their GPU cards by memory"):
        gpu_sharing.card_memory(node_allocatable([node_object("n", {"cpu": 1000.0})]))
    with pytest.raises(InputError, match="expected one of shared, whole"):
        gpu_sharing.parse_modes("shared,halves")


def test_the_example_what_if_shows_sharing_shortening_waits(tmp_path, capsys) -> None:
    """The shipped example, cut to its first 60 inference jobs: with shared cards the
    jobs wait less than with whole ones, and the whole run holds more card memory."""
    doc = list(yaml.safe_load_all((EXAMPLES / "gpu-sharing" / "inference.yaml").read_text()))
    doc[0]["jobs"] = [j for j in doc[0]["jobs"] if j["name"].startswith("infer-")][:60]
    work = tmp_path / "w.yaml"
    work.write_text(yaml.safe_dump_all(doc))
    cluster = EXAMPLES / "gpu-sharing" / "cluster.yaml"
    out = tmp_path / "out"
    rc = main(["simulate", str(work), "--cluster", str(cluster), "--config", str(CONFIG),
               "--gpu-sharing", "shared,whole", "--out", str(out), "--no-progress",
               "--workers", "1"])  # fmt: skip
    assert rc == 0
    summary = {
        mode: orjson.loads((out / mode / "metrics.json").read_bytes())["summary"]
        for mode in ("shared", "whole")
    }
    assert summary["shared"]["wait"]["mean"] < summary["whole"]["wait"]["mean"]
    held = {m: s["utilization"][GM] for m, s in summary.items()}
    assert held["shared"] < held["whole"]
    # the comparison says what sharing bought, in the summary and on the page
    printed = capsys.readouterr().out
    wait = {m: f"{summary[m]['wait']['mean'] / 60:.1f} min" for m in summary}
    sentence = (
        f"What sharing GPU cards bought: jobs waited {wait['shared']} on average, against "
        f"{wait['whole']} with a card each; the pods held {held['shared']:.1%} of the shared "
        f"cards' memory, against {held['whole']:.1%} with whole cards."
    )
    assert sentence in printed
    assert sentence.replace("'", "&#x27;") in (out / "index.html").read_text()
