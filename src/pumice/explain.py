"""``pumice explain-config``: what a scheduler configuration does, read as a person would.

For each extension point (a row of :data:`pumice.framework.hooks.HOOKS`): which
plugins decide it, tier by tier, in order, and the rule that combines them. What each
plugin registers is read from a real session opened on an empty snapshot (its hook
table), not from a list kept by hand, so custom plugins are explained too.

Then the findings, advice that never stops a load: flags that have no effect (set on a
plugin that registers nothing for that hook), orders that surprise (victims chosen by a
later tier when an earlier one refused them all, a permit that ends a vote before later
tiers are asked), plugins listed twice, actions whose plugins are missing, conflicting
plugins, and what pumice skipped of Volcano's (the load warnings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pumice.conf import catalog
from pumice.conf.config import LISTED_TWICE, PluginOption, SchedulerConfig
from pumice.framework.hooks import HOOKS
from pumice.scheduler import Scheduler

#: How each combination rule reads, for people.
RULES = {
    "order": "the first plugin with a preference decides, tier by tier in listed order",
    "all": "every plugin must agree",
    "any": "one plugin saying yes is enough",
    "vote": "a reject wins at once; a permit ends the vote at the end of its tier; "
    "no opinion means yes",
    "victims": "within a tier the answers intersect; when a tier allows no victim, "
    "the next tier decides",
    "sum": "scores add up",
    "each": "every plugin is called",
    "first": "the first plugin that answers decides",
    "filter": "every plugin that answers filters; none answering allows nothing",
}

#: Plugins of pumice's that read ``enableHierarchy`` (it gates no hook of its own).
HIERARCHY_READERS = frozenset({"drf", "capacity", "nodegroup"})


@dataclass(frozen=True, slots=True)
class Finding:
    """One piece of advice. ``kind``: ``no-effect``, ``order``, ``duplicate``,
    ``missing``, ``conflict`` or ``load`` (a warning given when the file loaded)."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class HookView:
    """Who decides one extension point: per tier (1-based), the plugins asked."""

    hook: str
    rule: str
    tiers: tuple[tuple[int, tuple[str, ...]], ...]
    #: Plugins that registered a function but whose entry's flag turns it off.
    disabled: tuple[str, ...] = ()

    @property
    def plugins(self) -> tuple[str, ...]:
        return tuple(p for _, ps in self.tiers for p in ps)


@dataclass(frozen=True, slots=True)
class Explanation:
    source: str
    actions: tuple[str, ...]
    tiers: tuple[tuple[str, ...], ...]
    hooks: tuple[HookView, ...]
    findings: tuple[Finding, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "actions": list(self.actions),
            "tiers": [list(t) for t in self.tiers],
            "hooks": [
                {
                    "hook": h.hook,
                    "rule": h.rule,
                    "combine": RULES[h.rule],
                    "tiers": [{"tier": i, "plugins": list(ps)} for i, ps in h.tiers],
                    "disabled": list(h.disabled),
                }
                for h in self.hooks
            ],
            "findings": [{"kind": f.kind, "message": f.message} for f in self.findings],
        }


def registered_hooks(scheduler: Scheduler) -> dict[str, tuple[str, ...]]:
    """Per hook, the plugins that register a function for it: a session opened on an
    empty snapshot, its hook table read."""
    from pumice.cache.build import build_snapshot

    ssn = scheduler.open(build_snapshot([]))
    return {hook: ssn.hooks.registered(hook) for hook in HOOKS}


def explain(scheduler: Scheduler) -> Explanation:
    config = scheduler.config
    registered = registered_hooks(scheduler)
    views = tuple(_view(config, hook, registered[hook]) for hook in HOOKS)
    by_hook = {v.hook: v for v in views}
    # The duplicate finding below says more than the load warning about it.
    findings = [Finding("load", w) for w in config.warnings if LISTED_TWICE not in w]
    findings += _no_effect(config, registered)
    findings += _duplicates(config, registered)
    findings += _orders(config, by_hook)
    findings += _missing(config, by_hook)
    findings += _conflicts(config)
    return Explanation(
        config.source,
        config.actions,
        tuple(tuple(p.name for p in t.plugins) for t in config.tiers),
        views,
        tuple(findings),
    )


