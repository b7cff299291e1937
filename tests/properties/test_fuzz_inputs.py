"""Every input ends in decisions or an InputError: real snapshots mutated at random.

Values are replaced by huge, negative or tiny numbers, by the wrong type (a list, a map,
a bool, a string where a map is), or deleted, anywhere in the objects; the mutated
snapshot goes through what ``pumice cycle`` does (build, cycle under each of a few
configurations, the decisions rendered as JSON and as a table). Anything but decisions
or an :class:`InputError` is a bug: a user would see a traceback.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.load import load_objects
from pumice.errors import InputError
from pumice.output import print_table, to_json
from pumice.scheduler import Scheduler

ROOT = Path(__file__).parents[2]
SCENARIOS = ROOT / "tests/scenarios"
#: Real snapshots: a GPU cluster, a kubectl dump with everything a dump holds, a queue
#: tree, per-role gang minimums, a PodDisruptionBudget and PriorityClasses.
SNAPSHOTS = [
    ROOT / "src/pumice/examples/gpu-cluster.yaml",
    *(
        SCENARIOS / case / "snapshot.yaml"
        for case in (
            "kubectl/dump-with-noise",
            "capacity-hierarchy/enqueue-bounded-by-ancestor",
            "volcano/allocate/gang-continues-past-failed-task-until-min-member",
            "preempt/pdb-min-available-blocks",
        )
    ),
]
#: Volcano's default configuration, capacity with a hierarchy, and every action.
CONFIGS = [
    None,
    SCENARIOS / "capacity-hierarchy/enqueue-bounded-by-ancestor/config.yaml",
    SCENARIOS / "preempt/pdb-min-available-blocks/config.yaml",
    ROOT / "tests/data/full-actions.yaml",
]


def _objects(path: Path) -> list[dict]:
    return [s.obj for s in load_objects([str(path)])]


OBJECTS = {str(p.relative_to(ROOT)): _objects(p) for p in SNAPSHOTS}
SCHEDULERS = [Scheduler.from_file(str(c) if c else None) for c in CONFIGS]

#: Numbers no float holds or int() reads, below zero, tiny, not numbers at all; and
#: strings that look like quantities, dates or nothing.
NUMBERS = st.sampled_from(
    [
        10**30,
        -(10**30),
        1180591620717411303424,
        "1180591620717411303424",
        "1e400",
        "-1e400",
        "1e999999999",
        1e308,
        float("inf"),
        float("nan"),
        "9" * 5000,  # more digits than int() reads
        10**5000,
        -1.0,
        -1,
        0,
        0.5,
        "1e-400",
        "-5",
        "100Ei",
    ]
)
#: Every wrong type, and strings that are nothing in particular.
OTHERS = st.sampled_from(
    [
        "",
        "x",
        "2026-13-45T99:00:00Z",
        True,
        None,
        [],
        [1, "a"],
        {},
        {"a": {"b": [None]}},
        "a string where a map is",
    ]
)
DELETE = object()
#: Fields pumice reads (most of an object's fields are not: managedFields, uids...).
_READ = """kind metadata name namespace labels annotations creationTimestamp deletionTimestamp
    spec status containers initContainers resources requests limits overhead cpu memory
    pods nvidia.com/gpu ephemeral-storage allocatable capacity conditions type phase
    nodeName schedulerName priority priorityClassName value globalDefault nodeSelector
    affinity tolerations taints effect key operator values unschedulable minMember
    minTaskMember minResources queue weight capability deserved guarantee parent state
    reclaimable minAvailable maxUnavailable selector matchLabels disruptionsAllowed
    hostPort ports restartPolicy preemptionPolicy"""
READ = frozenset(_READ.split())


def _places(value, out: list) -> list:
    """Every (container, key) in ``value``, depth first: each field, whatever its depth,
    is as likely to be mutated as any other."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return out
    for key, child in items:
        out.append((value, key))
        _places(child, out)
    return out


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(sorted(OBJECTS)))
    objects = copy.deepcopy(OBJECTS[name])
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(objects) - 1))
        places = _places(objects[i], [])
        new = draw(st.one_of(NUMBERS, OTHERS, st.just(DELETE)))
        if not places or draw(st.integers(0, 50)) == 0:  # the whole object, now and then
            objects[i] = {} if new is DELETE else copy.deepcopy(new)
            continue
        if draw(st.booleans()):  # half the time, a field pumice reads
            places = [p for p in places if str(p[1]) in READ] or places
        container, key = places[draw(st.integers(0, len(places) - 1))]
        if isinstance(container[key], str | int | float) and draw(st.booleans()):
            new = draw(NUMBERS)  # a value where one was: what typos and tools do
        if new is DELETE:
            if isinstance(container, dict):
                del container[key]
            else:
                container.pop(key)
        else:
            container[key] = copy.deepcopy(new)
    return name, objects, draw(st.integers(0, len(SCHEDULERS) - 1))


def _cycle(objects: list, scheduler: Scheduler) -> None:
    snapshot = build_snapshot([SourcedObject(o, "fuzz.yaml") for o in objects])
    decisions = scheduler.cycle(snapshot)
    to_json(decisions)
    print_table(decisions, Console(file=io.StringIO(), width=200))


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_the_snapshots_schedule_as_they_are(name: str) -> None:
    for scheduler in SCHEDULERS:
        _cycle(copy.deepcopy(OBJECTS[name]), scheduler)


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
def test_mutated_snapshots_end_in_decisions_or_an_input_error(case) -> None:
    _name, objects, k = case
    try:
        _cycle(objects, SCHEDULERS[k])
    except InputError as err:
        assert err.render()  # names where, and says what
