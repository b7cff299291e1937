"""`pumice job` and `pumice queue` against a real API server: what the tables and JSON
show of Jobs and Queues, the Commands suspend, resume, open and close create (as
vcctl's), delete, and the one-line errors with their exit status."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from tests.run import kube_kit as k
from tests.run.conftest import kube, shared_plane  # noqa: F401  (the API server fixtures)

from pumice.cli import main
from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient, Resource
from pumice.controllers import job_cli
from pumice.controllers.cli_api import COMMAND

if TYPE_CHECKING:
    from pumice.controllers.loop import ControllerLoop

pytestmark = pytest.mark.k8s

JOB, NAMESPACE = job_cli.JOB, RESOURCES["Namespace"]


def _served(client: KubeClient) -> bool:
    return all(client.request("GET", r.path())[0] == 200 for r in (JOB, COMMAND))


@pytest.fixture
def api(kube: tuple[KubeClient, str]) -> tuple[KubeClient, str]:  # noqa: F811
    """The `kube` cluster serving Jobs and Commands (deploy/'s CRDs), with none of
    either left from another test."""
    client, kubeconfig = kube
    k.wait_for("the Job and Command CRDs to be served", lambda: _served(client))
    for ns in ("default", "team-a"):
        for res in (JOB, COMMAND):
            status, body = client.request("DELETE", res.path(ns))
            assert status in (200, 404), body
    k.wait_for("no Jobs", lambda: not k.ok(client.request("GET", JOB.path()))["items"])
    return client, kubeconfig


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def task(name: str, replicas: int, image: str = "busybox", **extra: Any) -> dict[str, Any]:
    container = {
        "name": name,
        "image": image,
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
    }
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [container], "restartPolicy": "Never"}},
        **extra,
    }


def job(
    client: KubeClient,
    name: str,
    *tasks: dict[str, Any],
    namespace: str = "default",
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulerName": "volcano", "queue": "default", "tasks": list(tasks), **spec},
    }
    made = k.ok(client.request("POST", JOB.path(namespace), body=body))
    if status:
        made = k.ok(
            client.request(
                "PATCH",
                JOB.path(namespace, name, "status"),
                body={"status": status},
                content_type=MERGE_PATCH,
            )
        )
    return made


def commands(client: KubeClient, namespace: str = "default") -> list[dict[str, Any]]:
    return k.ok(client.request("GET", COMMAND.path(namespace)))["items"]


def phase(value: str, **counts: Any) -> dict[str, Any]:
    return {"state": {"phase": value}, **counts}


def namespace(client: KubeClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    status, reply = client.request("POST", NAMESPACE.path(), body=body)
    assert status in (201, 409), reply


def rows(out: str) -> dict[str, list[str]]:
    """A table's body rows by their first cell (rich's plain output: cells apart by
    spaces, no cell holding a space)."""
    found = {}
    for line in out.splitlines():
        cells = line.split()
        if cells and not set(line.strip()) <= set("─ "):
            found[cells[0]] = cells
    return found


def test_job_list_shows_phase_counts_and_retries_per_namespace(api, capsys):
    """Jobs of the namespace, vcctl's columns; -A adds other namespaces; filters."""
    client, kubeconfig = api
    namespace(client, "team-a")
    job(
        client,
        "train",
        task("ps", 1),
        task("worker", 3),
        minAvailable=4,
        status=phase("Running", minAvailable=4, running=3, pending=1, retryCount=2),
    )
    job(client, "etl", task("main", 2), queue="batch", status=phase("Completed", succeeded=2))
    job(client, "other", task("main", 1), namespace="team-a", status=phase("Pending", pending=1))

    code, out, err = run(capsys, "job", "list", "-k", kubeconfig)
    assert code == 0, err
    table = rows(out)
    assert table["NAME"][:12] == [
        "NAME", "QUEUE", "PHASE", "TYPE", "REPLICAS", "MIN", "PENDING", "RUNNING",
        "SUCCEEDED", "FAILED", "UNKNOWN", "RETRIES",
    ]  # fmt: skip
    assert table["train"][:12] == [
        "train", "default", "Running", "Batch", "4", "4", "1", "3", "0", "0", "0", "2"
    ]  # fmt: skip
    # (no minAvailable: Volcano's admission makes it the tasks' replicas)
    assert table["etl"][:6] == ["etl", "batch", "Completed", "Batch", "2", "2"]
    assert "other" not in table

    code, out, _ = run(capsys, "job", "list", "-k", kubeconfig, "--all-namespaces")
    table = rows(out)
    assert table["NAMESPACE"][1] == "NAME"
    assert table["team-a"][:4] == ["team-a", "other", "default", "Pending"]
    assert {"default", "team-a"} <= set(table)

    code, out, _ = run(capsys, "job", "list", "-k", kubeconfig, "-A", "-q", "batch")
    assert [r for r in rows(out) if r != "NAMESPACE"] == ["default"]
    assert "etl" in out and "train" not in out

    code, out, _ = run(capsys, "job", "list", "-k", kubeconfig, "-n", "team-a", "--format", "json")
    listed = orjson.loads(out)
    assert [(j["namespace"], j["name"], j["phase"], j["pending"]) for j in listed] == [
        ("team-a", "other", "Pending", 1)
    ]

    code, out, err = run(capsys, "job", "list", "-k", kubeconfig, "--selector", "nothing-like")
    assert (code, out) == (0, "")
    assert "No jobs found in namespace default" in err


