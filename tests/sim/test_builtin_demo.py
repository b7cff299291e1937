"""The README's first command, ``pumice simulate`` with no arguments, runs the built-in
scenario to its end: every one of its 3,000 jobs ends, no gang is ever half placed, and
the report is written. The smaller runs elsewhere cannot stand in for it: its workload
has the large gangs (up to 32 pods, terabytes of minResources) that a small run does not
draw, and a refusal of one of them once stopped the demo."""

from __future__ import annotations

import json

from pumice.cli import main


def test_the_builtin_demo_runs_to_the_end(tmp_path, capsys):
    assert main(["simulate", "--no-progress", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "gang atomicity violations" in out
    summary = json.loads((tmp_path / "metrics.json").read_text())["summary"]
    assert summary["jobs"] == summary["jobs_ended"] == 3000
    assert summary["gang_violations"] == 0 and summary["gang_checks"] > 0
    assert sum(summary["jobs_by_phase"].values()) == 3000
    for name in ("index.html", "jobs.csv", "timeseries.csv", "queues.csv"):
        assert (tmp_path / name).stat().st_size > 0
