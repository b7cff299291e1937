"""Tests for the trace importers on small made-up samples of each trace format."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pumice.api.quantity import to_canonical
from pumice.errors import InputError
from pumice.sim.objects import job_objects
from pumice.sim.traces import QueueMapper, alibaba2020, alibaba2023, k8s_name, philly
from pumice.sim.workload import GPU

DATA = Path(__file__).parent.parent / "data" / "traces"
A20 = str(DATA / "alibaba2020")
A23 = str(DATA / "alibaba2023")
PHILLY = str(DATA / "philly")
GiB = 2**30


def by_name(w):
    return {j.name: j for j in w.jobs}


# ----------------------------------------------------------------- Alibaba 2020 (PAI)


def test_pai_maps_tasks_to_roles_and_units():
    """PAI tasks become roles: inst_num replicas, percent cpu/GPU, GiB memory."""
    jobs = by_name(alibaba2020.load(A20))
    big = jobs["c3d4e5f6a7b8c9d0e1f2a3b4"]
    assert [(t.name, t.replicas) for t in big.tasks] == [("ps", 2), ("worker", 8), ("evaluator", 1)]
    ps, worker, evaluator = big.tasks
    assert ps.requests == {"cpu": 12000.0, "memory": 64 * GiB}
    assert worker.requests == {"cpu": 4000.0, "memory": 16 * GiB, GPU: 2.0}
    assert evaluator.requests[GPU] == 1.0, "25% of a GPU rounds up to one GPU"
    assert big.min_available == 11
    first = jobs["a1b2c3d4e5f6a7b8c9d0e1f2"]
    assert first.tasks[0].requests == {"cpu": 6000.0, "memory": 30000 * 2**20, GPU: 1.0}
    assert jobs["e1f2a3b4c5d6e7f8a9b0c1d2"].tasks[0].requests == {"cpu": 500.0}
    assert jobs["c9d0e1f2a3b4c5d6e7f8a9b0"].tasks[0].name == "pytorchworker"


def test_pai_times_status_and_queues():
    """Arrival is relative to the first job; duration excludes PAI's own queueing."""
    w = alibaba2020.load(A20)
    jobs = by_name(w)
    first = jobs["a1b2c3d4e5f6a7b8c9d0e1f2"]
    assert (first.arrival, first.duration, first.outcome) == (0.0, 540.0, "succeed")
    failed = jobs["b2c3d4e5f6a7b8c9d0e1f2a3"]
    assert (failed.arrival, failed.duration, failed.outcome) == (200.0, 290.0, "fail")
    assert first.queue == "user-3f2a9c1b7e01" and first.namespace == first.queue
    assert {q.name for q in w.queues} == {j.queue for j in w.jobs}
    assert [j.arrival for j in w.jobs] == sorted(j.arrival for j in w.jobs)


def test_pai_bad_rows_are_skipped_and_counted():
    """Unfinished jobs, malformed rows and orphan tasks are counted with file:line messages."""
    w = alibaba2020.load(A20)
    assert len(w.jobs) == 5
    assert w.skipped == 10, "the task of a skipped (running) job is not counted again"
    assert len(w.warnings) == 10
    text = "\n".join(w.warnings)
    assert "pai_job_table.csv:4: job d4e5f6a7b8c9d0e1f2a3b4c5 is Running" in text
    assert "pai_job_table.csv:6: start_time is not a number" in text
    assert "pai_task_table.csv:8: inst_num is not a number" in text
    assert "pai_task_table.csv:11: task of unknown job" in text


def test_pai_limit_keeps_the_first_jobs():
    """limit keeps the earliest submissions, arrivals relative to the first kept."""
    w = alibaba2020.load(A20, limit=2)
    assert [j.name for j in w.jobs] == ["a1b2c3d4e5f6a7b8c9d0e1f2", "b2c3d4e5f6a7b8c9d0e1f2a3"]
    assert len(w.queues) == 2


def test_pai_hashes_many_users_into_few_queues():
    """With more users than max_queues, users share hashed queues."""
    w = alibaba2020.load(A20, max_queues=2)
    assert {j.queue for j in w.jobs} <= {"user-0", "user-1"}


def test_pai_accepts_a_header_row_and_a_file_path(tmp_path):
    """A table with a header row (columns in any order) and a file path both work."""
    shutil.copy(DATA / "alibaba2020" / "pai_task_table.csv", tmp_path)
    rows = (DATA / "alibaba2020" / "pai_job_table.csv").read_text().splitlines()
    reordered = ["user,job_name,status,start_time,end_time"]
    for row in rows:
        name, _, user, status, start, end = row.split(",")
        reordered.append(f"{user},{name},{status},{start},{end}")
    (tmp_path / "pai_job_table.csv").write_text("\n".join(reordered) + "\n")
    w = alibaba2020.load(str(tmp_path / "pai_job_table.csv"))
    assert w.jobs == alibaba2020.load(A20).jobs