def test_job_view_shows_spec_state_tasks_conditions_podgroup_and_events(api, capsys):
    """What a person steering a job asks: how it is set up, where it stands, why."""
    client, kubeconfig = api
    made = job(
        client,
        "mpi",
        task("master", 1, image="mpi:1"),
        task("worker", 2, image="mpi:1", minAvailable=1,
             policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
        minAvailable=2,
        maxRetry=5,
        plugins={"ssh": [], "svc": []},
        policies=[{"event": "PodEvicted", "action": "RestartJob"}],
        status={
            "state": {"phase": "Restarting", "reason": "PodEvicted", "message": "pod evicted",
                      "lastTransitionTime": "2024-05-01T10:00:00Z"},
            "retryCount": 1,
            "running": 2,
            "pending": 1,
            "taskStatusCount": {"master": {"phase": {"Running": 1}},
                                "worker": {"phase": {"Running": 1, "Pending": 1}}},
            "conditions": [{"status": "Pending", "lastTransitionTime": "2024-05-01T09:00:00Z"},
                           {"status": "Running", "lastTransitionTime": "2024-05-01T09:30:00Z"}],
        },
    )  # fmt: skip
    uid = made["metadata"]["uid"]
    owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "mpi",
             "uid": uid, "controller": True}  # fmt: skip
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": f"mpi-{uid}", "namespace": "default", "ownerReferences": [owner]},
        "spec": {"minMember": 2, "queue": "default"},
    }
    k.ok(client.request("POST", RESOURCES["PodGroup"].path("default"), body=pg))
    k.podgroup(client, "unrelated", 1)
    for i, (reason, message, obj_uid) in enumerate(
        [
            ("Restarting", "job restarting: pod mpi-worker-1 evicted", uid),
            ("ExecuteAction", "Start to execute action RestartJob", uid),
            ("Stale", "an event of an earlier job of this name", "uid-of-another"),
        ]
    ):
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"mpi.{i}", "namespace": "default"},
            "involvedObject": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                               "name": "mpi", "namespace": "default", "uid": obj_uid},
            "reason": reason,
            "message": message,
            "type": "Normal",
            "count": 1,
            "firstTimestamp": f"2024-05-01T10:0{i}:00Z",
            "lastTimestamp": f"2024-05-01T10:0{i}:00Z",
            "source": {"component": "vc-controller-manager"},
        }  # fmt: skip
        k.ok(client.request("POST", RESOURCES["Event"].path("default"), body=event))

    code, out, err = run(capsys, "job", "view", "mpi", "-k", kubeconfig)
    assert code == 0, err
    assert "default/mpi" in out
    assert "Restarting" in out and "PodEvicted: pod evicted" in out
    assert "1 of at most 5" in out  # retries
    assert "2 of 3 pods" in out  # minAvailable of the total
    assert "PodEvicted -> RestartJob" in out and "TaskCompleted -> CompleteJob" in out
    assert "ssh" in out and "svc" in out
    table = rows(out)
    # TASK REPLICAS MIN PENDING RUNNING SUCCEEDED FAILED OTHER IMAGE REQUESTS
    assert table["master"][:10] == ["master", "1", "1", "0", "1", "0", "0", "0", "mpi:1",
                                    "cpu=500m,"]  # fmt: skip
    assert table["worker"][:9] == ["worker", "2", "1", "1", "1", "0", "0", "0", "mpi:1"]
    assert f"mpi-{uid}" in out  # its PodGroup, not the unrelated one
    assert "unrelated" not in out
    assert "job restarting: pod mpi-worker-1 evicted" in out
    assert "Start to execute action RestartJob" in out
    assert "an earlier job" not in out

    code, out, err = run(capsys, "job", "view", "-N", "mpi", "-k", kubeconfig, "--format", "json")
    assert code == 0, err
    view = orjson.loads(out)
    assert view["state"]["phase"] == "Restarting" and view["retryCount"] == 1
    assert view["maxRetry"] == 5
    assert [(t["name"], t["pods"]) for t in view["tasks"]] == [
        ("master", {"Running": 1}),
        ("worker", {"Pending": 1, "Running": 1}),
    ]
    assert view["tasks"][0]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert [c["status"] for c in view["conditions"]] == ["Pending", "Running"]
    assert [e["reason"] for e in view["events"]] == ["Restarting", "ExecuteAction"]
    assert view["podGroup"]["name"] == f"mpi-{uid}"


