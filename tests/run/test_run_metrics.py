"""SchedulerMetrics after real cycles: Volcano's names, labels and buckets, the values a
small snapshot gives, and pumice's own counters. No assertion reads a duration."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from pumice.cache.build import build_snapshot
from pumice.cache.load import load_objects
from pumice.run.metrics import SchedulerMetrics, exponential_buckets_range
from pumice.scheduler import Scheduler

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
GANG = SCENARIOS / "volcano" / "allocate" / "gang-two-jobs-one-fits"  # a bind, a pending job
GPU = SCENARIOS / "kubectl" / "dump-with-noise"  # GPUs, Volcano's default configuration
PREEMPT = SCENARIOS / "preempt" / "best-effort-evicts-only-best-effort"
CAPACITY = SCENARIOS / "capacity" / "allocatable-within-capability"
FULL = ROOT / "data" / "full-actions.yaml"

CREATED = 1704067200.0  # creation time of the pods and podgroups of GANG


def run_cycle(
    metrics: SchedulerMetrics,
    scenario: Path,
    config: Path | None = None,
    *,
    now: float | None = None,
):
    if config is None and (scenario / "config.yaml").exists():
        config = scenario / "config.yaml"
    sched = Scheduler.from_file(str(config) if config is not None else None)
    snapshot = build_snapshot(load_objects([str(scenario / "snapshot.yaml")]))
    record = metrics.observer()
    decisions = sched.cycle(snapshot, record)
    metrics.observe_cycle(decisions, record, snapshot_seconds=0.001, now=now)
    return sched, decisions, record


def samples(metrics: SchedulerMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)], parsed back from the text exposition (under
    the names the text gives them: the parser would append ``_total`` to the samples of
    a counter named without it)."""
    text = metrics.exposition().decode()
    written = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name = s.name if s.name in written else s.name.removesuffix("_total")
            out.setdefault(name, []).append((s.labels, s.value))
    return out


def types(metrics: SchedulerMetrics) -> dict[str, str]:
    """Family name -> type, as the ``# TYPE`` lines of the exposition say."""
    out = {}
    for line in metrics.exposition().decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            out[name] = kind
    return out


def value(got: dict, name: str, **labels: str) -> float:
    matches = [v for lab, v in got.get(name, []) if lab == labels]
    assert len(matches) == 1, (name, labels, got.get(name))
    return matches[0]


def label_values(got: dict, name: str, label: str) -> set[str]:
    return {lab[label] for lab, _ in got.get(name, []) if label in lab}


@pytest.fixture
def metrics() -> SchedulerMetrics:
    return SchedulerMetrics(clock=lambda: CREATED + 5.0, process_metrics=False)


VOLCANO_NAMES = [
    "volcano_e2e_scheduling_latency_milliseconds_count",
    "volcano_open_session_duration_milliseconds_count",
    "volcano_e2e_job_scheduling_latency_milliseconds_count",
    "volcano_e2e_job_scheduling_duration",
    "volcano_e2e_job_scheduling_start_time",
    "volcano_e2e_job_scheduling_last_time",
    "volcano_action_scheduling_latency_milliseconds_count",
    "volcano_plugin_scheduling_latency_milliseconds_count",
    "volcano_task_scheduling_latency_milliseconds_count",
    "volcano_schedule_attempts_total",
    "volcano_pod_preemption_victims",
    "volcano_total_preemption_attempts",
    "volcano_unschedule_task_count",
    "volcano_unschedule_job_count",
    "volcano_queue_allocated_milli_cpu",
    "volcano_queue_allocated_memory_bytes",
    "volcano_queue_request_milli_cpu",
    "volcano_queue_request_memory_bytes",
    "volcano_queue_deserved_milli_cpu",
    "volcano_queue_deserved_memory_bytes",
    "volcano_queue_real_capacity_milli_cpu",
    "volcano_queue_inqueue_milli_cpu",
    "volcano_queue_share",
    "volcano_queue_weight",
    "volcano_queue_overused",
    "volcano_queue_pod_group_inqueue_count",
    "volcano_queue_pod_group_pending_count",
    "volcano_queue_pod_group_running_count",
    "volcano_queue_pod_group_unknown_count",
    "volcano_queue_pod_group_completed_count",
]


