"""A Job's PodGroup and pods as Volcano's controller makes them: name, minMember,
minTaskMember, minResources (Volcano's calcPGMinResources), queue, priority class,
owner, and the pods' names, annotations and labels."""

from __future__ import annotations

from decimal import Decimal

from tests.controllers.test_job_world import World, job_yaml
from tests.kit import priority_class

from pumice.api.parse import parse_podgroup
from pumice.controllers.job.pods import min_resources, quota_usage, render
from pumice.controllers.job.spec import parse_job

PS_WORKER = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: ml, labels: {team: a}, annotations: {note: x}}
spec:
  minAvailable: 3
  queue: research
  priorityClassName: high
  tasks:
    - name: ps
      replicas: 1
      template:
        spec:
          priorityClassName: high
          containers:
            - name: ps
              image: x
              resources:
                requests: {cpu: 500m, memory: 1Gi}
                limits: {cpu: "1", memory: 1Gi}
    - name: worker
      replicas: 4
      minAvailable: 2
      template:
        spec:
          containers:
            - name: w
              image: x
              resources:
                requests: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
"""


def test_podgroup_as_volcano_makes_it():
    w = World(queues=("default", "research"))
    w.cluster.create(priority_class("high", 1000))
    key = w.submit(job_yaml(PS_WORKER))
    job = w.job(key)
    pg = w.podgroup(key)
    assert pg["metadata"]["name"] == f"train-{job['metadata']['uid']}"
    assert pg["metadata"]["labels"] == {"team": "a"}
    assert pg["metadata"]["annotations"] == {"note": "x"}
    assert pg["metadata"]["ownerReferences"] == [{
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
        "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
    }]  # fmt: skip
    spec = pg["spec"]
    assert spec["minMember"] == 3
    assert spec["minTaskMember"] == {"ps": 1, "worker": 2}
    assert spec["queue"] == "research" and spec["priorityClassName"] == "high"
    # ps (priority 1000) first, then two workers: the gang's minimum
    assert spec["minResources"] == {
        "count/pods": "3", "pods": "3",
        "cpu": "4500m", "requests.cpu": "4500m", "limits.cpu": "1",
        "memory": "9Gi", "requests.memory": "9Gi", "limits.memory": "1Gi",
        "nvidia.com/gpu": "2", "requests.nvidia.com/gpu": "2",
    }  # fmt: skip
    assert w.status(key)["minAvailable"] == 3


def test_pods_as_volcano_makes_them():
    w = World(queues=("default", "research"))
    key = w.submit(job_yaml(PS_WORKER))
    w.admit(key)
    assert w.pod_names(key) == ["train-ps-0"] + [f"train-worker-{i}" for i in range(4)]
    pod = w.store.get("Pod", "ml/train-worker-2")
    uid = w.job(key)["metadata"]["uid"]
    assert pod["metadata"]["annotations"] == {
        "volcano.sh/task-index": "2",
        "volcano.sh/task-spec": "worker",
        "scheduling.k8s.io/group-name": f"train-{uid}",
        "volcano.sh/job-name": "train",
        "volcano.sh/queue-name": "research",
        "volcano.sh/job-version": "0",
        "volcano.sh/template-uid": "train-worker",
        "volcano.sh/job-retry-count": "0",
    }
    assert pod["metadata"]["labels"] == {
        "volcano.sh/task-index": "2",
        "volcano.sh/job-name": "train",
        "volcano.sh/task-spec": "worker",
        "volcano.sh/job-namespace": "ml",
        "volcano.sh/queue-name": "research",
    }
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["spec"]["priorityClassName"] == "high"  # the job's, the template names none
    assert pod["metadata"]["ownerReferences"][0]["uid"] == uid


def test_no_pods_before_the_podgroup_is_admitted():
    w = World()
    key = w.submit(job_yaml(PS_WORKER.replace("queue: research", "queue: default")))
    w.admit(key, "Pending")
    assert w.pods(key) == []
    w.admit(key, "Inqueue")
    assert len(w.pods(key)) == 5


def _spec(text: str):
    obj = job_yaml(text)
    obj["metadata"]["uid"] = "u"
    return parse_job(obj)


def test_min_resources_when_the_job_minimum_is_below_the_tasks_minimums():
    """minAvailable below the sum of the tasks' minimums: the first minAvailable pods
    in priority order (here the ps and one worker)."""
    spec = _spec(PS_WORKER.replace("minAvailable: 3", "minAvailable: 2"))
    got = min_resources(spec, {"high": 1000}.get)
    assert got["cpu"] == "2500m" and got["pods"] == "2"


def test_min_resources_fill_up_with_spare_replicas():
    """minAvailable above the sum of the tasks' minimums: each task's minimum, then
    more pods of tasks with replicas to spare."""
    spec = _spec(PS_WORKER.replace("minAvailable: 3", "minAvailable: 4"))
    got = min_resources(spec, lambda name: 0)
    assert got["pods"] == "4" and got["cpu"] == "6500m" and got["nvidia.com/gpu"] == "3"


def test_quota_usage_counts_init_containers_and_overhead():
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "1", "hugepages-2Mi": "4Mi"}}},
                       {"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
        "overhead": {"cpu": "100m"},
    }  # fmt: skip
    got = {k: render(k, v) for k, v in quota_usage(spec).items()}
    assert got["cpu"] == "3100m"
    assert got["hugepages-2Mi"] == got["requests.hugepages-2Mi"] == "4Mi"
    assert render("memory", Decimal(1536 * 2**20)) == "1536Mi"
    assert render("cpu", Decimal("0.25")) == "250m"


def test_defaults_as_volcanos_webhook_fills_them():
    spec = _spec("""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: d}
