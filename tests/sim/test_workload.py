"""Tests for the workload data model, its Kubernetes objects and the workload file loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pumice.api.quantity import render_quantity, to_canonical
from pumice.errors import InputError
from pumice.sim.fields import parse_seconds
from pumice.sim.loader import load_workload
from pumice.sim.objects import (
    job_objects,
    min_resources,
    priority_class_objects,
    queue_objects,
    to_compact,
    workload_objects,
)
from pumice.sim.workload import GPU, JobSpec, QueueSpec, TaskSpec, Workload
from pumice.sim.workload_fields import parse_end_fraction

DATA = Path(__file__).parent.parent / "data" / "workloads"
GiB = 2**30


def write(tmp_path: Path, text: str, name: str = "w.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def compact(jobs: str, queues: str = "[{name: q}]") -> str:
    return f"kind: Workload\nqueues: {queues}\njobs:\n{jobs}"


# ----------------------------------------------------------------- loading the sample files


def test_mixed_directory_loads_both_forms_sorted_by_arrival():
    """A directory mixing compact YAML, manifests and JSON gives one sorted workload."""
    w = load_workload([str(DATA / "mixed")])
    assert [j.name for j in w.jobs] == ["notebook", "bert-large", "tf-dist", "resnet"]
    assert [j.arrival for j in w.jobs] == [10.0, 30.0, 300.0, 5400.0]
    assert {q.name for q in w.queues} == {"research", "prod", "default"}
    assert w.priority_classes == {"high": 1000, "low": 10}
    assert w.skipped == 1 and "Node stray-node" in w.warnings[0]


def test_compact_job_fields_in_canonical_units():
    """The compact job keeps its queue, priority, gang size and requests in canonical units."""
    w = load_workload([str(DATA / "mixed")])
    bert = next(j for j in w.jobs if j.name == "bert-large")
    assert bert == JobSpec(
        name="bert-large",
        namespace="default",
        queue="research",
        arrival=30.0,
        duration=7200.0,
        tasks=(TaskSpec("worker", 8, {"cpu": 8000.0, "memory": 64 * GiB, GPU: 1.0}),),
        min_available=8,
        priority_class="high",
    )
    resnet = next(j for j in w.jobs if j.name == "resnet")
    assert resnet.tasks == (TaskSpec("task", 1, {"cpu": 1500.0, "memory": 12 * GiB, GPU: 1.0}),)
    assert (resnet.outcome, resnet.end_fraction, resnet.min_available) == ("fail", 0.25, 1)
    research = next(q for q in w.queues if q.name == "research")
    assert research == QueueSpec("research", weight=3, capability={GPU: 64.0})
    prod = next(q for q in w.queues if q.name == "prod")
    assert prod.guarantee == {GPU: 16.0} and prod.reclaimable is False


def test_manifest_podgroup_groups_pods_into_roles():
    """Pods of a PodGroup become roles by task-spec, with limits standing in for requests."""
    w = load_workload([str(DATA / "mixed")])
    tf = next(j for j in w.jobs if j.name == "tf-dist")
    assert tf.namespace == "team-a" and tf.queue == "research" and tf.priority_class == "low"
    assert (tf.arrival, tf.duration, tf.min_available) == (300.0, 3600.0, 3)
    assert tf.tasks == (
        TaskSpec("ps", 1, {"cpu": 4000.0, "memory": 16 * GiB}, min_available=1),
        TaskSpec("worker", 2, {"cpu": 8000.0, "memory": 32 * GiB, GPU: 2.0}),
    )


def test_pod_without_podgroup_is_a_job_of_one():
    """A lone pod is a job named after it, in the queue its annotation names."""
    w = load_workload([str(DATA / "mixed")])
    nb = w.jobs[0]
    assert (nb.name, nb.namespace, nb.queue, nb.min_available) == (
        "notebook",
        "team-b",
        "research",
        1,
    )
    assert (nb.duration, nb.outcome, nb.end_fraction) == (8 * 3600.0, "cancel", 0.5)


# ----------------------------------------------------------------- objects


def test_job_objects_podgroup_and_pods():
    """job_objects renders a PodGroup and one pod per replica, named job-task-i."""
    job = JobSpec(
        name="j1",
        namespace="ns",
        queue="q",
        arrival=12.5,
        duration=600.0,
        tasks=(
            TaskSpec("ps", 1, {"cpu": 1500.0, "memory": 4 * GiB}, min_available=1),
            TaskSpec("worker", 3, {"cpu": 4000.0, "memory": 16 * GiB, GPU: 2.0}),
        ),
        min_available=3,
        priority_class="high",
    )
    objs = job_objects(job, scheduler_name="pumice", priority_classes={"high": 7})
    pg, pods = objs[0], objs[1:]
    assert pg["kind"] == "PodGroup" and pg["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert pg["spec"] == {
        "minMember": 3,
        "queue": "q",
        "minResources": {"cpu": "9500m", "memory": "36Gi", GPU: "4"},
        "minTaskMember": {"ps": 1},
        "priorityClassName": "high",
    }
    assert pg["status"]["phase"] == "Pending"
    assert pg["metadata"]["annotations"] == {
        "pumice.sim/arrival": "12.5",
        "pumice.sim/duration": "600",
    }
    assert [p["metadata"]["name"] for p in pods] == [
        "j1-ps-0",
        "j1-worker-0",
        "j1-worker-1",
        "j1-worker-2",
    ]
    w1 = pods[2]
    ann = w1["metadata"]["annotations"]
    assert ann["scheduling.k8s.io/group-name"] == "j1"
    assert ann["volcano.sh/task-spec"] == "worker"
    assert ann["pumice.sim/duration"] == "600" and ann["pumice.sim/arrival"] == "12.5"
    assert w1["spec"]["schedulerName"] == "pumice"
    assert w1["spec"]["priority"] == 7 and w1["spec"]["priorityClassName"] == "high"
    res = w1["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"cpu": "4000m", "memory": "16Gi", GPU: "2"}
    assert res["limits"] == {GPU: "2"}
    assert w1["status"]["phase"] == "Pending"


def test_min_resources_take_the_first_pods_in_role_order():
    """minResources sums the first min_available pods, roles in order."""
    job = JobSpec(
        "j",
        "ns",
        "q",
        0.0,
        1.0,
        (TaskSpec("a", 2, {"cpu": 100.0}), TaskSpec("b", 5, {"cpu": 1000.0, GPU: 1.0})),
        min_available=4,
    )
    assert min_resources(job) == {"cpu": 2200.0, GPU: 2.0}


def test_objects_written_out_load_back_equal(tmp_path):
    """A workload written as manifests and read back is the same workload."""
    w = load_workload([str(DATA / "mixed")])
    text = yaml.safe_dump_all(workload_objects(w))
    back = load_workload([write(tmp_path, text)])
    assert back.jobs == w.jobs
    assert sorted(back.queues, key=lambda q: q.name) == sorted(w.queues, key=lambda q: q.name)
    assert back.priority_classes == w.priority_classes


def test_compact_round_trip(tmp_path):
    """to_compact writes a document that loads back to the same jobs and queues."""
    w = load_workload([str(DATA / "mixed")])
    back = load_workload([write(tmp_path, yaml.safe_dump(to_compact(w)))])
    assert back.jobs == w.jobs and back.queues == w.queues


def test_queue_and_priority_class_objects():
    """Queues render Volcano's fields (guarantee under resource) and state Open."""
    q = QueueSpec(
        "r",
        weight=2,
        capability={GPU: 8.0},
        guarantee={"cpu": 2000.0},
        deserved={"memory": 2 * GiB},
        reclaimable=False,
        parent="root",
    )
    (obj,) = queue_objects([q])
    assert obj["kind"] == "Queue" and obj["status"] == {"state": "Open"}
    assert obj["spec"] == {
        "weight": 2,
        "reclaimable": False,
        "capability": {GPU: "8"},
        "guarantee": {"resource": {"cpu": "2000m"}},
        "deserved": {"memory": "2Gi"},
        "parent": "root",
    }
    (pc,) = priority_class_objects({"high": 1000})
    assert pc["kind"] == "PriorityClass" and pc["value"] == 1000


