"""Volcano's own configurations (its installer, benchmark and user guides) load unchanged.

The files under tests/data/configs/volcano/ are copies of Volcano's, each naming where
it comes from. What pumice does not implement of them loads with one warning per item
saying so; the rest runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.kit import node, pod, podgroup, queue, run

from pumice.scheduler import Scheduler

CONFIGS = Path(__file__).parent.parent / "data/configs/volcano"

#: File -> the items pumice does not implement, each warned about once.
UNSUPPORTED = {
    "helm-volcano-scheduler.conf": [],
    "helm-volcano-scheduler-ci.conf": [],
    "benchmark-gang-configmap.yaml": [],
    "development-configmap.yaml": [],
    "capacity-hierarchy.yaml": [],
    "capacity-dra.yaml": [
        "argument capacity.DynamicResourceAllocationEnable of plugin capacity",
        "argument capacity.DRAConsumableCapacityEnable of plugin capacity",
    ],
    "cdp.yaml": [],
    "deviceshare-gpu-sharing.yaml": [],
    "deviceshare-gpu-number.yaml": [],
    "deviceshare-vgpu.yaml": [],
    "deviceshare-vnpu.yaml": [
        "argument deviceshare.AscendHAMiVNPUEnable of plugin deviceshare",
        "argument deviceshare.KnownGeometriesCMNamespace of plugin deviceshare",
        "argument deviceshare.KnownGeometriesCMName of plugin deviceshare",
    ],
    "predicates-gpu-sharing-older.yaml": [
        "argument predicate.GPUSharingEnable of plugin predicates"
    ],
    "network-topology-aware.yaml": [],
    "numa-aware.yaml": [],
    "resource-strategy-fit.yaml": [],
    "extender.yaml": [],
    "task-topology.yaml": [],
}


def test_every_copied_config_is_listed() -> None:
    assert sorted(p.name for p in CONFIGS.iterdir()) == sorted(UNSUPPORTED)


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_volcano_config_loads_with_one_warning_per_unsupported_item(name: str) -> None:
    config = Scheduler.from_file(str(CONFIGS / name)).config
    expected = UNSUPPORTED[name]
    assert len(config.warnings) == len(expected), config.warnings
    for item in expected:
        hits = [w for w in config.warnings if w.startswith(item + " ")]
        assert len(hits) == 1, (item, config.warnings)
        assert "not supported by pumice" in hits[0]


def test_volcanos_numa_aware_config_schedules_with_every_plugin_it_names() -> None:
    """numa-aware's config: numa-aware joins gang, predicates and the rest."""
    config = Scheduler.from_file(str(CONFIGS / "numa-aware.yaml")).config
    assert "numa-aware" in config.plugin_names()
    assert "predicates" in config.plugin_names()
    text = (CONFIGS / "numa-aware.yaml").read_text()
    conf = text.split("volcano-scheduler.conf: |\n", 1)[1]
    objects = [queue(), node("n1", cpu="4"), podgroup("pg", min_member=2)]
    objects += [pod(f"p{i}", group="pg", cpu="1") for i in range(2)]
    decisions = run(objects, "\n".join(line[4:] for line in conf.splitlines()))
    assert len(decisions.binds) == 2
