"""Scenario tests: real Kubernetes YAML in, the decisions of one cycle out.

Every directory under tests/scenarios with an expected.yaml is one test (format in
tests/scenarios/README.md).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pumice.cache.build import build_snapshot
from pumice.cache.load import load_objects
from pumice.scheduler import Scheduler

ROOT = Path(__file__).parent / "scenarios"
CASES = sorted(p.parent for p in ROOT.rglob("expected.yaml"))


def bottom_hypernode_of(snapshot: Path) -> dict[str, str]:
    """Node name -> the HyperNode of the lowest tier in the snapshot that holds it, read
    straight from the YAML (Node members by exactMatch or regexMatch), as Volcano's test
    helper counts binds per HyperNode."""
    docs = [d for d in yaml.safe_load_all(snapshot.read_text()) if d]
    hypernodes = [d for d in docs if d.get("kind") == "HyperNode"]
    if not hypernodes:
        return {}
    bottom = min(h["spec"].get("tier", 0) for h in hypernodes)
    nodes = [d["metadata"]["name"] for d in docs if d.get("kind") == "Node"]
    out: dict[str, str] = {}
    for h in hypernodes:
        if h["spec"].get("tier", 0) != bottom:
            continue
        for m in h["spec"]["members"]:
            sel = m["selector"]
            if "exactMatch" in sel:
                out[sel["exactMatch"]["name"]] = h["metadata"]["name"]
            elif "regexMatch" in sel:
                pattern = sel["regexMatch"]["pattern"]
                out.update({n: h["metadata"]["name"] for n in nodes if re.search(pattern, n)})
            else:
                raise ValueError(f"binds_per_hypernode: {m} is not read by the test runner")
    return out


def check_bind_counts(case: Path, expected: dict, binds: dict[str, str], context: str) -> None:
    if "bind_count" in expected:
        assert len(binds) == expected["bind_count"], f"{context}: binds {binds}"
    for pod, nodes in (expected.get("binds_within") or {}).items():
        assert binds.get(pod) in nodes, f"{context}: {pod} -> {binds.get(pod)}, not in {nodes}"
    if "binds_per_hypernode" in expected:
        where = bottom_hypernode_of(case / "snapshot.yaml")
        counts = sorted(Counter(where.get(node, "") for node in binds.values()).values())
        want = sorted(expected["binds_per_hypernode"] or [])
        assert counts == want, f"{context}: binds {binds}"


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
    check_bind_counts(case, expected, out["binds"], context)
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
    for key in ("volumes", "provision"):
        if key in expected:
            assert out.get(key, {}) == (expected[key] or {}), f"{context}: {key}"
    for claim, devices in (expected.get("claims") or {}).items():
        results = out.get("claims", {}).get(claim, {}).get("devices", {}).get("results", [])
        got = sorted(f"{r['pool']}/{r['device']}" for r in results)
        assert got == sorted(devices), f"{context}: {claim}: {got}"
    for pod, notes in (expected.get("annotations") or {}).items():
        written = out.get("annotations", {}).get(pod, {})
        for key, value in notes.items():
            assert written.get(key) == value, f"{context}: {pod}: {key} in {written}"


def test_scenarios_exist() -> None:
    assert len(CASES) >= 10
