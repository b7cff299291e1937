"""The Job controller's lifecycle over the in-memory store: a job runs to Completed,
restarts by policy until maxRetry, completes on TaskCompleted, is suspended and resumed
by Commands, is deleted with its pods and PodGroup, and goes after its TTL."""

from __future__ import annotations

import copy

from tests.controllers.test_job_world import World, job_yaml, manifest

TWO_TASKS = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: tf, namespace: team-a}
spec:
  minAvailable: 3
  queue: default
  tasks:
    - name: ps
      replicas: 1
      template:
        spec:
          containers: [{name: ps, image: tf, resources: {requests: {cpu: "1", memory: 1Gi}}}]
    - name: worker
      replicas: 2
      template:
        spec:
          containers: [{name: w, image: tf, resources: {requests: {cpu: "2", memory: 2Gi}}}]
"""

RESTARTING = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: flaky}
spec:
  maxRetry: 3
  policies:
    - {event: PodFailed, action: RestartJob}
  tasks:
    - name: w
      replicas: 2
      template:
        spec:
          containers: [{name: w, image: x, resources: {requests: {cpu: "1"}}}]
"""


def test_two_task_job_runs_to_completed_with_pumices_scheduler():
    """A two-task Job: PodGroup first, pods once pumice's scheduler admits it, bound by
    the same scheduler; Running when minAvailable pods run, Completed when all
    succeed, with the counts per task along the way."""
    w = World()
    key = w.submit(job_yaml(TWO_TASKS))
    assert w.phase(key) == "Pending"
    assert w.podgroup(key) is not None and w.pods(key) == []
    w.schedule()  # enqueue admits, the controller creates the pods
    assert w.pod_names(key) == ["tf-ps-0", "tf-worker-0", "tf-worker-1"]
    w.schedule()  # allocate binds them
    assert all(p["spec"].get("nodeName") for p in w.pods(key))
    w.run_all(key)
    s = w.status(key)
    assert s["state"]["phase"] == "Running" and s["running"] == 3
    assert s["taskStatusCount"] == {
        "ps": {"phase": {"Running": 1}},
        "worker": {"phase": {"Running": 2}},
    }
    w.finish_all(key, "worker")
    assert w.phase(key) == "Running"
    w.finish_all(key, "ps")
    s = w.status(key)
    assert s["state"]["phase"] == "Completed" and s["succeeded"] == 3
    assert [c["status"] for c in s["conditions"]] == ["Pending", "Running", "Completed"]
    # as in Volcano, a finished job's next reconcile kills what is left: the PodGroup
    assert w.podgroup(key) is None and len(w.pods(key)) == 3


def test_pod_failure_under_restart_job_retries_until_max_retry_then_failed():
    """PodFailed -> RestartJob: every pod goes, the version goes up, the job is made
    again (new PodGroup, pods of the new version once admitted); the third failure
    with maxRetry 3 leaves it Failed, keeping the failed pod to look at."""
    w = World()
    key = w.submit(job_yaml(RESTARTING))
    for attempt in range(1, 4):
        w.admit(key)
        w.run_all(key)
        assert w.phase(key) == "Running"
        version = w.status(key).get("version", 0)
        assert {p["metadata"]["annotations"]["volcano.sh/job-version"] for p in w.pods(key)} == {
            str(version)
        }
        w.set_phase("default/flaky-w-0", "Failed", exit_code=1)
        s = w.status(key)
        assert s["retryCount"] == attempt
        if attempt < 3:
            assert s["state"]["phase"] == "Pending"
            assert w.pods(key) == [] and w.podgroup(key)["status"]["phase"] == "Pending"
            assert s["version"] > version
    s = w.status(key)
    assert s["state"]["phase"] == "Failed"
    # one condition per phase, the latest of each
    assert [c["status"] for c in s["conditions"]] == ["Pending", "Running", "Restarting", "Failed"]
    # the last retry keeps what finished (the failed pod), kills what ran
    assert w.pod_names(key) == ["flaky-w-0"]
    assert w.podgroup(key) is None


def test_no_policy_failed_pod_stays_and_the_job_fails_by_the_completion_rule():
    """Without policies a failed pod is not replaced; when all pods are done and fewer
    than minAvailable succeeded, the job is Failed."""
    w = World()
    job = job_yaml(RESTARTING)
    del job["spec"]["policies"]
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    w.set_phase("default/flaky-w-0", "Failed", exit_code=1)
    assert w.phase(key) == "Running" and w.status(key)["failed"] == 1
    assert len(w.pods(key)) == 2
    w.set_phase("default/flaky-w-1", "Succeeded", exit_code=0)
    assert w.phase(key) == "Failed"


