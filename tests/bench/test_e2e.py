"""``pumice bench e2e``: pumice against a real API server, at a tiny size.

What a user relies on: a run reports every pod bound and no gang partly bound, the
report and the JSON file hold the figures, and the gang check flags a scheduler that
binds part of a gang (checked on the watch's bookkeeping, without a server). No test
reads a timing.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pumice.bench.e2e import run_e2e, runs
from pumice.bench.e2e_load import GROUP_ANNOTATION, pod
from pumice.bench.e2e_model import DEFAULT_K8S, E2EOptions
from pumice.bench.e2e_report import print_report, write_json
from pumice.bench.e2e_watch import BindWatch


@pytest.fixture
def k8s_dir(k8s_binaries: None) -> Path:
    """Volcano's folder (its CRDs are the fallback for pumice's); the run itself needs
    only kube-apiserver and etcd, whose absence skips the test (``k8s_binaries``)."""
    return DEFAULT_K8S


@pytest.mark.k8s
def test_tiny_run_binds_every_pod_and_keeps_gangs_whole(k8s_dir: Path, tmp_path: Path) -> None:
    """20 nodes, 50 plain pods and 2 gangs of 10, pumice only: all bound, gangs whole."""
    options = E2EOptions(
        nodes=20, pods=50, gangs=2, gang_size=10, schedulers=("pumice",),
        k8s_dir=k8s_dir, workdir=tmp_path / "runs",
    )  # fmt: skip
    results = run_e2e(options)
    assert [(r.workload, r.scheduler) for r in results] == [
        ("basic", "pumice"),
        ("gangs", "pumice"),
    ]
    for r in results:
        assert r.problems == [], r.problems
        assert r.bound == r.pods
    basic, gangs = results
    assert basic.pods == 50 and basic.gang_check is None
    assert gangs.pods == 20
    assert gangs.gang_check is not None
    assert gangs.gang_check["groups"] == 2
    assert gangs.gang_check["violations"] == 0
    assert gangs.gang_check["early"] == [] and gangs.gang_check["partial_at_end"] == []

    out = io.StringIO()
    print_report(results, out)
    assert "2/2 whole" in out.getvalue()
    write_json(results, tmp_path / "e2e.json")
    saved = json.loads((tmp_path / "e2e.json").read_text())
    assert [r["bound"] for r in saved["runs"]] == [50, 20]


def test_kube_scheduler_skips_gangs() -> None:
    """kube-scheduler has no gangs: it runs the basic workload only."""
    options = E2EOptions(schedulers=("pumice", "kube-scheduler", "volcano"))
    assert [(w, p.name) for w, p in runs(options)] == [
        ("basic", "pumice"),
        ("basic", "kube-scheduler"),
        ("basic", "volcano"),
        ("gangs", "pumice"),
        ("gangs", "volcano"),
    ]


def _event(name: str, group: str, node: str | None = None) -> dict:
    obj = pod(name, "x", "gangs", group=group)
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def test_gang_check_flags_a_bind_before_the_gang_exists() -> None:
    """A pod bound while its gang has fewer pods than minMember is flagged early, and a
    gang left short is flagged at the end; a gang bound only once whole is not."""
    watch = BindWatch(None, "gangs", {"a": 3, "b": 3})  # type: ignore[arg-type]
    seen = 0.0

    def observe(obj: dict) -> None:
        nonlocal seen
        seen += 1.0
        watch._observe("MODIFIED", obj, seen)

    for i in range(3):
        observe(_event(f"a-{i}", "a"))
    for i in range(3):
        observe(_event(f"a-{i}", "a", "n1"))  # gang a: bound once all 3 exist
    observe(_event("b-0", "b"))
    observe(_event("b-0", "b", "n1"))  # gang b: bound with 1 of 3 created
    observe(_event("b-1", "b"))
    check = watch.gang_check()
    assert check.early == ["b"]
    assert check.partial_at_end == ["b"]
    assert check.violations == 1
    assert check.max_partial_groups == 1
    assert watch.groups["a"].created_at_first_bind == 3
    assert GROUP_ANNOTATION in _event("x", "a")["metadata"]["annotations"]


# -- the vcjob workload: one Volcano Job through the controllers ---------------------------


@pytest.mark.k8s
@pytest.mark.parametrize(
    ("inline", "minimum", "controllers"),
    [
        (False, None, "pumice controllers + pumice run"),
        (True, 1, "pumice run --controllers"),
    ],
)
def test_tiny_vcjob_run_creates_and_binds_every_pod(
    k8s_dir: Path, tmp_path: Path, inline: bool, minimum: int | None, controllers: str
) -> None:
    """A Job of 20 pods on 10 nodes, pumice's controllers beside its scheduler (or inside
    it): every pod created by the controller and bound, every milestone reported, the
    Job's gang never partly bound; the report has the Job's table."""
    options = E2EOptions(
        nodes=10, job_pods=20, job_min_available=minimum, inline_controllers=inline,
        schedulers=("pumice",), workloads=("vcjob",), k8s_dir=k8s_dir,
        workdir=tmp_path / "runs",
    )  # fmt: skip
    (r,) = run_e2e(options)
    assert r.problems == [], r.problems
    assert (r.workload, r.pods, r.bound) == ("vcjob", 20, 20)
    assert r.job_min_available == (minimum or 20)
    assert r.controllers == controllers
    for name in ("podgroup_created_s", "podgroup_inqueue_s", "first_pod_created_s",
                 "last_pod_created_s", "first_bind_s", "last_bind_s",
                 "controller_pods_per_s", "bind_pods_per_s"):  # fmt: skip
        assert getattr(r, name) is not None, name
    assert (r.controller_cpu_s is None) == inline  # no process of their own when inline
    assert r.gang_check is not None and r.gang_check["groups"] == 1
    assert r.gang_check["violations"] == 0
    out = io.StringIO()
    print_report([r], out)
    assert f"one Volcano Job of 20 pods (minAvailable {minimum or 20})" in out.getvalue()
    assert f"| {controllers} | 10 / 20 |" in out.getvalue()


def test_vcjob_runs_only_the_peers_with_a_job_controller() -> None:
    """kube-scheduler has no Job controller: the vcjob workload runs pumice and Volcano."""
    options = E2EOptions(schedulers=("pumice", "kube-scheduler", "volcano"), workloads=("vcjob",))
    assert [(w, p.name) for w, p in runs(options)] == [("vcjob", "pumice"), ("vcjob", "volcano")]
    assert options.pod_count("vcjob") == 1000


def test_vcjob_manifest_sets_what_volcanos_webhook_would_default() -> None:
    """vc-controller-manager runs without its admission webhook, so the Job carries the
    queue, minAvailable, maxRetry and the task's name and minimum itself; its pods carry
    the bench label the bind watch selects on."""
    from pumice.bench.e2e_load import LABEL
    from pumice.bench.e2e_vcjob import job, podgroup_name

    obj = job("j", "volcano", replicas=30, min_available=30)
    spec = obj["spec"]
    assert (spec["schedulerName"], spec["queue"], spec["minAvailable"], spec["maxRetry"]) == (
        "volcano", "default", 30, 3,
    )  # fmt: skip
    (task,) = spec["tasks"]
    assert (task["name"], task["replicas"], task["minAvailable"]) == ("worker", 30, 30)
    assert task["template"]["metadata"]["labels"] == {LABEL: "vcjob"}
    assert task["template"]["spec"]["schedulerName"] == "volcano"
    warm = job("w", "pumice", replicas=1, min_available=1, workload=None)
    assert warm["spec"]["tasks"][0]["template"]["metadata"] == {}
    assert podgroup_name({"metadata": {"name": "j", "uid": "u1"}}) == "j-u1"


@pytest.mark.parametrize(
    "argv",
    [
        ["--e2e-job-pods", "0"],
        ["--e2e-job-pods", "5", "--e2e-job-min-available", "6"],
        ["--e2e-job-min-available", "0"],
    ],
)
def test_vcjob_options_out_of_range_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from pumice.cli import main

    assert main(["bench", "e2e", "--e2e-workloads", "vcjob", *argv]) == 2
    err = capsys.readouterr().err
    assert "--e2e-job-" in err
