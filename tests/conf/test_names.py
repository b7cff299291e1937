"""Every name of a configuration: used, Volcano's but unsupported (one warning, skipped),
or a misspelling (refused with file, key path and the closest known name)."""

from __future__ import annotations

import logging

import pytest
import yaml
from tests.kit import node, pod, podgroup, queue, run

from pumice.actions import default_registry as default_actions
from pumice.conf import catalog
from pumice.errors import InputError
from pumice.framework.hooks import HOOKS
from pumice.plugins import default_registry as default_plugins
from pumice.run.reload import ConfigWatcher
from pumice.scheduler import Scheduler

BASE = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def load(tmp_path, text: str):
    path = tmp_path / "sched.conf"
    path.write_text(text)
    return Scheduler.from_file(str(path)).config


def refused(tmp_path, text: str) -> str:
    with pytest.raises(InputError) as err:
        load(tmp_path, text)
    message = err.value.render()
    assert str(tmp_path / "sched.conf") in message
    return message


# -- misspellings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "guess"),
    [
        (BASE.replace("name: binpack", "name: binpak"), "tiers[1].plugins[3].name", "binpack"),
        (
            BASE.replace("name: gang", "name: gang\n    enableJobOrdr: false"),
            "tiers[0].plugins[1].enableJobOrdr",
            "enableJobOrder",
        ),
        (
            BASE.replace(
                "name: gang", "name: gang\n    enabledOverused: false\n    enableOverused: false"
            ),
            "tiers[0].plugins[1].enableOverused",
            "enabledOverused",
        ),
        (
            BASE.replace("name: binpack", "name: binpack\n    arguments:\n      binpack.weigth: 3"),
            "tiers[1].plugins[3].arguments.binpack.weigth",
            "binpack.weight",
        ),
        (
            BASE.replace(
                "name: nodeorder", "name: nodeorder\n    arguments:\n      leastrequested.wieght: 3"
            ),
            "tiers[1].plugins[2].arguments.leastrequested.wieght",
            "leastrequested.weight",
        ),
        (BASE.replace("backfill", "backfil"), "actions", "backfill"),
        (
            BASE + "configurations:\n- name: preemt\n  arguments: {}\n",
            "configurations[0].name",
            "preempt",
        ),
        (
            BASE + "configurations:\n- name: allocate\n  argument: {}\n",
            "configurations[0].argument",
            "arguments",
        ),
        ("action: allocate\n" + BASE, "field action", "actions"),
        (
            BASE.replace("- plugins:\n  - name: predicates", "- plugin:\n  - name: predicates"),
            "tiers[1].plugin",
            "plugins",
        ),
        (
            BASE.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, preempt"')
            + "configurations:\n- name: preempt\n  arguments:\n"
            "    minCandidateNodesPercent: 5\n",
            "configurations[0].arguments.minCandidateNodesPercent",
            "minCandidateNodesPercentage",
        ),
        (
            BASE.replace("name: predicates", "name: numaaware"),
            "tiers[1].plugins[0].name",
            "numa-aware",
        ),
        (
            BASE.replace(
                "name: predicates",
                "name: deviceshare\n    arguments:\n      deviceshare.GPUSharingEnabled: 1",
            ),
            "tiers[1].plugins[0].arguments.deviceshare.GPUSharingEnabled",
            "deviceshare.GPUSharingEnable",
        ),
    ],
)
def test_a_misspelling_is_refused_with_path_and_closest_name(tmp_path, text, path, guess) -> None:
    message = refused(tmp_path, text)
    assert path in message
    assert f"did you mean {guess}?" in message


def test_a_dynamic_key_is_suggested_by_its_prefix(tmp_path) -> None:
    message = refused(
        tmp_path,
        BASE.replace(
            "name: binpack", "name: binpack\n    arguments:\n      binpack.resource.gpu: 2"
        ),
    )
    assert "did you mean binpack.resources.<name>?" in message


