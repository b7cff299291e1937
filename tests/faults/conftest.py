"""One control plane for the fault tests, with pumice's CRDs; each test empties it
(``Bench.reset``) and tears down what it started (``Bench.teardown``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.faults.command import crd_files
from pumice.faults.scenarios import Bench
from pumice.sandbox import ControlPlane
from pumice.sandbox.apply import apply


@pytest.fixture(scope="session")
def fault_plane(k8s_binaries: None) -> Iterator[ControlPlane]:
    plane = ControlPlane().start()
    apply(plane.kubeconfig, crd_files())
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def bench(fault_plane: ControlPlane, tmp_path: Path) -> Iterator[Bench]:
    b = Bench(fault_plane, tmp_path, lambda line: None)
    b.reset()
    try:
        yield b
    finally:
        b.teardown()
        b.close()