@pytest.mark.parametrize(
    ("name", "amount", "text"),
    [
        ("cpu", 1500.0, "1500m"),
        ("cpu", 2000.0, "2000m"),
        ("cpu", 0.4, "1m"),
        ("memory", 64 * GiB, "64Gi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 1000.0, "1000"),
        (GPU, 3.0, "3"),
    ],
)
def test_render_quantity(name, amount, text):
    """Quantities render as Kubernetes strings that parse back (rounded up below the unit)."""
    assert render_quantity(name, amount) == text
    assert to_canonical(name, text) >= amount


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(90, 90.0), ("12.5", 12.5), ("30s", 30.0), ("5m", 300.0), ("1h30m", 5400.0), ("2d", 172800.0)],
)
def test_parse_seconds(value, seconds):
    """Arrival and duration accept seconds or Go-style durations."""
    assert parse_seconds(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        *("-5", "1x", "h", True, None, "nan", "inf", "1e400s"),
        pytest.param(10**400, id="400-digits"),
        pytest.param(-(10**400), id="-400-digits"),
    ],
)
def test_parse_seconds_rejects(value):
    """Nonsense, negative and endless time spans are refused, naming the field (an int
    beyond any float too, not an overflow out of the parser)."""
    with pytest.raises(InputError, match="arrival"):
        parse_seconds(value, field="arrival")


