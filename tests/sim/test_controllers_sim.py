"""The simulator runs pumice's job controller: a file of Volcano Jobs restarts, fails
and completes by the rules the controller applies on a cluster."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pumice.errors import InputError
from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import SimOptions, Simulation
from pumice.sim.loader import load_workload
from pumice.sim.report_metrics import job_rows
from pumice.sim.summary_text import summary_rows

GiB = float(2**30)
DATA = Path(__file__).resolve().parents[1] / "data" / "jobs"

QUEUE = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
"""


def _job(
    name: str,
    *,
    duration: float = 300,
    arrival: float = 10,
    replicas: int = 2,
    policies: list | None = None,
    annotations: dict | None = None,
    **spec,
) -> str:
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "annotations": {
                "pumice.sim/arrival": str(arrival),
                "pumice.sim/duration": str(duration),
                **(annotations or {}),
            },
        },
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            **({"policies": policies} if policies else {}),
            **spec,
            "tasks": [
                {
                    "replicas": replicas,
                    "name": "worker",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "w",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }
    return yaml.safe_dump(job)


def _write(tmp_path: Path, *docs: str) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text("---\n".join((QUEUE, *docs)))
    return path


def _sim(path: Path, nodes: int = 2, **options) -> Simulation:
    workload = load_workload([str(path)])
    cluster = [node_object(f"n{i}", {"cpu": 4000.0, "memory": 16 * GiB}) for i in range(nodes)]
    return Simulation(cluster, workload, Scheduler.from_file(None),
                      SimOptions(**options))  # fmt: skip


def _evict_at(sim: Simulation, t: float, pod: str, seen: dict) -> None:
    """At ``t``, the scheduler's kind of eviction of ``pod``; note the Job's status."""

    def evict(s: Simulation) -> None:
        seen["before"] = copy.deepcopy(s.store.get("Job", "default/train")["status"])
        assert s.store.evict(pod)

    sim.clock.at(t, 0, ("call", evict))


def _status_at(sim: Simulation, t: float, seen: dict, key: str) -> None:
    def look(s: Simulation) -> None:
        seen[key] = copy.deepcopy(s.store.get("Job", "default/train")["status"])

    sim.clock.at(t, 0, ("call", look))


def test_a_file_of_volcano_jobs_runs_to_completion(tmp_path: Path) -> None:
    path = _write(tmp_path, _job("train"), _job("eval", arrival=20, replicas=1, duration=60))
    sim = _sim(path)
    result = sim.run()
    s = result.summary
    assert s["jobs"] == s["jobs_ended"] == s["jobs_succeeded"] == 2
    assert s["jobs_by_phase"] == {"Completed": 2}
    train = result.metrics.jobs["default/train"]
    # arrives at 10, admitted by the cycle at 10, its pods bound by the next one,
    # Running 5 s later, done 300 s after that
    assert (train.start, train.end) == (11.0, 316.0)
    assert s["restarts"] == 0 and s["actions"] == {}
    assert s["gang_violations"] == 0
    # the job controller made the PodGroup and pods; the simulator cleaned up after it
    assert sim.store.list("Job") == [] and sim.store.list("Pod") == []
    assert sim.store.list("PodGroup") == []


def test_an_eviction_under_restart_job_restarts_the_job(tmp_path: Path) -> None:
    policies = [{"event": "PodEvicted", "action": "RestartJob"}]
    sim = _sim(_write(tmp_path, _job("train", policies=policies)))
    seen: dict = {}
    _evict_at(sim, 100.0, "default/train-worker-0", seen)
    _status_at(sim, 140.0, seen, "after")
    result = sim.run()
    assert seen["before"]["state"]["phase"] == "Running"
    assert "retryCount" not in seen["before"]
    # the evicted pod left its node after its grace (30 s); the controller saw it go,
    # restarted the job: retry counted in the Job's status, as on a cluster
    assert seen["after"]["retryCount"] == 1
    rec = result.metrics.jobs["default/train"]
    assert (rec.restarts, rec.evictions, rec.retries, rec.phase) == (1, 1, 1, "Completed")
    s = result.summary
    assert s["actions"] == {"RestartJob": 1}
    # worker-0 ran 84 s until evicted (Running at 16); worker-1 ran 114 s until the
    # restart at 130 deleted it
    assert s["lost_by_cause"] == {"Evicted": 84.0, "RestartJob": 114.0}
    assert s["lost_work_pod_seconds"] == 198.0
    # the new run started over and ran its full 300 s
    assert rec.end > 130 + 300
    rows = dict(summary_rows(s))
    assert rows["Volcano Jobs (final phase)"] == "1 Completed"
    assert "RestartJob 1×" in rows["actions (times, lost work)"]
    assert job_rows(result)[0]["phase"] == "Completed" and job_rows(result)[0]["retries"] == 1


def test_an_eviction_without_policy_only_recreates_the_pod(tmp_path: Path) -> None:
    sim = _sim(_write(tmp_path, _job("train")))
    seen: dict = {}
    _evict_at(sim, 100.0, "default/train-worker-0", seen)
    result = sim.run()
    rec = result.metrics.jobs["default/train"]
    assert (rec.restarts, rec.evictions, rec.phase) == (0, 1, "Completed")
    assert result.summary["actions"] == {}
    # worker-1 ended at 316; the new worker-0 only once it ran 300 s from its own start
    assert rec.end > 130 + 300


def test_max_retry_exhausted_fails_the_job(tmp_path: Path) -> None:
    job = _job(
        "train",
        policies=[{"event": "PodFailed", "action": "RestartJob"}],
        maxRetry=2,
        annotations={"pumice.sim/outcome": "fail", "pumice.sim/end-fraction": "0.5"},
    )
    result = _sim(_write(tmp_path, job)).run()
    rec = result.metrics.jobs["default/train"]
    assert rec.phase == "Failed" and rec.retries == 2 and rec.restarts == 2
    assert rec.outcome == "fail"
    s = result.summary
    assert s["jobs_failed"] == 1 and s["jobs_by_phase"] == {"Failed": 1}
    assert s["actions"]["RestartJob"] >= 2
    # each run's two pods failed after 150 s; the first run was thrown away whole (the
    # last retry keeps what finished, to be looked at)
    assert s["lost_by_cause"]["RestartJob"] == pytest.approx(2 * 150.0)


def test_task_completed_completes_the_mpi_example(tmp_path: Path) -> None:
    text = (DATA / "mpi-example.yaml").read_text()
    text = text.replace(
        "metadata:\n  name: lm-mpi-job\n",
        'metadata:\n  name: lm-mpi-job\n  annotations: {pumice.sim/duration: "100"}\n',
    )
    # the workers (sshd -D) would run for ever; the master is the job's 100 s
    text = text.replace(
        "      name: mpiworker\n      template:\n",
        "      name: mpiworker\n      template:\n        metadata:\n"
        '          annotations: {pumice.sim/duration: "100000"}\n',
    )
    path = tmp_path / "mpi.yaml"
    path.write_text(QUEUE + "---\n" + text)
    sim = _sim(path)
    result = sim.run()
    rec = result.metrics.jobs["default/lm-mpi-job"]
    assert rec.phase == "Completed" and rec.outcome == "succeed"
    s = result.summary
    assert s["actions"] == {"CompleteJob": 1}
    assert s["lost_work_pod_seconds"] == 0.0  # the job's work was done
    # master Running at 6, done at 106; the workers stopped, gone after their grace
    assert rec.end == pytest.approx(106.0 + 30.0)


def test_a_job_volcano_would_refuse_is_refused_when_loaded(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    text = (DATA / "minAvailable-webhook-deny.yaml").read_text()
    path.write_text(QUEUE + "---\n" + text)
    with pytest.raises(InputError) as err:
        load_workload([str(path)])
    assert "Volcano would refuse" in str(err.value) and "Job default/" in str(err.value)


def test_the_job_controller_path_decides_as_the_podgroup_model_for_gangs() -> None:
    """Every job of a synthetic workload as a Volcano Job (the default) and through the
    PodGroup model (``--simple-jobs``): for gangs that need all their pods, the same
    decisions and metrics (only the Jobs' final phases are new)."""
    import dataclasses

    from pumice.sim.synthetic import generate

    w = generate(120, seed=3, capacity_gpus=32, max_gang=8, load=1.1)
    w = dataclasses.replace(
        w, jobs=tuple(dataclasses.replace(j, min_available=j.replicas) for j in w.jobs)
    )
    nodes = [node_object(f"n{i}", {"cpu": 96000.0, "memory": 768 * GiB,
                                   "nvidia.com/gpu": 8.0}) for i in range(4)]  # fmt: skip

    def run(controller: bool) -> dict:
        sim = Simulation(nodes, w, Scheduler.from_file(None),
                         SimOptions(job_controller=controller))  # fmt: skip
        return sim.run().summary

    model, controlled = run(False), run(True)
    assert model["jobs_by_phase"] == {} and model["jobs_ended"] == 120
    phases = controlled.pop("jobs_by_phase")
    assert sum(phases.values()) == 120 and set(phases) <= {"Completed", "Failed"}
    assert phases.get("Failed", 0) == model["jobs_failed"] + model["jobs_cancelled"]
    model.pop("jobs_by_phase")
    assert controlled == model


def test_by_default_an_elastic_job_runs_every_replica_as_volcanos_controller_does() -> None:
    """A PodGroup-shaped elastic job (3 pods, minAvailable 1) that finds room for 2 (a
    long job holds the other node): by default it goes through the job controller,
    whose completion rule waits for the third replica to run once the first two free
    their node; the PodGroup model (``--simple-jobs``) ends the job when its bound pods
    end and drops the third."""
    from pumice.sim.workload import JobSpec, QueueSpec, TaskSpec, Workload

    pod = {"cpu": 2000.0, "memory": GiB}
    blocker = JobSpec("blocker", "default", "default", 0.0, 1000.0,
                      (TaskSpec("w", 1, {"cpu": 4000.0, "memory": GiB}),), 1)  # fmt: skip
    elastic = JobSpec("elastic", "default", "default", 10.0, 100.0, (TaskSpec("w", 3, pod),), 1)
    w = Workload(jobs=(blocker, elastic), queues=(QueueSpec("default"),))
    nodes = [node_object(f"n{i}", {"cpu": 4000.0, "memory": 16 * GiB}) for i in range(2)]

    def run(**options) -> tuple[Simulation, dict]:
        sim = Simulation(nodes, w, Scheduler.from_file(None), SimOptions(**options))
        return sim, {r["job"]: r for r in job_rows(sim.run())}

    sim, default = run()
    assert sim.manager is not None and sim.manager.reconciles["job"] > 0
    assert sim.metrics.binds == 4 and default["default/elastic"]["phase"] == "Completed"
    simple_sim, simple = run(job_controller=False)
    assert simple_sim.metrics.binds == 3
    assert default["default/elastic"]["end"] > simple["default/elastic"]["end"] + 90