def test_view_of_a_missing_job_is_one_line_and_exit_2(api, capsys):
    client, kubeconfig = api
    for verb in ("view", "suspend", "resume", "delete"):
        code, out, err = run(capsys, "job", verb, "-N", "nope", "-k", kubeconfig)
        assert code == 2, verb
        assert err.strip() == "pumice: error: no Job 'nope' in namespace 'default'", verb
        assert out == ""
    code, _, err = run(capsys, "job", "view", "-k", kubeconfig)
    assert code == 2 and "which job?" in err
    assert commands(client) == []


def test_suspend_and_resume_create_vcctl_commands_owned_by_the_job(api, capsys):
    """AbortJob and ResumeJob Commands, named, owned and targeted as vcctl's; a command
    the job's state would ignore is refused and creates nothing."""
    client, kubeconfig = api
    made = job(client, "train", task("worker", 2), status=phase("Running", running=2))
    uid = made["metadata"]["uid"]

    code, out, err = run(capsys, "job", "resume", "train", "-k", kubeconfig)
    assert code == 2
    assert "job default/train is Running: only a suspended job can be resumed" in err
    assert commands(client) == []

    code, out, err = run(capsys, "job", "suspend", "train", "-k", kubeconfig)
    assert code == 0, err
    [cmd] = commands(client)
    ref = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "train",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert cmd["action"] == "AbortJob"
    assert cmd["target"] == ref
    assert cmd["metadata"]["ownerReferences"] == [ref]
    assert cmd["metadata"]["name"].startswith("train-abortjob-")
    assert f"Command default/{cmd['metadata']['name']}" in out

    # The job controller would carry the command out and delete it: play it.
    client.request("DELETE", COMMAND.path("default", cmd["metadata"]["name"]))
    client.request("PATCH", JOB.path("default", "train", "status"),
                   body={"status": phase("Aborted")}, content_type=MERGE_PATCH)  # fmt: skip
    code, _, err = run(capsys, "job", "suspend", "-N", "train", "-k", kubeconfig)
    assert code == 2 and "job default/train is Aborted: nothing to suspend" in err
    assert commands(client) == []

    code, out, err = run(capsys, "job", "resume", "train", "-k", kubeconfig, "--format", "json")
    assert code == 0, err
    [cmd] = commands(client)
    assert cmd["action"] == "ResumeJob" and cmd["target"]["uid"] == uid
    assert cmd["metadata"]["name"].startswith("train-resumejob-")
    reply = orjson.loads(out)
    assert reply == {
        "command": f"default/{cmd['metadata']['name']}",
        "action": "ResumeJob",
        "target": cmd["target"],
    }