# ----------------------------------------------------------------- validation


def test_negative_replicas_names_file_job_and_field():
    """A negative replica count is refused with the file, job and field in the message."""
    with pytest.raises(InputError) as err:
        load_workload([str(DATA / "bad" / "negative_replicas.yaml")])
    e = err.value
    assert e.file and e.file.endswith("negative_replicas.yaml")
    assert e.obj == "Workload job broken"
    assert e.field == "jobs[0].tasks[0].replicas"
    assert "must be >= 1" in str(e) and "jobs[0].tasks[0].replicas" in str(e)


@pytest.mark.parametrize(
    ("job", "field", "message"),
    [
        (
            "- {name: a, queue: q, duration: 1, replicas: 1, colour: red}",
            "jobs[0].colour",
            "unknown",
        ),
        ("- {name: a, queue: q, duration: 1}", "jobs[0].replicas", "missing replicas"),
        (
            "- {name: a, queue: q, duration: 1, tasks: [{name: w}]}",
            "jobs[0].tasks[0].replicas",
            "missing",
        ),
        (
            "- {name: a, queue: q, duration: 1, replicas: 2, minAvailable: 3}",
            "jobs[0].minAvailable",
            "greater than",
        ),
        ("- {name: a, queue: q, replicas: 1}", "jobs[0].duration", "missing duration"),
        (
            "- {name: a, queue: q, duration: 1, replicas: 1, requests: {cpu: lots}}",
            "jobs[0].requests.cpu",
            "invalid quantity",
        ),
        ("- {name: a, queue: nope, duration: 1, replicas: 1}", "jobs[0].queue", "not declared"),
        (
            "- {name: a, queue: q, duration: 1, replicas: 1, priorityClass: vip}",
            "jobs[0].priorityClass",
            "not declared",
        ),
        ("- {name: A_b, queue: q, duration: 1, replicas: 1}", "jobs[0].name", "invalid job name"),
        (
            "- {name: a, queue: q, duration: 1, replicas: 1, outcome: win}",
            "jobs[0].outcome",
            "succeed",
        ),
        (
            "- {name: a, queue: q, duration: 1, replicas: 1, endFraction: 0.5}",
            "jobs[0].endFraction",
            "ends early",
        ),
    ],
)
def test_compact_validation(tmp_path, job, field, message):
    """Each kind of mistake in the compact form is refused, naming the field."""
    with pytest.raises(InputError) as err:
        load_workload([write(tmp_path, compact(job))])
    assert err.value.field == field
    assert message in str(err.value)
    assert err.value.file and err.value.file.endswith("w.yaml")


def test_duplicate_job_names_across_files(tmp_path):
    """The same namespace/name declared twice is refused, pointing at both files."""
    a = write(tmp_path, compact("- {name: a, queue: q, duration: 1, replicas: 1}"), "a.yaml")
    b = write(
        tmp_path, "kind: Workload\njobs:\n- {name: a, queue: q, duration: 2, replicas: 1}", "b.yaml"
    )
    with pytest.raises(InputError) as err:
        load_workload([a, b])
    assert "duplicate job default/a" in str(err.value) and "a.yaml" in str(err.value)
    assert err.value.file == b


