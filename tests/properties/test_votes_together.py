"""A plugin that votes on many jobs at once says what it says of each one alone.

A backlog of parked jobs is voted on together (``job_enqueueable``'s ``refuses``
facet: rows of minResources in, which ones it rejects out; see
``pumice.actions.enqueue._refuse_all``): on random backlogs over partly full nodes and
several overcommit factors, every job's answer in the batch must be the rejection its
one-by-one vote gives, including jobs that fit exactly.
"""

from __future__ import annotations

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf
from tests.properties.test_enqueue_shortcut import CONFIGS, backlogs

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.scheduler import Scheduler

EXACT = conf(
    "enqueue, allocate",
    ["priority", "gang"],
    [{"name": "overcommit", "arguments": {"overcommit-factor": 1.0}}, "proportion"],
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(backlogs(), st.sampled_from([*sorted(CONFIGS), "exact"]))
def test_votes_together_match_votes_one_by_one(objs: list[dict], name: str) -> None:
    text = EXACT if name == "exact" else CONFIGS[name]
    sched = Scheduler.create(parse_config(yaml.safe_load(text)))
    ssn = sched.open(build_snapshot([SourcedObject(o, "test") for o in objs]))
    jobs = [j for j in ssn.jobs.values() if j.min_resources is not None]
    voted = 0
    for _tier in ssn.hooks.chain("job_enqueueable"):
        for _plugin, fn in _tier:
            refuses = ssn.hooks.facet("job_enqueueable", fn, "refuses")
            if refuses is None or not jobs:
                continue
            together = refuses(np.vstack([j.min_resources for j in jobs])).tolist()
            alone = [fn(j) < 0 for j in jobs]
            assert together == alone
            voted += 1
    assert voted == 1 or not jobs  # (overcommit, in every configuration)
