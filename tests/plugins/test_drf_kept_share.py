"""drf keeps the share of a running job from cycle to cycle (in the job's verdicts), and
the job order must still follow what each job holds now: a job that loses pods between
two cycles goes before one it used to follow. Driven through the scheduler cache, which
keeps the jobs (and their kept answers) across cycles."""

from __future__ import annotations

import yaml
from tests.kit import conf, node, pod, podgroup, queue

from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.conf.config import parse_config
from pumice.framework.session import Session
from pumice.scheduler import Scheduler


class _Orders:
    """A cycle observer that asks the session's job order before it closes."""

    def __init__(self, a: str, b: str) -> None:
        self.a, self.b = a, b
        self.a_first: bool | None = None

    def plugin_opened(self, plugin: str, seconds: float) -> None: ...
    def session_opened(self, seconds: float) -> None: ...
    def action_done(self, action: str, seconds: float) -> None: ...
    def plugin_closed(self, plugin: str, seconds: float) -> None: ...
    def cycle_done(self, seconds: float) -> None: ...

    def session_closing(self, ssn: Session) -> None:
        self.a_first = ssn.job_less(ssn.jobs[self.a], ssn.jobs[self.b])


def _a_first(scheduler: Scheduler, cache: SchedulerCache) -> bool:
    orders = _Orders("default/a", "default/b")
    cache.apply(scheduler.cycle(cache.snapshot(), orders))
    assert orders.a_first is not None
    return orders.a_first


def test_job_order_follows_running_jobs_shares_across_cycles() -> None:
    config = parse_config(yaml.safe_load(conf("enqueue, allocate", ["drf"])))
    scheduler = Scheduler.create(config)
    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1", cpu="16", memory="64Gi"),
            podgroup("a", phase="Running"),
            *(pod(f"a-{i}", cpu="2", group="a", node="n1", phase="Running") for i in range(4)),
            podgroup("b", phase="Running"),
            *(pod(f"b-{i}", cpu="2", group="b", node="n1", phase="Running") for i in range(2)),
        ]
    )
    cache = SchedulerCache(store)
    # a holds 8 cpu, b 4: drf puts b (the smaller share) first, cycle after cycle (the
    # jobs settle after the first cycles: their shares are then kept, not recomputed).
    assert [_a_first(scheduler, cache) for _ in range(4)] == [False] * 4
    # Three of a's pods end: a holds 2 cpu, b still 4, so a goes first now, and in the
    # cycles after, once a has settled again and its share comes from what was kept.
    for i in range(3):
        store.delete("Pod", f"default/a-{i}")
    assert [_a_first(scheduler, cache) for _ in range(4)] == [True] * 4
