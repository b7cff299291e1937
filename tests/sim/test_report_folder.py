"""A report folder holds one run: pumice marks it, empties it of the last run's files,
and refuses to write into a folder of someone else's."""

from __future__ import annotations

from pumice.cli import main
from pumice.sim.report_folder import MARKER, is_report, prepare_out

SMALL = ["--jobs", "25", "--nodes", "4", "--no-progress"]
CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'


def test_a_folder_that_is_not_a_report_is_refused_with_exit_2(tmp_path, capsys):
    """A non-empty folder without pumice's marker is left as it was."""
    (tmp_path / "thesis.tex").write_text("mine")
    (tmp_path / "data.csv").write_text("mine too")
    assert main(["simulate", *SMALL, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a pumice report" in err and str(tmp_path) in err and "--out" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "thesis.tex"]


def test_a_file_as_out_is_refused(tmp_path, capsys):
    target = tmp_path / "report"
    target.write_text("x")
    assert main(["simulate", *SMALL, "--out", str(target)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_a_run_replaces_the_last_runs_report_and_keeps_other_files(tmp_path, capsys):
    """A what-if, then a single run into the same folder: the what-if's per-config
    reports and comparison are gone; a file of the user's stays."""
    out = tmp_path / "r"
    conf = tmp_path / "spread.yaml"
    conf.write_text(CONF)
    argv = ["simulate", *SMALL, "--out", str(out)]
    assert main([*argv, "--config", str(conf), "--config", str(conf)]) == 0
    assert (out / "spread-2" / "index.html").exists() and (out / "comparison.csv").exists()
    (out / "notes.txt").write_text("keep me")
    assert main(argv) == 0
    capsys.readouterr()
    names = sorted(p.name for p in out.iterdir())
    assert "comparison.csv" not in names and "spread" not in names and "spread-2" not in names
    assert {"index.html", "metrics.json", MARKER, "notes.txt"} <= set(names)
    assert (out / "notes.txt").read_text() == "keep me"


def test_prepare_out_marks_new_folders_and_accepts_older_reports(tmp_path):
    """A new folder is made and marked; a report of a pumice without the marker (its
    index.html and run.json) is recognised and emptied."""
    fresh = prepare_out(tmp_path / "new")
    assert (fresh / MARKER).is_file() and is_report(fresh)
    old = tmp_path / "old"
    old.mkdir()
    for name in ("index.html", "run.json", "utilization.png"):
        (old / name).write_text("x")
    prepare_out(old)
    assert sorted(p.name for p in old.iterdir()) == [MARKER]