def _view(config: SchedulerConfig, hook: str, plugins: tuple[str, ...]) -> HookView:
    tiers = []
    disabled = []
    for i, tier in enumerate(config.tiers, 1):
        asked = []
        for opt in tier.plugins:
            if opt.name not in plugins:
                continue
            if opt.enabled(hook):
                asked.append(opt.name)
            else:
                disabled.append(f"{opt.name} (tier {i})")
        if asked:
            tiers.append((i, tuple(asked)))
    return HookView(hook, HOOKS[hook].rule, tuple(tiers), tuple(disabled))


def _tier_of(opt: PluginOption) -> str:
    """``tier 2`` for an entry at ``tiers[1].plugins[..]``."""
    index = opt.where.removeprefix("tiers[").split("]", 1)[0]
    return f"tier {int(index) + 1}" if index.isdigit() else "a tier"


def _no_effect(config: SchedulerConfig, registered: dict[str, tuple[str, ...]]) -> list[Finding]:
    own = _builtin_plugins()
    out = []
    for tier in config.tiers:
        for opt in tier.plugins:
            for key, value in opt.keys.items():
                flag = catalog.FLAGS.get(key) or catalog.RETIRED_FLAGS.get(key)
                if flag is None or not flag.hooks:
                    continue  # a flag pumice lacks: a load warning says so
                if flag.hooks == ("hierarchy",):
                    if opt.name in own and opt.name not in HIERARCHY_READERS:
                        out.append(
                            Finding(
                                "no-effect",
                                f"{key}: {str(value).lower()} on plugin {opt.name} "
                                f"({opt.where}) has no effect: only "
                                f"{' and '.join(sorted(HIERARCHY_READERS))} read it",
                            )
                        )
                    continue
                hooks = [h for h in flag.hooks if h in registered]
                if not any(opt.name in registered[h] for h in hooks):
                    names = " or ".join(flag.hooks)
                    out.append(
                        Finding(
                            "no-effect",
                            f"{key}: {str(value).lower()} on plugin {opt.name} "
                            f"({opt.where}) has no effect: {opt.name} registers no "
                            f"{names} function",
                        )
                    )
    return out


def _builtin_plugins() -> set[str]:
    from pumice.plugins import default_registry

    return default_registry().names()


def _duplicates(config: SchedulerConfig, registered: dict[str, tuple[str, ...]]) -> list[Finding]:
    entries: dict[str, list[PluginOption]] = {}
    for tier in config.tiers:
        for opt in tier.plugins:
            entries.setdefault(opt.name, []).append(opt)
    out = []
    for name, opts in entries.items():
        if len(opts) < 2:
            continue
        hooks = [h for h in HOOKS if name in registered[h]]
        places = []
        for opt in opts:
            asked = [h for h in hooks if opt.enabled(h)]
            places.append(f"in {_tier_of(opt)} ({opt.where}) for {', '.join(asked) or 'nothing'}")
        out.append(
            Finding(
                "duplicate",
                f"plugin {name} is listed {len(opts)} times; one instance is built, with "
                f"the arguments of {opts[-1].where}, and asked " + "; ".join(places),
            )
        )
    return out


def _orders(config: SchedulerConfig, hooks: dict[str, HookView]) -> list[Finding]:
    out = []
    for hook, action in (("preemptable", "preempt"), ("reclaimable", "reclaim")):
        view = hooks[hook]
        if action not in config.actions or len(view.tiers) < 2:
            continue
        (first, early), *later = view.tiers
        rest = ", then ".join(f"tier {i} ({', '.join(ps)})" for i, ps in later)
        out.append(
            Finding(
                "order",
                f"{hook} (used by {action}): tier {first} ({', '.join(early)}) decides "
                f"first; when it allows no victim at all, {rest} decides next, and may "
                f"evict victims that {', '.join(early)} refused (as in Volcano)",
            )
        )
    for hook, action in (("job_enqueueable", "enqueue"), ("job_pipelined", "allocate")):
        view = hooks[hook]
        if action not in config.actions or len(view.tiers) < 2:
            continue
        (first, early), *later = view.tiers
        rest = ", ".join(dict.fromkeys(p for _, ps in later for p in ps if p not in early))
        if not rest:
            continue
        out.append(
            Finding(
                "order",
                f"{hook} (used by {action}): a permit from {', '.join(early)} (tier "
                f"{first}) ends the vote: {rest}, in later tiers, are then not asked (as in "
                "Volcano)",
            )
        )
    return out


