"""Parse and validate Volcano's scheduler configuration.

Accepted forms: the configuration itself (``actions:`` + ``tiers:`` +
``configurations:`` + ``metrics:``), or a ConfigMap whose ``data`` holds
``volcano-scheduler.conf``. Enable flags use Volcano's own YAML keys (``enableJobOrder``,
``enabledOverused``, ...); a missing flag means enabled (``enableHierarchy``: disabled),
as in Volcano's loader.

Every name is one of three cases (see :mod:`pumice.conf.check`): implemented by pumice
and used; Volcano's but not implemented by pumice, loaded with a warning (the item is
skipped); or a misspelling, refused with the key path and the closest known name. The
warnings travel with the loaded :class:`SchedulerConfig` (``warnings``); each front end
shows them once. Everything is found at load time, never in the middle of a cycle.

Names are sorted against what pumice implements only when a :class:`Known` is given
(:meth:`pumice.scheduler.Scheduler.from_file` and ``create`` pass the registries'); without
one, only the structure and the flags are checked and ``checked`` is False, so that
``Scheduler.create`` checks the names again against its registries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.conf import catalog
from pumice.conf.arguments import Arguments, go_duration
from pumice.conf.check import Known, Notes, check_arguments, unknown_name, unsupported
from pumice.documents import load_one_yaml
from pumice.errors import InputError, shown, shown_text

#: Volcano's YAML keys for the per-hook enable flags -> the hooks each one gates.
FLAG_KEYS: dict[str, tuple[str, ...]] = {k: f.hooks for k, f in catalog.FLAGS.items()}

#: Hooks whose flag defaults to *off* in Volcano (everything else defaults to on).
OFF_BY_DEFAULT = frozenset(h for f in catalog.FLAGS.values() if not f.default for h in f.hooks)

#: How the warning about a plugin listed twice starts.
LISTED_TWICE = "is listed more than once"

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
    """One plugin entry of a tier: its name, enable flags (by hook) and arguments.

    ``where`` is the entry's key path (``tiers[1].plugins[2]``); ``keys`` the enable
    flags as written, by Volcano's YAML key."""

    name: str
    flags: Mapping[str, bool]
    arguments: Arguments
    where: str = ""
    keys: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, hook: str) -> bool:
        return self.flags.get(hook, hook not in OFF_BY_DEFAULT)


@dataclass(frozen=True, slots=True)
class Tier:
    plugins: tuple[PluginOption, ...]


@dataclass(frozen=True, slots=True)
class Skipped:
    """An item of the file pumice does not implement and skipped."""

    kind: str  # "plugin", "action", "configuration", "flag", "argument", "metrics"
    name: str
    where: str


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """A loaded configuration: actions in order, tiers of the plugins pumice runs,
    action arguments, and the warnings loading it gave (each once)."""

    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    configurations: Mapping[str, Arguments] = field(default_factory=dict)
    source: str = "<default>"
    warnings: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    #: The names were sorted against what pumice implements (a :class:`Known`).
    checked: bool = False
    #: The parsed document, so that names can be checked again against registries.
    document: Any = field(default=None, compare=False, repr=False)
    #: The ``metrics`` section (Volcano's string map: ``type``, ``address``,
    #: ``interval``...), checked: where nodes' measured load comes from, and how often.
    metrics: Mapping[str, str] = field(default_factory=dict)
    #: :meth:`instances`, kept once asked (the tiers never change; every cycle asks).
    _instances: tuple[PluginOption, ...] | None = field(
        default=None, init=False, compare=False, repr=False
    )
    #: :meth:`action_arguments` by action, kept once asked (read-only views).
    _action_arguments: dict[str, Arguments] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def action_arguments(self, name: str) -> Arguments:
        got = self._action_arguments.get(name)
        if got is None:
            got = self._action_arguments[name] = self.configurations.get(name) or Arguments(
                {}, f"action {name}"
            )
        return got

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]

    def instances(self) -> tuple[PluginOption, ...]:
        """The entries whose plugin is built for a session: each plugin once, from its
        last entry. Volcano builds every entry, but its session keeps each plugin's
        functions by name, so the last entry's instance (its arguments) is the one
        asked, in every tier the plugin is listed in, under each entry's flags."""
        got = self._instances
        if got is None:
            last = {p.name: p for t in self.tiers for p in t.plugins}
            got = tuple(p for t in self.tiers for p in t.plugins if last[p.name] is p)
            object.__setattr__(self, "_instances", got)  # (frozen: a cache, not a field)
        return got


def parse_config(
    data: Any, *, source: str = "<config>", known: Known | None = None
) -> SchedulerConfig:
    """Validate a parsed YAML document (the config, or a ConfigMap holding it).

    With ``known``, plugin, action and argument names are sorted into used,
    unsupported (warned about and skipped) and misspelt (InputError)."""
    try:
        return _Parser(source, known).parse(data)
    except InputError as err:
        raise err.located(file=source) from None