def test_volcano_names_and_values_after_a_cycle_with_a_bind_and_a_pending_job(
    metrics: SchedulerMetrics,
) -> None:
    _, decisions, record = run_cycle(metrics, GANG)
    assert decisions.binds and decisions.pending
    assert record.facts is not None and record.facts.source == "proportion"
    got = samples(metrics)
    missing = [n for n in VOLCANO_NAMES if n not in got]
    assert not missing

    q = {"queue_name": "q1"}
    assert value(got, "volcano_queue_allocated_milli_cpu", **q) == 2000.0  # the two binds
    assert value(got, "volcano_queue_request_milli_cpu", **q) == 8000.0
    assert value(got, "volcano_queue_deserved_milli_cpu", **q) == 4000.0  # the one 4-cpu node
    assert value(got, "volcano_queue_share", **q) == 0.5
    assert value(got, "volcano_queue_weight", **q) == 1.0
    assert value(got, "volcano_queue_overused", **q) == 0.0
    assert value(got, "volcano_queue_pod_group_inqueue_count", **q) == 2.0
    assert value(got, "volcano_queue_pod_group_running_count", **q) == 0.0
    assert "volcano_queue_capacity_milli_cpu" not in got  # no capability: unlimited

    # pg1's gang of 3 got nothing; pg2 was placed.
    assert value(got, "volcano_unschedule_task_count", job_id="c1/pg1") == 3.0
    assert value(got, "volcano_unschedule_job_count") == 1.0
    assert value(got, "volcano_schedule_attempts_total", result="unschedulable") == 3.0
    assert value(got, "pumice_pending_jobs") == 1.0
    job = {"job_name": "pg2", "queue": "q1", "job_namespace": "c1"}
    assert value(got, "volcano_e2e_job_scheduling_duration", **job) == 5000.0
    assert value(got, "volcano_e2e_job_scheduling_start_time", **job) == CREATED
    assert value(got, "volcano_e2e_job_scheduling_last_time", **job) == CREATED + 5.0
    assert value(got, "volcano_e2e_job_scheduling_latency_milliseconds_count") == 1.0
    assert value(got, "volcano_task_scheduling_latency_milliseconds_count", stage="Assumed") == 2
    assert value(got, "volcano_e2e_scheduling_latency_milliseconds_count") == 1.0
    assert value(got, "volcano_pod_preemption_victims") == 0.0
    assert value(got, "volcano_total_preemption_attempts") == 0.0


def test_action_and_plugin_labels_are_the_configuration(metrics: SchedulerMetrics) -> None:
    sched, _, _ = run_cycle(metrics, GANG, FULL)
    got = samples(metrics)
    plugins = {opt.name for tier in sched.config.tiers for opt in tier.plugins}
    name = "volcano_action_scheduling_latency_milliseconds_count"
    assert label_values(got, name, "action") == set(sched.config.actions)
    name = "volcano_plugin_scheduling_latency_milliseconds_count"
    assert label_values(got, name, "plugin") == plugins
    assert label_values(got, name, "OnSession") == {"OnSessionOpen", "OnSessionClose"}
    for plugin in plugins:
        for phase in ("OnSessionOpen", "OnSessionClose"):
            assert value(got, name, plugin=plugin, OnSession=phase) == 1.0


