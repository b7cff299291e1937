"""`pumice job` and `pumice queue` without an API server: which namespace a command
means, what a cluster that does not answer prints, and how the view condenses a Job."""

from __future__ import annotations

import socket
from pathlib import Path

import orjson
import pytest
import yaml

from pumice.cli import main
from pumice.controllers.cli_api import default_namespace
from pumice.controllers.cli_render import human_age
from pumice.controllers.job_cli import print_job
from pumice.controllers.job_view import job_view
from pumice.controllers.queue_cli import queue_rows


def kubeconfig(path: Path, server: str, namespaces: dict[str, str | None]) -> str:
    """A kubeconfig with one context per entry (name -> namespace); the first is current."""
    contexts = []
    for name, ns in namespaces.items():
        ctx = {"cluster": "c", "user": "u"}
        if ns:
            ctx["namespace"] = ns
        contexts.append({"name": name, "context": ctx})
    data = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": contexts,
        "current-context": next(iter(namespaces)),
    }
    path.write_text(yaml.safe_dump(data))
    return str(path)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_namespace_is_the_contexts_as_kubectl_takes_it(tmp_path):
    config = kubeconfig(tmp_path / "k", "https://127.0.0.1:1", {"a": "team-a", "b": None})
    assert default_namespace(config, None) == "team-a"
    assert default_namespace(config, "b") == "default"


@pytest.mark.parametrize(
    "argv",
    [("job", "list"), ("job", "view", "x"), ("job", "suspend", "x"), ("job", "delete", "x"),
     ("queue", "list"), ("queue", "close", "x")],
)  # fmt: skip
def test_an_unreachable_api_server_is_one_line_and_exit_1(tmp_path, capsys, argv):
    server = f"https://127.0.0.1:{closed_port()}"
    config = kubeconfig(tmp_path / "k", server, {"a": None})
    assert main([*argv, "-k", config]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"pumice: error: cannot reach the API server at {server}")


def test_a_missing_kubeconfig_is_exit_2_naming_the_flag(tmp_path, capsys):
    assert main(["job", "list", "-k", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pumice: error: field --kubeconfig: cannot load cluster credentials")


def test_two_different_names_are_refused(tmp_path, capsys):
    config = kubeconfig(tmp_path / "k", "https://127.0.0.1:1", {"a": None})
    assert main(["job", "view", "a", "-N", "b", "-k", config]) == 2
    assert "two job names given" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(5, "5s"), (119, "119s"), (200, "3m20s"), (600, "10m"), (7500, "125m"), (14700, "4h5m"),
     (30 * 3600, "30h"), (3 * 86400 + 4 * 3600, "3d4h"), (100 * 86400, "100d"),
     (800 * 86400, "2y")],
)  # fmt: skip
def test_ages_read_as_kubectls(seconds, shown):
    assert human_age(seconds) == shown


def _event(i: int, uid: str = "u1") -> dict:
    return {
        "reason": f"R{i}",
        "message": f" message {i} ",
        "type": "Normal",
        "count": 2 if i == 11 else 1,
        "firstTimestamp": f"2024-05-01T10:{i:02d}:00Z",
        "lastTimestamp": f"2024-05-01T10:{i + 20:02d}:00Z",
        "involvedObject": {"kind": "Job", "name": "j", "uid": uid},
        "source": {"component": "vc-controller-manager", "host": "n1"},
    }


def test_view_keeps_the_ten_most_recent_events_oldest_first():
    events = [_event(i) for i in (3, 11, 0, 7, 1, 2, 4, 5, 6, 8, 9, 10)]
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "u1"}, "spec": {}, "status": {}}
    view = job_view(job, None, events)
    assert [e["reason"] for e in view["events"]] == [f"R{i}" for i in range(2, 12)]
    assert view["olderEvents"] == 2
    last = view["events"][-1]
    assert last["count"] == 2 and last["message"] == "message 11"
    assert last["from"] == "vc-controller-manager, n1"
    orjson.dumps(view)  # (what --format json prints)


