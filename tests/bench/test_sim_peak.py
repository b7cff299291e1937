"""The simulator's peak benchmark: a window of ``pumice simulate`` timed cycle by cycle.

What a user relies on: the window holds cycles and the result is valid, two runs do the
same work (the counts and the placements are equal; only timings differ, and no test
reads them), and a wrong scenario name or window is refused with a clear message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict

import orjson
import pytest

from pumice.bench.report import print_results, write_json
from pumice.bench.runner import run_isolated
from pumice.bench.scenarios import DEFAULT, HOUR, SIM_SCENARIOS, SimScenario, resolve
from pumice.bench.sim_peak import PeakResult, run_peak
from pumice.cli import main
from pumice.scheduler import Scheduler

#: 4 nodes (32 GPUs) and 300 jobs: the first day's peak already has a backlog, and jobs
#: finish in the hour from 16 h.
TINY = SimScenario(
    "tiny", "4 nodes, 300 jobs", nodes=4, jobs=300, start=16.0 * HOUR, end=17.0 * HOUR
)

#: The figures that must not change from one run to the next.
COUNTS = (
    "opened_h",
    "closed_h",
    "build_cycles",
    "backlog_pending",
    "backlog_admitted",
    "cycles",
    "jobs_finished",
    "pods_bound",
    "evictions",
    "gang_checks",
    "gang_violations",
    "placements",
)

_FRESH_RUN = """
import json, sys
from dataclasses import asdict
from pumice.bench.scenarios import HOUR, SimScenario
from pumice.bench.sim_peak import run_peak
from pumice.scheduler import Scheduler
s = SimScenario("tiny", "", nodes=4, jobs=300, start=16.0 * HOUR, end=17.0 * HOUR)
json.dump(asdict(run_peak(s, Scheduler.from_file(None))), sys.stdout)
"""


def _counts(r: PeakResult | dict) -> dict:
    d = r if isinstance(r, dict) else asdict(r)
    return {k: d[k] for k in COUNTS}


def test_window_has_cycles_is_valid_and_repeats_exactly(capsys, tmp_path) -> None:
    """One run in a forked child (as ``pumice bench`` runs it), one in a fresh
    interpreter with another hash seed: the window has cycles and a backlog, nothing is
    invalid, and every count and the placements' digest agree."""
    r = run_isolated(TINY, Scheduler.from_file(None))
    assert isinstance(r, PeakResult)
    assert r.valid, r.problems
    assert r.cycles > 0 and r.gang_violations == 0
    assert r.backlog_pending > 0, "the tiny window should open on a backlog"
    assert r.opened_h >= 16.0 and r.closed_h >= 17.0 > r.opened_h
    assert r.jobs_finished > 0 and r.pods_bound > 0
    assert r.cycle_p99_s >= r.cycle_p50_s > 0 and r.peak_rss_mib > 0

    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_RUN], env=env, capture_output=True, text=True, check=True
    )
    assert _counts(json.loads(out.stdout)) == _counts(r)

    # Where the time went: every action of the configuration and the plugins' opens and
    # closes, as steps of the cycles, printed per cycle after the table.
    for step in ("enqueue", "allocate", "backfill", "open proportion", "close gang"):
        assert step in r.steps, sorted(r.steps)
    assert "status and explanations" in r.steps and "open, besides the plugins" in r.steps
    assert all(v >= 0 for v in r.steps.values())

    print_results([r])
    text = capsys.readouterr().out
    assert "tiny" in text and "yes" in text and r.placements in text
    assert f"tiny: where the window's time went, per cycle ({r.cycles:,} cycles)" in text
    assert "  allocate " in text and "the simulator around the cycles" in text
    path = tmp_path / "peak.json"
    write_json([r], str(path))
    saved = orjson.loads(path.read_bytes())[0]
    assert saved["cycles"] == r.cycles and saved["steps"].keys() == r.steps.keys()


def test_window_after_the_simulation_ends_is_refused() -> None:
    """A window the simulation never reaches is an error that says where it ended."""
    late = SimScenario("late", "", nodes=1, jobs=5, start=1000 * HOUR, end=1001 * HOUR)
    with pytest.raises(ValueError, match=r"late: the simulation ended at .* before the window"):
        run_peak(late, Scheduler.from_file(None))


def test_sim_scenarios_are_named_listed_and_not_default(capsys) -> None:
    """``sim-peak-small`` and ``sim-peak`` run by name and are listed, but a plain
    ``pumice bench`` does not start them (they take minutes)."""
    assert [s.name for s in resolve(["sim-peak-small", "basic"])] == ["sim-peak-small", "basic"]
    assert isinstance(resolve(["sim-peak"])[0], SimScenario)
    assert not set(SIM_SCENARIOS) & {s.name for s in resolve(list(DEFAULT))}
    assert main(["bench", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "sim-peak-small" in listed and "sim-peak " in listed


def test_a_bad_scenario_name_is_a_clear_error(capsys) -> None:
    assert main(["bench", "sim-peak-huge"]) == 2
    err = capsys.readouterr().err
    assert "unknown scenario 'sim-peak-huge'" in err
    assert "sim-peak-small" in err


def test_capacity_check_reads_the_simulated_cluster() -> None:
    """The validity check sees a node of the simulated cluster over its allocatable (a
    pod of 200 cores on a 96-core node), independently of the scheduler."""
    from pumice.bench import scenarios
    from pumice.bench.sim_peak import build, capacity_problems

    sim = build(
        SimScenario("one", "", nodes=1, jobs=0, start=0.0, end=1.0), Scheduler.from_file(None)
    )
    assert capacity_problems(sim) == []
    node = sim.store.list("Node")[0]["metadata"]["name"]
    sim.store.create(scenarios.pod("hog", "200", "1Gi", node_name=node))
    assert any("over capacity in cpu" in p for p in capacity_problems(sim))