def test_evicted_pod_without_policy_is_created_again():
    """A pod deleted by someone else (no policy): made again under the same name; the
    job is Pending while more pods wait than minAvailable leaves room for (Volcano's
    rule), Running again once the new pod runs."""
    w = World()
    job = job_yaml(RESTARTING)
    del job["spec"]["policies"]
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    old = w.store.get("Pod", "default/flaky-w-1")["metadata"]["uid"]
    w.store.delete("Pod", "default/flaky-w-1")
    w.step()
    new = w.store.get("Pod", "default/flaky-w-1")
    assert new is not None and new["metadata"]["uid"] != old
    assert w.phase(key) == "Pending" and w.status(key).get("retryCount", 0) == 0
    w.set_phase("default/flaky-w-1", "Running")
    assert w.phase(key) == "Running"


def test_evicted_pod_under_restart_job_policy_restarts_the_job():
    """Volcano's example job: PodEvicted -> RestartJob."""
    w = World()
    key = w.submit(manifest("nginx-job"))
    w.admit(key)
    w.run_all(key)
    w.store.delete("Pod", "default/test-job-default-nginx-3")
    w.step()
    s = w.status(key)
    assert s["retryCount"] == 1 and s["state"]["phase"] == "Pending"
    assert w.pods(key) == []
    # the controller's own deletions are not evictions: one restart, not six
    w.admit(key)
    assert w.status(key)["retryCount"] == 1
    assert len(w.pods(key)) == 6


def test_task_completed_completes_the_mpi_job():
    """Volcano's MPI example: the master's TaskCompleted -> CompleteJob, while the
    workers still run (they are killed, the master kept)."""
    w = World()
    key = w.submit(manifest("mpi-example"))
    w.admit(key)
    w.run_all(key)
    w.finish_all(key, "mpimaster")
    s = w.status(key)
    assert s["state"]["phase"] == "Completed"
    assert [c["status"] for c in s["conditions"]][-2:] == ["Completing", "Completed"]
    assert w.pod_names(key) == ["lm-mpi-job-mpimaster-0"]
    assert w.podgroup(key) is None
    assert any(e["message"] == "Start to execute action CompleteJob" for e in w.events(key))


def test_suspend_and_resume_by_commands():
    """AbortJob (vcctl suspend) kills the running pods and leaves the job Aborted;
    ResumeJob (vcctl resume) brings it back through Restarting to Pending and new
    pods. Commands are consumed and leave an Event."""
    w = World()
    key = w.submit(job_yaml(TWO_TASKS))
    w.admit(key)
    w.run_all(key)
    w.command(key, "AbortJob")
    assert w.phase(key) == "Aborted"
    assert w.pods(key) == [] and w.podgroup(key) is None
    assert w.store.list("Command") == []
    assert any(e["reason"] == "CommandIssued" for e in w.events(key))
    w.command(key, "ResumeJob")
    s = w.status(key)
    assert s["state"]["phase"] == "Pending" and s["retryCount"] == 1
    assert [c["status"] for c in s["conditions"]][-4:] == [
        "Aborting", "Aborted", "Restarting", "Pending",
    ]  # fmt: skip
    w.admit(key)
    w.run_all(key)
    assert w.phase(key) == "Running" and len(w.pods(key)) == 3


def test_command_for_an_earlier_job_of_the_same_name_is_ignored():
    """A Command whose target uid is another Job's is consumed without effect."""
    w = World()
    key = w.submit(job_yaml(TWO_TASKS))
    w.admit(key)
    w.store.create(
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": "old", "namespace": "team-a"},
            "action": "AbortJob",
            "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "tf",
                       "uid": "uid-of-an-older-tf"},
        }
    )  # fmt: skip
    w.step()
    assert w.store.list("Command") == [] and w.phase(key) == "Pending"
    assert len(w.pods(key)) == 3


def test_terminate_job_command():
    w = World()
    key = w.submit(job_yaml(TWO_TASKS))
    w.admit(key)
    w.run_all(key)
    w.command(key, "TerminateJob")
    assert w.phase(key) == "Terminated" and w.pods(key) == []


def test_deleting_a_job_removes_its_pods_podgroup_and_plugin_objects():
    w = World()
    key = w.submit(manifest("mpi-example"))
    w.admit(key)
    assert w.pods(key) and w.store.list("Service") and w.store.list("Secret")
    w.store.delete("Job", key)
    w.step()
    assert w.pods(key) == []
    assert w.store.list("PodGroup") == []
    assert w.store.list("Service") == w.store.list("ConfigMap") == w.store.list("Secret") == []


