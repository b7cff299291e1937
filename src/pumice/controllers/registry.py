"""The controllers by name: what ``--controllers job,podgroup,queue`` picks from.

Each entry names the module and class of one controller; it is built from a store and
the :class:`Settings` every mode shares (the scheduler names whose pods are pumice's,
the default queue), each passed as the keyword of that name when the controller's
constructor takes it. Modules are imported only when their controller is asked for, so a mode
that runs one controller does not load the others, and a controller whose module is
missing or broken is refused by name (an :class:`~pumice.errors.InputError` naming
``--controllers``) before anything starts.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pumice.controllers.manager import Controller
from pumice.controllers.store import Store
from pumice.errors import InputError


@dataclass(frozen=True, slots=True)
class Settings:
    """What the controllers are told, whichever mode runs them."""

    #: Pods with one of these ``schedulerName`` values are pumice's (PodGroup
    #: controller); a Job that names no scheduler gets the first.
    scheduler_names: tuple[str, ...] = ("volcano",)
    #: The queue of Jobs and pods that name none.
    default_queue: str = "default"


@dataclass(frozen=True, slots=True)
class Entry:
    """Where a controller's class lives, and what it is for (``--help``)."""

    module: str
    cls: str
    about: str
    #: Part of ``all``; an optional one runs only when named.
    default: bool = True


#: Every controller, in the order they run in one step.
CONTROLLERS: dict[str, Entry] = {
    "job": Entry(
        "pumice.controllers.job.controller",
        "JobController",
        "batch.volcano.sh Jobs: their PodGroup, pods, services and lifecycle policies",
    ),
    "podgroup": Entry(
        "pumice.controllers.podgroup",
        "PodGroupController",
        "a PodGroup for the pods of pumice's schedulers that name none",
    ),
    "queue": Entry(
        "pumice.controllers.queue",
        "QueueController",
        "Queue states (Open, Closing, Closed), their counts and the default queue",
    ),
    "ephemeral": Entry(
        "pumice.controllers.ephemeral",
        "EphemeralClaimController",
        "the claim of each generic ephemeral volume of a pod, for a cluster without "
        "kube-controller-manager (optional: not part of all)",
        default=False,
    ),
    "resourceclaim": Entry(
        "pumice.controllers.resourceclaims",
        "ResourceClaimController",
        "the ResourceClaims of pods' resourceClaimTemplateName entries, and the devices of "
        "pods that are done given back, for a cluster without kube-controller-manager "
        "(optional: not part of all)",
        default=False,
    ),
}
#: What ``all`` runs: every controller but the optional ones.
ALL = tuple(n for n, e in CONTROLLERS.items() if e.default)


def parse_names(text: str, flag: str = "--controllers") -> tuple[str, ...]:
    """``"job,podgroup"`` (or ``all``, ``*``, which an optional one may join:
    ``all,ephemeral``) -> the names, in registry order; an unknown or empty name is an
    InputError listing the known ones."""
    names = [n.strip() for n in text.split(",")]
    if any(n in ("all", "*") for n in names):
        names = [*ALL, *(n for n in names if n not in ("all", "*"))]
    unknown = [n for n in names if n not in CONTROLLERS]
    if unknown or not names:
        known = ", ".join(CONTROLLERS)
        raise InputError(f"unknown controller {unknown[0]!r} (known: {known}, or all)",
                         field=flag)  # fmt: skip
    return tuple(n for n in CONTROLLERS if n in names)


def controller_class(name: str, flag: str = "--controllers") -> type:
    """The class of controller ``name``, imported now; InputError when it cannot be."""
    entry = CONTROLLERS.get(name)
    if entry is None:
        raise InputError(f"unknown controller {name!r} (known: {', '.join(CONTROLLERS)})",
                         field=flag)  # fmt: skip
    try:
        module = importlib.import_module(entry.module)
    except ImportError as err:
        raise InputError(
            f"the {name} controller is not available: cannot import {entry.module} ({err})",
            field=flag,
        ) from None
    cls = getattr(module, entry.cls, None)
    if not isinstance(cls, type):
        raise InputError(
            f"the {name} controller is not available: {entry.module} has no {entry.cls}",
            field=flag,
        )
    return cls


def _settings_for(cls: type, settings: Settings) -> dict[str, Any]:
    """The keyword settings ``cls`` takes (a controller takes only those it needs)."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {}
    wanted = {
        "scheduler_names": settings.scheduler_names,
        "default_queue": settings.default_queue,
    }
    return {k: v for k, v in wanted.items() if k in params}


def build(names: Iterable[str], store: Store, settings: Settings | None = None) -> list[Controller]:
    """The controllers ``names`` over ``store``, in registry order."""
    settings = settings or Settings()
    wanted = set(names)
    out: list[Controller] = []
    for name in CONTROLLERS:
        if name in wanted:
            cls = controller_class(name)
            out.append(cls(store, **_settings_for(cls, settings)))
    return out


def kinds_of(controllers: Sequence[Controller], *, direct: Collection[str] = ()) -> tuple[str, ...]:
    """The kinds ``controllers`` watch or read (a controller names what it reads beyond
    what it watches in a ``reads`` attribute), sorted; a kind in ``direct`` only read is
    left out (a store that reads it one object at a time needs no informer for it)."""
    kinds: set[str] = set()
    for c in controllers:
        kinds.update(c.kinds)
        kinds.update(k for k in getattr(c, "reads", ()) if k not in direct)
    return tuple(sorted(kinds))


__all__ = ["ALL", "CONTROLLERS", "Entry", "Settings", "build", "controller_class",
           "kinds_of", "parse_names"]  # fmt: skip
