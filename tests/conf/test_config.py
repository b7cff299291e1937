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


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("9" * 30, "expected an integer (Go's int64), got '999"),
        (2**63, "expected an integer (Go's int64), got 9223372036854775808"),
        (10**4000, "got <a number of about 4001 digits>"),
        ([[1]], "got [[1]]"),
    ],
)
def test_an_integer_argument_beyond_gos_int64_is_refused(value: object, says: str) -> None:
    doc = {"actions": "allocate", "tiers": [{"plugins": [{"name": "binpack"}]}]}
    doc["tiers"][0]["plugins"][0]["arguments"] = {"binpack.weight": value}
    with pytest.raises(InputError) as err:
        Scheduler.create(parse_config(doc, source="c.yaml"))
    line = err.value.render()
    assert says in line and "arguments.binpack.weight" in line and len(line) < 200


def test_a_configmap_whose_data_is_not_a_map_of_text() -> None:
    cases = [
        ([1], "field data: expected a map"),
        ({"volcano-scheduler.conf": 5}, "field data.volcano-scheduler.conf: expected the"),
    ]
    for data, says in cases:
        with pytest.raises(InputError) as err:
            parse_config({"kind": "ConfigMap", "data": data}, source="cm.yaml")
        assert err.value.render().startswith("cm.yaml: ConfigMap: ") and says in str(err.value)