def load_config(path: str | None, *, known: Known | None = None) -> SchedulerConfig:
    """Read a configuration file (or the built-in default when ``path`` is None)."""
    if path is None:
        data, source = load_one_yaml(DEFAULT_CONFIG, source="<default>"), "<default>"
    else:
        source = path
        try:
            with open(path, "rb") as fh:
                text = fh.read()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", file=path) from None
        data = load_one_yaml(text, source=path)
    return parse_config(data, source=source, known=known)


def _unwrap(data: Any) -> Any:
    """The configuration inside a ConfigMap, or ``data`` itself."""
    if not (isinstance(data, Mapping) and data.get("kind") == "ConfigMap"):
        return data
    held = data.get("data") or {}
    if not isinstance(held, Mapping):
        raise InputError(
            f"expected a map of file names to text, got {shown(held)}",
            obj="ConfigMap",
            field="data",
        )
    conf = held.get("volcano-scheduler.conf")
    if conf is None:
        raise InputError("has no key volcano-scheduler.conf", obj="ConfigMap", field="data")
    field = "data.volcano-scheduler.conf"
    if not isinstance(conf, str):
        raise InputError(
            f"expected the configuration as text, got {shown(conf)}", obj="ConfigMap", field=field
        )
    try:
        return load_one_yaml(conf, source="")
    except InputError as err:
        raise InputError(err.message, obj="ConfigMap", field=field) from None


def metrics_interval(config: SchedulerConfig, default: float) -> float:
    """The ``metrics.interval`` of ``config`` in seconds, or ``default``."""
    raw = config.metrics.get("interval")
    seconds = None if raw is None else go_duration(raw)
    return seconds if seconds is not None and seconds > 0 else default


def _keys_of(raw: Mapping, allowed: tuple[str, ...], where: str, what: str) -> None:
    for key in raw:
        if key not in allowed:
            path = f"{where}.{shown_text(key)}" if where else shown_text(key)
            guess = catalog.did_you_mean(shown_text(key), allowed)
            raise InputError(
                f"unknown key {shown(key)} of {what}{guess}",
                field=path,
            )