def test_unknown_queue_accepted_when_known(tmp_path):
    """A queue the caller says exists needs no declaration."""
    path = write(tmp_path, compact("- {name: a, queue: team, duration: 1, replicas: 1}"))
    with pytest.raises(InputError, match="queue 'team' is not declared"):
        load_workload([path])
    w = load_workload([path], known_queues=["team"])
    assert w.jobs[0].queue == "team" and [q.name for q in w.queues] == ["q"]


def test_default_queue_exists_as_on_every_volcano_cluster(tmp_path):
    """A job in queue default (or naming no queue) runs without a file declaring the
    queue: the workload gets Volcano's default queue, weight 1 and reclaimable."""
    path = write(tmp_path, "kind: Workload\njobs:\n- {name: a, duration: 1, replicas: 1}")
    w = load_workload([path])
    assert w.jobs[0].queue == "default"
    assert w.queues == (QueueSpec(name="default", weight=1, reclaimable=True),)
    queue = queue_objects(w.queues)[0]
    assert queue["metadata"]["name"] == "default"
    assert queue["spec"] == {"weight": 1, "reclaimable": True}


def test_default_queue_as_declared_wins(tmp_path):
    """A file that declares queue default keeps its own weight and limits."""
    path = write(
        tmp_path,
        compact(
            "- {name: a, duration: 1, replicas: 1}",
            queues="[{name: default, weight: 3, reclaimable: false}]",
        ),
    )
    w = load_workload([path])
    assert w.queues == (QueueSpec(name="default", weight=3, reclaimable=False),)


def test_default_queue_not_added_when_no_job_uses_it(tmp_path):
    """Queues declared and used are all a workload gets: an added default queue would
    be a queue more for proportion to weigh."""
    path = write(tmp_path, compact("- {name: a, queue: q, duration: 1, replicas: 1}"))
    assert [q.name for q in load_workload([path]).queues] == ["q"]


def test_volcano_job_in_default_queue_needs_no_queue_file(tmp_path):
    """A Volcano Job as written for a cluster (queue default) loads as it is."""
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "annotations": {"pumice.sim/duration": "60"}},
        "spec": {
            "minAvailable": 1,
            "queue": "default",
            "tasks": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                }
            ],
        },
    }
    w = load_workload([write(tmp_path, yaml.safe_dump(job))])
    assert w.jobs[0].queue == "default"
    assert [q.name for q in w.queues] == ["default"]


def test_pod_names_missing_podgroup(tmp_path):
    """A pod naming a PodGroup that no file declares is refused."""
    text = """
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations: {scheduling.k8s.io/group-name: ghost, pumice.sim/duration: "1"}
spec: {containers: [{name: c, image: i}]}
"""
    with pytest.raises(InputError, match="PodGroup ghost") as err:
        load_workload([write(tmp_path, text)], known_queues=["default"])
    assert err.value.obj == "Pod default/p"


def test_podgroup_min_member_above_pods(tmp_path):
    """minMember larger than the job's pod count is refused naming spec.minMember."""
    text = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: g, annotations: {pumice.sim/duration: 1m}}
spec: {minMember: 3}
---
apiVersion: v1
kind: Pod
metadata: {name: p, annotations: {scheduling.k8s.io/group-name: g}}
spec: {containers: [{name: c, image: i}]}
"""
    with pytest.raises(InputError) as err:
        load_workload([write(tmp_path, text)], known_queues=["default"])
    assert err.value.field == "spec.minMember" and err.value.obj == "PodGroup default/g"


def test_pods_of_one_task_must_share_a_shape(tmp_path):
    """Two pods of one role asking for different resources are refused."""
    pod = """
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, annotations: {{scheduling.k8s.io/group-name: g}}}}
spec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: {cpu}}}}}}}]}}
"""
    text = (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: g, annotations: {pumice.sim/duration: '60'}}\nspec: {minMember: 2}"
        + pod.format(name="p1", cpu=1)
        + pod.format(name="p2", cpu=2)
    )
    with pytest.raises(InputError, match="task-spec"):
        load_workload([write(tmp_path, text)], known_queues=["default"])


def test_podgroup_without_duration(tmp_path):
    """A job without a duration annotation cannot be simulated and is refused."""
    text = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: i}]}
"""
    with pytest.raises(InputError, match=r"pumice\.sim/duration"):
        load_workload([write(tmp_path, text)], known_queues=["default"])


