"""Tests for running the configurations of a what-if in worker processes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pumice.cli import main
from pumice.sim.parallel import Relay, run_parallel

CONFIGS = Path(__file__).parents[2] / "src" / "pumice" / "examples" / "configs"
CONFIG_ARGS = [
    "--config",
    str(CONFIGS / "volcano-default.yaml"),
    "--config",
    str(CONFIGS / "binpack-heavy.yaml"),
]
METRICS = ("metrics.json", "jobs.csv", "timeseries.csv", "queues.csv")


def _workload(tmp_path: Path) -> Path:
    """A small contended workload in two queues (two queues keep the report's plots,
    most of a small run's time, cheap): 24 jobs, gangs of 1-4 pods, on 3 nodes."""
    lines = [
        "kind: Workload",
        "queues: [{name: research, weight: 1}, {name: prod, weight: 3}]",
        "jobs:",
    ]
    for i in range(24):
        queue = "prod" if i % 3 == 0 else "research"
        replicas, gpus = 1 + i % 4, (2, 4, 8)[i % 3] if i % 4 < 2 else 4
        lines.append(
            f"- {{name: j{i:02d}, queue: {queue}, arrival: {i * 120}, "
            f"duration: {1800 + (i * 997) % 5400}, replicas: {replicas}, "
            f"requests: {{cpu: 8, nvidia.com/gpu: {gpus}}}}}"
        )
    path = tmp_path / "workload.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _whatif(tmp_path: Path, *extra: str) -> list[str]:
    wl = _workload(tmp_path)
    return ["simulate", str(wl), "--nodes", "3", "--no-progress", *CONFIG_ARGS, *extra]


def test_parallel_whatif_is_byte_identical_to_sequential(tmp_path, capsys):
    """--workers 2 writes the same metrics files per configuration, and the same
    comparison, as --workers 1 (one after the other in this process)."""
    seq, par = tmp_path / "seq", tmp_path / "par"
    assert main(_whatif(tmp_path, "--workers", "1", "--out", str(seq))) == 0
    assert main(_whatif(tmp_path, "--workers", "2", "--out", str(par))) == 0
    # the configurations decide differently: a mix-up between them would show
    assert (par / "volcano-default" / "jobs.csv").read_bytes() != (
        par / "binpack-heavy" / "jobs.csv"
    ).read_bytes()
    for name in ("volcano-default", "binpack-heavy"):
        for f in METRICS:
            assert (seq / name / f).read_bytes() == (par / name / f).read_bytes(), f"{name}/{f}"
        assert (par / name / "index.html").exists()
    for f in ("comparison.json", "comparison.csv"):
        assert (seq / f).read_bytes() == (par / f).read_bytes(), f
    out = capsys.readouterr().out
    assert "binpack-heavy" in out and str(par / "index.html") in out


def test_workers_below_one_exits_2(tmp_path, capsys):
    """--workers 0 is bad input naming --workers, before anything runs."""
    assert main(_whatif(tmp_path, "--workers", "0", "--out", str(tmp_path / "r"))) == 2
    assert "--workers" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_error_in_a_worker_fails_the_command(tmp_path, capsys):
    """An InputError raised in a worker process (a job no node can hold, found when
    the simulation is built) reaches the CLI: exit 2, the job named."""
    wl = tmp_path / "w.yaml"
    wl.write_text(
        "kind: Workload\nqueues: [{name: q}]\njobs:\n"
        "- {name: big, queue: q, arrival: 0, duration: 60, replicas: 1,\n"
        "   requests: {cpu: 4, nvidia.com/gpu: 16}}\n"
    )
    argv = ["simulate", str(wl), "--nodes", "2", "--no-progress", *CONFIG_ARGS]
    argv += ["--workers", "2", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "big" in err and "no node" in err


# -- run_parallel on its own ---------------------------------------------------------------


def _double(shared: list[int], index: int, progress) -> tuple[int, int]:
    progress(1, 2, 10.0 * index)
    progress(2, 2, 20.0 * index)
    return shared[index] * 2, os.getpid()


def _sleep_or_fail(marker: Path, index: int, progress) -> None:
    if index == 1:
        raise ValueError("boom")
    time.sleep(20)
    marker.write_text("the other worker ran to the end")


def test_run_parallel_returns_in_order_and_relays_progress():
    """Values come back in index order, computed in other processes, and each task's
    last progress report reaches the display."""
    seen: dict[int, tuple[int, int, float]] = {}

    @contextmanager
    def display() -> Iterator[Relay]:
        def relay(index: int, done: int, total: int, now: float) -> None:
            seen[index] = (done, total, now)

        yield relay

    values = run_parallel(_double, [3, 5, 7], 3, 2, display())
    assert [v for v, _pid in values] == [6, 10, 14]
    assert all(pid != os.getpid() for _v, pid in values)
    assert seen == {i: (2, 2, 20.0 * i) for i in range(3)}


def test_run_parallel_failure_stops_the_other_workers(tmp_path):
    """The first task to raise propagates, and a task still running is stopped rather
    than waited for (it never gets to write its marker)."""
    marker = tmp_path / "finished"
    with pytest.raises(ValueError, match="boom"):
        run_parallel(_sleep_or_fail, marker, 2, 2)
    assert not marker.exists()
