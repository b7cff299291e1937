"""enqueue: admit Pending jobs (phase Pending -> Inqueue) when the plugins allow.

Queues take turns in queue order, one job per turn in job order. A job without
minResources is always admitted; otherwise the ``job_enqueueable`` vote decides, and a
refused job stays Pending with the refusing plugin's reason.
"""

from __future__ import annotations

from pumice.api.job import INQUEUE, JobInfo
from pumice.api.queue import QueueInfo
from pumice.conf.arguments import Arguments
from pumice.framework.orders import job_key
from pumice.framework.pqueue import KeyedQueue, PriorityQueue, ordered
from pumice.framework.session import Session


def enqueue_refusal(ssn: Session, plugin_name: str | None, job: JobInfo) -> str:
    """A sentence naming the gate that refused ``job`` and why."""
    for plugin in ssn.plugins:
        if plugin.name == plugin_name:
            explain = getattr(plugin, "explain_enqueue", None) or getattr(plugin, "explain", None)
            if explain is not None:
                return f"{plugin_name}: {explain(ssn, job)}"
    return f"{plugin_name or 'a plugin'} refused to admit the job"


class EnqueueAction:
    name = "enqueue"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_less)
        jobs_of: dict[str, PriorityQueue[JobInfo] | KeyedQueue[JobInfo]] = {}
        jkey = job_key(ssn)  # job order cannot change during enqueue
        seen: set[str] = set()
        # Only Pending jobs have anything to enqueue, and they are all active; a queue
        # without one would be popped and dropped, so it is not pushed at all.
        for job in ssn.active.values():
            if not job.is_pending():
                continue
            queue = ssn.queues[job.queue]
            if queue.name not in seen:
                seen.add(queue.name)
                queues.push(queue)
                jobs_of[queue.name] = ordered(ssn.job_less, jkey)
            jobs_of[queue.name].push(job)
        while not queues.empty():
            queue = queues.pop()
            jobs = jobs_of.get(queue.name)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            if not queue.is_open():
                admitted, refuser = False, None
                ssn.not_enqueued[job.uid] = f"queue {queue.name} is {queue.state}"
                queues.push(queue)
                continue
            if job.min_resources is None:
                admitted, refuser = True, None
            else:
                admitted, refuser = ssn.hooks.vote_detail("job_enqueueable", job)
            if admitted:
                ssn.hooks.each("job_enqueued", job)
                job.phase = INQUEUE
                ssn.not_enqueued.pop(job.uid, None)
            else:
                ssn.not_enqueued[job.uid] = enqueue_refusal(ssn, refuser, job)
            queues.push(queue)
