"""Eviction guards: PodDisruptionBudgets (pdb) and cooldown protection (cdp)."""

from __future__ import annotations

import pytest
from tests.kit import conf, node, pod, podgroup, priority_class, queue, run

from pumice.api.pdb import disruptions_allowed, parse_pdb
from pumice.errors import InputError
from pumice.plugins.cdp import parse_go_duration


def guarded(plugin: str) -> str:
    return conf(
        "enqueue, allocate, preempt",
        ["priority", {"name": "gang", "enablePreemptable": False}, "conformance", plugin],
        ["predicates", "nodeorder"],
    )


def pdb(name="budget", *, labels=None, min_available=None, max_unavailable=None, status=None):
    spec = {"selector": {"matchLabels": labels or {"app": "web"}}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    obj = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def web_cluster(n_web=4, *extra, labels=None):
    objs = [
        queue("default"),
        priority_class("high", 1000),
        priority_class("low", 10),
        node("n1", cpu=str(n_web), memory="64Gi"),
        podgroup("web", priority_class="low", phase="Running", min_member=0),
    ]
    for i in range(n_web):
        p = pod(f"web-{i}", group="web", cpu="1", node="n1", priority_class="low")
        p["metadata"]["labels"] = labels if labels is not None else {"app": "web"}
        objs.append(p)
    objs.append(podgroup("high", priority_class="high", min_member=2))
    objs += [pod(f"high-{i}", group="high", cpu="1", priority_class="high") for i in range(2)]
    return objs + list(extra)


# -- budgets -----------------------------------------------------------------------------


def test_parse_pdb_reads_spec_and_status() -> None:
    rec = parse_pdb(pdb(min_available="50%", status={"disruptionsAllowed": 1}))
    assert rec.min_available == "50%" and rec.disruptions_allowed == 1
    assert rec.selector.matches({"app": "web", "x": "y"})
    assert not rec.selector.matches({"app": "db"})


def test_parse_pdb_rejects_both_bounds_and_bad_values() -> None:
    with pytest.raises(InputError, match="mutually exclusive"):
        parse_pdb(pdb(min_available=1, max_unavailable=1))
    with pytest.raises(InputError, match="percentage"):
        parse_pdb(pdb(min_available="lots"))


def test_disruptions_allowed_from_spec() -> None:
    def allowed(**kw) -> int:
        return disruptions_allowed(parse_pdb(pdb(**kw)), expected=4, healthy=4)

    assert allowed(min_available=3) == 1
    assert allowed(min_available="50%") == 2
    assert allowed(max_unavailable=1) == 1
    assert allowed(max_unavailable="25%") == 1
    assert allowed(min_available=5) == 0
    assert allowed(status={"disruptionsAllowed": 3}, min_available=4) == 3


def test_pdb_min_available_limits_evictions() -> None:
    """minAvailable 3 of 4: only one web pod may go, too few for a gang of two."""
    d = run(web_cluster(4, pdb(min_available=3)), guarded("pdb"))
    assert d.evictions == []
    d = run(web_cluster(4, pdb(min_available=2)), guarded("pdb"))
    assert len(d.evictions) == 2


def test_pdb_max_unavailable_and_status_budget() -> None:
    d = run(web_cluster(4, pdb(max_unavailable=2)), guarded("pdb"))
    assert len(d.evictions) == 2
    d = run(web_cluster(4, pdb(min_available=0, status={"disruptionsAllowed": 1})), guarded("pdb"))
    assert d.evictions == []


def test_pdb_unrelated_budget_and_unlabelled_pods() -> None:
    """A budget of other pods changes nothing; pods without labels are never victims
    while pdb is on (Volcano's behaviour)."""
    d = run(web_cluster(4, pdb(labels={"app": "db"}, min_available=9)), guarded("pdb"))
    assert len(d.evictions) == 2
    d = run(web_cluster(4, labels={}), guarded("pdb"))
    assert d.evictions == []


# -- cooldown ----------------------------------------------------------------------------


def test_go_durations() -> None:
    assert parse_go_duration("90s") == 90
    assert parse_go_duration("1h30m") == 5400
    assert parse_go_duration("1.5m") == 90
    assert parse_go_duration("0") == 0
    assert parse_go_duration("10") is None
    assert parse_go_duration("soon") is None


def cooled_cluster(cooldown: str, scheduled: str):
    objs = web_cluster(2)
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("web-"):
            o["metadata"]["annotations"]["volcano.sh/cooldown-time"] = cooldown
            o["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}
            ]
        # "now" is the latest timestamp of the snapshot
        o.setdefault("metadata", {})["creationTimestamp"] = "2026-01-01T01:00:00Z"
    return objs


def test_cdp_protects_pods_within_their_cooldown() -> None:
    """Scheduled 10 minutes before "now" with a 1h cooldown: protected."""
    d = run(cooled_cluster("1h", "2026-01-01T00:50:00Z"), guarded("cdp"))
    assert d.evictions == []


def test_cdp_releases_pods_after_their_cooldown() -> None:
    """Scheduled 10 minutes before "now" with a 5m cooldown: evictable."""
    d = run(cooled_cluster("5m", "2026-01-01T00:50:00Z"), guarded("cdp"))
    assert len(d.evictions) == 2


def test_cdp_ignores_bad_durations() -> None:
    d = run(cooled_cluster("forever", "2026-01-01T00:50:00Z"), guarded("cdp"))
    assert len(d.evictions) == 2
