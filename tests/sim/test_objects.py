"""A job of the PodGroup model made a Volcano Job: each task's template is the pod the
model would have created for that role, so the job controller makes the same pods."""

from __future__ import annotations

from pumice.sim.objects import job_objects, volcano_job
from pumice.sim.workload import GPU, JobSpec, TaskSpec

GiB = float(2**30)


def test_each_task_template_is_the_first_pod_of_its_role() -> None:
    job = JobSpec(
        name="train",
        namespace="ml",
        queue="research",
        arrival=5.0,
        duration=600.0,
        tasks=(
            TaskSpec("ps", 1, {"cpu": 2000.0, "memory": 4 * GiB}),
            TaskSpec("worker", 3, {"cpu": 8000.0, "memory": 32 * GiB, GPU: 1.0}, 2),
        ),
        min_available=3,
        priority_class="high",
        outcome="fail",
        end_fraction=0.5,
    )
    pods = job_objects(job, scheduler_name="volcano")[1:]
    made = volcano_job(job, scheduler_name="volcano")

    tasks = made["spec"]["tasks"]
    assert [(t["name"], t["replicas"], t.get("minAvailable")) for t in tasks] == [
        ("ps", 1, None),
        ("worker", 3, 2),
    ]
    assert tasks[0]["template"]["spec"] == pods[0]["spec"]
    assert tasks[1]["template"]["spec"] == pods[1]["spec"]
    worker = tasks[1]["template"]["spec"]["containers"][0]["resources"]
    assert worker["limits"] == {GPU: "1"}  # (an extended resource is a limit too)
    assert made["spec"]["priorityClassName"] == "high"
    assert made["spec"]["minAvailable"] == 3
