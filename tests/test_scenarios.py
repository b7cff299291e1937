"""Scenario tests: real Kubernetes YAML in, the decisions of one cycle out.

Every directory under tests/scenarios with an expected.yaml is one test (format in
tests/scenarios/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pumice.cache.build import build_snapshot
from pumice.cache.load import load_objects
from pumice.scheduler import Scheduler

ROOT = Path(__file__).parent / "scenarios"
CASES = sorted(p.parent for p in ROOT.rglob("expected.yaml"))


def run_scenario(case: Path):
    config = case / "config.yaml"
    scheduler = Scheduler.from_file(str(config) if config.exists() else None)
    snapshot = build_snapshot(load_objects([str(case / "snapshot.yaml")]))
    return scheduler.cycle(snapshot).to_json()


@pytest.mark.parametrize("case", CASES, ids=[str(c.relative_to(ROOT)) for c in CASES])
def test_scenario(case: Path) -> None:
    expected = yaml.safe_load((case / "expected.yaml").read_text()) or {}
    out = run_scenario(case)
    context = f"{case.relative_to(ROOT)}: {expected.get('description', '')}"
    if "binds" in expected:
        assert out["binds"] == (expected["binds"] or {}), context
    if "evictions" in expected:
        assert sorted(out["evictions"]) == sorted(expected["evictions"] or []), context
    if "pipelined" in expected:
        assert out["pipelined"] == (expected["pipelined"] or {}), context
    for pg, phase in (expected.get("podgroups") or {}).items():
        assert out["podgroups"].get(pg, {}).get("phase") == phase, f"{context}: {pg}"
    for job, needles in (expected.get("pending") or {}).items():
        assert job in out["pending"], f"{context}: {job} should be pending"
        for needle in needles if isinstance(needles, list) else [needles]:
            assert needle in out["pending"][job], f"{context}: {job}: {out['pending'][job]}"
    for job in expected.get("not_pending") or []:
        assert job not in out["pending"], f"{context}: {job}: {out['pending'].get(job)}"


def test_scenarios_exist() -> None:
    assert len(CASES) >= 10