def test_invalid_yaml_names_the_line(tmp_path):
    """A YAML syntax error names the file and line."""
    path = write(tmp_path, "kind: Workload\njobs: [\n  - a: b\n  c")
    with pytest.raises(InputError, match="line") as err:
        load_workload([path])
    assert err.value.file == path


def test_missing_path():
    """A path that does not exist is an InputError, not a traceback."""
    with pytest.raises(InputError, match="no such file"):
        load_workload(["/nonexistent/workload.yaml"])


def test_workload_equality_is_by_value():
    """Workloads compare by value, which the determinism tests rely on."""
    job = JobSpec("a", "ns", "q", 0.0, 1.0, (TaskSpec("t", 1, {"cpu": 1.0}),), 1)
    w1 = Workload((job,), (QueueSpec("q"),), {})
    w2 = Workload(
        (JobSpec("a", "ns", "q", 0.0, 1.0, (TaskSpec("t", 1, {"cpu": 1.0}),), 1),),
        (QueueSpec("q"),),
        {},
    )
    assert w1 == w2
    assert job.replicas == 1 and job.total("cpu") == 1.0


# ----------------------------------------------------------------- properties

names = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
requests = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.integers(1, 256_000).map(float),
        "memory": st.integers(1, 2**40).map(float),
        GPU: st.integers(1, 8).map(float),
    },
)


@st.composite
def jobs(draw) -> JobSpec:
    task_names = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    tasks = tuple(
        TaskSpec(
            n,
            (r := draw(st.integers(1, 5))),
            draw(requests),
            draw(st.none() | st.integers(1, r)),
        )
        for n in task_names
    )
    total = sum(t.replicas for t in tasks)
    outcome = draw(st.sampled_from(["succeed", "fail", "cancel"]))
    return JobSpec(
        name=draw(names),
        namespace=draw(st.sampled_from(["default", "team-a"])),
        queue="q",
        arrival=draw(st.integers(0, 10**6)) / 8,
        duration=draw(st.integers(0, 10**7)) / 4,
        tasks=tasks,
        min_available=draw(st.integers(1, total)),
        priority_class=draw(st.none() | st.just("high")),
        outcome=outcome,
        end_fraction=1.0 if outcome == "succeed" else draw(st.integers(1, 100)) / 100,
    )


@settings(max_examples=40, deadline=None)
@given(job=jobs(), form=st.sampled_from(["objects", "compact"]))
def test_any_job_round_trips(tmp_path_factory, job, form):
    """Any job written as objects or in the compact form reads back equal."""
    w = Workload((job,), (QueueSpec("q"),), {"high": 5})
    if form == "objects":
        text = yaml.safe_dump_all(workload_objects(w))
    else:
        text = yaml.safe_dump(to_compact(w))
    path = tmp_path_factory.mktemp("rt") / "w.yaml"
    path.write_text(text)
    assert load_workload(str(path)).jobs == (job,)


def test_task_role_from_label(tmp_path):
    """Pods name their role by annotation or, as Volcano also does, by label."""
    pod = """
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{volcano.sh/task-spec: {role}}}
  annotations: {{scheduling.k8s.io/group-name: g}}
spec: {{containers: [{{name: c, image: i}}]}}
"""
    text = (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: g, annotations: {pumice.sim/duration: '60'}}\nspec: {minMember: 2}"
        + pod.format(name="a", role="ps")
        + pod.format(name="b", role="worker")
    )
    (job,) = load_workload([write(tmp_path, text)], known_queues=["default"]).jobs
    assert [t.name for t in job.tasks] == ["ps", "worker"]


@pytest.mark.parametrize("value", [0, 1.5, "x", pytest.param(10**400, id="400-digits"), True])
def test_end_fraction_outside_0_to_1_is_refused(value):
    """A failed job's end fraction must be in (0, 1]; an int beyond any float is refused
    the same way, naming the field."""
    with pytest.raises(InputError, match="expected a number in"):
        parse_end_fraction(value, "fail", field="jobs[0].endAt")
