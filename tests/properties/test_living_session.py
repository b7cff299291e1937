"""A session that lives from cycle to cycle decides what a new session would.

The scheduler keeps one session from cycle to cycle: plugins that can keep their
registrations do, and refresh what a cycle needs; the others are built anew. Two copies
of one cluster go through the same random events (see
:mod:`tests.properties.test_repeated_cycles`), one scheduled by a living session that
runs every cycle, the other by a new session for each: every cycle's decisions and
explanations must be the same, under Volcano's default configuration, under one with
preemption, reclaim and clocked plugins, under one whose plugins cannot all live (so
that rebuilt and living plugins share the hook table), and under hierarchical drf.
"""

from __future__ import annotations

import pickle

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from tests.kit import conf, node, queue
from tests.properties.test_repeated_cycles import CLOCKED, OPS, START, World, _check, _job

from pumice.api.snapshot import Snapshot
from pumice.conf.config import parse_config
from pumice.framework.session import Session, living
from pumice.plugins import default_registry
from pumice.scheduler import Scheduler

MIXED = conf(
    "enqueue, allocate, preempt, reclaim, backfill",
    ["priority", "gang", "conformance", "sla"],
    ["drf", "predicates", "proportion", "nodeorder", "binpack", "pdb", "cdp"],
)

#: drf's hierarchical mode (its queue tree is the cycle's own) and gang's optimistic
#: readiness.
HIERARCHY = conf(
    "enqueue, allocate, reclaim, backfill",
    ["priority", {"name": "gang", "arguments": {"gang.bestEffortReady": "optimistic"}}],
    [{"name": "drf", "enableHierarchy": True}, "predicates", "nodeorder", "binpack"],
)


@pytest.mark.parametrize(
    ("config", "label"),
    [(None, "default"), (CLOCKED, "clocked"), (MIXED, "mixed"), (HIERARCHY, "hierarchy")],
    ids=["default", "clocked-plugins", "rebuilt-plugins", "hierarchical-drf"],
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_a_living_session_decides_as_new_ones(config, label, ops):
    _check(config, f"living-{label}", ops, repeat_first=False, plain=False)


def test_the_default_configuration_lives_whole():
    """Every plugin of Volcano's default configuration keeps its registrations: a
    renewed session rebuilds none of them."""
    sched = Scheduler.from_file(None)
    registry = default_registry()
    built = [registry.create(o.name, o.arguments) for o in sched.config.instances()]
    assert [p.name for p in built if not living(p)] == []


def _world(config: str) -> tuple[World, list[float]]:
    clock = [START]
    world = World(Scheduler.create(parse_config(yaml.safe_load(config))), clock)
    world.store.create_all([queue("a", weight=1), node("n1", cpu="8", memory="64Gi")])
    return world, clock


def test_a_session_that_fails_is_not_renewed(monkeypatch):
    """A cycle that raises half way (a plugin's bug) leaves no session behind: the next
    cycle opens a new one and schedules as if nothing had happened."""
    world, _clock = _world(MIXED)
    world.store.create_all(_job(1, 2, 1, 2, "a", None, 0))
    first = world.cycle()
    kept = world.scheduler._session
    assert kept is not None
    world.store.create_all(_job(2, 1, 1, 1, "a", None, 0))

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
    world.store.create_all(_job(1, 2, 1, 2, "a", None, 0))
    world.cycle()
    assert world.scheduler._session is not None
    copy = pickle.loads(pickle.dumps(world.scheduler))
    assert copy._session is None
    world.store.create_all(_job(2, 1, 1, 1, "a", None, 0))
    snapshot = world.cache.snapshot()
    mine = world.scheduler.cycle(snapshot).to_json(sessions=False)
    theirs = copy.cycle(world.cache.snapshot()).to_json(sessions=False)
    assert mine == theirs
    assert "default/j2-0" in mine["binds"]
