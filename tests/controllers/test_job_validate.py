"""A Job Volcano's admission webhook would refuse is left Pending with the reasons and
an Event, and nothing else is made; fixed (or its queue opened), it goes ahead."""

from __future__ import annotations

import pytest
from tests.controllers.test_job_world import World, job_yaml, manifest
from tests.kit import queue

GOOD = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  tasks:
    - name: w
      replicas: 2
      template:
        spec:
          containers: [{name: w, image: x}]
"""


def _refused(w: World, key: str) -> str:
    state = w.status(key)["state"]
    assert state["phase"] == "Pending" and state["reason"] == "Invalid"
    assert w.pods(key) == [] and w.podgroup(key) is None
    assert w.store.list("Service") == w.store.list("Secret") == []
    warn = [e for e in w.events(key) if e["type"] == "Warning" and e["reason"] == "Invalid"]
    assert warn and warn[0]["message"] == state["message"]
    return state["message"]


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("minAvailable-webhook-deny", "minAvailable (5) is greater than the total replicas"),
        ("duplicatedTaskName-webhook-deny", "two tasks have this name"),
        ("duplicatedPolicyEvent-webhook-deny", "event PodFailed is already handled"),
    ],
)
def test_volcanos_invalid_examples_are_refused(name: str, says: str):
    """Volcano's example/invalid_jobs, each refused for the reason its comment gives."""
    w = World()
    key = w.submit(manifest(name))
    assert says in _refused(w, key)


ANY_FAILED = {"event": "PodFailed", "action": "RestartJob"}


def _with(**changes) -> dict:
    job = job_yaml(GOOD)
    task = job["spec"]["tasks"][0]
    for k, v in changes.items():
        if k.startswith("task_"):
            task[k[5:]] = v
        else:
            job["spec"][k] = v
    return job


@pytest.mark.parametrize(
    ("job", "says"),
    [
        (_with(minAvailable=-1), "minAvailable must not be negative"),
        (_with(task_minAvailable=3), "minAvailable (3) is greater than its replicas (2)"),
        (_with(task_name="Bad_Name"), "DNS-1123"),
        (_with(policies=[{"event": "PodExploded", "action": "RestartJob"}]), "unknown event"),
        (_with(policies=[{"event": "PodFailed", "action": "Reboot"}]), "unknown action"),
        (
            _with(policies=[{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}]),
            "both an event and an exitCode",
        ),
        (_with(policies=[{"exitCode": 0, "action": "RestartJob"}]), "exitCode 0"),
        (_with(policies=[{"event": "*", "action": "AbortJob"}, ANY_FAILED]), "'*' must be"),
        (_with(task_policies=[{"action": "RestartJob"}]), "neither an event nor an exitCode"),
        (_with(queue="nowhere"), "queue 'nowhere' does not exist"),
        (_with(plugins={"magic": []}), "unknown job plugin 'magic'"),
        (_with(tasks=[]), "the job has no tasks"),
        (_with(maxRetry=-2), "maxRetry must not be negative"),
        (_with(ttlSecondsAfterFinished=-1), "ttlSecondsAfterFinished must not be negative"),
        (_with(task_replicas="two"), "expected an integer"),
        (_with(task_template={"spec": {"containers": []}}), "no containers"),
    ],
)
def test_webhook_rules(job: dict, says: str):
    w = World()
    key = w.submit(job)
    assert says in _refused(w, key)


def test_each_job_is_refused_for_its_own_template():
    """Jobs repeating a template go ahead alike, and a Job whose template differs from
    theirs in one bad quantity is still refused for it."""
    w = World()
    for name in ("a", "b"):
        job = _with()
        job["metadata"]["name"] = name
        key = w.submit(job)
        assert "reason" not in w.status(key)["state"] and w.podgroup(key) is not None
    bad = _with(
        task_template={
            "spec": {
                "containers": [
                    {"name": "w", "image": "x", "resources": {"requests": {"cpu": "lots"}}}
                ]
            }
        }
    )
    assert "invalid quantity 'lots'" in _refused(w, w.submit(bad))


def test_closed_queue_refuses_then_opening_it_lets_the_job_go():
    """A job for a Closed queue is refused; when the queue opens, the job is checked
    again (its queue's event) and goes ahead."""
    w = World(queues=("default", queue("q", state="Closed")))
    key = w.submit(_with(queue="q"))
    assert "queue 'q' is Closed" in _refused(w, key)
    w.store.patch("Queue", "q", {"status": {"state": "Open"}}, subresource="status")
    w.step()
    s = w.status(key)
    assert s["state"]["phase"] == "Pending" and set(s["state"]) == {"phase", "lastTransitionTime"}
    assert w.podgroup(key) is not None


def test_a_refused_job_fixed_in_place_goes_ahead():
    w = World()
    key = w.submit(_with(minAvailable=5))
    _refused(w, key)
    w.store.patch("Job", key, {"spec": {"minAvailable": 2}})
    w.step()
    assert "reason" not in w.status(key)["state"]
    w.admit(key)
    assert len(w.pods(key)) == 2


def test_a_refusal_is_recorded_once():
    """Reconciling a refused job again adds no status write and no second Event."""
    w = World()
    key = w.submit(_with(minAvailable=5))
    events = w.events(key)
    watch = w.cluster.watch(["Job", "Event"])
    w.ctl.reconcile(key)
    assert watch.drain() == [] and w.events(key) == events


def test_validation_happens_before_acceptance_only():
    """As with Volcano's webhook, the queue is checked when the job is accepted; a
    queue closed later does not refuse a running job."""
    w = World(queues=("default", queue("q")))
    key = w.submit(_with(queue="q"))
    w.admit(key)
    w.store.patch("Queue", "q", {"status": {"state": "Closed"}}, subresource="status")
    w.step()
    w.run_all(key)
    assert w.phase(key) == "Running"