def _missing(config: SchedulerConfig, hooks: dict[str, HookView]) -> list[Finding]:
    actions = set(config.actions)
    out = []

    def missing(message: str) -> None:
        out.append(Finding("missing", message))

    if "preempt" in actions and not hooks["preemptable"].tiers:
        missing("preempt never evicts anything: no enabled plugin decides preemptable")
    if "reclaim" in actions and not hooks["reclaimable"].tiers:
        missing("reclaim never evicts anything: no enabled plugin decides reclaimable")
    for action in sorted(actions & {"gangpreempt", "gangreclaim"}):
        if not hooks["gang_evictable"].tiers:
            missing(f"{action} never evicts anything: no enabled plugin answers gang_evictable")
    if "shuffle" in actions and not hooks["victim_tasks"].tiers:
        missing("shuffle never evicts anything: no enabled plugin names victim tasks")
    placing = sorted(actions & {"allocate", "backfill", "preempt", "reclaim"})
    if placing and not hooks["predicate"].tiers:
        missing(
            f"{', '.join(placing)} with no enabled predicate plugin: nodeSelector, node "
            "affinity, taints, host ports and pod affinity are ignored; pods go to any "
            "node with room"
        )
    if "allocate" in actions and not hooks["job_ready"].tiers:
        missing(
            "allocate with no enabled job_ready plugin (gang): every job counts as ready, "
            "so a gang's pods are bound even when fewer than minMember fit"
        )
    if "allocate" in actions and not hooks["node_order"].tiers:
        missing("allocate with no node-order plugin: of the nodes that fit, the first by name")
    if "enqueue" in actions and not hooks["job_enqueueable"].tiers:
        missing("enqueue with no enabled job_enqueueable plugin: every Pending job is admitted")
    if "enqueue" not in actions and "allocate" in actions:
        missing(
            "no enqueue action: allocate admits every Pending job itself, without checking "
            "that the queue or the cluster has room (as Volcano does)"
        )
    if "backfill" not in actions:
        missing(
            "no backfill action: best-effort pods (no resource requests) are never placed, "
            "allocate leaves them to backfill"
        )
    order = list(config.actions)
    if {"enqueue", "allocate"} <= actions and order.index("enqueue") > order.index("allocate"):
        missing(
            "enqueue runs after allocate: a job admitted in a cycle waits for the next "
            "cycle to be placed"
        )
    return out


def _conflicts(config: SchedulerConfig) -> list[Finding]:
    names = set(config.plugin_names())
    out = []
    if {"proportion", "capacity"} <= names:
        out.append(
            Finding(
                "conflict",
                "proportion and capacity are both listed: each divides the cluster between "
                "queues its own way and both vote on admission and queue order; Volcano's "
                "documentation says to use one of them",
            )
        )
    return out


# -- output -------------------------------------------------------------------------------


def print_text(exp: Explanation, console: Any = None) -> None:
    """The explanation for people (rich)."""
    import sys

    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 120)
    console.print(f"[bold]Configuration[/bold] {exp.source}")
    console.print(f"Actions, in order: {' → '.join(exp.actions) or '(none)'}")
    for i, tier in enumerate(exp.tiers, 1):
        console.print(f"Tier {i}: {', '.join(tier) or '(nothing pumice runs)'}")
    table = Table(title="Who decides what", title_justify="left")
    for col in ("extension point", "rule", "decided by (tier: plugins, in order)", "off by flag"):
        table.add_column(col, overflow="fold")
    for h in exp.hooks:
        who = "; ".join(f"{i}: {', '.join(ps)}" for i, ps in h.tiers) or "-"
        table.add_row(h.hook, h.rule, who, ", ".join(h.disabled))
    console.print(table)
    for rule in dict.fromkeys(h.rule for h in exp.hooks):
        console.print(f"  {rule}: {RULES[rule]}", highlight=False)
    if not exp.findings:
        console.print("Findings: none")
        return
    console.print(f"[bold]Findings ({len(exp.findings)})[/bold]")
    for f in exp.findings:
        console.print(f"- [{f.kind}] {f.message}", markup=False, highlight=False)


__all__ = ["Explanation", "Finding", "HookView", "explain", "print_text", "registered_hooks"]
