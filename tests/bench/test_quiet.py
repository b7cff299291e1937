"""The quiet benchmark: cycles on a cluster where nothing changes, through the cache.

What a user relies on: it is listed and runs by name, the repeated cycle decides what a
fresh one decides (the result is valid), every waiting pod is explained, and the figures
print as a table and save as JSON. No test reads a timing.
"""

from __future__ import annotations

import orjson

from pumice.bench.quiet import QuietResult, QuietScenario, run_quiet
from pumice.bench.report import print_results, write_json
from pumice.bench.runner import run_isolated
from pumice.bench.scenarios import known, resolve
from pumice.scheduler import Scheduler

SMALL = QuietScenario("quiet-small", "20 full nodes, 60 pending pods", nodes=20, pending=60,
                      cycles=3)  # fmt: skip


def test_quiet_is_listed_and_resolves():
    assert "quiet" in dict(known())
    (s,) = resolve(["quiet"])
    assert isinstance(s, QuietScenario) and (s.nodes, s.pending) == (5000, 10_000)


def test_a_quiet_cycle_repeats_what_a_fresh_one_decides(capsys, tmp_path):
    r = run_quiet(SMALL, Scheduler.from_file(None))
    assert r.valid, r.problems
    assert (r.nodes, r.pending, r.cycles) == (20, 60, 3)
    print_results([r])
    out = capsys.readouterr().out
    assert "repeated p50" in out and "quiet-small" in out
    path = tmp_path / "bench.json"
    write_json([r], str(path))
    (saved,) = orjson.loads(path.read_bytes())
    assert saved["pending"] == 60 and saved["problems"] == []


def test_quiet_runs_in_its_own_process():
    r = run_isolated(SMALL, Scheduler.from_file(None))
    assert isinstance(r, QuietResult) and r.valid


def test_a_backlog_waiting_for_admission_is_explained_and_decides_as_fresh():
    """quiet-admission: Volcano Jobs' PodGroups without pods that enqueue refuses (the
    backlog a living session parks): valid, every job explained."""
    (s,) = resolve(["quiet-admission"])
    assert isinstance(s, QuietScenario) and s.groups
    small = QuietScenario("admission-small", "20 full nodes, 60 waiting PodGroups",
                          nodes=20, pending=60, cycles=3, groups=True)  # fmt: skip
    r = run_quiet(small, Scheduler.from_file(None))
    assert r.valid, r.problems
