"""Sort keys for the job and task orders of a session, where the plugins offer them.

:meth:`Session.job_less` walks the ``job_order`` functions and falls back to creation
time and uid; when every such function also offers a ``key`` (``fn(a, b)`` is the sign
of ``key(a) - key(b)``), the tuple of keys followed by the same fallback orders jobs
identically, and a heap can compare tuples in C (:class:`~pumice.framework.pqueue.
KeyedQueue`). Only use these where an item's key cannot change while it waits in the
heap: allocate and enqueue change a job only while it is out of the heap, and allocate
changes a queue's share only while serving it (reclaim and preempt do not qualify:
evicting a victim changes the share of a queue that waits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo
from pumice.framework.pqueue import order_key
from pumice.framework.session import Session

#: The fallbacks after the order functions (creation time, then a name), as tuples made
#: in C: a key is made for every waiting job of a served queue, every cycle.
_JOB_FALLBACK = attrgetter("creation", "uid")
_QUEUE_FALLBACK = attrgetter("creation", "name")
_INDEXED_TASK_FALLBACK = attrgetter("name_index", "creation", "uid")
_TASK_FALLBACK = attrgetter("creation", "uid")


def job_key(ssn: Session) -> Callable[[JobInfo], tuple] | None:
    return ssn.hooks.derived("job_order", "key", _job_key)


def _job_key(facets: tuple[Any, ...]) -> Callable[[JobInfo], tuple] | None:
    return order_key(facets, _JOB_FALLBACK)


def queue_key(ssn: Session) -> Callable[[QueueInfo], tuple] | None:
    return ssn.hooks.derived("queue_order", "key", _queue_key)


def _queue_key(facets: tuple[Any, ...]) -> Callable[[QueueInfo], tuple] | None:
    return order_key(facets, _QUEUE_FALLBACK)


def task_key(ssn: Session, tasks: Sequence[TaskInfo]) -> Callable[[TaskInfo], tuple] | None:
    """The task key, for these tasks: :func:`~pumice.api.task.default_task_order`
    compares pod indices only when both tasks have one, which a tuple can express only
    when all of them have one or none does."""
    with_index = sum(1 for t in tasks if t.name_index is not None)
    if with_index == len(tasks):
        return task_keys(ssn)[0]
    if with_index == 0:
        return task_keys(ssn)[1]
    return None


def task_keys(
    ssn: Session,
) -> tuple[Callable[[TaskInfo], tuple] | None, Callable[[TaskInfo], tuple] | None]:
    """The task key for tasks that all have a pod index, and for tasks none of which
    has one (see :func:`task_key`); made once per change of the task order functions."""
    return ssn.hooks.derived("task_order", "key", _task_keys)


def _task_keys(
    facets: tuple[Any, ...],
) -> tuple[Callable[[TaskInfo], tuple] | None, Callable[[TaskInfo], tuple] | None]:
    return (
        order_key(facets, _INDEXED_TASK_FALLBACK),
        order_key(facets, _TASK_FALLBACK),
    )
