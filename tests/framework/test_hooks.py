"""The hook table combines plugin answers with Volcano's rules, tier by tier."""

from __future__ import annotations

from pumice.conf.arguments import Arguments
from pumice.conf.config import PluginOption, Tier
from pumice.framework.hooks import HookTable
from pumice.framework.pqueue import PriorityQueue


def table(*tiers: list[tuple[str, dict]]) -> HookTable:
    return HookTable(
        [Tier(tuple(PluginOption(n, flags, Arguments({}, n)) for n, flags in t)) for t in tiers]
    )


def test_order_first_non_zero_wins_across_tiers() -> None:
    h = table([("a", {}), ("b", {})], [("c", {})])
    h.register("job_order", "a", lambda x, y: 0)
    h.register("job_order", "b", lambda x, y: 1)
    h.register("job_order", "c", lambda x, y: -1)
    assert h.order("job_order", 1, 2) == 1


def test_disabled_flag_removes_the_plugin_from_the_walk() -> None:
    h = table([("a", {"job_order": False}), ("b", {})])
    h.register("job_order", "a", lambda x, y: 1)
    h.register("job_order", "b", lambda x, y: -1)
    assert h.order("job_order", 1, 2) == -1


def test_vote_reject_wins_permit_ends_at_its_tier_abstain_is_yes() -> None:
    h = table([("a", {}), ("b", {})], [("c", {})])
    h.register("job_enqueueable", "a", lambda j: 1)
    h.register("job_enqueueable", "b", lambda j: 0)
    h.register("job_enqueueable", "c", lambda j: -1)
    assert h.vote("job_enqueueable", None) is True  # permit in tier 1 ends the walk
    h2 = table([("a", {}), ("b", {})])
    h2.register("job_enqueueable", "a", lambda j: 1)
    h2.register("job_enqueueable", "b", lambda j: -1)
    assert h2.vote_detail("job_enqueueable", None) == (False, "b")
    h3 = table([("a", {})])
    h3.register("job_enqueueable", "a", lambda j: 0)
    assert h3.vote("job_enqueueable", None) is True


def test_victims_intersect_within_first_opinionated_tier() -> None:
    h = table([("abstain", {}), ("a", {}), ("b", {})], [("c", {})])
    h.register("preemptable", "abstain", lambda p, c: None)
    h.register("preemptable", "a", lambda p, c: [x for x in c if x != "v1"])
    h.register("preemptable", "b", lambda p, c: [x for x in c if x != "v3"])
    h.register("preemptable", "c", lambda p, c: c)
    victims, deciders = h.victims("preemptable", "p", ["v1", "v2", "v3"])
    assert victims == ["v2"]
    assert deciders == ["a", "b"]


def test_victims_empty_answer_passes_the_decision_to_the_next_tier() -> None:
    h = table([("a", {})], [("b", {})])
    h.register("preemptable", "a", lambda p, c: [])
    h.register("preemptable", "b", lambda p, c: c)
    assert h.victims("preemptable", "p", ["v"]) == (["v"], ["b"])
    h2 = table([("a", {})])
    h2.register("preemptable", "a", lambda p, c: [])
    assert h2.victims("preemptable", "p", ["v"])[0] == []


def test_all_and_any() -> None:
    h = table([("a", {}), ("b", {})])
    h.register("job_ready", "a", lambda j: True)
    h.register("job_ready", "b", lambda j: False)
    h.register("overused", "a", lambda q: False)
    h.register("overused", "b", lambda q: True)
    assert h.all("job_ready", None) is False
    assert h.any("overused", None) is True


def test_priority_queue_pops_in_order() -> None:
    q = PriorityQueue(lambda a, b: a < b, [5, 1, 4, 2, 3])
    assert [q.pop() for _ in range(5)] == [1, 2, 3, 4, 5]
    assert q.empty()
