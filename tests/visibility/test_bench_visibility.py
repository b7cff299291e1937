"""``pumice bench visibility`` on a small backlog: it runs, and its checks hold."""

from __future__ import annotations

from pumice.bench.scenarios import resolve
from pumice.bench.visibility import VisibilityScenario, run_visibility
from pumice.cli import main
from pumice.scheduler import Scheduler


def test_the_scenario_is_known_by_name() -> None:
    (s,) = resolve(["visibility"])
    assert isinstance(s, VisibilityScenario) and s.pending == 10_000


def test_a_small_backlog_is_lined_up_whole_and_served_from_one_build() -> None:
    s = VisibilityScenario("tiny", "", nodes=4, pending=60, queues=3, requests=3)
    r = run_visibility(s, Scheduler.from_file(None))
    assert r.problems == []
    assert r.all_kib > 0 and r.pending == 60


def test_bench_prints_the_figures(capsys, monkeypatch) -> None:
    import pumice.bench.visibility as v

    tiny = VisibilityScenario("visibility", "tiny", nodes=2, pending=20, requests=2)
    monkeypatch.setitem(v.VISIBILITY_SCENARIOS, "visibility", tiny)
    assert main(["bench", "visibility", "--in-process"]) == 0
    out = capsys.readouterr().out
    assert "line-up" in out and "HTTP page" in out
    assert "INVALID" not in out