def test_buckets_are_volcanos() -> None:
    assert exponential_buckets_range(1, 5000, 20)[0] == 1.0
    assert exponential_buckets_range(1, 5000, 20)[-1] == pytest.approx(5000.0)
    assert len(exponential_buckets_range(100, 120000, 30)) == 30
    m = SchedulerMetrics(process_metrics=False)
    m.e2e.observe(3.0)
    m.action_latency.labels("allocate").observe(3.0)
    got = samples(m)
    les = [lab["le"] for lab, _ in got["volcano_e2e_scheduling_latency_milliseconds_bucket"]]
    assert len(les) == 21 and les[0] == "1.0" and les[-1] == "+Inf"
    les = [
        float(lab["le"]) for lab, _ in got["volcano_action_scheduling_latency_milliseconds_bucket"]
    ]
    assert les[:-1] == pytest.approx(exponential_buckets_range(1, 2000, 20))


def test_scalar_resources_in_milli_units(metrics: SchedulerMetrics) -> None:
    _, decisions, _ = run_cycle(metrics, GPU)
    assert len(decisions.binds) == 2  # two pods of 2 GPUs each
    got = samples(metrics)
    name = "volcano_queue_allocated_scalar_resources"
    assert value(got, name, queue_name="default", resource="nvidia.com/gpu") == 4000.0
    assert "pods" not in label_values(got, name, "resource")


def test_preemption_counted_from_the_audit(metrics: SchedulerMetrics) -> None:
    _, decisions, _ = run_cycle(metrics, PREEMPT)
    assert decisions.evictions == ["default/low-be"]
    got = samples(metrics)
    assert value(got, "volcano_pod_preemption_victims") == 1.0
    assert value(got, "volcano_total_preemption_attempts") == 1.0
    assert value(got, "volcano_eviction_transactions_total", action="preempt") == 1.0
    assert value(got, "pumice_evictions_total", action="preempt") == 1.0


def test_capacity_plugin_gives_the_queue_figures(metrics: SchedulerMetrics) -> None:
    _, _, record = run_cycle(metrics, CAPACITY)
    assert record.facts is not None and record.facts.source == "capacity"
    got = samples(metrics)
    queues = label_values(got, "volcano_queue_deserved_milli_cpu", "queue_name")
    assert queues and label_values(got, "volcano_queue_share", "queue_name") == queues
    for lab, v in got["volcano_queue_overused"]:  # Volcano's capacity rule: share above 1
        share = value(got, "volcano_queue_share", **lab)
        assert v == (1.0 if share > 1 else 0.0)


def test_without_a_queue_plugin_the_snapshot_sums_are_reported(
    metrics: SchedulerMetrics, tmp_path: Path
) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n")
    _, decisions, record = run_cycle(metrics, GANG, conf)
    assert record.facts is not None and record.facts.source == "snapshot"
    got = samples(metrics)
    # (the sums the cycle began with: nothing was allocated yet)
    assert value(got, "volcano_queue_allocated_milli_cpu", queue_name="q1") == 0.0
    assert value(got, "volcano_queue_request_milli_cpu", queue_name="q1") == 8000.0
    assert "volcano_queue_share" not in got
    assert "volcano_queue_overused" not in got  # no plugin says
    assert decisions.binds


def test_gone_queues_and_jobs_leave_the_exposition(metrics: SchedulerMetrics) -> None:
    run_cycle(metrics, GANG)
    got = samples(metrics)
    assert label_values(got, "volcano_queue_weight", "queue_name") == {"q1"}
    assert label_values(got, "volcano_e2e_job_scheduling_duration", "job_name") == {"pg2"}
    run_cycle(metrics, GPU)  # another cluster: q1 and c1/pg2 are gone
    got = samples(metrics)
    assert label_values(got, "volcano_queue_weight", "queue_name") == {"default"}
    jobs = label_values(got, "volcano_e2e_job_scheduling_duration", "job_name")
    assert "pg2" not in jobs and jobs
    assert "c1/pg1" not in label_values(got, "volcano_unschedule_task_count", "job_id")


