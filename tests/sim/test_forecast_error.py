"""The simulator sets start forecasts against what then happened."""

from __future__ import annotations

import json
from pathlib import Path

from pumice.cli import main
from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import SimOptions, Simulation
from pumice.sim.workload import GPU, JobSpec, QueueSpec, TaskSpec, Workload

GiB = float(2**30)


def _job(name: str, arrival: float, duration: float, gpus: float, queue: str = "q") -> JobSpec:
    req = {"cpu": 1000.0, "memory": GiB, GPU: gpus}
    return JobSpec(
        name=name,
        namespace="default",
        queue=queue,
        arrival=arrival,
        duration=duration,
        tasks=(TaskSpec("worker", 1, req),),
        min_available=1,
    )


def _queue_of_four() -> Workload:
    """Four jobs that each take the one node's 2 GPUs, all arriving at once: they run
    one after another, and nothing arrives after the forecast."""
    jobs = tuple(_job(f"j{i}", 0.0, 100.0 * (i + 1), 2.0) for i in range(4))
    return Workload(jobs=jobs, queues=(QueueSpec("q"),))


def _node() -> list[dict]:
    return [node_object("n0", {"cpu": 96000.0, "memory": 768 * GiB, GPU: 2.0})]


def test_known_run_times_and_no_later_arrivals_give_exact_forecasts() -> None:
    options = SimOptions(forecast_sample=4, forecast_durations="annotation")
    r = Simulation(_node(), _queue_of_four(), Scheduler.from_file(None), options).run()
    fc = r.summary["forecast"]
    starts = sorted(j.start for j in r.metrics.jobs.values() if j.start is not None)
    assert len(starts) == 4 and starts[-1] >= 600.0  # they did run one after another
    assert fc["jobs"] == 4
    assert fc["coverage"] == 1.0
    assert fc["abs_error"]["mean"] == 0.0
    assert fc["abs_error"]["p90"] == 0.0


def test_learned_run_times_cover_only_queues_with_finished_jobs() -> None:
    """Learned from jobs that ended: the first jobs of a queue wait behind pods of no
    known end (no estimate), later ones get one; the error is a finite figure."""
    jobs = [_job(f"j{i}", 50.0 * i, 100.0 + 10 * (i % 3), 2.0) for i in range(12)]
    w = Workload(jobs=tuple(jobs), queues=(QueueSpec("q"),))
    options = SimOptions(forecast_sample=12, forecast_durations="learned")
    r = Simulation(_node(), w, Scheduler.from_file(None), options).run()
    fc = r.summary["forecast"]
    assert fc["jobs"] == 12
    assert 0.0 < fc["coverage"] < 1.0
    assert fc["abs_error"]["mean"] is not None and fc["abs_error"]["mean"] >= 0.0
    assert fc["abs_error"]["p90"] >= fc["abs_error"]["mean"] * 0.5


def test_without_the_flag_nothing_is_forecast() -> None:
    r = Simulation(_node(), _queue_of_four(), Scheduler.from_file(None)).run()
    assert "forecast" not in r.summary


def test_the_command_reports_the_forecast_error(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rep"
    code = main(["simulate", "--jobs", "40", "--nodes", "2", "--forecast-error",
                 "--forecast-sample", "10", "--out", str(out), "--no-progress"])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "start forecast" in printed
    doc = json.loads((out / "metrics.json").read_text())
    fc = doc["summary"]["forecast"]
    assert fc["durations"] == "learned"
    assert 0 < fc["jobs"] <= 10
    assert fc["coverage"] is not None and 0.0 <= fc["coverage"] <= 1.0


def test_forecasting_changes_nothing_the_run_decides() -> None:
    """The forecasts replay copies: the run's jobs and summary are those of a run
    without them."""
    jobs = [_job(f"j{i}", 30.0 * i, 100.0 + 10 * (i % 3), 1.0 + i % 2) for i in range(10)]
    w = Workload(jobs=tuple(jobs), queues=(QueueSpec("q"),))
    plain = Simulation(_node(), w, Scheduler.from_file(None)).run()
    options = SimOptions(forecast_sample=10)
    probed = Simulation(_node(), w, Scheduler.from_file(None), options).run()
    summary = dict(probed.summary)
    assert summary.pop("forecast")["jobs"] == 10
    assert summary == plain.summary
    starts = {u: (j.start, j.end) for u, j in plain.metrics.jobs.items()}
    assert {u: (j.start, j.end) for u, j in probed.metrics.jobs.items()} == starts
