"""The end of a test run says how many tests skipped and why: a run without the
Kubernetes binaries must not look like a full one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_run_without_kube_apiserver_says_how_many_skipped_and_how_to_get_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("KUBEBUILDER_ASSETS", "PYTEST_ADDOPTS")}
    env.update(PUMICE_K8S_BIN=str(tmp_path / "none"), PATH=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
         "tests/run/test_default_queue_k8s.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-2] == (
        "2 tests skipped: no Kubernetes control plane (set PUMICE_K8S_BIN to a folder holding "
        "kube-apiserver; etcd from Debian's etcd-server)"
    )
    assert lines[-1].startswith("2 skipped in ")  # pytest's own line stays the last