def test_ttl_deletes_the_job_that_long_after_it_finished():
    """ttlSecondsAfterFinished: the Job stays until then, and goes (with its pods)
    when the store's clock gets there."""
    w = World()
    job = job_yaml(TWO_TASKS)
    job["spec"]["ttlSecondsAfterFinished"] = 100
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    w.finish_all(key)
    assert w.phase(key) == "Completed"
    w.advance(60)
    assert w.job(key) is not None
    w.until_due()
    assert w.job(key) is None and w.pods(key) == []


def test_exit_code_policy_and_task_policies_win_over_job_policies():
    """A task's policy on an exit code is asked before the job's; another exit code
    falls through to the job's policies."""
    w = World()
    job = job_yaml(RESTARTING)
    job["spec"]["policies"] = [{"event": "PodFailed", "action": "AbortJob"}]
    job["spec"]["tasks"][0]["policies"] = [{"exitCode": 137, "action": "RestartJob"}]
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    w.set_phase("default/flaky-w-0", "Failed", exit_code=137)
    assert w.status(key)["retryCount"] == 1 and w.phase(key) == "Pending"
    w.admit(key)
    w.run_all(key)
    w.set_phase("default/flaky-w-1", "Failed", exit_code=2)
    assert w.phase(key) == "Aborted"


def test_restart_pod_replaces_only_the_failed_pod():
    """RestartPod: the failed pod is deleted and made again, the others keep running,
    the PodGroup stays; the retry is counted (Volcano's current controller)."""
    w = World()
    job = job_yaml(RESTARTING)
    job["spec"]["policies"] = [{"event": "PodFailed", "action": "RestartPod"}]
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    keep = w.store.get("Pod", "default/flaky-w-1")["metadata"]["uid"]
    pg = w.podgroup(key)["metadata"]["uid"]
    w.set_phase("default/flaky-w-0", "Failed", exit_code=1)
    assert w.store.get("Pod", "default/flaky-w-1")["metadata"]["uid"] == keep
    assert w.store.get("Pod", "default/flaky-w-0")["status"]["phase"] == "Pending"
    assert w.podgroup(key)["metadata"]["uid"] == pg
    assert w.status(key)["retryCount"] == 1
    w.set_phase("default/flaky-w-0", "Running")
    assert w.phase(key) == "Running"


def test_restart_task_replaces_the_pods_of_that_task():
    w = World()
    job = job_yaml(TWO_TASKS)
    job["spec"]["tasks"][1]["policies"] = [{"event": "PodFailed", "action": "RestartTask"}]
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    ps = w.store.get("Pod", "team-a/tf-ps-0")["metadata"]["uid"]
    before = {p["metadata"]["uid"] for p in w.pods(key)}
    w.set_phase("team-a/tf-worker-1", "Failed", exit_code=1)
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in w.pods(key)}
    assert after["tf-ps-0"] == ps
    assert after["tf-worker-0"] not in before and after["tf-worker-1"] not in before


def test_a_policy_timeout_waits_on_the_store_clock():
    """PodFailed -> RestartJob after 30s: nothing at once, the restart when the
    requeue falls due on the store's clock."""
    w = World()
    job = job_yaml(RESTARTING)
    job["spec"]["policies"] = [{"event": "PodFailed", "action": "RestartJob", "timeout": "30s"}]
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    w.set_phase("default/flaky-w-0", "Failed", exit_code=1)
    assert w.phase(key) == "Running" and w.mgr.next_due() == w.t + 30
    w.advance(10)
    assert w.phase(key) == "Running"
    w.until_due()
    assert w.status(key)["retryCount"] == 1


def test_pod_pending_timeout_acts_only_while_the_pod_stays_pending():
    """PodPending with a timeout: a pod that starts in time cancels it; one that stays
    Pending triggers the action."""
    w = World()
    job = job_yaml(RESTARTING)
    job["spec"]["policies"] = [{"event": "PodPending", "action": "AbortJob", "timeout": "1m"}]
    key = w.submit(job)
    w.admit(key)
    w.set_phase("default/flaky-w-0", "Running")
    w.advance(30)
    w.set_phase("default/flaky-w-1", "Running")
    w.advance(60)
    assert w.phase(key) == "Running"
    job2 = copy.deepcopy(job)
    job2["metadata"]["name"] = "stuck"
    key2 = w.submit(job2)
    w.admit(key2)
    w.advance(59)
    assert w.phase(key2) == "Pending"
    w.until_due()
    assert w.phase(key2) == "Aborted"