class _Parser:
    """One load: the names pumice implements and the warnings found so far."""

    def __init__(self, source: str, known: Known | None) -> None:
        self.source = source
        self.known = known
        self.notes = Notes()
        self.skipped: list[Skipped] = []

    def skip(self, kind: str, name: str, where: str, meaning: str) -> None:
        self.skipped.append(Skipped(kind, name, where))
        self.notes.add(f"{kind} {name}", where, unsupported(meaning, skipped=True))

    # -- the document -------------------------------------------------------------------

    def parse(self, data: Any) -> SchedulerConfig:
        data = _unwrap(data)
        if not isinstance(data, Mapping):
            raise InputError("expected a mapping with actions and tiers")
        _keys_of(data, catalog.TOP_LEVEL, "", "the configuration")
        listed = self._actions(data.get("actions"))
        tiers = self._tiers(data.get("tiers"))
        configurations = self._configurations(data.get("configurations"), listed)
        metrics = self._metrics(data.get("metrics"))
        return SchedulerConfig(
            actions=tuple(a for a in listed if self._implemented_action(a)),
            tiers=tiers,
            configurations=configurations,
            source=self.source,
            warnings=self.notes.render(),
            skipped=tuple(self.skipped),
            checked=self.known is not None,
            document=data,
            metrics=metrics,
        )

    def _implemented_action(self, name: str) -> bool:
        return self.known is None or name in self.known.actions

    def _metrics(self, raw: Any) -> dict[str, str]:
        """The ``metrics`` section as Volcano reads it (strings by key). A Prometheus
        source needs its ``address``; ``interval`` is a Go duration (how often the load
        is fetched, and how long a pod just started counts as not yet measured by the
        usage plugin). A type pumice does not query loads with a warning."""
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            raise InputError("expected a mapping of strings (type, address, ...)", field="metrics")
        out: dict[str, str] = {}
        for key, value in raw.items():
            if key not in catalog.METRICS_KEYS:
                raise InputError(
                    f"unknown key {shown(key)} of the metrics section"
                    + catalog.did_you_mean(shown_text(key), catalog.METRICS_KEYS),
                    field=f"metrics.{shown_text(key)}",
                )
            if isinstance(value, bool):
                value = "true" if value else "false"
            if not isinstance(value, str | int | float):
                raise InputError(
                    f"expected a string, got {shown(value)}", field=f"metrics.{shown_text(key)}"
                )
            out[key] = str(value)
        kind = out.get("type", "")
        if kind and kind not in catalog.METRICS_TYPES:
            raise InputError(
                f"unknown metrics source type {shown(kind)}"
                + catalog.did_you_mean(kind, catalog.METRICS_TYPES),
                field="metrics.type",
            )
        if kind == catalog.METRICS_PROMETHEUS and not out.get("address"):
            raise InputError("is required for a Prometheus source", field="metrics.address")
        if "interval" in out:
            seconds = go_duration(out["interval"])
            if seconds is None or seconds <= 0:
                raise InputError(
                    f"expected a positive duration such as 30s, got {shown(out['interval'])}",
                    field="metrics.interval",
                )
        if kind and kind != catalog.METRICS_PROMETHEUS:
            self.skipped.append(Skipped("metrics", kind, "metrics.type"))
            self.notes.add(
                f"metrics source {kind}",
                "metrics.type",
                unsupported(catalog.METRICS_MEANING.format(type=kind)),
            )
        return out

    # -- actions ------------------------------------------------------------------------

    def _actions(self, raw: Any) -> list[str]:
        if not isinstance(raw, str) or not raw.strip():
            raise InputError(
                "is required: a comma-separated list such as 'enqueue, allocate'",
                field="actions",
            )
        names = [a.strip() for a in raw.split(",") if a.strip()]
        for name in names:
            if self.known is None or name in self.known.actions:
                continue
            entry = catalog.ACTIONS.get(name)
            if entry is None:
                raise unknown_name(
                    "action", name, {*self.known.actions, *catalog.ACTIONS}, "actions"
                )
            if not any(s.kind == "action" and s.name == name for s in self.skipped):
                self.skip("action", name, "actions", entry.meaning)
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                self.notes.add(
                    f"action {name}",
                    "actions",
                    f"is listed {names.count(name)} times: it runs that many times in "
                    "each cycle, as in Volcano",
                )
        return names

    # -- tiers and plugin entries -------------------------------------------------------

    def _tiers(self, raw: Any) -> tuple[Tier, ...]:
        raw = raw or []
        if not isinstance(raw, list):
            raise InputError("expected a list of tiers", field="tiers")
        tiers = []
        places: dict[str, list[str]] = {}
        for i, t in enumerate(raw):
            where = f"tiers[{i}]"
            if not isinstance(t, Mapping) or not isinstance(t.get("plugins"), list):
                if isinstance(t, Mapping):
                    _keys_of(t, ("plugins",), where, "a tier")
                raise InputError("expected a mapping with a list of plugins", field=where)
            _keys_of(t, ("plugins",), where, "a tier")
            plugins = []
            for j, p in enumerate(t["plugins"]):
                opt = self._plugin(p, f"{where}.plugins[{j}]")
                if opt is not None:
                    plugins.append(opt)
                    places.setdefault(opt.name, []).append(opt.where)
            self._hierarchy_conflict(plugins, where)
            tiers.append(Tier(tuple(plugins)))
        for name, wheres in places.items():
            if len(wheres) > 1:
                self.notes.add(
                    f"plugin {name}",
                    ", ".join(wheres),
                    f"{LISTED_TWICE}: as in Volcano, one instance is used, built "
                    "from the last entry's arguments, and its functions are asked in every "
                    "place it is listed, under that entry's enable flags",
                )
        return tuple(tiers)

    def _plugin(self, raw: Any, where: str) -> PluginOption | None:
        if not isinstance(raw, Mapping):
            raise InputError("expected a mapping with a name", field=where)
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("is required", field=f"{where}.name")
        known = self.known
        implemented = known is None or name in known.plugins
        entry = catalog.PLUGINS.get(name)
        if known is not None and not implemented and entry is None:
            raise unknown_name("plugin", name, {*known.plugins, *catalog.PLUGINS}, f"{where}.name")
        flags, keys = self._flags(raw, name, where, quiet=not implemented)
        args = raw.get("arguments")
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise InputError("expected a mapping", field=f"{where}.arguments")
        for key in args:
            if not isinstance(key, str):
                raise InputError(
                    f"argument keys are strings, got {shown(key)}", field=f"{where}.arguments"
                )
        if known is not None:
            check_arguments(
                args,
                owner=f"plugin {name}",
                where=where,
                implemented=implemented,
                declared=known.plugins.get(name),
                entry=entry,
                notes=self.notes,
            )
        if not implemented and entry is not None:  # (entry None: refused above)
            self.skip("plugin", name, where, entry.meaning)
            return None
        return PluginOption(name, flags, Arguments(args, f"plugin {name}"), where, keys)

    def _flags(
        self, raw: Mapping, plugin: str, where: str, *, quiet: bool
    ) -> tuple[dict[str, bool], dict[str, bool]]:
        """The entry's flags by hook and by Volcano key; warnings unless ``quiet`` (a
        skipped plugin: its flags are checked for spelling only)."""
        flags: dict[str, bool] = {}
        keys: dict[str, bool] = {}
        for key, value in raw.items():
            if key in catalog.PLUGIN_ENTRY_KEYS:
                continue
            path = f"{where}.{shown_text(key)}"
            flag = catalog.FLAGS.get(key)
            note = None
            if flag is None and key in catalog.MISSPELT_FLAGS:
                flag = catalog.FLAGS[catalog.MISSPELT_FLAGS[key]]
                note = (
                    f"is not Volcano's spelling, which is {flag.key} (Volcano ignores "
                    f"{key}); pumice reads it as {flag.key}"
                )
                if not flag.hooks:
                    note += f", which {unsupported(flag.meaning)}"
            elif flag is None and key in catalog.RETIRED_FLAGS:
                flag = catalog.RETIRED_FLAGS[key]
                note = flag.meaning
            elif flag is None:
                raise InputError(
                    f"unknown enable flag {shown(key)} of plugin {shown(plugin)}"
                    + catalog.did_you_mean(
                        str(key),
                        [*catalog.FLAGS, *catalog.PLUGIN_ENTRY_KEYS, *catalog.MISSPELT_FLAGS],
                    ),
                    field=path,
                )
            elif not flag.hooks:
                note = unsupported(flag.meaning)
            if not isinstance(value, bool):
                raise InputError(f"expected true or false, got {shown(value)}", field=path)
            if note is not None and not quiet:
                if not flag.hooks:
                    self.skipped.append(Skipped("flag", flag.key, path))
                self.notes.add(f"flag {key}", path, note)
            for hook in flag.hooks:
                flags[hook] = value
            keys[flag.key] = value
        return flags, keys

    def _hierarchy_conflict(self, plugins: list[PluginOption], where: str) -> None:
        """Volcano refuses drf with hierarchy and proportion in one tier."""
        names = {p.name for p in plugins}
        hdrf = any(p.name == "drf" and p.enabled("hierarchy") for p in plugins)
        if hdrf and "proportion" in names:
            raise InputError(
                "proportion and drf with enableHierarchy conflict (Volcano refuses them "
                "in one tier): hierarchical drf divides the queues itself",
                field=where,
            )

    # -- configurations -----------------------------------------------------------------

    def _configurations(self, raw: Any, listed: list[str]) -> dict[str, Arguments]:
        raw = raw or []
        if not isinstance(raw, list):
            raise InputError("expected a list", field="configurations")
        out: dict[str, Arguments] = {}
        first: dict[str, str] = {}
        known = self.known
        for i, c in enumerate(raw):
            where = f"configurations[{i}]"
            if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
                raise InputError("expected a mapping with a name", field=where)
            _keys_of(c, ("name", "arguments"), where, "a configuration")
            name = c["name"]
            args = c.get("arguments") or {}
            if not isinstance(args, Mapping):
                raise InputError("expected a mapping", field=f"{where}.arguments")
            if name in first:
                self.notes.add(
                    f"configuration of action {name}",
                    where,
                    f"repeats {first[name]}: as in Volcano, the first one is used and "
                    "this one is ignored",
                )
                continue
            first[name] = where
            implemented = known is None or name in known.actions
            entry = catalog.ACTIONS.get(name)
            other = catalog.OTHER_CONFIGURATIONS.get(name)
            if known is not None and not implemented and entry is None and other is None:
                raise unknown_name(
                    "action",
                    name,
                    {*known.actions, *catalog.ACTIONS, *catalog.OTHER_CONFIGURATIONS},
                    f"{where}.name",
                )
            if known is not None:
                check_arguments(
                    args,
                    owner=f"action {name}",
                    where=where,
                    implemented=implemented,
                    declared=known.actions.get(name),
                    entry=entry or other,
                    notes=self.notes,
                )
            if other is not None and not implemented:
                self.skip("configuration", name, where, other.meaning)
                continue
            if not implemented:
                # listed: the action's own warning says it all (entry None: refused above)
                if name not in listed and entry is not None:
                    self.skip("configuration", name, where, entry.meaning)
                continue
            if name not in listed:
                self.notes.add(
                    f"configuration of action {name}",
                    where,
                    f"has no effect: {name} is not in actions",
                )
            out[name] = Arguments(args, f"action {name}")
        return out


__all__ = [
    "DEFAULT_CONFIG",
    "FLAG_KEYS",
    "LISTED_TWICE",
    "Known",
    "PluginOption",
    "SchedulerConfig",
    "Skipped",
    "Tier",
    "load_config",
    "metrics_interval",
    "parse_config",
]
