"""The plots' time axis covers the hours in which something happens."""

from __future__ import annotations

import pytest

from pumice.sim.engine import SimResult
from pumice.sim.metrics import Metrics
from pumice.sim.report_plots import active_hours, plot_report
from pumice.sim.summary_text import HOUR
from pumice.sim.workload import GPU, QueueSpec, Workload


def quiet_tail() -> SimResult:
    """Busy for 5 hours, then one small job holds 0.5% of the cluster for 95 more."""
    m = Metrics({"cpu": 1000.0, GPU: 8.0}, [QueueSpec("a")])
    for k in range(101):
        busy = k < 5
        m.series.time.append(k * HOUR)
        m.series.utilization.append([0.5, 0.5] if busy else [0.005, 0.0])
        m.series.queue_share.append([0.5 if busy else 0.005])
        m.series.queue_deserved.append([0.5 if busy else 0.005])
        m.series.pending.append(1 if k < 2 else 0)
        m.series.running.append(1)
    return SimResult(m, {}, 0, 100 * HOUR, Workload(jobs=(), queues=()))


def test_the_time_axis_leaves_out_a_quiet_tail(tmp_path):
    lo, hi = active_hours([quiet_tail()])
    assert lo == 0.0
    assert hi == pytest.approx(5.0 * 1.02, abs=0.01)  # to the end of the last busy sample
    paths = plot_report([quiet_tail()], tmp_path)
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths.values())


def test_a_run_where_nothing_happens_keeps_every_sample():
    r = quiet_tail()
    s = r.metrics.series
    s.utilization = [[0.0, 0.0] for _ in s.time]
    s.pending = [0 for _ in s.time]
    assert active_hours([r]) is None


def test_a_subset_of_the_plots_is_drawn_as_in_the_full_set(tmp_path):
    """Each plot is drawn on its own: drawing some of them (as a forked child does)
    writes only those, with the bytes of the full set's."""
    every = plot_report([quiet_tail()], tmp_path / "all")
    some = plot_report([quiet_tail()], tmp_path / "some", ["pending", "queue_share"])
    assert list(some) == ["pending", "queue_share"]
    assert sorted(p.name for p in (tmp_path / "some").iterdir()) == [
        "pending.png",
        "queue_share.png",
    ]
    assert all(some[n].read_bytes() == every[n].read_bytes() for n in some)
