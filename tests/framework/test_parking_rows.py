"""The parked jobs as rows, as the parked backlog changes from cycle to cycle.

enqueue votes on every parked job's minResources at once, from rows kept with the
parking. Jobs leave the parking (admitted, changed, gone) and join it (refused for the
first time) in most busy cycles: the rows then made from the last ones must be the rows
a parking made afresh would hand over, row for row.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from pumice.api.job import JobInfo
from pumice.api.resources import ResourceSpace
from pumice.framework.decisions import PodGroupUpdate
from pumice.framework.parking import Parked, Parking, Rows

SPACE = ResourceSpace(["cpu", "memory", "nvidia.com/gpu"])


def _parked(space: ResourceSpace, k: int, rng: random.Random, asking: float) -> Parked:
    wants = (
        np.array([rng.randint(1, 9) for _ in range(space.size)], float)
        if rng.random() < asking
        else None
    )
    job = JobInfo(
        uid=f"ns/job-{k}", namespace="ns", name=f"job-{k}", queue="default", priority=0,
        priority_class="", min_available=1, min_task_member={}, min_resources=wants,
        phase="Pending", creation=float(k), allocated=space.zeros(),
    )  # fmt: skip
    reason = "too few pods" if rng.random() < 0.7 else None
    return Parked(job, 0, 1, reason, PodGroupUpdate("Pending"))


def _same(a: Rows, b: Rows) -> None:
    assert a.parked == b.parked
    assert a.every == b.every
    assert a.jobs == b.jobs
    assert a.uids == b.uids
    assert a.at.tolist() == b.at.tolist()
    assert np.array_equal(a.matrix, b.matrix)
    assert a.matrix.shape == b.matrix.shape
    assert a.index == b.index
    assert a.invalid.tolist() == b.invalid.tolist()
    assert a.all_invalid == b.all_invalid


@pytest.mark.parametrize("asking", [0.8, 1.0])
def test_rows_follow_the_parked_jobs_as_a_fresh_parking_sees_them(asking: float) -> None:
    space = SPACE
    rng = random.Random(7)
    parking = Parking()
    made = 0
    for cycle in range(400):
        gone = 0.05 if cycle < 200 else 0.0  # (later: only joins, all asking or not)
        for uid in [u for u in parking.kept if rng.random() < gone]:
            del parking.kept[uid]
        for _ in range(rng.randint(0, 3)):
            p = _parked(space, made, rng, asking)
            made += 1
            parking.kept[p.job.uid] = p
        rows = parking.rows(space)
        _same(rows, Rows(list(parking.kept), tuple(parking.kept.values()), space))
