"""Start forecasts on snapshots small enough to work out by hand."""

from __future__ import annotations

from typing import Any

import yaml

from pumice.conf.config import load_config
from pumice.forecast import QueueDurations, forecast_starts

# 2026-01-01T00:10:00Z: the forecast's now; the running pod started 100 s before.
NOW = 1767226200.0

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
status: {state: Open}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: busy, namespace: default}
spec: {minMember: 1, queue: default}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata:
  name: busy-0
  namespace: default
  annotations: {scheduling.k8s.io/group-name: busy}
spec:
  schedulerName: volcano
  nodeName: n1
  {deadline}
  containers: [{name: c, resources: {requests: {cpu: "4", memory: 1Gi}}}]
status:
  phase: Running
  startTime: "2026-01-01T00:08:20Z"
"""


def gang(name: str, members: int, cpu: str, *, created: str, queue: str = "default") -> str:
    """A PodGroup of ``members`` pods of ``cpu`` each, waiting (Pending, not admitted)."""
    docs = [
        f"""
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default, creationTimestamp: "{created}"}}
spec: {{minMember: {members}, queue: {queue}}}
status: {{phase: Pending}}
"""
    ]
    for i in range(members):
        docs.append(
            f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}-{i}
  namespace: default
  creationTimestamp: "{created}"
  annotations: {{scheduling.k8s.io/group-name: {name}}}
spec:
  schedulerName: volcano
  containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}]
status: {{phase: Pending}}
"""
        )
    return "---".join(docs)


def objects(*parts: str, deadline: str = "activeDeadlineSeconds: 600") -> list[dict[str, Any]]:
    text = "---".join([CLUSTER.replace("{deadline}", deadline), *parts])
    return [d for d in yaml.safe_load_all(text) if d]


def test_a_gang_waits_for_the_pod_whose_deadline_frees_the_node() -> None:
    got = forecast_starts(objects(gang("g", 2, "2", created="2026-01-01T00:09:00Z")),
                          load_config(None), NOW)  # fmt: skip
    est = got["default/g"]
    # the pod started 100 s ago with a 600 s deadline: the node frees at now + 500 s,
    # and the next cycle (at most one period later) binds both pods
    assert est.start is not None
    assert NOW + 500 <= est.start <= NOW + 501
    assert "activeDeadlineSeconds" in est.assumption
    assert "no new arrivals" in est.assumption
    assert set(got) == {"default/g"}  # the running job is not waiting


def test_a_job_behind_another_of_its_queue_starts_when_the_first_ends() -> None:
    first = gang("first", 1, "4", created="2026-01-01T00:09:00Z")
    second = gang("second", 1, "4", created="2026-01-01T00:09:30Z")
    runs = QueueDurations()
    for seconds in (200.0, 300.0, 400.0):
        runs.finished("default", seconds)
    got = forecast_starts(objects(first, second), load_config(None), NOW, durations=runs)
    # first: when busy-0 ends (now + 500); it runs its queue's p75 of 200, 300, 400
    # (350 s); second follows it
    assert NOW + 500 <= got["default/first"].start <= NOW + 501  # type: ignore[operator]
    assert NOW + 850 <= got["default/second"].start <= NOW + 852  # type: ignore[operator]
    assert "learned run time" in got["default/second"].assumption
    assert "350 s" in got["default/second"].assumption
    assert "learned" not in got["default/first"].assumption


def test_the_duration_annotation_sets_the_end_and_is_named() -> None:
    pod = "pumice.sim/duration"
    text = objects(gang("g", 1, "4", created="2026-01-01T00:09:00Z"), deadline="")
    for obj in text:
        if obj["metadata"]["name"] == "busy-0":
            obj["metadata"]["annotations"][pod] = "300"
    est = forecast_starts(text, load_config(None), NOW)["default/g"]
    assert NOW + 200 <= est.start <= NOW + 201  # type: ignore[operator]
    assert "duration annotation" in est.assumption


def test_a_job_that_can_never_fit_gets_no_estimate_and_the_reason() -> None:
    huge = gang("huge", 1, "16", created="2026-01-01T00:09:00Z")
    est = forecast_starts(objects(huge), load_config(None), NOW)["default/huge"]
    assert est.start is None
    assert est.assumption.startswith("no estimate")
    assert "can never fit" in est.assumption
    assert "cpu 16" in est.assumption  # what it asks is named


def test_a_pod_of_no_known_end_leaves_the_jobs_behind_it_without_an_estimate() -> None:
    waiting = gang("g", 1, "4", created="2026-01-01T00:09:00Z")
    est = forecast_starts(objects(waiting, deadline=""), load_config(None), NOW)["default/g"]
    assert est.start is None
    assert "no known end" in est.assumption
    assert "activeDeadlineSeconds" in est.assumption


def test_a_job_that_fits_now_starts_now() -> None:
    small = objects(gang("small", 1, "4", created="2026-01-01T00:09:00Z"), deadline="")
    small = [o for o in small if o["metadata"]["name"] not in ("busy", "busy-0")]
    est = forecast_starts(small, load_config(None), NOW)["default/small"]
    assert est.start is not None and est.start - NOW <= 2  # admitted, then bound
    assert "fits now" in est.assumption or "no running pod" in est.assumption