def test_pai_missing_table(tmp_path):
    """A directory without the tables is an InputError."""
    with pytest.raises(InputError, match=r"pai_job_table\.csv"):
        alibaba2020.load(str(tmp_path))


# ----------------------------------------------------------------- Alibaba 2023 (openb)


def test_openb_pods_are_jobs_of_one():
    """Each pod is a job of one with its cpu, memory and (rounded-up) GPUs."""
    w = alibaba2023.load(A23)
    jobs = by_name(w)
    assert all(j.replicas == 1 and j.min_available == 1 for j in w.jobs)
    p17 = jobs["openb-pod-0017"]
    assert p17.tasks[0].requests == {"cpu": 88000.0, "memory": 320 * GiB, GPU: 8.0}
    assert p17.duration == 10769854 - 9437497
    assert jobs["openb-pod-0022"].tasks[0].requests[GPU] == 1.0, "220 milli-GPU -> one GPU"
    assert GPU not in jobs["openb-pod-0040"].tasks[0].requests


def test_openb_times_phase_and_qos():
    """Arrival from creation, duration from scheduling, Failed -> fail, qos -> priority."""
    w = alibaba2023.load(A23)
    jobs = by_name(w)
    assert w.jobs[0].name == "openb-pod-0048" and w.jobs[0].arrival == 0.0
    assert jobs["openb-pod-0040"].arrival == 9500000 - 9437000
    assert jobs["openb-pod-0040"].duration == 9503600 - 9500010
    assert jobs["openb-pod-0043"].duration == 9600300 - 9500300, "no scheduled_time"
    assert jobs["openb-pod-0041"].outcome == "fail"
    assert jobs["openb-pod-0035"].priority_class == "ls"
    assert jobs["openb-pod-0022"].priority_class == "be"
    assert jobs["openb-pod-0046"].priority_class is None
    assert w.priority_classes == {"ls": 1000, "burstable": 100, "be": 10}
    assert [q.name for q in w.queues] == ["default"]


def test_openb_bad_rows_counted():
    """Malformed or unfinished pods are skipped with their line numbers."""
    w = alibaba2023.load(A23)
    assert len(w.jobs) == 8 and w.skipped == 4
    text = "\n".join(w.warnings)
    for fragment in (
        "openb_pod_list_default.csv:7: cpu_milli is not a number",
        ":9: no deletion_time",
        ":10: deletion_time 9500400 is before",
        ":12: unknown pod_phase",
    ):
        assert fragment in text


def test_openb_limit_and_queue():
    """limit keeps the first pods by creation time; the queue is configurable."""
    w = alibaba2023.load(A23, limit=3, queue="openb")
    assert [j.name for j in w.jobs] == ["openb-pod-0048", "openb-pod-0017", "openb-pod-0040"]
    assert {j.queue for j in w.jobs} == {"openb"} and [q.name for q in w.queues] == ["openb"]


def test_openb_nodes():
    """The node list becomes Nodes with GPU counts and model labels."""
    nodes = alibaba2023.load_nodes(A23)
    assert [n["metadata"]["name"] for n in nodes][:2] == ["openb-node-0000", "openb-node-0022"]
    a = nodes[1]["status"]["allocatable"]
    assert to_canonical("cpu", a["cpu"]) == 128000 and a[GPU] == "8"
    assert to_canonical("memory", a["memory"]) == 786432 * 2**20
    assert nodes[1]["metadata"]["labels"]["nvidia.com/gpu.product"] == "G3"
    assert GPU not in nodes[-1]["status"]["allocatable"]
    assert "nvidia.com/gpu.product" not in nodes[-1]["metadata"]["labels"]


def test_openb_bad_node_row_raises_with_line():
    """A broken node row is an error naming the file and line, not a silent gap."""
    with pytest.raises(InputError, match=r"bad_nodes\.csv:3"):
        alibaba2023.load_nodes(str(DATA / "alibaba2023" / "bad_nodes.csv"))


# ----------------------------------------------------------------- Philly