def test_delete_removes_the_job(api, capsys):
    client, kubeconfig = api
    namespace(client, "team-a")
    job(client, "old", task("main", 1), namespace="team-a")
    job(client, "keep", task("main", 1), namespace="team-a")
    code, out, err = run(capsys, "job", "delete", "old", "-n", "team-a", "-k", kubeconfig)
    assert code == 0, err
    assert out.strip() == "job team-a/old deleted"
    left = k.ok(client.request("GET", JOB.path("team-a")))["items"]
    assert [j["metadata"]["name"] for j in left] == ["keep"]


def test_queue_list_counts_podgroups_and_open_close_create_commands(api, capsys):
    """vcctl's queue columns with PodGroups counted by phase; open and close make
    OpenQueue and CloseQueue Commands in `default`, owned by the Queue."""
    client, kubeconfig = api
    made = k.queue(client, "research", weight=3)
    client.request("PATCH", RESOURCES["Queue"].path("", "research", "status"),
                   body={"status": {"state": "Open"}}, content_type=MERGE_PATCH)  # fmt: skip
    for name, queue, pg_phase in [
        ("a", "research", "Running"),
        ("b", "research", "Running"),
        ("c", "research", "Inqueue"),
        ("d", "research", "Pending"),
        ("e", "default", "Completed"),
    ]:
        k.podgroup(client, name, 1, queue=queue)
        client.request("PATCH", RESOURCES["PodGroup"].path("default", name, "status"),
                       body={"status": {"phase": pg_phase}}, content_type=MERGE_PATCH)  # fmt: skip

    code, out, err = run(capsys, "queue", "list", "-k", kubeconfig)
    assert code == 0, err
    table = rows(out)
    assert table["NAME"] == ["NAME", "WEIGHT", "STATE", "PARENT", "INQUEUE", "PENDING",
                             "RUNNING", "UNKNOWN", "COMPLETED"]  # fmt: skip
    assert table["research"] == ["research", "3", "Open", "-", "1", "1", "2", "0", "0"]
    assert table["default"][4:] == ["0", "0", "0", "0", "1"]

    code, out, _ = run(capsys, "queue", "list", "-k", kubeconfig, "--format", "json")
    assert [q["name"] for q in orjson.loads(out)] == ["default", "research"]

    code, out, err = run(capsys, "queue", "close", "research", "-k", kubeconfig)
    assert code == 0, err
    [cmd] = commands(client)
    ref = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": "research",
        "uid": made["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert cmd["action"] == "CloseQueue"
    assert cmd["target"] == ref and cmd["metadata"]["ownerReferences"] == [ref]
    assert cmd["metadata"]["name"].startswith("research-closequeue-")
    assert "queue research: CloseQueue requested" in out

    code, out, err = run(capsys, "queue", "open", "-n", "research", "-k", kubeconfig)
    assert code == 0, err
    assert sorted(c["action"] for c in commands(client)) == ["CloseQueue", "OpenQueue"]

    code, out, err = run(capsys, "queue", "open", "nope", "-k", kubeconfig)
    assert code == 2 and err.strip() == "pumice: error: no Queue 'nope'"
    assert len(commands(client)) == 2


def test_a_cluster_without_the_job_crd_is_exit_1_saying_so(api, capsys, monkeypatch):
    """A resource type the API server does not serve (here: a group no CRD defines)."""
    _, kubeconfig = api
    missing = Resource("Job", "/apis/batch.example.invalid/v1alpha1", "jobs", True)
    monkeypatch.setattr(job_cli, "JOB", missing)
    for argv in (("job", "list"), ("job", "view", "x"), ("job", "suspend", "x")):
        code, out, err = run(capsys, *argv, "-k", kubeconfig)
        assert code == 1, argv
        assert err.strip() == (
            "pumice: error: the API server does not serve jobs.batch.example.invalid "
            "(batch.example.invalid/v1alpha1): install the CRDs (deploy/)"
        ), argv
        assert out == ""


@pytest.fixture
def controllers(api: tuple[KubeClient, str]) -> Iterator[ControllerLoop]:
    """pumice's Job and Queue controllers on a thread, on the `api` cluster."""
    from pumice.controllers.kube_store import KubeStore
    from pumice.controllers.loop import ControllerLoop

    _, kubeconfig = api
    loop = ControllerLoop(KubeStore(KubeClient.from_config(kubeconfig)), ("job", "queue"), idle=0.1)
    thread = loop.start_thread()
    try:
        yield loop
    finally:
        loop.stop.set()
        thread.join(10)
        assert not thread.is_alive(), "the controller loop did not stop"
        loop.store.close()


def consumed(client: KubeClient) -> bool:
    """No Command waits: each is gone or being deleted (a controller deletes what it
    carried out orphaning its dependents, which waits for a garbage collector this
    cluster does not run)."""
    return all(c["metadata"].get("deletionTimestamp") for c in commands(client))


def _job_phase(client: KubeClient, name: str) -> str:
    body = k.get(client, "Job", f"default/{name}") or {}
    return ((body.get("status") or {}).get("state") or {}).get("phase") or ""


def _queue_state(client: KubeClient, name: str) -> str:
    return ((k.get(client, "Queue", name) or {}).get("status") or {}).get("state") or ""


def test_the_controllers_carry_out_suspend_resume_close_and_open(api, controllers, capsys):
    """With pumice's controllers running: suspend makes the job Aborted, resume brings it
    back (a retry), each Command consumed and said in `job view`; close and open move
    the queue. No scheduler runs, so the job never gets past Pending."""
    client, kubeconfig = api
    job(client, "train", task("worker", 2))
    k.wait_for("the job Pending", lambda: _job_phase(client, "train") == "Pending")

    assert run(capsys, "job", "suspend", "train", "-k", kubeconfig)[0] == 0
    k.wait_for("the job Aborted", lambda: _job_phase(client, "train") == "Aborted")
    k.wait_for("the Command consumed", lambda: consumed(client))

    assert run(capsys, "job", "resume", "train", "-k", kubeconfig)[0] == 0
    k.wait_for("the job back to Pending",
               lambda: _job_phase(client, "train") in ("Restarting", "Pending"))  # fmt: skip
    k.wait_for("the Command consumed", lambda: consumed(client))
    code, out, err = run(capsys, "job", "view", "train", "-k", kubeconfig, "--format", "json")
    assert code == 0, err
    view = orjson.loads(out)
    assert view["retryCount"] == 1
    issued = [e["message"] for e in view["events"] if e["reason"] == "CommandIssued"]
    assert any("AbortJob" in m for m in issued) and any("ResumeJob" in m for m in issued)

    # A queue with PodGroups stays Closing while they last (Volcano's rule): an empty one.
    k.queue(client, "research")
    k.wait_for("the queue Open", lambda: _queue_state(client, "research") == "Open")
    assert run(capsys, "queue", "close", "research", "-k", kubeconfig)[0] == 0
    k.wait_for("the queue Closed", lambda: _queue_state(client, "research") == "Closed")
    code, out, err = run(capsys, "queue", "list", "-k", kubeconfig)
    assert code == 0, err
    assert rows(out)["research"][2] == "Closed"
    assert run(capsys, "queue", "open", "research", "-k", kubeconfig)[0] == 0
    k.wait_for("the queue Open again", lambda: _queue_state(client, "research") == "Open")
    k.wait_for("the Commands consumed", lambda: consumed(client))
