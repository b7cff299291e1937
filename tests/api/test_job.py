"""JobInfo's running sums stay equal to fresh sums through status changes."""

from __future__ import annotations

import numpy as np
from tests.kit import node, pod, podgroup, queue

from pumice.api.task import TaskStatus
from pumice.cache.build import SourcedObject, build_snapshot


def test_pending_and_allocated_sums_follow_status_changes() -> None:
    objs = [queue(), node("n1", cpu="8"), podgroup("pg", min_member=1)]
    objs += [pod(f"p{i}", group="pg", cpu=f"{i + 1}") for i in range(3)]
    job = build_snapshot([SourcedObject(o, "t") for o in objs]).jobs["default/pg"]
    cpu = 0
    assert job.pending_request[cpu] == 6000.0
    tasks = sorted(job.tasks.values(), key=lambda t: t.name)
    job.update_status(tasks[0], TaskStatus.ALLOCATED)
    job.update_status(tasks[1], TaskStatus.PIPELINED)
    assert job.pending_request[cpu] == 3000.0
    assert job.allocated[cpu] == 1000.0
    job.update_status(tasks[1], TaskStatus.PENDING)
    fresh = sum(t.resreq for t in job.with_status(TaskStatus.PENDING))
    assert np.array_equal(job.pending_request, fresh)
