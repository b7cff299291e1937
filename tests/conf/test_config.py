"""Volcano's configuration format: flags, defaults, arguments, errors."""

from __future__ import annotations

import pytest
import yaml

from pumice.conf.config import load_config, parse_config
from pumice.errors import InputError
from pumice.scheduler import Scheduler


def test_default_config_is_volcanos() -> None:
    c = load_config(None)
    assert c.actions == ("enqueue", "allocate", "backfill")
    assert c.plugin_names() == [
        "priority",
        "gang",
        "conformance",
        "overcommit",
        "drf",
        "predicates",
        "proportion",
        "nodeorder",
        "binpack",
    ]
    gang = c.tiers[0].plugins[1]
    assert gang.enabled("preemptable") is False
    assert gang.enabled("job_order") is True  # a missing flag means enabled


def test_volcano_flag_spellings_are_accepted() -> None:
    raw = yaml.safe_load("""
actions: "allocate"
tiers:
- plugins:
  - name: proportion
    enabledOverused: false
    enabledAllocatable: true
    enableQueueOrder: false
    enableJobEnqueued: false
""")
    opt = parse_config(raw).tiers[0].plugins[0]
    assert opt.enabled("overused") is False
    assert opt.enabled("queue_order") is False
    assert opt.enabled("job_enqueueable") is False
    assert opt.enabled("allocatable") is True


def test_hierarchy_defaults_off() -> None:
    opt = parse_config({"actions": "allocate", "tiers": [{"plugins": [{"name": "drf"}]}]})
    assert opt.tiers[0].plugins[0].enabled("hierarchy") is False


def test_duplicate_plugin_loads_with_a_warning() -> None:
    """Volcano accepts a plugin listed twice; pumice loads it too, and says so."""
    c = parse_config(
        {
            "actions": "allocate",
            "tiers": [{"plugins": [{"name": "gang"}]}, {"plugins": [{"name": "gang"}]}],
        }
    )
    assert c.plugin_names() == ["gang", "gang"]
    assert [w for w in c.warnings if "plugin gang" in w and "more than once" in w]


def test_bad_plugin_argument_fails_at_load_not_mid_cycle(tmp_path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: nodeorder\n'
        "    arguments: {leastrequested.weight: lots}\n"
    )
    with pytest.raises(InputError, match=r"leastrequested\.weight"):
        Scheduler.from_file(str(p))


def test_action_configurations_are_kept() -> None:
    c = parse_config(
        {
            "actions": "allocate",
            "tiers": [],
            "configurations": [{"name": "allocate", "arguments": {"x": 1}}],
        }
    )
    assert c.action_arguments("allocate").get_int("x", 0) == 1
