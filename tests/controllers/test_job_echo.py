"""What calls for a reconcile of a Job: a change of something it reads, not the
controller's own writes coming back, nor a status write of another client.

The in-memory store keeps ``metadata.generation`` as the API server does (1 on create,
one more on a spec change, never on a status write), and the controller reconciles a
Job again only when its spec (generation) or phase moved, one of its pods changed in
what the controller reads, or its PodGroup was admitted, lost or changed in spec."""

from __future__ import annotations

from tests.controllers.test_job_world import World, job_yaml

from pumice.cluster.memory import MemoryCluster
from pumice.controllers.store import MemoryStore

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  minAvailable: 2
  queue: default
  tasks:
    - name: w
      replicas: 2
      template:
        spec:
          containers: [{name: w, image: x, resources: {requests: {cpu: "1"}}}]
"""


def generation(store: MemoryStore, kind: str, key: str) -> int:
    obj = store.get(kind, key)
    assert obj is not None
    return obj["metadata"]["generation"]


def test_generation_moves_with_the_spec_only() -> None:
    """Created at 1; a status write (subresource or not), a label, or a patch that
    changes nothing leave it; a spec change adds one."""
    store = MemoryStore(MemoryCluster())
    made = store.create(job_yaml(JOB) | {"metadata": {"name": "train", "generation": 7}})
    assert made is not None and made["metadata"]["generation"] == 1  # the server's, not ours
    key = "default/train"
    store.patch("Job", key, {"status": {"state": {"phase": "Running"}}}, subresource="status")
    store.patch("Job", key, {"status": {"running": 2}})
    store.patch("Job", key, {"metadata": {"labels": {"team": "a"}}})
    store.patch("Job", key, {"spec": {"minAvailable": 2}})  # as it was
    assert generation(store, "Job", key) == 1
    store.patch("Job", key, {"spec": {"minAvailable": 1}})
    assert generation(store, "Job", key) == 2
    assert store.get("Job", key)["status"] == {"state": {"phase": "Running"}, "running": 2}


def test_a_status_write_does_not_reconcile_the_job_but_a_spec_change_does() -> None:
    """Another client's status write (no phase change) and the controller's own status
    writes coming back run no reconcile; a spec change (scaling the task) does, and is
    acted on."""
    w = World()
    key = w.submit(job_yaml(JOB))
    w.admit(key)
    assert len(w.pods(key)) == 2
    before = w.mgr.reconciles["job"]
    gen = generation(w.store, "Job", key)
    w.store.patch("Job", key, {"status": {"runningDuration": "1m"}}, subresource="status")
    w.step()
    assert generation(w.store, "Job", key) == gen
    assert w.mgr.reconciles["job"] == before
    w.store.patch(
        "Job", key, {"spec": {"tasks": [{**w.job(key)["spec"]["tasks"][0], "replicas": 3}]}}
    )
    w.step()
    assert generation(w.store, "Job", key) == gen + 1
    assert w.mgr.reconciles["job"] == before + 1
    assert w.pod_names(key) == ["train-w-0", "train-w-1", "train-w-2"]


def test_own_writes_and_binds_run_no_reconcile_while_phases_that_matter_do() -> None:
    """Submitting and admitting a job costs one reconcile each: the PodGroup and pods
    it creates and the status it writes coming back cost none. A bind, the PodGroup
    moving from Inqueue to Running and its conditions cost none; a pod running costs
    one, and the Running phase it moves the Job to none more (on the same pods that
    phase has nothing to do, which the reconcile that moved it can tell)."""
    w = World()
    key = w.submit(job_yaml(JOB))
    assert w.mgr.reconciles["job"] == 1 and w.phase(key) == "Pending"
    w.admit(key)
    assert w.mgr.reconciles["job"] == 2 and len(w.pods(key)) == 2
    for pod in w.pods(key):
        assert w.cluster.bind(f"default/{pod['metadata']['name']}", "n0")
    w.admit(key, "Running")
    pg = w.podgroup(key)
    assert pg is not None
    w.store.patch(
        "PodGroup", f"default/{pg['metadata']['name']}",
        {"status": {"conditions": [{"type": "Scheduled", "status": "True"}]}},
        subresource="status",
    )  # fmt: skip
    w.step()
    assert w.mgr.reconciles["job"] == 2
    w.set_phase("default/train-w-0", "Running")
    assert w.mgr.reconciles["job"] == 3 and w.status(key)["running"] == 1
    w.set_phase("default/train-w-1", "Running")
    assert w.phase(key) == "Running"
    assert w.mgr.reconciles["job"] == 4  # the pod; the Running phase's turn is idle


def test_pods_done_before_the_job_ran_still_complete_it() -> None:
    """Pods that finish before the Job saw them run move it to Running, whose own turn
    is not skipped then: it completes the Job, and the Completed phase's kill removes
    the PodGroup."""
    w = World()
    key = w.submit(job_yaml(JOB))
    w.admit(key)
    for pod in w.pods(key):
        w.set_phase(f"default/{pod['metadata']['name']}", "Succeeded", exit_code=0)
    assert w.phase(key) == "Completed" and w.podgroup(key) is None


def test_a_podgroup_deleted_by_someone_else_is_made_again() -> None:
    """The controller's own PodGroup deletions coming back are skipped, not those of
    others: a PodGroup deleted behind its back is created again."""
    w = World()
    key = w.submit(job_yaml(JOB))
    pg = w.podgroup(key)
    assert pg is not None
    w.store.delete("PodGroup", f"default/{pg['metadata']['name']}")
    w.step()
    again = w.podgroup(key)
    assert again is not None and again["metadata"]["uid"] != pg["metadata"]["uid"]


def test_pod_pending_timeout_starts_when_the_pods_are_created() -> None:
    """A PodPending timeout counts from when the controller creates the pods, though
    nothing else happens to them afterwards (their creation coming back is skipped)."""
    w = World()
    job = job_yaml(JOB)
    job["spec"]["policies"] = [{"event": "PodPending", "action": "AbortJob", "timeout": "1m"}]
    key = w.submit(job)
    w.admit(key)
    assert w.mgr.next_due() == w.t + 60
    w.until_due()
    assert w.phase(key) in ("Aborting", "Aborted")
