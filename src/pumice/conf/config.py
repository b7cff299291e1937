"""Parse and validate Volcano's scheduler configuration.

Accepted forms: the configuration itself (``actions:`` + ``tiers:`` +
``configurations:``), or a ConfigMap whose ``data`` holds ``volcano-scheduler.conf``.
Enable flags use Volcano's own YAML keys (``enableJobOrder``, ``enabledOverused``, ...);
a missing flag means enabled, as in Volcano's loader. Unknown actions, plugins and flags
are errors, found at load time and never in the middle of a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from pumice.conf.arguments import Arguments
from pumice.errors import InputError

#: Volcano's YAML keys for the per-hook enable flags, and the hook each one gates.
FLAG_KEYS: dict[str, str] = {
    "enableJobOrder": "job_order",
    "enableNamespaceOrder": "namespace_order",
    "enableHierarchy": "hierarchy",
    "enableJobReady": "job_ready",
    "enableJobPipelined": "job_pipelined",
    "enableTaskOrder": "task_order",
    "enablePreemptable": "preemptable",
    "enableReclaimable": "reclaimable",
    "enablePreemptive": "preemptive",
    "enableQueueOrder": "queue_order",
    "EnabledClusterOrder": "cluster_order",
    "enablePredicate": "predicate",
    "enableBestNode": "best_node",
    "enableNodeOrder": "node_order",
    "enableTargetJob": "target_job",
    "enableReservedNodes": "reserved_nodes",
    "enableJobEnqueued": "job_enqueueable",
    "enabledVictim": "victim_tasks",
    "enableJobStarving": "job_starving",
    "enabledOverused": "overused",
    "enabledAllocatable": "allocatable",
    "enabledHyperNodeOrder": "hyper_node_order",
    "enableSubJobReady": "sub_job_ready",
    "enableSubJobPipelined": "sub_job_pipelined",
    "enableSubJobOrder": "sub_job_order",
}

#: Flags that default to *off* in Volcano (everything else defaults to on).
OFF_BY_DEFAULT = frozenset({"hierarchy"})

DEFAULT_CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


@dataclass(frozen=True, slots=True)
class PluginOption:
    """One plugin entry of a tier: its name, enable flags and arguments."""

    name: str
    flags: Mapping[str, bool]
    arguments: Arguments

    def enabled(self, hook: str) -> bool:
        return self.flags.get(hook, hook not in OFF_BY_DEFAULT)


@dataclass(frozen=True, slots=True)
class Tier:
    plugins: tuple[PluginOption, ...]


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    configurations: Mapping[str, Arguments] = field(default_factory=dict)
    source: str = "<default>"

    def action_arguments(self, name: str) -> Arguments:
        return self.configurations.get(name) or Arguments({}, f"action {name}")

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]


def _parse_plugin(raw: Any, where: str, known_plugins: set[str] | None) -> PluginOption:
    if not isinstance(raw, Mapping):
        raise InputError("expected a mapping with a name", field=where)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("is required", field=f"{where}.name")
    if known_plugins is not None and name not in known_plugins:
        raise InputError(
            f"unknown plugin {name!r} (known: {', '.join(sorted(known_plugins))})",
            field=f"{where}.name",
        )
    flags: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        hook = FLAG_KEYS.get(key)
        if hook is None:
            raise InputError(
                f"unknown enable flag {key!r} of plugin {name!r}", field=f"{where}.{key}"
            )
        if not isinstance(value, bool):
            raise InputError(f"expected true or false, got {value!r}", field=f"{where}.{key}")
        flags[hook] = value
    args = raw.get("arguments")
    if args is not None and not isinstance(args, Mapping):
        raise InputError("expected a mapping", field=f"{where}.arguments")
    return PluginOption(name, flags, Arguments(args, f"plugin {name}"))


def parse_config(
    data: Any,
    *,
    source: str = "<config>",
    known_actions: set[str] | None = None,
    known_plugins: set[str] | None = None,
) -> SchedulerConfig:
    """Validate a parsed YAML document (the config, or a ConfigMap holding it)."""
    try:
        return _parse_config(data, source, known_actions, known_plugins)
    except InputError as err:
        raise err.located(file=source) from None


def _parse_config(data, source, known_actions, known_plugins) -> SchedulerConfig:
    if isinstance(data, Mapping) and data.get("kind") == "ConfigMap":
        conf = (data.get("data") or {}).get("volcano-scheduler.conf")
        if conf is None:
            raise InputError("has no key volcano-scheduler.conf", obj="ConfigMap", field="data")
        try:
            data = yaml.load(conf, Loader=yaml.CSafeLoader)
        except yaml.YAMLError as exc:
            raise InputError(
                f"malformed YAML: {exc}", obj="ConfigMap", field="data.volcano-scheduler.conf"
            ) from None
    if not isinstance(data, Mapping):
        raise InputError("expected a mapping with actions and tiers")
    unknown = set(data) - {"actions", "tiers", "configurations", "metrics"}
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    actions_raw = data.get("actions")
    if not isinstance(actions_raw, str) or not actions_raw.strip():
        raise InputError(
            "is required: a comma-separated list such as 'enqueue, allocate'", field="actions"
        )
    actions = tuple(a.strip() for a in actions_raw.split(",") if a.strip())
    for a in actions:
        if known_actions is not None and a not in known_actions:
            raise InputError(
                f"unknown action {a!r} (known: {', '.join(sorted(known_actions))})",
                field="actions",
            )
    if len(set(actions)) != len(actions):
        raise InputError("an action is listed twice", field="actions")
    tiers_raw = data.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise InputError("expected a list of tiers", field="tiers")
    tiers = []
    seen: set[str] = set()
    for i, t in enumerate(tiers_raw):
        if not isinstance(t, Mapping) or not isinstance(t.get("plugins"), list):
            raise InputError("expected a mapping with a list of plugins", field=f"tiers[{i}]")
        plugins = []
        for j, p in enumerate(t["plugins"]):
            opt = _parse_plugin(p, f"tiers[{i}].plugins[{j}]", known_plugins)
            if opt.name in seen:
                raise InputError(
                    f"plugin {opt.name!r} is listed twice", field=f"tiers[{i}].plugins[{j}].name"
                )
            seen.add(opt.name)
            plugins.append(opt)
        tiers.append(Tier(tuple(plugins)))
    configurations: dict[str, Arguments] = {}
    confs = data.get("configurations") or []
    if not isinstance(confs, list):
        raise InputError("expected a list", field="configurations")
    for i, c in enumerate(confs):
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            raise InputError("expected a mapping with a name", field=f"configurations[{i}]")
        args = c.get("arguments") or {}
        if not isinstance(args, Mapping):
            raise InputError("expected a mapping", field=f"configurations[{i}].arguments")
        configurations[c["name"]] = Arguments(args, f"action {c['name']}")
    return SchedulerConfig(actions, tuple(tiers), configurations, source)


def load_config(
    path: str | None,
    *,
    known_actions: set[str] | None = None,
    known_plugins: set[str] | None = None,
) -> SchedulerConfig:
    """Read a configuration file (or Volcano's default when ``path`` is None)."""
    if path is None:
        data, source = yaml.load(DEFAULT_CONFIG, Loader=yaml.CSafeLoader), "<default>"
    else:
        source = path
        try:
            with open(path, encoding="utf-8") as fh:
                data = yaml.load(fh, Loader=yaml.CSafeLoader)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", file=path) from None
        except yaml.YAMLError as exc:
            raise InputError(f"malformed YAML: {exc}", file=path) from None
    return parse_config(
        data, source=source, known_actions=known_actions, known_plugins=known_plugins
    )