spec:
  plugins: {pytorch: []}
  tasks:
    - {replicas: 2, template: {spec: {containers: [{name: c}]}}}
    - {replicas: 3, minAvailable: 1, template: {spec: {containers: [{name: c}]}}}
""")
    assert [t.name for t in spec.tasks] == ["default0", "default1"]
    assert spec.min_available == 3 and spec.max_retry == 3 and spec.queue == "default"
    assert spec.scheduler_name == "volcano" and "svc" in spec.plugins
    assert [t.max_retry for t in spec.tasks] == [3, 3]


def test_jobs_alike_but_for_requests_or_priority_each_get_their_own_min_resources():
    """The controller reuses the minResources of a gang it has seen, so Jobs that
    differ only in a request, or in which task's pods go first, must not share one."""
    w = World(queues=("default", "research"))
    w.cluster.create(priority_class("high", 1000))

    def variant(name: str, text: str) -> str:
        job = job_yaml(text)
        job["metadata"]["name"] = name
        return w.submit(job)

    first = variant("first", PS_WORKER)
    bigger = variant("bigger", PS_WORKER.replace("requests: {cpu: 500m", "requests: {cpu: 1500m"))
    again = variant("again", PS_WORKER)
    # a gang of two: ps (priority 1000) and one worker; then the workers put first
    two = PS_WORKER.replace("minAvailable: 3", "minAvailable: 2")
    ps_first = variant("ps-first", two)
    workers_first = variant(
        "workers-first",
        two.replace("          priorityClassName: high\n", "").replace(
            "          containers:\n            - name: w",
            "          priorityClassName: high\n          containers:\n            - name: w",
        ),
    )
    got = {
        k: (m["cpu"], m.get("nvidia.com/gpu"))
        for k in (first, bigger, again, ps_first, workers_first)
        for m in [w.podgroup(k)["spec"]["minResources"]]
    }
    assert got == {
        first: ("4500m", "2"),
        bigger: ("5500m", "2"),
        again: ("4500m", "2"),
        ps_first: ("2500m", "1"),
        workers_first: ("4", "2"),
    }


def test_a_podgroup_of_terabytes_is_read_by_the_scheduler():
    """A gang of 32 pods of 384Gi gets minResources ``requests.memory: 12289Gi``. The
    scheduler reads that quota-style key in bytes, like ``memory`` (read in millis, it
    was refused as too large, which stopped the built-in demo at its first such gang)."""
    text = PS_WORKER.replace("queue: research", "queue: default")
    text = text.replace("memory: 4Gi", "memory: 384Gi").replace("replicas: 4", "replicas: 32")
    text = text.replace("minAvailable: 3", "minAvailable: 33")
    text = text.replace("minAvailable: 2", "minAvailable: 32")
    w = World(nodes=1)
    key = w.submit(job_yaml(text))
    pg = w.podgroup(key)
    assert pg["spec"]["minResources"]["requests.memory"] == "12289Gi"
    record = parse_podgroup(pg)
    assert record.min_quota["requests.memory"] == 12289 * 2**30
    w.schedule()  # the cycle reads it too, and leaves the gang waiting for room
    assert w.podgroup(key)["status"]["phase"] == "Pending"


def test_a_podgroup_known_unchanged_since_made_is_what_the_job_says():
    """The controller notes the PodGroup it just made as needing no patch (without
    building it again on the next reconcile): that holds, a fresh comparison finds
    nothing to change; and a change of its spec by someone else is still undone."""
    from pumice.controllers.job.pods import podgroup_changes

    w = World(queues=("default", "research"))
    w.cluster.create(priority_class("high", 1000))
    key = w.submit(job_yaml(PS_WORKER))
    pg = w.podgroup(key)
    assert pg is not None
    job = w.job(key)
    assert job is not None
    spec = parse_job(job, default_queue="default", default_scheduler="volcano")

    def priority(name: str) -> int:
        return 1000 if name == "high" else 0

    assert podgroup_changes(pg, spec, priority) == {}
    pg_key = f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"
    w.store.patch("PodGroup", pg_key, {"spec": {"minMember": 1, "minTaskMember": {"ps": 0}}})
    w.step()
    pg = w.podgroup(key)
    assert pg is not None
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"ps": 1, "worker": 2}
    assert podgroup_changes(pg, spec, priority) == {}
