"""Tests for ``pumice simulate`` as a user runs it."""

from __future__ import annotations

from pathlib import Path

from pumice.cli import main

DATA = Path(__file__).parents[1] / "data"
SMALL = ["--jobs", "25", "--nodes", "4", "--no-progress"]


def test_simulate_writes_report_and_prints_summary(tmp_path, capsys):
    """A small synthetic run exits 0, prints the summary and writes the report."""
    assert main(["simulate", *SMALL, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "gang atomicity violations" in out and "index.html" in out
    assert (tmp_path / "index.html").exists() and (tmp_path / "metrics.json").exists()


def test_the_run_says_how_much_of_its_wall_time_was_scheduling(tmp_path, capsys):
    """run.json and the printed summary split the wall time: the scheduling cycles with
    the cache's work around them, and the simulated cluster. The part is within the
    whole (no figure of speed is asserted)."""
    import json

    assert main(["simulate", *SMALL, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    run = json.loads((tmp_path / "run.json").read_text())
    assert 0 < run["cycle_seconds"] < run["scheduling_seconds"] <= run["wall_seconds"]
    assert f"{run['scheduling_seconds']:.1f} s scheduling ({run['cycles']:,} cycles)" in out
    assert "of it scheduling" in (tmp_path / "index.html").read_text()


def test_jobs_run_through_the_job_controller_unless_simple_jobs(tmp_path, capsys):
    """By default every generated job is a Volcano Job driven by the job controller (its
    final phase is reported); ``--simple-jobs`` and ``--pods-upfront`` use the PodGroup
    model, which has no Job phases."""
    import json

    def phases(*flags: str) -> dict:
        out = tmp_path / "-".join(flags or ("default",))
        assert main(["simulate", *SMALL, *flags, "--out", str(out)]) == 0
        capsys.readouterr()
        return json.loads((out / "metrics.json").read_text())["summary"]["jobs_by_phase"]

    assert sum(phases().values()) == 25
    assert phases("--simple-jobs") == {} and phases("--pods-upfront") == {}


def test_whatif_with_two_configs(tmp_path, capsys):
    """Two --config files give per-config reports and a comparison."""
    conf = tmp_path / "spread.yaml"
    conf.write_text(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        "  - name: predicates\n  - name: nodeorder\n"
    )
    default = tmp_path / "default.yaml"
    default.write_text(
        'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n'
        "  - name: gang\n  - name: proportion\n  - name: binpack\n"
    )
    out = tmp_path / "r"
    rc = main(
        ["simulate", *SMALL, "--config", str(default), "--config", str(conf), "--out", str(out)]
    )
    assert rc == 0
    assert (out / "default" / "index.html").exists() and (out / "spread" / "index.html").exists()
    assert (out / "comparison.csv").read_text().startswith("metric,default,spread")
    printed = capsys.readouterr().out
    assert "spread" in printed
    # utilization over three windows, each named, and what the names mean
    for window in ("whole run", "arrivals", "waiting"):
        assert f"utilization nvidia.com/gpu ({window})" in printed
    assert "arrivals = over the arrival window" in printed.replace("\n", " ")


def test_bad_workload_file_exits_2_naming_it(tmp_path, capsys):
    """A malformed workload file is a clear error naming the file, exit code 2."""
    bad = tmp_path / "jobs.yaml"
    bad.write_text("jobs: [ {name: a\n")
    assert main(["simulate", str(bad), "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    assert "jobs.yaml" in capsys.readouterr().err


def test_job_larger_than_any_node_exits_2(tmp_path, capsys):
    """A job whose pod no node can hold names the job and exits 2."""
    wl = tmp_path / "w.yaml"
    wl.write_text(
        "kind: Workload\nqueues: [{name: q}]\njobs:\n"
        "- {name: big, queue: q, arrival: 0, duration: 60, replicas: 1,\n"
        "   requests: {cpu: 4, nvidia.com/gpu: 16}}\n"
    )
    rc = main(["simulate", str(wl), "--nodes", "2", "--out", str(tmp_path / "r"), "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "big" in err and "no node" in err


def test_bad_config_exits_2(tmp_path, capsys):
    """An unknown plugin in a config fails before anything runs."""
    conf = tmp_path / "c.yaml"
    conf.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: nosuch\n')
    assert main(["simulate", *SMALL, "--config", str(conf), "--out", str(tmp_path)]) == 2
    assert "nosuch" in capsys.readouterr().err


def test_trace_replay(tmp_path):
    """A sample Philly trace replays on a small cluster."""
    rc = main(
        [
            "simulate",
            str(DATA / "traces" / "philly"),
            "--trace-format",
            "philly",
            "--nodes",
            "8",
            "--out",
            str(tmp_path),
            "--no-progress",
        ]
    )
    assert rc == 0
    assert (tmp_path / "jobs.csv").exists()


def test_example_configs_load():
    """The what-if example configurations shipped with pumice are valid."""
    from pumice.scheduler import Scheduler

    examples = Path(__file__).parents[2] / "src" / "pumice" / "examples" / "configs"
    files = sorted(examples.glob("*.yaml"))
    assert len(files) >= 2
    for f in files:
        Scheduler.from_file(str(f))


def test_volcano_job_in_default_queue_runs_without_a_queue_file(tmp_path, capsys):
    """A Volcano Job written for a cluster, in queue default, runs: the simulated cluster
    has Volcano's default queue, as every Volcano cluster does."""
    import json

    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n"
        "metadata: {name: train, annotations: {pumice.sim/duration: '60'}}\n"
        "spec:\n  minAvailable: 2\n  queue: default\n  tasks:\n"
        "  - name: w\n    replicas: 2\n    template:\n      spec:\n        containers:\n"
        "        - {name: c, image: i, resources: {requests: {cpu: '1'}}}\n"
    )
    out = tmp_path / "out"
    assert main(["simulate", str(job), "--nodes", "2", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["summary"]["jobs_succeeded"] == 1
    assert list(doc["summary"]["queues"]) == ["default"]