def test_view_summarises_spec_with_volcanos_defaults():
    job = {
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "tasks": [
                {"name": "a", "replicas": 2},
                {"name": "b", "replicas": 3, "minAvailable": 1,
                 "policies": [{"exitCode": 3, "action": "AbortJob"},
                              {"events": ["PodFailed", "PodEvicted"], "action": "RestartTask",
                               "timeout": "10m"}],
                 "template": {"spec": {"containers": [
                     {"image": "x", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                     {"image": "y", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": 1}}},
                 ]}}},
            ],
        },
    }  # fmt: skip
    view = job_view(job, None, [])
    assert view["minAvailable"] == 3  # the tasks' minimums, as Volcano's admission sets it
    assert view["maxRetry"] == 3
    assert view["queue"] == "default"
    a, b = view["tasks"]
    assert (a["minAvailable"], b["minAvailable"]) == (2, 1)
    assert b["images"] == ["x", "y"]
    assert b["requests"] == {"cpu": "1250m", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert b["policies"] == [
        "exit code 3 -> AbortJob",
        "PodFailed, PodEvicted -> RestartTask after 10m",
    ]


def test_queue_counts_take_a_podgroup_without_queue_as_default_s():
    queues = [{"metadata": {"name": n}, "spec": {"weight": 1}} for n in ("q", "default")]
    pgs = [
        {"spec": {}, "status": {"phase": "Running"}},
        {"spec": {"queue": "q"}, "status": {"phase": "Inqueue"}},
        {"spec": {"queue": "q"}, "status": {}},  # no phase yet: not counted, as vcctl
        {"spec": {"queue": "gone"}, "status": {"phase": "Running"}},
    ]
    rows = {r["name"]: r for r in queue_rows(queues, pgs)}
    assert list(rows) == ["default", "q"]
    assert rows["default"]["running"] == 1
    assert (rows["q"]["inqueue"], rows["q"]["running"], rows["q"]["pending"]) == (1, 0, 0)


def _job_in(phase: str, *, spec: dict | None = None, **status) -> dict:
    return {
        "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
        "spec": spec or {"tasks": [{"name": "worker", "replicas": 2}]},
        "status": {"state": {"phase": phase}, **status},
    }


def _said(reason: str, message: str, minute: int, type_: str = "Normal") -> dict:
    return {
        "type": type_,
        "reason": reason,
        "message": message,
        "lastTimestamp": f"2024-05-01T10:{minute:02d}:00Z",
    }


def test_a_job_failed_after_its_retries_says_so_and_the_policy_that_restarted_it(capsys):
    spec = {
        "maxRetry": 2,
        "policies": [{"event": "PodFailed", "action": "RestartJob"}],
        "tasks": [{"name": "worker", "replicas": 2}],
    }
    job = _job_in("Failed", spec=spec, retryCount=2, failed=1)
    events = [
        _said("ExecuteAction", "Start to execute action RestartJob", 1),
        _said("ExecuteAction", "Start to execute action RestartJob", 5),
        _said("PluginError", "cannot create the ssh secret", 3, "Warning"),
    ]
    view = job_view(job, None, events)
    assert view["why"] == [
        "restarted 2 times, the most its maxRetry (2) allows",
        "the job controller executed RestartJob, as the Job's policy PodFailed -> RestartJob "
        "calls for (2024-05-01T10:05:00Z)",
        "last warning: PluginError: cannot create the ssh secret (2024-05-01T10:03:00Z)",
    ]
    print_job(view, 1714557900.0)
    out = capsys.readouterr().out
    assert "Why" in out and "restarted 2 times" in out


def test_an_aborted_job_names_the_task_policy_that_aborted_it():
    spec = {
        "tasks": [
            {"name": "ps", "replicas": 1},
            {"name": "worker", "replicas": 2,
             "policies": [{"exitCode": 3, "action": "AbortJob"}]},
        ]
    }  # fmt: skip
    job = _job_in("Aborted", spec=spec)
    view = job_view(job, None, [_said("ExecuteAction", "Start to execute action AbortJob", 2)])
    assert view["why"] == [
        "the job controller executed AbortJob, as task worker's policy exit code 3 -> "
        "AbortJob calls for (2024-05-01T10:02:00Z)"
    ]


def test_a_job_stopped_by_a_command_says_a_command_asked():
    issued = "Start to execute command AbortJob, and clean it up to make sure executed not more"
    events = [
        _said("CommandIssued", issued, 2),
        _said("ExecuteAction", "Start to execute action AbortJob", 2),
    ]
    view = job_view(_job_in("Aborting"), None, events)
    assert view["why"] == ["AbortJob was asked for by a command (pumice job / vcctl job)"]


def test_a_job_failed_by_its_pods_says_how_they_ended():
    job = _job_in("Failed", retryCount=0, succeeded=1, failed=1)
    view = job_view(job, None, [])
    assert view["why"] == ["its pods ended with 1 succeeded and 1 failed; minAvailable is 2"]


def test_a_running_job_has_no_why():
    events = [_said("ExecuteAction", "Start to execute action RestartJob", 1)]
    assert job_view(_job_in("Running"), None, events)["why"] == []
