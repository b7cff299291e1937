"""A running scheduler's forecast: at most one at a time, off the request thread, kept
with its age; the endpoint's ``?eta=1``; run times learned from pods as they finish."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from tests.forecast.test_forecast import NOW, gang, objects

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cluster.memory import MemoryCluster
from pumice.forecast.learn import FinishedPods
from pumice.forecast.live import BackgroundForecast, Forecast
from pumice.scheduler import Scheduler
from pumice.visibility.endpoint import PendingEndpoint
from pumice.visibility.eta import choose_step, run_forecast

PATH = "/apis/visibility/v1/pendingjobs"


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Later:
    """A thread factory that runs the work when the test says (one at a time)."""

    def __init__(self) -> None:
        self.queued: list[Callable[[], None]] = []

    def __call__(self, work: Callable[[], None]) -> None:
        self.queued.append(work)

    def run(self) -> None:
        work, self.queued = self.queued, []
        for w in work:
            w()


def done(at: float) -> Forecast:
    return Forecast({}, at, 1.0, "given", 3600.0, seconds=0.5)


def test_one_forecast_at_a_time_computed_only_when_asked_and_kept_with_its_age() -> None:
    clock, later = Clock(1000.0), Later()
    bg = BackgroundForecast(max_age=60.0, clock=clock, spawn=later)
    takes: list[float] = []

    def take() -> Callable[[], Forecast]:
        takes.append(clock.t)
        at = clock.t
        return lambda: done(at)

    # nobody asked: the loop copies nothing
    assert bg.between_cycles(take) is False and takes == []
    # asked: nothing yet, one is on its way; the next loop turn takes the copy
    assert bg.latest() == (None, True)
    assert bg.between_cycles(take) is True and takes == [1000.0]
    # while it runs, more requests and turns start no second one
    assert bg.latest() == (None, True)
    assert bg.between_cycles(take) is False and takes == [1000.0]
    later.run()
    clock.t = 1030.0
    got, computing = bg.latest()
    assert got is not None and got.computed_at == 1000.0 and not computing
    assert bg.age(got) == 30.0
    # younger than max_age: kept, nothing recomputed
    assert bg.between_cycles(take) is False and takes == [1000.0]
    # older: the request gets the old one and asks for a new one
    clock.t = 1061.0
    got, computing = bg.latest()
    assert got is not None and got.computed_at == 1000.0 and computing
    assert bg.between_cycles(take) is True and takes == [1000.0, 1061.0]
    later.run()
    assert bg.latest()[0].computed_at == 1061.0  # type: ignore[union-attr]
    assert bg.started == 2


def test_a_failed_forecast_is_said_and_the_next_request_tries_again() -> None:
    clock, later = Clock(0.0), Later()
    bg = BackgroundForecast(max_age=60.0, clock=clock, spawn=later)

    def broken() -> Forecast:
        raise RuntimeError("no room")

    bg.latest()
    bg.between_cycles(lambda: broken)
    later.run()
    got, computing = bg.latest()
    assert got is not None and got.error == "RuntimeError: no room" and not got.estimates
    assert not computing  # (fresh: the next try waits for max_age)
    clock.t = 61.0
    assert bg.latest()[1] is True


def _cycle(objs: list[dict[str, Any]]) -> Any:
    snapshot = build_snapshot([SourcedObject(o, "test") for o in objs], now=NOW)
    return Scheduler.from_file(None).cycle(snapshot)


def test_the_endpoint_answers_202_until_a_forecast_is_done_then_the_estimates() -> None:
    objs = objects(gang("g", 2, "2", created="2026-01-01T00:09:00Z"))
    decisions = _cycle(objs)
    clock, later = Clock(NOW), Later()
    bg = BackgroundForecast(max_age=60.0, clock=clock, spawn=later)
    endpoint = PendingEndpoint(lambda: decisions, bg, clock=clock)

    status, _, body = endpoint.answer(PATH, "eta=1")
    doc = orjson.loads(body)
    assert status == 202 and doc["forecast"] == {"computing": True}
    assert [i["name"] for i in doc["items"]] == ["g"] and "eta" not in doc["items"][0]
    # the plain list is unchanged and says nothing of a forecast
    plain = orjson.loads(endpoint.answer(PATH)[2])
    assert "forecast" not in plain and "eta" not in plain["items"][0]

    scheduler = Scheduler.from_file(None)
    step, why = choose_step(None, 1, 1.0)

    def work() -> Forecast:
        return run_forecast(
            objs, scheduler, NOW, durations=None, horizon=3600.0, step=step,
            step_reason=why, period=1.0, scheduler_name="volcano",
        )  # fmt: skip

    bg.between_cycles(lambda: work)
    later.run()
    clock.t = NOW + 30  # the answer counts from the request, not from the forecast
    status, _, body = endpoint.answer(PATH, "eta=1")
    doc = orjson.loads(body)
    assert status == 200
    item = doc["items"][0]
    # the running pod's 600 s deadline frees the node 500 s after the forecast
    assert 470 <= item["eta"] <= 471
    assert "activeDeadlineSeconds" in item["assumption"]
    info = doc["forecast"]
    assert info["computedAt"] == "2026-01-01T00:10:00Z" and info["ageSeconds"] == 30.0
    assert info["step"] == 1.0 and info["stepChosen"] == "auto: 1 nodes"
    assert info["computing"] is False and info["cycles"] >= 1
    assert endpoint.answer(PATH, "eta=maybe")[0] == 400
    # past max_age: the old estimates still come, and a new forecast is on its way
    clock.t = NOW + 90
    doc = orjson.loads(endpoint.answer(PATH, "eta=1")[2])
    assert 410 <= doc["items"][0]["eta"] <= 411 and doc["forecast"]["computing"] is True


def test_a_server_without_forecasts_refuses_eta() -> None:
    decisions = _cycle(objects(gang("g", 2, "2", created="2026-01-01T00:09:00Z")))
    status, _, body = PendingEndpoint(lambda: decisions).answer(PATH, "eta=1")
    assert status == 400 and b"no start forecasts" in body


def test_the_step_grows_with_the_cluster_unless_given() -> None:
    assert choose_step(None, 12, 1.0) == (1.0, "auto: 12 nodes")
    assert choose_step(None, 150, 1.0) == (60.0, "auto: 150 nodes")
    assert choose_step(None, 1000, 1.0) == (300.0, "auto: 1000 nodes")
    assert choose_step(30.0, 1000, 1.0) == (30.0, "given")


def _pod(name: str, group: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml",
                     "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": phase, "startTime": "2026-01-01T00:00:00Z"},
    }  # fmt: skip


def _finish(seconds: int) -> Callable[[dict[str, Any]], None]:
    def change(pod: dict[str, Any]) -> None:
        end = f"2026-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"
        term = {"terminated": {"finishedAt": end}}
        pod["status"] = {
            **pod["status"],
            "phase": "Succeeded",
            "containerStatuses": [{"state": term}],
        }

    return change


def test_finished_pods_teach_their_queue_each_once() -> None:
    cluster = MemoryCluster()
    done_before = _pod("old-0", "old")
    _finish(600)(done_before)
    for pod in (done_before, _pod("a-0", "a"), _pod("b-0", "b"), _pod("x-0", "x")):
        cluster.create(pod)
    queues = {"ml/old": "train", "ml/a": "train", "ml/b": "train"}
    feed = FinishedPods(cluster)
    # the pod that finished before the scheduler started counts
    assert feed.take(queues.get) == 1
    assert feed.durations.estimate("train") is None  # (too few yet)
    cluster.modify("Pod", "ml/a-0", _finish(1200))
    cluster.modify("Pod", "ml/x-0", _finish(3000))  # of no known queue: left out
    assert feed.take(queues.get) == 1
    cluster.modify("Pod", "ml/a-0", lambda p: p["metadata"].setdefault("labels", {"k": "v"}))
    assert feed.take(queues.get) == 0  # (counted once, whatever comes after)
    cluster.modify("Pod", "ml/b-0", _finish(1800))
    assert feed.take(queues.get) == 1
    # p75 of 600, 1200, 1800
    assert feed.durations.estimate("train") == 1500.0
    assert feed.durations.estimate("") is None


def test_the_endpoint_benchmark_serves_estimates_and_prints_its_figures(capsys) -> None:
    from pumice.bench.forecast_endpoint import main

    assert main(["--nodes", "4", "--waiting", "6"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 nodes, ") and "6 waiting jobs" in out
    assert "estimates served" in out and "auto: 4 nodes" in out


def test_the_forecast_runs_in_a_child_process_and_its_result_comes_back() -> None:
    """The scheduler's process does not compute the forecast (it would hold the
    interpreter's lock against the cycles): a child does, and its result, estimates
    and all, is what the endpoint then serves."""
    import os

    clock, later = Clock(0.0), Later()
    bg = BackgroundForecast(max_age=60.0, clock=clock, spawn=later)

    def where() -> Forecast:
        return Forecast({}, 5.0, 1.0, f"pid {os.getpid()}", 3600.0, seconds=0.25)

    bg.latest()
    bg.between_cycles(lambda: where)
    later.run()
    got = bg.latest()[0]
    assert got is not None and got.error is None
    assert got.step_reason.startswith("pid ") and got.step_reason != f"pid {os.getpid()}"
    assert (got.computed_at, got.seconds) == (5.0, 0.25)


def test_a_forecast_process_that_dies_is_said_and_the_scheduler_goes_on() -> None:
    """A child killed mid-forecast (out of memory, say) leaves an error naming how it
    ended; the next request asks for a new forecast once the error is older than
    max_age."""
    import os
    import signal

    clock, later = Clock(0.0), Later()
    bg = BackgroundForecast(max_age=60.0, clock=clock, spawn=later)

    def killed() -> Forecast:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")

    bg.latest()
    bg.between_cycles(lambda: killed)
    later.run()
    got, computing = bg.latest()
    assert got is not None and not got.estimates and not computing
    assert got.error == "the forecast's process ended without a result (killed by signal 9)"
    clock.t = 61.0
    assert bg.latest()[1] is True