def test_binds_counted_when_the_api_answers(metrics: SchedulerMetrics) -> None:
    _, decisions, _ = run_cycle(metrics, GANG)
    (first, node), (second, _) = sorted(decisions.binds.items())
    metrics.bound(first, node, seconds=0.002)
    metrics.bind_failed(second, node, "conflict", seconds=0.003)
    got = samples(metrics)
    assert value(got, "volcano_schedule_attempts_total", result="scheduled") == 1.0
    assert value(got, "volcano_schedule_attempts_total", result="error") == 1.0
    assert value(got, "pumice_bind_failures_total", reason="conflict") == 1.0
    assert value(got, "pumice_api_writes_total", kind="bind", result="success") == 1.0
    assert value(got, "pumice_api_writes_total", kind="bind", result="conflict") == 1.0
    bound = value(got, "volcano_task_scheduling_latency_milliseconds_count", stage="Bound")
    assert bound == 1.0
    assert value(got, "volcano_scheduling_stage_duration_milliseconds_count", stage="Bind") == 2


def test_pumice_counters(metrics: SchedulerMetrics) -> None:
    in_flight = [3]
    metrics.follow_binds_in_flight(lambda: in_flight[0])
    metrics.observe_relist("Pod")
    metrics.observe_watch_event("Pod", "ADDED")
    metrics.observe_watch_events("Node", {"MODIFIED": 4, "DELETED": 0, "ADDED": -2})
    metrics.observe_api_write("podgroup_status")
    metrics.observe_api_write("evict", "error", count=2)
    metrics.observe_relist("Node", count=0)
    metrics.config_reload(True)
    metrics.config_reload(False)
    metrics.set_leader(True)
    metrics.observe_pod_watched(CREATED)
    got = samples(metrics)
    assert value(got, "pumice_binds_in_flight") == 3.0
    in_flight[0] = 0
    assert value(samples(metrics), "pumice_binds_in_flight") == 0.0
    assert value(got, "pumice_informer_relists_total", kind="Pod") == 1.0
    assert value(got, "pumice_watch_events_total", kind="Pod", type="ADDED") == 1.0
    assert value(got, "pumice_watch_events_total", kind="Node", type="MODIFIED") == 4.0
    seen = {(lab["kind"], lab["type"]) for lab, _ in got["pumice_watch_events_total"]}
    assert ("Node", "DELETED") not in seen and ("Node", "ADDED") not in seen
    assert value(got, "pumice_api_writes_total", kind="podgroup_status", result="success") == 1
    assert value(got, "pumice_api_writes_total", kind="evict", result="error") == 2
    assert label_values(got, "pumice_informer_relists_total", "kind") == {"Pod"}
    assert value(got, "pumice_config_reloads_total", result="success") == 1.0
    assert value(got, "pumice_config_reloads_total", result="error") == 1.0
    assert value(got, "pumice_leader") == 1.0
    metrics.set_leader(False)
    assert value(samples(metrics), "pumice_leader") == 0.0
    watched = value(got, "volcano_task_scheduling_latency_milliseconds_count", stage="Watched")
    assert watched == 1.0


def test_cycle_done_is_observe_cycle_with_the_loop_time(metrics: SchedulerMetrics) -> None:
    sched = Scheduler.from_file(str(GANG / "config.yaml"))
    snapshot = build_snapshot(load_objects([str(GANG / "snapshot.yaml")]))
    record = metrics.observer()
    decisions = sched.cycle(snapshot, record)
    metrics.cycle_done(decisions, record, snapshot, 0.25)
    got = samples(metrics)
    assert value(got, "pumice_loop_duration_seconds_count") == 1.0
    assert value(got, "volcano_e2e_scheduling_latency_milliseconds_count") == 1.0