def test_philly_gpus_split_into_pods():
    """GPUs of the last attempt become pods of at most 8 GPUs; the job is one gang."""
    jobs = by_name(philly.load(PHILLY))
    one = jobs["application-1506638472019-14199"]
    assert [(t.name, t.replicas, t.requests[GPU]) for t in one.tasks] == [("worker", 1, 8.0)]
    assert one.duration == 7200.0, "the last attempt's run time"
    sixteen = jobs["application-1506638472019-14201"]
    assert [(t.replicas, t.requests[GPU]) for t in sixteen.tasks] == [(2, 8.0)]
    assert sixteen.min_available == 2
    twelve = jobs["application-1506638472019-14202"]
    assert [(t.replicas, t.requests[GPU]) for t in twelve.tasks] == [(2, 6.0)]
    nine = jobs["application-1506638472019-14203"]
    assert [(t.name, t.replicas, t.requests[GPU]) for t in nine.tasks] == [
        ("worker", 1, 8.0),
        ("rest", 1, 1.0),
    ]
    assert nine.min_available == 2
    assert one.tasks[0].requests["cpu"] == 32000 and one.tasks[0].requests["memory"] == 256 * GiB


def test_philly_status_times_and_queues():
    """vc -> queue, submission -> arrival, Killed -> cancel, Failed -> fail."""
    w = philly.load(PHILLY)
    jobs = by_name(w)
    assert w.jobs[0].name == "application-1506638472019-14199" and w.jobs[0].arrival == 0.0
    killed = jobs["application-1506638472019-14200"]
    assert (killed.outcome, killed.arrival, killed.duration) == ("cancel", 201.0, 1800.0)
    assert jobs["application-1506638472019-14209"].outcome == "fail"
    assert killed.queue == "vc-ee9e8c" and killed.namespace == "vc-ee9e8c"
    assert [q.name for q in w.queues] == ["vc-6214e9", "vc-b436b2", "vc-ee9e8c"]


def test_philly_bad_jobs_counted():
    """Running, attempt-less, undated and unknown-status jobs are skipped and counted."""
    w = philly.load(PHILLY)
    assert len(w.jobs) == 7 and w.skipped == 5
    text = "\n".join(w.warnings)
    assert "job #5 (application_1506638472019_14204): the last attempt has no end_time" in text
    assert "no scheduling attempt" in text and "no submitted_time" in text
    assert "unknown status 'Running'" in text and "is not a time" in text


def test_philly_limit_and_options():
    """limit keeps the first submissions; per-GPU cpu/memory and pod size are options."""
    w = philly.load(PHILLY, limit=2, gpus_per_pod=4, cpu_per_gpu=2, memory_per_gpu=8)
    assert len(w.jobs) == 2
    t = w.jobs[0].tasks[0]
    assert (t.replicas, t.requests) == (2, {GPU: 4.0, "cpu": 8000.0, "memory": 32 * GiB})


def test_philly_not_a_json_array(tmp_path):
    """A job log that is not a JSON array is an InputError naming the file."""
    path = tmp_path / "cluster_job_log"
    path.write_text('{"jobid": 1}')
    with pytest.raises(InputError, match="JSON array") as err:
        philly.load(str(tmp_path))
    assert err.value.file == str(path)


# ----------------------------------------------------------------- shared behaviour


@pytest.mark.parametrize(
    ("load", "path"), [(alibaba2020.load, A20), (alibaba2023.load, A23), (philly.load, PHILLY)]
)
def test_importers_are_deterministic_and_render(load, path):
    """Loading twice gives equal workloads whose jobs render to valid objects."""
    a, b = load(path), load(path)
    assert a == b
    queues = {q.name for q in a.queues}
    for job in a.jobs:
        assert job.queue in queues
        assert job.priority_class is None or job.priority_class in a.priority_classes
        objs = job_objects(job)
        assert len(objs) == 1 + job.replicas
        assert all(len(o["metadata"]["name"]) <= 253 for o in objs)
    assert load(path, limit=0).jobs == ()


def test_k8s_name_and_queue_mapper():
    """Trace ids become DNS labels; few tenants get own queues, many are hashed stably."""
    assert k8s_name("application_1506638472019_14199") == "application-1506638472019-14199"
    assert k8s_name("__PyTorch Worker__") == "pytorch-worker"
    few = QueueMapper(["b", "a", "b"], max_queues=4, prefix="vc")
    assert few("a") == "vc-a" and [q.name for q in few.queues()] == ["vc-a", "vc-b"]
    many = QueueMapper([f"user{i}" for i in range(100)], max_queues=8, prefix="q")
    assert len(many.queues()) <= 8
    others = QueueMapper(["user7"] + [f"x{i}" for i in range(20)], max_queues=8, prefix="q")
    assert many("user7") == others("user7"), "a tenant's queue depends only on its name"