def test_task_failed_when_containers_restart_max_retry_times():
    """TaskFailed: the task's live pods restarted their containers maxRetry (3) times."""
    w = World()
    job = job_yaml(RESTARTING)
    job["spec"]["policies"] = [{"event": "TaskFailed", "action": "TerminateJob"}]
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    w.set_phase("default/flaky-w-0", "Running", restarts=2)
    assert w.phase(key) == "Running"
    w.set_phase("default/flaky-w-1", "Running", restarts=1)
    assert w.phase(key) == "Terminated"


def test_min_success_completes_early():
    w = World()
    job = job_yaml(RESTARTING)
    del job["spec"]["policies"]
    job["spec"]["minSuccess"] = 1
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)
    w.set_phase("default/flaky-w-0", "Succeeded", exit_code=0)
    assert w.phase(key) == "Completed"


def test_scaling_a_job_up_and_down():
    """Replicas changed in the spec: pods made or deleted, the PodGroup follows."""
    w = World()
    job = job_yaml(TWO_TASKS)
    job["spec"]["minAvailable"] = 2
    key = w.submit(job)
    w.admit(key)
    w.run_all(key)

    def scaled(n: int) -> list:
        return [job["spec"]["tasks"][0], {**job["spec"]["tasks"][1], "replicas": n}]

    w.store.patch("Job", key, {"spec": {"tasks": scaled(4)}})
    w.step()
    assert w.pod_names(key)[-1] == "tf-worker-3"
    assert w.podgroup(key)["spec"]["minTaskMember"]["worker"] == 4
    w.store.patch("Job", key, {"spec": {"tasks": scaled(1)}})
    w.step()
    assert w.pod_names(key) == ["tf-ps-0", "tf-worker-0"]


def test_a_quiet_job_writes_nothing_more():
    """Level-based and idempotent: another reconcile of a settled job writes nothing."""
    w = World()
    key = w.submit(job_yaml(TWO_TASKS))
    w.admit(key)
    w.run_all(key)
    watch = w.cluster.watch(["Job", "Pod", "PodGroup", "Event"])
    assert w.ctl.reconcile(key) is None
    assert watch.drain() == []


def test_a_job_made_again_under_the_same_name_ignores_the_old_ones_pods():
    """Pods of an earlier Job of the same name (not yet collected) are neither counted
    nor taken for evictions of the new one when they go."""
    w = World()
    job = job_yaml(RESTARTING)
    job["spec"]["policies"] = [{"event": "PodEvicted", "action": "RestartJob"}]
    key = w.submit(copy.deepcopy(job))
    w.admit(key)
    old_pods = [copy.deepcopy(p) for p in w.pods(key)]
    w.store.delete("Job", key, cascade=False)  # the garbage collector has not run yet
    w.step()
    key = w.submit(copy.deepcopy(job))
    assert w.status(key).get("pending", 0) == 0
    for p in old_pods:
        w.store.delete("Pod", f"default/{p['metadata']['name']}")
    w.step()
    w.admit(key)
    assert w.status(key).get("retryCount", 0) == 0 and len(w.pods(key)) == 2


def test_graceful_eviction_restarts_once_and_the_scheduler_places_the_new_run():
    """An eviction as the scheduler makes one (terminating, then gone after its grace
    period): counted as terminating, PodEvicted -> RestartJob once it is gone; the new
    run's PodGroup is admitted and its pods bound by pumice's scheduler."""
    w = World()
    key = w.submit(manifest("nginx-job"))
    w.schedule(2)
    assert all(p["spec"].get("nodeName") for p in w.pods(key)) and len(w.pods(key)) == 6
    w.run_all(key)
    assert w.cluster.evict("default/test-job-default-nginx-2", "preempted")
    w.step()
    assert w.status(key)["terminating"] == 1 and w.phase(key) == "Running"
    w.store.delete("Pod", "default/test-job-default-nginx-2")  # the kubelet, after grace
    w.step()
    assert w.status(key)["retryCount"] == 1 and w.pods(key) == []
    w.schedule(2)
    pods = w.pods(key)
    assert len(pods) == 6 and all(p["spec"].get("nodeName") for p in pods)
    assert {p["metadata"]["annotations"]["volcano.sh/job-version"] for p in pods} == {"1"}
    w.run_all(key)
    assert w.phase(key) == "Running" and w.status(key)["retryCount"] == 1