def test_a_typo_exits_2_on_the_cli(tmp_path, capsys) -> None:
    from pumice.cli import main

    path = tmp_path / "sched.conf"
    path.write_text(
        BASE.replace("name: binpack", "name: binpack\n    arguments:\n      binpack.weigth: 3")
    )
    assert main(["explain-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "binpack.weigth" in err and "did you mean binpack.weight?" in err


# -- used ---------------------------------------------------------------------------------


def test_keys_pumice_reads_load_silently(tmp_path) -> None:
    text = BASE.replace(
        "name: binpack",
        "name: binpack\n    arguments:\n      binpack.weight: 2\n      binpack.cpu: 1\n"
        "      binpack.resources: nvidia.com/gpu\n      binpack.resources.nvidia.com/gpu: 3",
    ).replace("name: proportion", "name: overcommit\n    arguments:\n      overcommit-factor: 1.5")
    assert load(tmp_path, text).warnings == ()


def test_the_built_in_default_loads_without_warnings() -> None:
    assert Scheduler.from_file(None).config.warnings == ()


# -- unsupported --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        (
            BASE.replace("name: predicates", "name: predicates\n  - name: reservation"),
            "plugin reservation",
        ),
        (
            BASE.replace("name: gang", "name: gang\n    enableTargetJob: true"),
            "flag enableTargetJob",
        ),
        (
            BASE.replace(
                "name: predicates",
                "name: predicates\n    arguments:\n      predicate.CacheEnable: true",
            ),
            "argument predicate.CacheEnable of plugin predicates",
        ),
        (
            BASE + "configurations:\n- name: allocate\n  arguments:\n"
            "    predicateErrorCacheEnable: true\n",
            "argument predicateErrorCacheEnable of action allocate",
        ),
        (
            BASE + "configurations:\n- name: init-params\n  arguments: {grace-over-time: '900'}\n",
            "configuration init-params",
        ),
        (
            BASE + "metrics:\n  type: elasticsearch\n  address: http://elastic:9200\n",
            "metrics source elasticsearch",
        ),
    ],
)
def test_an_unsupported_item_loads_with_one_warning(
    tmp_path, text, subject, plugin_pumice_lacks
) -> None:
    warnings = load(tmp_path, text).warnings
    hits = [w for w in warnings if w.startswith(subject)]
    assert len(hits) == 1, warnings
    assert "not supported by pumice" in hits[0]
    assert len(warnings) == 1


def test_an_unsupported_plugin_listed_in_two_tiers_warns_once_naming_both(
    tmp_path, plugin_pumice_lacks
) -> None:
    text = BASE.replace("name: gang", "name: gang\n  - name: reservation").replace(
        "name: binpack", "name: binpack\n  - name: reservation"
    )
    (warning,) = load(tmp_path, text).warnings
    assert "tiers[0].plugins[2]" in warning and "tiers[1].plugins[4]" in warning


def test_unsupported_items_are_skipped(tmp_path, plugin_pumice_lacks) -> None:
    config = load(
        tmp_path, BASE.replace("name: predicates", "name: predicates\n  - name: reservation")
    )
    assert config.actions == ("enqueue", "allocate", "backfill")
    assert "reservation" not in config.plugin_names()
    assert "predicates" in config.plugin_names()
    assert {(s.kind, s.name) for s in config.skipped} == {("plugin", "reservation")}


def test_old_misspelt_flag_is_read_with_a_warning_naming_volcanos_key(tmp_path) -> None:
    (warning,) = load(
        tmp_path, BASE.replace("name: gang", "name: gang\n    EnabledClusterOrder: true")
    ).warnings
    assert "Volcano's spelling, which is enabledClusterOrder" in warning


def test_a_config_for_an_action_not_listed_warns(tmp_path) -> None:
    (warning,) = load(
        tmp_path, BASE + "configurations:\n- name: preempt\n  arguments: {}\n"
    ).warnings
    assert "has no effect: preempt is not in actions" in warning


def test_a_repeated_configuration_keeps_the_first_as_volcano(tmp_path) -> None:
    text = BASE.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, preempt"')
    text += (
        "configurations:\n- name: preempt\n  arguments: {minCandidateNodesAbsolute: 3}\n"
        "- name: preempt\n  arguments: {minCandidateNodesAbsolute: 7}\n"
    )
    config = load(tmp_path, text)
    assert config.action_arguments("preempt").get_int("minCandidateNodesAbsolute", 0) == 3
    assert any("configurations[1]" in w and "first one is used" in w for w in config.warnings)


def test_drf_hierarchy_with_proportion_in_one_tier_is_refused_as_by_volcano(tmp_path) -> None:
    message = refused(
        tmp_path,
        BASE.replace(
            "name: predicates", "name: drf\n    enableHierarchy: true\n  - name: predicates"
        ),
    )
    assert "tiers[1]" in message and "conflict" in message


def test_enable_job_enqueued_gates_the_enqueued_notice_too(tmp_path) -> None:
    """As in Volcano, one flag gates both the enqueueable vote and the enqueued notice."""
    config = load(
        tmp_path, BASE.replace("name: proportion", "name: overcommit\n    enableJobEnqueued: false")
    )
    opt = next(p for t in config.tiers for p in t.plugins if p.name == "overcommit")
    assert not opt.enabled("job_enqueueable") and not opt.enabled("job_enqueued")