def test_the_horizon_bounds_the_forecast() -> None:
    waiting = gang("g", 2, "2", created="2026-01-01T00:09:00Z")
    est = forecast_starts(objects(waiting), load_config(None), NOW, horizon=100)["default/g"]
    assert est.start is None
    assert "horizon" in est.assumption


def test_the_queue_estimate_learns_the_p75_of_the_latest_runs() -> None:
    runs = QueueDurations(keep=4)
    assert runs.estimate("q") is None  # nothing finished yet
    for seconds in (1000.0, 10.0, 20.0, 30.0, 40.0):
        runs.finished("q", seconds)
    # the first run fell out of the last four: p75 of 10, 20, 30, 40 is 32.5
    assert runs.estimate("q") == 32.5
    assert runs.estimate("other") is None
    assert "last 4" in runs.describe("q")


def test_cycle_eta_adds_the_estimates_to_the_decisions(tmp_path, capsys) -> None:
    import json

    from pumice.cli import main

    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(objects(gang("g", 2, "2", created="2026-01-01T00:10:00Z"))))
    assert main(["cycle", str(snap), "--eta"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["binds"] == {}  # the cycle itself decides as without --eta
    eta = doc["eta"]["default/g"]
    # the snapshot's now is its latest timestamp (00:10:00); the node frees at 00:18:20
    assert NOW + 500 <= eta["start"] <= NOW + 501
    assert "activeDeadlineSeconds" in eta["assumption"]
    assert main(["cycle", str(snap)]) == 0
    assert "eta" not in json.loads(capsys.readouterr().out)


def test_cycle_eta_refuses_a_horizon_that_is_not_positive(tmp_path, capsys) -> None:
    from pumice.cli import main

    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(objects()))
    assert main(["cycle", str(snap), "--eta", "--eta-horizon", "0"]) == 2
    err = capsys.readouterr().err
    assert "--eta-horizon" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_queue_estimate_learns_from_a_clusters_finished_pods() -> None:
    def finished(name: str, group: str, start: str, end: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": "ml",
                         "annotations": {"scheduling.k8s.io/group-name": group}},
            "status": {"phase": "Succeeded", "startTime": start,
                       "containerStatuses": [{"state": {"terminated": {"finishedAt": end}}}]},
        }  # fmt: skip

    pods = [
        # a gang of two: from its first start to its last finish, 600 s
        finished("a-0", "a", "2026-01-01T00:00:00Z", "2026-01-01T00:08:00Z"),
        finished("a-1", "a", "2026-01-01T00:01:00Z", "2026-01-01T00:10:00Z"),
        finished("b-0", "b", "2026-01-01T00:00:00Z", "2026-01-01T00:20:00Z"),  # 1200 s
        finished("c-0", "c", "2026-01-01T00:00:00Z", "2026-01-01T00:30:00Z"),  # 1800 s
        finished("x-0", "x", "2026-01-01T00:00:00Z", "2026-01-01T05:00:00Z"),  # no queue
        {"metadata": {"name": "r-0", "namespace": "ml",
                      "annotations": {"scheduling.k8s.io/group-name": "a"}},
         "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}},
    ]  # fmt: skip
    runs = QueueDurations.from_pods(pods, {"ml/a": "train", "ml/b": "train", "ml/c": "train"})
    # p75 of 600, 1200, 1800
    assert runs.estimate("train") == 1500.0


def test_a_podgroup_without_pods_is_placed_as_its_min_resources_say() -> None:
    """A running scheduler's cluster holds a Volcano Job's PodGroup but not the Job, and
    no pods until the PodGroup is admitted: the forecast places minMember pods sharing
    minResources, and says so."""
    lone = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: lone, namespace: default, creationTimestamp: "2026-01-01T00:09:00Z"}
spec: {minMember: 2, queue: default, minResources: {cpu: "4", memory: 2Gi}}
status: {phase: Pending}
"""
    est = forecast_starts(objects(lone), load_config(None), NOW)["default/lone"]
    # admitted once busy-0's deadline frees the node, its two pods of 2 cpus bound a
    # cycle later
    assert est.start is not None and NOW + 500 <= est.start <= NOW + 502
    assert "minResources" in est.assumption


def test_a_volcano_job_gets_its_pods_from_the_job_controller_in_the_replay() -> None:
    job = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: default, creationTimestamp: "2026-01-01T00:09:00Z"}
spec:
  minAvailable: 2
  queue: default
  schedulerName: volcano
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        containers: [{name: c, image: x, resources: {requests: {cpu: "2", memory: 1Gi}}}]
"""
    got = forecast_starts(objects(job), load_config(None), NOW)
    ((uid, est),) = got.items()
    assert uid.startswith("default/train")
    # admitted, its pods made, bound when busy-0's deadline frees the node (now + 500 s)
    assert est.start is not None and NOW + 500 <= est.start <= NOW + 503


def test_the_cycle_cap_bounds_the_forecast_and_is_named() -> None:
    waiting = gang("g", 2, "2", created="2026-01-01T00:09:00Z")
    est = forecast_starts(objects(waiting), load_config(None), NOW, max_cycles=1)["default/g"]
    assert est.start is None
    assert "cap of 1 cycles" in est.assumption
