"""A session that lives from cycle to cycle decides what a new session would.

The scheduler keeps one session from cycle to cycle: plugins that can keep their
registrations do, and refresh what a cycle needs; the others are built anew. Two copies
of one cluster go through the same random events (see
:mod:`tests.properties.test_repeated_cycles`), one scheduled by a living session that
runs every cycle, the other by a new session for each: every cycle's decisions and
explanations must be the same, under Volcano's default configuration, under one with
preemption, reclaim and clocked plugins, under one with a plugin that does not live (so
that rebuilt and living plugins share the hook table), under hierarchical drf, and
under capacity (flat and as a queue tree).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from tests.kit import conf, node, pod, podgroup, queue
from tests.plugins.test_pdb_cdp import guarded, pdb, web_cluster
from tests.properties.test_repeated_cycles import (
    CLOCKED,
    OPS,
    START,
    World,
    check_same,
    gang_job,
    scheduler_for,
)

from pumice.api.snapshot import Snapshot
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session, living
from pumice.plugins import default_registry

#: A plugin built anew for every cycle (a user's plugin without ``on_cycle_open``)
#: between living ones, with the clocked and victim-guarding plugins.
MIXED = conf(
    "enqueue, allocate, preempt, reclaim, backfill",
    ["priority", "gang", "conformance", "sla"],
    [
        "drf", "predicates", "proportion", "nodeorder",
        {"name": "prefer-label", "arguments": {"label": "pool", "value": "reserved"}},
        "binpack", "pdb", "cdp",
    ],
)  # fmt: skip
#: capacity in place of proportion, flat and as a queue tree.
CAPACITY = conf(
    "enqueue, allocate, reclaim, backfill",
    ["priority", "gang", "conformance"],
    ["drf", "predicates", "capacity", "nodeorder", "binpack"],
)
CAPACITY_TREE = conf(
    "enqueue, allocate, reclaim, backfill",
    ["priority", "gang", "conformance"],
    ["drf", "predicates", {"name": "capacity", "enableHierarchy": True}, "nodeorder"],
)
EXAMPLE_PLUGINS = Path(__file__).parents[2] / "src" / "pumice" / "examples" / "plugins"

#: drf's hierarchical mode (its queue tree is the cycle's own) and gang's optimistic
#: readiness.
HIERARCHY = conf(
    "enqueue, allocate, reclaim, backfill",
    ["priority", {"name": "gang", "arguments": {"gang.bestEffortReady": "optimistic"}}],
    [{"name": "drf", "enableHierarchy": True}, "predicates", "nodeorder", "binpack"],
)


@pytest.mark.parametrize(
    ("config", "label"),
    [
        (None, "default"),
        (CLOCKED, "clocked"),
        (MIXED, "mixed"),
        (HIERARCHY, "hierarchy"),
        (CAPACITY, "capacity"),
        (CAPACITY_TREE, "capacity-tree"),
    ],
    ids=[
        "default",
        "clocked-plugins",
        "rebuilt-plugins",
        "hierarchical-drf",
        "capacity",
        "capacity-tree",
    ],
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_a_living_session_decides_as_new_ones(config, label, ops):
    extra = EXAMPLE_PLUGINS if config is MIXED else None
    check_same(config, f"living-{label}", ops, repeat_first=False, plain=False, plugins_dir=extra)


def test_every_plugin_pumice_ships_lives():
    """Every plugin of pumice's own keeps its registrations: a renewed session rebuilds
    none of them (Volcano's default configuration included)."""
    registry = default_registry()
    built = [registry.create(n, Arguments({}, f"plugin {n}")) for n in registry.names()]
    assert len(built) >= 15
    assert [p.name for p in built if not living(p)] == []


def test_only_a_plugin_without_on_cycle_open_is_rebuilt():
    """pumice's clocked and victim-guarding plugins live too; a user's plugin that
    declares no ``on_cycle_open`` is built anew for every cycle."""
    sched = scheduler_for(MIXED, EXAMPLE_PLUGINS)
    built = [sched.plugins.create(o.name, o.arguments) for o in sched.config.instances()]
    assert [p.name for p in built if not living(p)] == ["prefer-label"]


def _world(config: str) -> tuple[World, list[float]]:
    clock = [START]
    world = World(scheduler_for(config, EXAMPLE_PLUGINS), clock)
    world.store.create_all([queue("a", weight=1), node("n1", cpu="8", memory="64Gi")])
    return world, clock


def test_a_session_that_fails_is_not_renewed(monkeypatch):
    """A cycle that raises half way (a plugin's bug) leaves no session behind: the next
    cycle opens a new one and schedules as if nothing had happened."""
    world, _clock = _world(MIXED)
    world.store.create_all(gang_job(1, 2, 1, 2, "a", None, 0))
    first = world.cycle()
    kept = world.scheduler._session
    assert kept is not None
    world.store.create_all(gang_job(2, 1, 1, 1, "a", None, 0))

    def broken(self: Session, snapshot: Snapshot) -> None:
        raise RuntimeError("a plugin's bug")

    with monkeypatch.context() as m:
        m.setattr(Session, "renew", broken)
        with pytest.raises(RuntimeError):
            world.cycle()
    assert world.scheduler._session is None
    again = world.cycle()
    assert world.scheduler._session is not None
    assert world.scheduler._session is not kept
    assert "default/j1-0" in first["binds"]
    assert "default/j2-0" in again["binds"]


def test_a_scheduler_that_has_run_cycles_still_pickles():
    """A sweep hands schedulers to worker processes: one that has a living session
    pickles without it, and the copy schedules the next cycle as the original does."""
    world, _clock = _world(MIXED)
    world.store.create_all(gang_job(1, 2, 1, 2, "a", None, 0))
    world.cycle()
    assert world.scheduler._session is not None
    copy = pickle.loads(pickle.dumps(world.scheduler))
    assert copy._session is None
    world.store.create_all(gang_job(2, 1, 1, 1, "a", None, 0))
    snapshot = world.cache.snapshot()
    mine = world.scheduler.cycle(snapshot).to_json(sessions=False)
    theirs = copy.cycle(world.cache.snapshot()).to_json(sessions=False)
    assert mine == theirs
    assert "default/j2-0" in mine["binds"]


def test_a_disruption_budget_is_counted_afresh_every_cycle():
    """pdb lives: what a budget allows is counted again when a cycle opens. Four web
    pods fill the node; with minAvailable 2 they may lose two. Once one has ended, the
    three left may lose only one: too few for a gang of three (the ended pod's cpu is
    free, two more are needed), which a budget allowing two would let in."""

    def worlds(min_available: int) -> tuple[World, World]:
        config = guarded("pdb")
        cluster = [
            o for o in web_cluster(4, pdb(min_available=min_available))
            if o["kind"] not in ("Pod", "PodGroup") or not o["metadata"]["name"].startswith("high")
        ]  # fmt: skip
        gang = [podgroup("high", priority_class="high", min_member=3)]
        gang += [pod(f"high-{i}", group="high", cpu="1", priority_class="high") for i in range(3)]
        living_world = World(scheduler_for(config), [START])
        living_world.store.create_all(cluster)
        assert living_world.cycle()["evictions"] == []  # (nothing waits; budget counted)
        living_world.store.delete("Pod", "default/web-3")
        living_world.store.create_all(gang)
        fresh_world = World(dataclasses.replace(scheduler_for(config), living=False), [START])
        left = [o for o in cluster if o["metadata"]["name"] != "web-3"]
        fresh_world.store.create_all(copy.deepcopy(left + gang))  # (a store keeps the dicts)
        return living_world, fresh_world

    living_world, fresh_world = worlds(2)
    got = living_world.cycle()
    assert got["evictions"] == []
    assert got == fresh_world.cycle()
    living_world, fresh_world = worlds(1)  # three pods may lose two: the gang gets in
    got = living_world.cycle()
    assert len(got["evictions"]) == 2
    assert got == fresh_world.cycle()
