"""The seed inputs a fuzz case starts from: real files, listed in a stable order.

Snapshots and configurations come from the examples shipped with pumice and, when
pumice runs from a source checkout, from its tests (``tests/scenarios``, ``tests/data``).
Simulator cases start from small clusters and workloads only, so that each run stays a
fraction of a second. The order is sorted by path, so a seed number picks the same
files on every machine with the same checkout.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pumice

PACKAGE = Path(pumice.__file__).parent
EXAMPLES = PACKAGE / "examples"
#: The tests of a source checkout (absent from an installed wheel).
TESTS = PACKAGE.parents[1] / "tests"

#: A tiny simulator cluster and workload, always available.
TINY_CLUSTER = b"""nodes:
- count: 2
  namePrefix: gpu
  allocatable: {cpu: 16, memory: 64Gi, nvidia.com/gpu: 2}
- allocatable: {cpu: 8, memory: 32Gi}
  namePrefix: cpu
"""
TINY_WORKLOAD = b"""apiVersion: pumice.io/v1alpha1
kind: Workload
queues:
- {name: a, weight: 2, capability: {nvidia.com/gpu: 4}}
- {name: b, weight: 1}
jobs:
- name: train
  queue: a
  arrival: 10s
  duration: 10m
  minAvailable: 2
  tasks:
  - {name: worker, replicas: 2, requests: {cpu: 4, memory: 8Gi, nvidia.com/gpu: 1}}
- name: web
  queue: b
  arrival: 20s
  duration: 5m
  replicas: 1
  requests: {cpu: 1500m, memory: 2Gi}
"""


@dataclass(frozen=True, slots=True)
class Corpus:
    """Seed files by role: snapshots (each with the configuration its scenario runs
    under, or None), configurations, and simulator (cluster, workload) pairs."""

    snapshots: tuple[tuple[Path, Path | None], ...]
    configs: tuple[Path, ...]
    simulations: tuple[tuple[bytes, bytes, str], ...]


def _sorted(paths: Iterable[Path]) -> list[Path]:
    return sorted(paths, key=lambda p: str(p))


def load_corpus() -> Corpus:
    """The seeds found in this installation (examples always; tests when present)."""
    snapshots: list[tuple[Path, Path | None]] = [(EXAMPLES / "gpu-cluster.yaml", None)]
    configs = _sorted(EXAMPLES.glob("configs/*.yaml"))
    scenarios = TESTS / "scenarios"
    if scenarios.is_dir():
        for snap in _sorted(scenarios.rglob("snapshot.yaml")):
            config = snap.with_name("config.yaml")
            snapshots.append((snap, config if config.is_file() else None))
        configs += _sorted(scenarios.rglob("config.yaml"))
    data = TESTS / "data"
    if data.is_dir():
        configs += _sorted((data / "configs").rglob("*.yaml"))
        if (data / "full-actions.yaml").is_file():
            configs.append(data / "full-actions.yaml")
    simulations = [(TINY_CLUSTER, TINY_WORKLOAD, "tiny")]
    workloads = data / "workloads"
    if (workloads / "clusters/compact.yaml").is_file():
        cluster = (workloads / "clusters/compact.yaml").read_bytes()
        for w in _sorted((workloads / "mixed").glob("*.yaml")):
            simulations.append((cluster, w.read_bytes(), f"tests/data/workloads/mixed/{w.name}"))
    return Corpus(tuple(snapshots), tuple(configs), tuple(simulations))
