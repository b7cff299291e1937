"""The cycle's observer hooks: what they are told, in which order, and that they change
nothing about the decisions."""

from __future__ import annotations

from pathlib import Path

from pumice.cache.build import build_snapshot
from pumice.cache.load import load_objects
from pumice.framework.session import Session
from pumice.scheduler import Scheduler

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "data" / "full-actions.yaml"
GANG = ROOT / "scenarios" / "volcano" / "allocate" / "gang-two-jobs-one-fits"


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.seconds: list[float] = []
        self.hooks_seen = False

    def plugin_opened(self, plugin: str, seconds: float) -> None:
        self.calls.append(("plugin_opened", plugin))
        self.seconds.append(seconds)

    def session_opened(self, seconds: float) -> None:
        self.calls.append(("session_opened", ""))
        self.seconds.append(seconds)

    def action_done(self, action: str, seconds: float) -> None:
        self.calls.append(("action_done", action))
        self.seconds.append(seconds)

    def plugin_closed(self, plugin: str, seconds: float) -> None:
        self.calls.append(("plugin_closed", plugin))
        self.seconds.append(seconds)

    def session_closing(self, ssn: Session) -> None:
        self.calls.append(("session_closing", ""))
        # The plugins and their functions are still there; the decisions are complete.
        self.hooks_seen = bool(ssn.plugins) and bool(ssn.hooks.flat("overused"))
        self.podgroups = set(ssn.decisions.podgroups)

    def cycle_done(self, seconds: float) -> None:
        self.calls.append(("cycle_done", ""))
        self.seconds.append(seconds)


def _snapshot():
    return build_snapshot(load_objects([str(GANG / "snapshot.yaml")]))


def test_observer_sees_every_plugin_and_action_in_order() -> None:
    sched = Scheduler.from_file(str(FULL))
    rec = Recorder()
    decisions = sched.cycle(_snapshot(), rec)
    plugins = [opt.name for tier in sched.config.tiers for opt in tier.plugins]
    expected = (
        [("plugin_opened", p) for p in plugins]
        + [("session_opened", "")]
        + [("action_done", a) for a in sched.config.actions]
        + [("plugin_closed", p) for p in plugins]
        + [("session_closing", ""), ("cycle_done", "")]
    )
    assert rec.calls == expected
    assert all(s >= 0.0 for s in rec.seconds)
    assert rec.hooks_seen
    assert rec.podgroups == set(decisions.podgroups)


def test_observer_changes_no_decision() -> None:
    sched = Scheduler.from_file(str(GANG / "config.yaml"))
    # (session uids differ from cycle to cycle; they are in the conditions)
    plain = sched.cycle(_snapshot()).to_json(sessions=False)
    observed = sched.cycle(_snapshot(), Recorder()).to_json(sessions=False)
    assert plain == observed
    assert plain["binds"] == {"c1/b1": "n1", "c1/b2": "n1"}
