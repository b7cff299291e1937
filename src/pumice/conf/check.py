"""The three cases of every name in a configuration: used, unsupported, misspelt.

A name pumice implements (a plugin, an action, an argument key its class declares, an
enable flag gating one of its hooks) is used. A name of Volcano's (see
:mod:`pumice.conf.catalog`) that pumice does not implement loads, with one warning
saying what that means for the decisions; an unsupported plugin or action is skipped.
Anything else is refused as a misspelling, naming the key path and the closest known
name. Volcano itself ignores unknown keys silently; pumice is stricter on purpose,
because a misspelt weight or flag is the kind of mistake nobody finds.

:class:`Known` says what pumice implements; it comes from the plugin and action
registries (:meth:`pumice.scheduler.Scheduler.create`), so that this layer needs no
plugin code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pumice.conf import catalog
from pumice.conf.catalog import did_you_mean, match_key
from pumice.errors import InputError, shown

UNSUPPORTED = "is not supported by pumice"


@dataclass(frozen=True, slots=True)
class Known:
    """What pumice implements: plugin and action names, each with the argument keys
    its class declares (``prefix*`` patterns allowed), or None when the class declares
    none (a custom plugin: its arguments are not checked)."""

    plugins: Mapping[str, tuple[str, ...] | None]
    actions: Mapping[str, tuple[str, ...] | None]


@dataclass(slots=True)
class Notes:
    """Warnings collected while loading, one per item: the same warning found in
    several places is given once, naming them all."""

    _items: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def add(self, subject: str, where: str, detail: str) -> None:
        places = self._items.setdefault((subject, detail), [])
        if where and where not in places:
            places.append(where)

    def render(self) -> tuple[str, ...]:
        out = []
        for (subject, detail), places in self._items.items():
            at = f" ({', '.join(places)})" if places else ""
            out.append(f"{subject}{at} {detail}")
        return tuple(out)


def unsupported(meaning: str, skipped: bool = False) -> str:
    tail = "; pumice skips it" if skipped else ""
    return f"{UNSUPPORTED}: {meaning}{tail}"


def check_arguments(
    args: Mapping[str, object],
    *,
    owner: str,
    where: str,
    implemented: bool,
    declared: tuple[str, ...] | None,
    entry: catalog.Entry | None,
    notes: Notes,
) -> None:
    """Sort each argument key of ``owner`` (``plugin binpack``, ``action preempt``).

    Implemented by pumice: a key its class ``declared`` is used; a key of Volcano's
    (``entry``) is a warning; anything else is an InputError at
    ``where.arguments.<key>``. A class that declares nothing (``declared`` None) is not
    checked. Not implemented (skipped as a whole, warned about elsewhere): a key of
    Volcano's passes, anything else is refused; free-form arguments (``entry.keys``
    None) pass.
    """
    if implemented and declared is None:
        return
    if entry is not None and entry.keys is None:
        return
    volcano = tuple(entry.keys) if entry is not None and entry.keys is not None else ()
    for key in args:
        path = f"{where}.arguments.{key}"
        if implemented and match_key(key, declared or ()) is not None:
            continue
        meaning = entry.key_meaning(key) if entry is not None else None
        if meaning is not None:  # a key of Volcano's
            if implemented:
                notes.add(f"argument {key} of {owner}", path, unsupported(meaning))
            continue
        candidates = (*(declared or ()), *volcano)
        raise InputError(
            f"unknown argument {shown(key)} of {owner}{did_you_mean(key, candidates)}", field=path
        )


def unknown_name(kind: str, name: str, candidates: Iterable[str], path: str) -> InputError:
    return InputError(f"unknown {kind} {shown(name)}{did_you_mean(name, candidates)}", field=path)


__all__ = ["UNSUPPORTED", "Known", "Notes", "check_arguments", "unknown_name", "unsupported"]
