"""The tdm plugin: revocable zones' windows on the session's clock, and who may be evicted."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
import yaml
from tests.kit import node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.framework.session import open_session
from pumice.plugins import default_registry
from pumice.plugins.tdm import parse_window
from pumice.scheduler import Scheduler

RZ = "volcano.sh/revocable-zone"


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Windows are read in the scheduler's local time: pin it to UTC for the test."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def at(hhmm: str) -> float:
    h, m = map(int, hhmm.split(":"))
    return datetime(2024, 3, 5, h, m, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("00:00-01:00", 3600),
        ("0:00-23:59", 23 * 3600 + 59 * 60),
        ("1:00-0:00", 23 * 3600),
        ("   1:00-0:00    ", 23 * 3600),
        ("23:59-23:59", 24 * 3600),
    ],
)
def test_a_window_lasts_as_volcano_reads_it(text: str, length: int) -> None:
    # volcano pkg/scheduler/plugins/tdm/tdm_test.go, Test_parseRevocableZone
    window = parse_window(text, field="f")
    begin, end = window.spans(at("12:00"))[1]
    assert end - begin == length


@pytest.mark.parametrize("text", ["00:00_01:00", "0:00", "1:0-0:0", "63:59-23:59"])
def test_a_malformed_window_is_refused_naming_its_argument(text: str) -> None:
    config = parse_config(
        yaml.safe_load(
            "actions: allocate\ntiers:\n- plugins:\n  - name: tdm\n    arguments:\n"
            f"      tdm.revocable-zone.rz1: '{text}'\n"
        )
    )
    with pytest.raises(InputError, match=r"tdm\.revocable-zone\.rz1"):
        Scheduler.create(config)


def test_a_window_past_midnight_is_open_after_midnight_too() -> None:
    window = parse_window("22:00-06:00", field="f")
    assert window.is_open(at("23:00"))
    assert window.is_open(at("03:00"))
    assert not window.is_open(at("12:00"))


CONFIG = """
actions: allocate
tiers:
- plugins:
  - name: gang
  - name: tdm
    arguments:
      tdm.revocable-zone.rz1: "10:00-21:00"
  - name: predicates
"""


def cluster(annotations: dict[str, str]) -> list[dict]:
    lent = node("lent", labels={RZ: "rz1"})
    own = node("own")
    job = pod("p", group="pg")
    job["metadata"]["annotations"].update(annotations)
    return [queue(), lent, own, podgroup("pg"), job]


def place(objects: list[dict], now: float, scheduler: Scheduler | None = None) -> dict[str, str]:
    scheduler = scheduler or Scheduler.create(parse_config(yaml.safe_load(CONFIG)))
    snapshot = build_snapshot([SourcedObject(o, "test") for o in objects], now=now)
    return scheduler.cycle(snapshot).binds


def test_a_revocable_pod_goes_to_the_lent_node_only_while_its_window_is_open() -> None:
    revocable = cluster({RZ: "*"})
    assert place(revocable, at("12:00")) == {"default/p": "lent"}
    assert place(revocable, at("21:30")) == {"default/p": "own"}
    assert place(revocable, at("09:59")) == {"default/p": "own"}


def test_a_preemptable_pod_counts_as_revocable_and_an_ordinary_one_never_does() -> None:
    assert place(cluster({"volcano.sh/preemptable": "true"}), at("12:00")) == {"default/p": "lent"}
    assert place(cluster({}), at("12:00")) == {"default/p": "own"}
    # A zone value other than "*" means none, as in Volcano.
    assert place(cluster({RZ: "rz1"}), at("12:00")) == {"default/p": "own"}


def valid_until(now: float) -> float:
    config = parse_config(yaml.safe_load(CONFIG), known=None)
    snapshot = build_snapshot([SourcedObject(o, "test") for o in cluster({RZ: "*"})], now=now)
    ssn = open_session(snapshot, config, default_registry())
    (plugin,) = [p for p in ssn.plugins if p.name == "tdm"]
    return plugin.valid_until(ssn)


def test_answers_stand_until_the_next_window_edge() -> None:
    # Open: it closes after its last second (Volcano compares whole seconds, 21:00:00
    # still open); closed: it opens at its start.
    assert valid_until(at("20:00")) == at("21:00") + 1
    assert valid_until(at("09:00")) == at("10:00")
    assert valid_until(at("22:00")) == at("10:00") + 86400


EVICT = """
actions: shuffle
tiers:
- plugins:
  - name: tdm
    arguments:
      tdm.revocable-zone.rz1: "10:00-21:00"
      tdm.evict.period: 5m
"""


def test_closing_a_window_evicts_its_preemptable_pods_once_per_period() -> None:
    scheduler = Scheduler.create(parse_config(yaml.safe_load(EVICT)))
    objects = [
        queue(),
        node("lent", labels={RZ: "rz1"}),
        podgroup("pg", min_member=1, phase="Running"),
        pod("a", group="pg", node="lent"),
        pod("b", group="pg", node="lent"),
    ]
    objects[4]["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"

    def evicted(now: float) -> list[str]:
        snapshot = build_snapshot([SourcedObject(o, "test") for o in objects], now=now)
        snapshot.carried = carried
        return scheduler.cycle(snapshot).evictions

    carried: dict = {}
    assert evicted(at("12:00")) == []  # open: nothing to do
    carried.clear()
    assert evicted(at("21:30")) == ["default/a"]  # one pod per job without a budget
    assert evicted(at("21:32")) == []  # within the evict period
    assert evicted(at("21:36")) == ["default/a"]


PREEMPT = """
actions: preempt
tiers:
- plugins:
  - name: gang
  - name: tdm
    arguments:
      tdm.revocable-zone.rz1: "0:00-0:00"
- plugins:
  - name: predicates
"""


def preemption(preemptor_annotations: dict[str, str]) -> list[str]:
    low_a = pod("low-a", group="low", node="n1", cpu="1", priority=1)
    low_b = pod("low-b", group="low", node="n1", cpu="1", priority=1)
    low_b["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    high = pod("high", group="high", cpu="1", priority=100)
    high["metadata"]["annotations"].update(preemptor_annotations)
    objects = [
        queue(),
        node("n1", cpu="2"),
        podgroup("low", min_member=1, phase="Running"),
        podgroup("high", min_member=1),
        low_a,
        low_b,
        high,
    ]
    scheduler = Scheduler.create(parse_config(yaml.safe_load(PREEMPT)))
    return scheduler.cycle(build_snapshot([SourcedObject(o, "test") for o in objects])).evictions


def test_only_a_preemptor_that_cannot_be_revoked_preempts_and_only_preemptable_pods() -> None:
    assert preemption({"volcano.sh/preemptable": "false"}) == ["default/low-a"]
    # A pod without the annotation is preemptable, so it may be revoked: it preempts nobody.
    assert preemption({}) == []
