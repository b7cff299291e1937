"""The grid of a sweep: its seeds, its executor, its aggregate (no Dask cluster)."""

from __future__ import annotations

import math

import pytest

from pumice.cli import main
from pumice.errors import InputError
from pumice.sim import sweep

SMALL = ["--jobs", "25", "--nodes", "4", "--no-progress"]


def test_seeds_lists_and_ranges():
    assert sweep.seeds(None, None) == [1]
    assert sweep.seeds([7], None) == [7]
    assert sweep.seeds([3, 1], None) == [3, 1]
    assert sweep.seeds(None, "1, 3-5,9") == [1, 3, 4, 5, 9]


@pytest.mark.parametrize(
    ("repeated", "listed", "says"),
    [
        ([1], "2", "not both"),
        (None, "2,2", "twice"),
        ([4, 4], None, "twice"),
        (None, "1-x", "1-x"),
        (None, "5-2", "5-2"),
        (None, "1-100000", "at most"),
        (None, " , ", "at least one"),
    ],
)
def test_bad_seeds_are_refused(repeated, listed, says):
    with pytest.raises(InputError, match=says):
        sweep.seeds(repeated, listed)


def test_dask_address_precedence(monkeypatch):
    """--dask, else --workers (the local pool), else the environment."""
    monkeypatch.delenv(sweep.ENV_ADDRESS, raising=False)
    assert sweep.dask_address(None, None) is None
    monkeypatch.setenv(sweep.ENV_ADDRESS, "tcp://env:8786")
    assert sweep.dask_address(None, None) == "tcp://env:8786"
    assert sweep.dask_address(None, 2) is None
    assert sweep.dask_address("tcp://flag:8786", None) == "tcp://flag:8786"
    with pytest.raises(InputError, match="--workers"):
        sweep.dask_address("tcp://flag:8786", 2)
    with pytest.raises(InputError, match="address"):
        sweep.dask_address(" ", None)


def test_spread_over_the_seeds():
    """Mean and sample standard deviation of the numeric values; a seed without a
    figure (None) is kept but not counted."""
    cell = sweep.Spread.of({1: 1.0, 2: 3, 3: None})
    assert (cell.n, cell.mean, cell.min, cell.max) == (2, 2.0, 1.0, 3.0)
    assert cell.std == pytest.approx(math.sqrt(2))
    assert sweep.cell_text("wait mean (s)", cell) == "0.0 min ± 0.0 min"
    assert sweep.cell_text("evictions", cell) == "2 ± 1.414"
    assert sweep.Spread.of({1: None}).mean is None
    assert sweep.cell_text("evictions", sweep.Spread.of({1: None})) == "–"


def test_one_seed_is_todays_single_run_report(tmp_path, capsys):
    """--seeds with one seed is no grid: the run's own report at --out, the same files
    as --seed with that seed."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["simulate", *SMALL, "--seed", "3", "--out", str(a)]) == 0
    assert main(["simulate", *SMALL, "--seeds", "3", "--out", str(b)]) == 0
    assert "gang atomicity violations" in capsys.readouterr().out
    for f in ("metrics.json", "jobs.csv", "timeseries.csv", "queues.csv"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert not (b / "grid.json").exists()


def test_seeds_of_a_workload_file_are_refused(tmp_path, capsys):
    """Seeds only vary generated workloads: a grid over a workload file would run the
    same simulation once per seed."""
    wl = tmp_path / "w.yaml"
    wl.write_text(
        "kind: Workload\nqueues: [{name: q}]\njobs:\n"
        "- {name: a, queue: q, arrival: 0, duration: 60, replicas: 1, requests: {cpu: 1}}\n"
    )
    argv = ["simulate", str(wl), "--nodes", "1", "--seeds", "1,2", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "--seeds" in capsys.readouterr().err


def test_grid_of_one_configuration_on_the_local_pool(tmp_path, capsys):
    """Two seeds of the default configuration: a report per seed and the aggregate,
    whose cells hold each seed's figure."""
    import json

    argv = ["simulate", *SMALL, "--seed", "1", "--seed", "2", "--workers", "2"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "±" in out and str(tmp_path / "index.html") in out
    grid = json.loads((tmp_path / "grid.json").read_text())
    assert grid["configs"] == ["default"] and grid["seeds"] == [1, 2]
    row = next(r for r in grid["rows"] if r["metric"] == "makespan (s)")
    for seed in (1, 2):
        summary = json.loads((tmp_path / "default" / f"seed-{seed}" / "metrics.json").read_text())
        assert row["values"]["default"]["seeds"][str(seed)] == summary["summary"]["makespan"]
    header = (tmp_path / "grid.csv").read_text().splitlines()[0]
    assert header == "metric,config,n,mean,std,min,max,seed 1,seed 2"
