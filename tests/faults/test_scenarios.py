"""A small part of ``pumice bench faults`` on every test run: pumice run processes
through fault proxies, then the cluster checked. (The whole suite, with the slow
timeouts, is the benchmark command; see docs/run.md.)"""

from __future__ import annotations

import pytest

from pumice.faults.scenarios import FITTING, run_scenario

pytestmark = pytest.mark.k8s


@pytest.mark.parametrize(
    ("scenario", "fault"),
    [("bind-500", "bind 500 (landed)"), ("scheduler-kill", "scheduler kill -9")],
)
def test_the_fitting_gangs_end_whole_and_the_checks_hold(bench, scenario, fault):
    r = run_scenario(bench, scenario)
    assert r.error == ""
    assert r.faults[fault] >= 1
    assert [(v.check, v.message) for v in r.violations] == []
    assert r.bound == FITTING