def test_a_plugin_listed_twice_uses_the_last_entrys_arguments_in_both_tiers(tmp_path) -> None:
    """binpack's weight from its second entry; its score asked in both tiers."""
    text = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: binpack
    arguments: {binpack.weight: 1}
- plugins:
  - name: predicates
  - name: binpack
    arguments: {binpack.weight: 5}
"""
    sched = Scheduler.from_file(str(_write(tmp_path, text)))
    assert any("plugin binpack" in w and "more than once" in w for w in sched.config.warnings)
    from pumice.cache.build import build_snapshot

    ssn = sched.open(build_snapshot([]))
    (binpack,) = [p for p in ssn.plugins if p.name == "binpack"]
    assert binpack.weight == 5
    assert [[name for name, _ in tier] for tier in ssn.hooks.chain("node_order")] == [
        ["binpack"],
        ["binpack"],
    ]
    objects = [queue(), node("n1"), node("n2"), podgroup("pg"), pod("p", group="pg")]
    assert len(run(objects, text).binds) == 1


def test_a_reload_logs_the_new_configs_warnings(tmp_path, caplog, plugin_pumice_lacks) -> None:
    path = _write(tmp_path, BASE)
    watcher = ConfigWatcher(str(path), Scheduler.from_file)
    path.write_text(BASE.replace("name: predicates", "name: predicates\n  - name: reservation"))
    with caplog.at_level(logging.WARNING, logger="pumice.config"):
        assert watcher.poll().scheduler is not None
    assert [r for r in caplog.records if "plugin reservation" in r.getMessage()]


def _write(tmp_path, text: str):
    path = tmp_path / "sched.conf"
    path.write_text(text)
    return path


# -- the catalog itself --------------------------------------------------------------------


def test_every_flag_gates_real_hooks() -> None:
    for flag in (*catalog.FLAGS.values(), *catalog.RETIRED_FLAGS.values()):
        for hook in flag.hooks:
            assert hook in HOOKS or hook == "hierarchy", flag.key
        assert flag.hooks or flag.meaning, flag.key
    assert set(catalog.MISSPELT_FLAGS.values()) <= set(catalog.FLAGS)


def test_pumice_implements_only_volcano_names_and_declares_its_keys() -> None:
    for registry, entries in (
        (default_plugins(), catalog.PLUGINS),
        (default_actions(), catalog.ACTIONS),
    ):
        for name in registry.names():
            assert name in entries, name
            assert registry.argument_keys(name) is not None, name
    lacking = [e for e in catalog.PLUGINS.values() if e.name not in default_plugins().names()]
    lacking += [e for e in catalog.ACTIONS.values() if e.name not in default_actions().names()]
    assert not lacking, "every plugin and action Volcano registers is implemented"
    for entry in (*catalog.PLUGINS.values(), *catalog.ACTIONS.values()):
        assert not entry.meaning, f"{entry.name} is implemented: its 'not supported' text goes"


#: Keys whose value must be of a kind other than a number (Volcano refuses, or panics
#: on, a number there), or false where two enable keys exclude each other (Volcano
#: stops on deviceshare's GPU sharing with GPU number or vGPU).
REAL_VALUES = {
    "sla-waiting-time": "1s",
    "interval": "1m",
    "metricsPeriod": "5m",
    "strategies": [],
    "resources": {"cpu": {"type": "MostAllocated", "weight": 1}},
    "sra": {"enable": True, "resources": "nvidia.com/gpu", "weight": 1},
    "proportional": {"enable": True, "resources": "nvidia.com/gpu"},
    "strict": False,
    "enablePreferredOrder": True,
    "deviceshare.SchedulePolicy": "binpack",
    "deviceshare.GPUNumberEnable": False,
    "deviceshare.VGPUEnable": False,
    "tdm.evict.period": "1m",
    "thresholds": {"cpu": 80, "mem": 80},
    "estimator": {"request_ratio": 0.7},
    "extender.urlPrefix": "http://127.0.0.1:9",
    "extender.httpTimeout": "100ms",
    "extender.managedResources": ["nvidia.com/gpu"],
    "extender.ignorable": True,
}


def test_yaml_of_every_supported_plugin_with_all_volcano_keys_loads(tmp_path) -> None:
    """Each catalogued key of a plugin pumice has loads (used or warned), none refused."""
    plugins = []
    for name in sorted(default_plugins().names()):
        keys = catalog.PLUGINS[name].keys or {}
        args = {
            k: REAL_VALUES.get(k, True if k.lower().endswith("enable") else 1)
            for k in keys
            if "*" not in k
        }
        plugins.append({"name": name, "arguments": args})
    text = yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": plugins}]})
    warned = {w.split(" (", 1)[0] for w in load(tmp_path, text).warnings}
    assert "argument podaffinity.weight of plugin nodeorder" in warned
