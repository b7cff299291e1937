"""An explanation said when read is the one the cycle would have written at once.

overcommit hands over the figures of a refusal instead of its sentence (see
``pumice.framework.said``); the sentence is made when a caller reads it, after the
cycle, when later admissions of the same cycle have moved the figures on. Random
backlogs (some jobs admitted, some refused, in several queues and configurations) are
decided with the sentences said later and with them said at the refusal: every
pending job's explanation must read the same.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import run
from tests.properties.test_enqueue_shortcut import CONFIGS, backlogs

from pumice.plugins.overcommit import OvercommitPlugin


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(backlogs(), st.sampled_from(sorted(CONFIGS)))
def test_a_refusal_said_later_reads_as_said_at_once(objs: list[dict], name: str) -> None:
    later = run(objs, CONFIGS[name]).to_json(sessions=False)

    def at_once_said(self, ssn, job, head=""):
        return head + self.explain(ssn, job)

    with mock.patch.object(OvercommitPlugin, "explain_later", new=at_once_said):
        at_once = run(objs, CONFIGS[name]).to_json(sessions=False)
    assert later == at_once
