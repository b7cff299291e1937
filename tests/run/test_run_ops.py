"""Operating `pumice run`: config hot reload, the SIGUSR1 cache dump replayed by
`pumice cycle`, bad objects in the cluster, SIGTERM, and the shipped RBAC."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from tests.run import kube_kit as k

from pumice.cache.build import build_snapshot
from pumice.cache.load import load_objects
from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.scheduler import Scheduler

pytestmark = pytest.mark.k8s

ENQUEUE_ONLY = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n'
DEFAULT = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
BAD = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gangg\n'


def _swap(link: Path, folder: Path, name: str, text: str) -> None:
    """Change the config the way the kubelet updates a mounted ConfigMap: a new
    directory, and a symlink swapped onto it."""
    target = folder / name
    target.mkdir()
    (target / "volcano-scheduler.conf").write_text(text)
    tmp = folder / "..data_tmp"
    tmp.symlink_to(target)
    tmp.replace(link)


def test_config_hot_reload_takes_a_good_config_and_refuses_a_bad_one(kube, tmp_path, monkeypatch):
    """In a pod (the Deployment's downward API), a refused config is an Event on the
    scheduler's own Pod."""
    client, kubeconfig = kube
    k.nodes(client, 1, cpu="4")
    own = k.pod(client, "pumice-scheduler", scheduler="default-scheduler")
    monkeypatch.setenv("POD_NAME", "pumice-scheduler")
    monkeypatch.setenv("POD_NAMESPACE", "default")
    monkeypatch.setenv("POD_UID", own["metadata"]["uid"])
    data = tmp_path / "..data"
    _swap(data, tmp_path, "v1", ENQUEUE_ONLY)
    conf = tmp_path / "volcano-scheduler.conf"
    conf.symlink_to(data / "volcano-scheduler.conf")
    k.pod(client, "p1", cpu="1")
    with k.running(kubeconfig, config=str(conf)) as runner:
        k.wait_for("cycles under the first config", lambda: runner.cycles >= 3)
        assert k.bound(client) == {}  # no allocate action: nothing is placed
        _swap(data, tmp_path, "v2", BAD)
        refused = k.wait_for(
            "a ConfigRefused event",
            lambda: [e for e in k.events(client) if e["reason"] == "ConfigRefused"],
        )
        assert "gangg" in refused[0]["message"] and "last good" in refused[0]["message"]
        assert refused[0]["involvedObject"]["uid"] == own["metadata"]["uid"]
        cycles = runner.cycles
        k.wait_for("more cycles", lambda: runner.cycles >= cycles + 3)
        assert k.bound(client) == {}  # still the first config
        assert tuple(runner.scheduler.config.actions) == ("enqueue",)
        _swap(data, tmp_path, "v3", DEFAULT)
        k.wait_for("the pod bound under the new config", lambda: "p1" in k.bound(client))
    assert runner.config.reloads == 1 and runner.config.refusals == 1


def test_a_sigusr1_dump_replays_to_the_same_decisions(kube, tmp_path):
    client, kubeconfig = kube
    k.nodes(client, 3, cpu="4")
    leading = False
    with k.running(kubeconfig) as runner:
        runner.cluster.may_write = lambda: leading
        runner.may_write = lambda: leading  # a standby: its cache follows, it decides nothing
        runner.options.dump_dir = str(tmp_path)
        k.gang(client, "g", 3, cpu="2")
        k.pod(client, "solo", cpu="3")
        k.pod(client, "huge", cpu="64")  # never fits: explained in both
        k.wait_for("every pod in the cache", lambda: len(runner.cache.tasks) == 5)
        runner.request_dump()
        dump = k.wait_for("the dump", lambda: list(tmp_path.glob("pumice-dump-*.json")))
        replayed = Scheduler.from_file(None).cycle(build_snapshot(load_objects([str(dump[0])])))
        cycles: list = []
        runner.on_cycle = lambda decisions, applied: cycles.append(decisions)
        leading = True
        live = k.wait_for("the runner's cycle", lambda: cycles)[0]
    assert replayed.binds and replayed.binds == live.binds
    assert replayed.pending == live.pending
    assert len(replayed.pending) == 2  # solo does not fit now, huge never will


def test_bad_objects_are_reported_once_and_skipped(kube, caplog):
    client, kubeconfig = kube
    k.nodes(client, 2, cpu="4")
    k.podgroup(client, "negative", -1)
    k.podgroup(client, "bad-quantity", 1, minResources={"cpu": "-2"})
    for name, parent in (("loop-a", "loop-b"), ("loop-b", "loop-a")):
        k.queue(client, name, parent=parent)
    k.gang(client, "fine", 2, cpu="1")
    caplog.set_level(logging.WARNING, logger="pumice")
    with k.running(kubeconfig) as runner:
        k.wait_for("the good gang bound", lambda: len(k.bound(client)) == 2)
        k.nodes(client, 1, cpu="4", start=2)  # a new node: the model is rebuilt
        k.wait_for("the new node", lambda: len(runner.cache.nodes) == 3)
        warned = k.wait_for(
            "InvalidSpec events",
            lambda: (
                (ev := [e for e in k.events(client) if e["reason"] == "InvalidSpec"])
                and len(ev) >= 4
                and ev
            ),
        )
    about = {e["involvedObject"]["name"]: e["message"] for e in warned}
    assert "minMember" in about["negative"]
    assert "minResources" in about["bad-quantity"]
    assert "cycle" in about["loop-a"] or "cycle" in about["loop-b"]
    lines = [r.getMessage() for r in caplog.records if "skipped by pumice" in r.getMessage()]
    assert sum("default/negative" in line for line in lines) == 1  # once, not per rebuild


def test_pumice_run_stops_cleanly_on_sigterm_and_dumps_on_sigusr1(kube, tmp_path):
    client, kubeconfig = kube
    k.nodes(client, 2, cpu="4")
    k.gang(client, "g", 2, cpu="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pumice.cli", "run", "--kubeconfig", kubeconfig,
         "--schedule-period", "200ms", "--dump-dir", str(tmp_path),
         "--healthz-address", "127.0.0.1:0", "--log-format", "json"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        k.wait_for("the gang bound", lambda: len(k.bound(client)) == 2)
        proc.send_signal(signal.SIGUSR1)
        dump = k.wait_for("the dump", lambda: list(tmp_path.glob("pumice-dump-*.json")))
        time.sleep(0.2)
        items = orjson.loads(dump[0].read_bytes())["items"]
        assert {i["kind"] for i in items} >= {"Node", "Pod", "PodGroup", "Queue"}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    logs = [orjson.loads(line) for line in proc.stderr.read().splitlines() if line.startswith("{")]
    assert any("caches synced" in rec["msg"] for rec in logs)


def test_a_bad_config_stops_the_start_with_exit_code_2(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text(BAD)
    out = subprocess.run(
        [sys.executable, "-m", "pumice.cli", "run", "--config", str(conf),
         "--kubeconfig", os.devnull],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert "gangg" in out.stderr


def test_the_shipped_cluster_role_is_enough_to_schedule(rbac_control_plane):
    """deploy/ applied on an API server that enforces RBAC; pumice runs as its service
    account and schedules a gang, writing every status it writes."""
    cp = rbac_control_plane
    admin = KubeClient.from_config(cp.kubeconfig)
    from pumice.sandbox.apply import apply

    apply(cp.kubeconfig, [str(k.CRDS)])
    k.nodes(admin, 2, cpu="4")
    k.gang(admin, "g", 2, cpu="1")
    k.pod(admin, "huge", cpu="64")
    with k.running(cp.kubeconfig_for("system:serviceaccount:pumice-system:pumice")) as runner:
        k.wait_for("the gang bound", lambda: len(k.bound(admin)) == 2)
        k.wait_for("the podgroup status", lambda: (k.get(admin, "PodGroup", "default/g") or {})
                   .get("status", {}).get("phase") == "Running")  # fmt: skip
        k.wait_for("huge's condition", lambda: k.condition(k.pods(admin)["huge"], "PodScheduled"))
        k.wait_for("an event", lambda: k.events_for(admin, "huge", "FailedScheduling"))
        k.wait_for("the queue status", lambda: (k.get(admin, "Queue", "default") or {})
                   .get("status", {}).get("allocated"))  # fmt: skip
    assert runner.cluster.stats.write_failures == {}
    status, _ = admin.request("GET", RESOURCES["Lease"].path("default", "x"))
    assert status == 404
