"""``pumice cycle``'s line of waiting jobs: in the order the scheduler tries them, with
positions, the stage that stops each and why."""

from __future__ import annotations

import json
from pathlib import Path

from pumice.cli import main
from pumice.visibility.line import pending_jobs
from tests.kit import conf, node, pod, podgroup, priority_class, queue, run

LINE = Path(__file__).parent.parent / "data/visibility/line.yaml"


def _line(capsys) -> list[dict]:
    assert main(["cycle", str(LINE)]) == 0
    return json.loads(capsys.readouterr().out)["pending_jobs"]


def test_the_line_follows_queue_order_then_job_order(capsys) -> None:
    line = _line(capsys)
    # fresh runs nothing, so allocate serves it before busy (over its share, skipped);
    # in busy the high-priority job goes first though created later; capped's job was
    # not admitted, so it waits behind every admitted one.
    assert [
        (j["name"], j["queue"], j["positionInCluster"], j["positionInQueue"]) for j in line
    ] == [
        ("fresh-job", "fresh", 1, 1),
        ("busy-high", "busy", 2, 1),
        ("busy-low", "busy", 3, 2),
        ("too-big", "capped", 4, 1),
    ]
    assert [j["priority"] for j in line] == [0, 100, 1, 0]


def test_each_job_says_the_stage_that_stops_it(capsys) -> None:
    by_name = {j["name"]: j for j in _line(capsys)}
    # busy is over its deserved share: allocate skips it, and says so
    busy = by_name["busy-high"]
    assert busy["stage"] == "queue"
    assert "queue busy has used its deserved share" in busy["reason"]
    # fresh's job would take it over its share
    fresh = by_name["fresh-job"]
    assert fresh["stage"] == "queue"
    assert "queue fresh cannot take task fresh-job-0 now" in fresh["reason"]
    big = by_name["too-big"]
    assert big["stage"] == "enqueue"
    assert "not enqueued" in big["reason"]
    # the reason is the cycle's own pending explanation, word for word
    assert main(["cycle", str(LINE)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {f"{j['namespace']}/{j['name']}": j["reason"] for j in out["pending_jobs"]} == out[
        "pending"
    ]
    assert "eta" not in big  # (no forecast asked for)


def test_table_shows_the_line_with_positions(capsys) -> None:
    assert main(["cycle", str(LINE), "--format", "table"]) == 0
    out = capsys.readouterr().out
    _before, title, table = out.partition("in the order the scheduler tries them")
    assert title
    rows = [r for r in table.splitlines() if "default/" in r]
    names = [n for r in rows for n in ("fresh-job", "busy-high", "busy-low", "too-big") if n in r]
    assert names == ["fresh-job", "busy-high", "busy-low", "too-big"]


def test_a_gang_no_node_can_hold_is_stopped_at_allocate() -> None:
    objects = [
        node("n1", cpu="3"),
        node("n2", cpu="3"),
        queue(),
        podgroup("gang", min_member=3),
        *[pod(f"gang-{i}", group="gang", cpu="2") for i in range(3)],
        podgroup("small"),
        pod("small-0", group="small", cpu="4", memory="16Gi"),
    ]
    jobs = pending_jobs(run(objects))
    assert [(j.name, j.stage) for j in jobs] == [("gang", "allocate"), ("small", "allocate")]
    assert "gang short: needs 3 tasks, 2 could be placed" in jobs[0].reason
    assert "0/2 nodes are available" in jobs[1].reason


def test_priority_orders_jobs_of_one_queue() -> None:
    config = conf("enqueue, allocate", ["priority", "gang"], ["proportion", "predicates"])
    objects = [
        node("n1", cpu="1"),
        queue(),
        priority_class("urgent", 1000),
        *[
            x
            for i, pc in enumerate(["", "urgent", "", "urgent"])
            for x in (
                podgroup(f"j{i}", priority_class=pc, created=f"2026-01-01T00:0{i}:00Z"),
                pod(f"j{i}-0", group=f"j{i}", cpu="2", priority_class=pc,
                    priority=1000 if pc else None),
            )
        ],
    ]  # fmt: skip
    jobs = pending_jobs(run(objects, config))
    assert [j.name for j in jobs] == ["j1", "j3", "j0", "j2"]
    assert [j.position_in_queue for j in jobs] == [1, 2, 3, 4]


def test_a_job_of_a_queue_that_does_not_exist_is_listed_under_that_queue() -> None:
    """Its owner asks for the queue it named (``pumice queue pending research``) and
    finds it there, last, with why: the queue does not exist."""
    objects = [
        node("n1", cpu="4"),
        queue(),
        podgroup("lost", queue="research"),
        pod("lost-0", group="lost", cpu="1"),
    ]
    (job,) = pending_jobs(run(objects))
    assert (job.name, job.queue, job.stage) == ("lost", "research", "not-schedulable")
    assert "queue 'research' does not exist" in job.reason
    assert job.position_in_queue == 1