def test_a_registry_of_its_own() -> None:
    a = SchedulerMetrics(process_metrics=False)
    b = SchedulerMetrics()  # a second one in the same process: no duplicate names
    assert a.registry is not b.registry
    assert not any(m.name.startswith("volcano_") for m in REGISTRY.collect())
    names = {m.name for m in b.registry.collect()}
    assert "process_cpu_seconds" in names
    assert not any(n.startswith("process_") for n in (m.name for m in a.registry.collect()))


@pytest.mark.parametrize(("limit", "kept"), [(1, {"pg1"}), (None, {"pg1", "pg2"})])
def test_per_job_series_are_capped(limit: int | None, kept: set[str]) -> None:
    metrics = SchedulerMetrics(
        clock=lambda: CREATED + 5.0, process_metrics=False, job_series_limit=limit
    )
    _, decisions, record = run_cycle(metrics, GANG)  # pg2 placed
    assert record.facts is not None
    later = replace(record.facts, placed_jobs={"c1/pg1": ("pg1", "c1", "q1", CREATED)})
    metrics.observe_cycle(decisions, replace(record, facts=later), now=CREATED + 9.0)
    got = samples(metrics)
    assert label_values(got, "volcano_e2e_job_scheduling_duration", "job_name") == kept
    assert value(got, "volcano_e2e_job_scheduling_latency_milliseconds_count") == 2.0


DRF = """actions: allocate
tiers:
- plugins:
  - name: gang
- plugins:
  - name: drf
  - name: proportion
  - name: predicates
"""


def test_job_share_is_drfs_dominant_share_per_job(
    metrics: SchedulerMetrics, tmp_path: Path
) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(DRF)
    run_cycle(metrics, GANG, conf)
    got = samples(metrics)
    assert types(metrics)["volcano_job_share"] == "gauge"
    # pg2's two 1-cpu pods on the one 4-cpu node; pg1 got nothing
    assert value(got, "volcano_job_share", job_ns="c1", job_id="pg2") == 0.5
    assert value(got, "volcano_job_share", job_ns="c1", job_id="pg1") == 0.0
    run_cycle(metrics, GPU)  # another cluster: c1's jobs are gone
    assert not {"pg1", "pg2"} & label_values(samples(metrics), "volcano_job_share", "job_id")


def test_no_job_share_without_drf(metrics: SchedulerMetrics) -> None:
    run_cycle(metrics, GANG)  # gang, proportion, predicates
    assert "volcano_job_share" not in samples(metrics)


def test_job_retry_counts_one_per_cycle_that_left_the_job_unschedulable(
    metrics: SchedulerMetrics,
) -> None:
    run_cycle(metrics, GANG)
    got = samples(metrics)
    assert value(got, "volcano_job_retry_counts", job_id="c1/pg1") == 1.0
    assert label_values(got, "volcano_job_retry_counts", "job_id") == {"c1/pg1"}  # pg2 placed
    run_cycle(metrics, GANG)
    assert value(samples(metrics), "volcano_job_retry_counts", job_id="c1/pg1") == 2.0
    run_cycle(metrics, GPU)  # c1/pg1 is gone
    assert "c1/pg1" not in label_values(samples(metrics), "volcano_job_retry_counts", "job_id")


def test_volcanos_counters_keep_their_exact_names(metrics: SchedulerMetrics) -> None:
    run_cycle(metrics, PREEMPT)
    run_cycle(metrics, GANG)
    text = metrics.exposition().decode()
    kinds = types(metrics)
    for name in ("volcano_total_preemption_attempts", "volcano_job_retry_counts"):
        assert kinds[name] == "counter"
        assert f"# HELP {name} " in text
        assert f"{name}_total" not in text
    assert "volcano_total_preemption_attempts 1.0" in text.splitlines()
    assert 'volcano_job_retry_counts{job_id="c1/pg1"} 1.0' in text.splitlines()
    assert kinds["volcano_schedule_attempts_total"] == "counter"  # named with _total already
    # and the families are still valid for a Prometheus parser
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert families["volcano_total_preemption_attempts"] == "counter"
