"""A what-if grid (configurations × seeds) on a real multi-process Dask cluster.

The cluster is local (two worker processes of this venv), reached only through its
address on the command line or in PUMICE_DASK_ADDRESS, as a remote one would be.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.cli import main
from pumice.sim import sweep

distributed = pytest.importorskip("distributed")

CONFIGS = Path(__file__).parents[2] / "src" / "pumice" / "examples" / "configs"
CONFIG_ARGS = [
    "--config",
    str(CONFIGS / "volcano-default.yaml"),
    "--config",
    str(CONFIGS / "binpack-heavy.yaml"),
]
NAMES = ("volcano-default", "binpack-heavy")
GRID = ["--jobs", "30", "--nodes", "4", "--no-progress", "--seeds", "1,2", *CONFIG_ARGS]
METRICS = ("metrics.json", "jobs.csv", "timeseries.csv", "queues.csv")


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


def test_grid_on_dask_is_the_local_pool_grid(tmp_path, capsys, dask_address):
    """The same grid on the Dask cluster and on the local process pool writes the same
    files: every (configuration, seed) run's metrics under its own directory, and the
    aggregate over the seeds; the aggregate is each run's figure, averaged."""
    local, remote = tmp_path / "local", tmp_path / "dask"
    assert main(["simulate", *GRID, "--workers", "2", "--out", str(local)]) == 0
    capsys.readouterr()
    assert main(["simulate", *GRID, "--dask", dask_address, "--out", str(remote)]) == 0
    out = capsys.readouterr().out
    assert "mean ± std" in out and str(remote / "index.html") in out

    for name in NAMES:
        for seed in (1, 2):
            run = f"{name}/seed-{seed}"
            for f in METRICS:
                assert (local / run / f).read_bytes() == (remote / run / f).read_bytes(), run
            assert json.loads((remote / run / "run.json").read_text())["seed"] == seed
            assert (remote / run / "index.html").exists()
    for f in ("grid.json", "grid.csv"):
        assert (local / f).read_bytes() == (remote / f).read_bytes(), f
    assert json.loads((remote / "run.json").read_text())["dask"] == dask_address

    # the seeds are different workloads and the configurations decide differently:
    # a run reported under the wrong (configuration, seed) would show
    jobs = {
        (n, s): (remote / n / f"seed-{s}" / "jobs.csv").read_bytes() for n in NAMES for s in (1, 2)
    }
    assert len(set(jobs.values())) == 4

    grid = json.loads((remote / "grid.json").read_text())
    assert grid["configs"] == list(NAMES) and grid["seeds"] == [1, 2]
    row = next(r for r in grid["rows"] if r["metric"] == "completion mean (s)")
    for name in NAMES:
        waits = [
            json.loads((remote / name / f"seed-{s}" / "metrics.json").read_text())["summary"][
                "completion"
            ]["mean"]
            for s in (1, 2)
        ]
        cell = row["values"][name]
        assert cell["seeds"] == {"1": waits[0], "2": waits[1]}
        assert cell["n"] == 2 and cell["mean"] == pytest.approx(sum(waits) / 2)
        assert cell["min"] == min(waits) and cell["max"] == max(waits)


def test_error_in_a_dask_worker_exits_2_naming_the_run(tmp_path, capsys, monkeypatch, dask_address):
    """A workload the cluster cannot run is bad input (exit 2) naming the configuration
    file and the seed, found before any run is sent; the address comes from
    PUMICE_DASK_ADDRESS."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "nodes:\n- {count: 2, namePrefix: cpu, allocatable: {cpu: '4', memory: 16Gi}}\n"
    )
    monkeypatch.setenv(sweep.ENV_ADDRESS, dask_address)
    argv = ["simulate", "--cluster", str(cluster), "--jobs", "5", "--seeds", "1-2"]
    argv += ["--no-progress", *CONFIG_ARGS, "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pumice: error: in the run of ")
    assert "binpack-heavy.yaml" in err or "volcano-default.yaml" in err
    assert "seed " in err and "no node" in err
    assert not (tmp_path / "r" / "grid.json").exists()


def test_bad_config_with_dask_exits_2_naming_the_file(tmp_path, capsys, dask_address):
    """A configuration that does not parse is refused before any run is sent."""
    bad = tmp_path / "typo.yaml"
    bad.write_text("actions: enqueue, allocat\ntiers:\n- plugins:\n  - name: gang\n")
    argv = ["simulate", *GRID, "--config", str(bad), "--dask", dask_address]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    assert str(bad) in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_unreachable_dask_scheduler_exits_2(tmp_path, capsys, monkeypatch):
    """An address nothing listens on is bad input naming --dask, not a traceback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed
    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT", 2)
    argv = ["simulate", *GRID, "--dask", f"tcp://127.0.0.1:{port}"]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "--dask" in err and "cannot reach" in err
