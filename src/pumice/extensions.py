"""The plugin and action registries of every mode: built-ins, installed packages, a directory.

Volcano loads custom plugins from a directory (``--plugins-dir``); pumice does the same,
and also takes the plugins and actions that installed Python packages announce through
entry points. :func:`load_registries` is the one place ``pumice cycle``, ``simulate``,
``bench`` and ``run`` get their registries from (through
:meth:`pumice.scheduler.Scheduler.from_file`), so a configuration names the same plugins
in every mode. The sources, in this order:

1. pumice's own plugins and actions;
2. entry points of the groups ``pumice.plugins`` and ``pumice.actions``: each one names
   a class (``prefer-label = mypkg.scoring:PreferLabelPlugin``), and its name must be the
   class's ``name``;
3. with a plugins directory: every ``*.py`` file in it whose name does not start with
   ``_``, imported once per process as a submodule of a private package whose path is
   the directory (so a file may import helpers kept next to it, in ``_``-prefixed
   files, with relative imports: ``from ._common import f``). A module lists the classes
   to load in module-level lists ``plugins = [...]`` and/or ``actions = [...]``; a
   module with neither is an error (a misspelt list would otherwise load nothing).

The contract (:mod:`pumice.framework.plugin`): a plugin is a class with a non-empty
string class attribute ``name``, a constructor taking the plugin's ``Arguments``, and
``on_session_open(session)`` (``on_session_close(session)`` is optional); an action has
``name``, the same constructor and ``execute(session)``. A file that does not import, a
class of another shape, a name already taken (by a built-in or another extension) and,
when the scheduler is built, a constructor that refuses its arguments are
:class:`~pumice.errors.InputError` naming the file or entry point and the class, so the
start fails (exit code 2) before any cycle runs.

Registries made here survive pickling (what-if workers started with ``spawn`` get the
scheduler pickled): they pickle as "load again from this directory", because a
directory's modules live under a private name that a fresh interpreter cannot import.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pumice.actions import default_registry as default_actions
from pumice.conf.arguments import Arguments
from pumice.errors import InputError
from pumice.framework.plugin import Named, Registry
from pumice.plugins import default_registry as default_plugins

#: Entry point group of each kind.
GROUPS = {"plugin": "pumice.plugins", "action": "pumice.actions"}
#: The module-level list a plugins-directory module names its classes in, by kind.
LISTS = {"plugin": "plugins", "action": "actions"}
#: The methods each kind must have (``on_session_close`` is optional for plugins).
REQUIRED = {"plugin": ("on_session_open",), "action": ("execute",)}
OPTIONAL = {"plugin": ("on_session_close",), "action": ()}


class Registries(NamedTuple):
    """The plugin and the action registry of one scheduler."""

    plugins: Registry
    actions: Registry


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an extension class came from, for error messages: a file (``file`` set) or
    an entry point (``label`` describes it)."""

    label: str
    file: str | None = None

    def error(self, message: str, *, obj: str | None = None) -> InputError:
        if self.file is not None:
            return InputError(message, file=self.file, obj=obj)
        return InputError(message, obj=f"{self.label}: {obj}" if obj else self.label)


BUILTIN = Origin("pumice's built-in")


class ExtensionRegistry(Registry):
    """A registry that knows where each extension class came from.

    ``create`` names the class's origin when an extension's constructor fails (any
    exception becomes an :class:`InputError`), so a bad argument is reported like a bad
    built-in argument. Built-in classes are created as by :class:`Registry`."""

    def __init__(self, kind: str, plugins_dir: str | None) -> None:
        super().__init__(kind)
        self.plugins_dir = plugins_dir
        self._origins: dict[str, Origin] = {}

    def add(self, cls: type[Named], origin: Origin) -> None:
        """Register ``cls``; a name already taken is an InputError naming both sources."""
        name = cls.name
        taken = self._origins.get(name)
        if taken is not None:
            other = (
                f"pumice's built-in {self.kind}"
                if taken is BUILTIN
                else f"the {self.kind} from {taken.file or taken.label}"
            )
            raise origin.error(
                f"the name {name!r} is already taken by {other}; give the class another name",
                obj=f"{self.kind} {name} (class {cls.__qualname__})",
            )
        self.register(cls)
        self._origins[name] = origin

    def origin(self, name: str) -> Origin | None:
        """Where ``name`` came from (:data:`BUILTIN` for pumice's own); None if unknown."""
        return self._origins.get(name)

    def create(self, name: str, arguments: Arguments) -> Any:
        origin = self._origins.get(name)
        if origin is None or origin is BUILTIN:
            return super().create(name, arguments)
        try:
            return super().create(name, arguments)
        except InputError as err:
            obj = f"{self.kind} {name} from {origin.file or origin.label}"
            if err.obj and err.obj != f"{self.kind} {name}":
                obj = f"{obj}: {err.obj}"
            raise InputError(err.message, file=err.file, obj=obj, field=err.field) from None
        except Exception as exc:
            cls = self._classes[name]
            where = _line_in(exc, _module_file(cls))
            raise InputError(
                f"cannot be built from its arguments: {_describe(exc)}{where}",
                obj=f"{self.kind} {name} from {origin.file or origin.label}",
            ) from None

    def __reduce__(self) -> tuple[Callable[..., Registry], tuple[str, str | None]]:
        return _rebuild, (self.kind, self.plugins_dir)


def load_registries(plugins_dir: str | os.PathLike[str] | None = None) -> Registries:
    """The plugin and action registries a scheduler draws on: pumice's built-ins, the
    classes of the installed entry points (groups ``pumice.plugins``,
    ``pumice.actions``) and, when ``plugins_dir`` is given, those its ``*.py`` modules
    list (see the module docstring for the convention).

    Raises :class:`~pumice.errors.InputError` naming the file or entry point and the
    class when an extension cannot be imported, has the wrong shape or takes a name
    already in use. A directory's modules are imported once per process (later calls
    reuse them); each call returns new registries. Constructors run later, in
    :meth:`Scheduler.create <pumice.scheduler.Scheduler.create>`, for the configured
    plugins only."""
    directory = None if plugins_dir is None else _directory(plugins_dir)
    dir_key = None if directory is None else str(directory)
    registries: dict[str, ExtensionRegistry] = {}
    for kind, builtins in (("plugin", default_plugins()), ("action", default_actions())):
        reg = ExtensionRegistry(kind, dir_key)
        for name in sorted(builtins.names()):
            reg.add(builtins.cls(name), BUILTIN)
        for cls, origin in _entry_point_classes(kind):
            reg.add(cls, origin)
        registries[kind] = reg
    if directory is not None:
        for kind, cls, origin in _directory_classes(directory):
            registries[kind].add(cls, origin)
    return Registries(registries["plugin"], registries["action"])


def _rebuild(kind: str, plugins_dir: str | None) -> Registry:
    """Unpickle an :class:`ExtensionRegistry`: load the same sources again."""
    regs = load_registries(plugins_dir)
    return regs.plugins if kind == "plugin" else regs.actions


# -- entry points ------------------------------------------------------------------------


def _entry_point_classes(kind: str) -> list[tuple[type, Origin]]:
    group = GROUPS[kind]
    found = []
    for ep in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        package = f", package {dist.name} {dist.version}" if dist is not None else ""
        origin = Origin(f"entry point {ep.name} = {ep.value} (group {group}{package})")
        try:
            cls = ep.load()
        except Exception as exc:
            raise origin.error(f"cannot import: {_describe(exc)}") from None
        _check_shape(kind, cls, origin)
        if cls.name != ep.name:
            raise origin.error(
                f"the entry point's name must be the class's name {cls.name!r}",
                obj=f"{kind} class {cls.__qualname__}",
            )
        found.append((cls, origin))
    return found


# -- a plugins directory -----------------------------------------------------------------

#: Resolved directory -> the classes its modules listed (a directory is imported once).
_loaded: dict[str, list[tuple[str, type, Origin]]] = {}


def _directory(plugins_dir: str | os.PathLike[str]) -> Path:
    path = Path(plugins_dir)
    if not path.is_dir():
        why = "does not exist" if not path.exists() else "is not a directory"
        raise InputError(f"plugins directory {why}", file=str(plugins_dir))
    return path.resolve()


def _directory_classes(directory: Path) -> list[tuple[str, type, Origin]]:
    key = str(directory)
    found = _loaded.get(key)
    if found is None:
        found = _import_directory(directory)
        _loaded[key] = found
    return found


def _import_directory(directory: Path) -> list[tuple[str, type, Origin]]:
    """Import every module of ``directory`` under a private package; on any error,
    forget the package again so that a corrected directory can be loaded."""
    package = "_pumice_plugins_" + hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
    spec.submodule_search_locations = [str(directory)]
    sys.modules[package] = importlib.util.module_from_spec(spec)
    importlib.invalidate_caches()
    try:
        found = []
        for path in sorted(directory.glob("*.py")):
            if path.name.startswith("_") or not path.is_file():
                continue
            found.extend(_module_classes(package, path))
        return found
    except BaseException:
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
        raise


def _module_classes(package: str, path: Path) -> list[tuple[str, type, Origin]]:
    origin = Origin(f"file {path}", file=str(path))
    if not path.stem.isidentifier():
        raise origin.error("a plugin file's name must be a Python identifier (e.g. my_plugin.py)")
    try:
        module = importlib.import_module(f"{package}.{path.stem}")
    except SyntaxError as exc:
        raise origin.error(f"cannot import: SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except Exception as exc:
        raise origin.error(f"cannot import: {_describe(exc)}{_line_in(exc, path)}") from None
    found = []
    for kind, attr in LISTS.items():
        listed = getattr(module, attr, None)
        if listed is None:
            continue
        if not isinstance(listed, list | tuple):
            raise origin.error(f"module-level {attr!r} must be a list of classes, got {listed!r}")
        for cls in listed:
            _check_shape(kind, cls, origin)
            found.append((kind, cls, origin))
    if not any(hasattr(module, attr) for attr in LISTS.values()):
        raise origin.error(
            "lists no classes: name them in a module-level `plugins = [...]` "
            "and/or `actions = [...]` (helper modules start with '_')"
        )
    return found


# -- checks and messages -----------------------------------------------------------------


def _check_shape(kind: str, cls: Any, origin: Origin) -> None:
    """``cls`` is a class of ``kind``'s shape, or an InputError says what it lacks."""
    if not isinstance(cls, type):
        raise origin.error(f"expected a {kind} class, got {cls!r}")
    label = f"{kind} class {cls.__qualname__}"
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise origin.error(
            "has no `name`: a non-empty string class attribute, the name configurations use",
            obj=label,
        )
    label = f"{kind} {name} (class {cls.__qualname__})"
    for method in REQUIRED[kind]:
        if not callable(getattr(cls, method, None)):
            raise origin.error(f"has no method {method}(session)", obj=label)
    for method in OPTIONAL[kind]:
        if hasattr(cls, method) and not callable(getattr(cls, method)):
            raise origin.error(f"{method} must be a method (session)", obj=label)
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no signature to read: let the constructor decide
        return
    try:
        signature.bind(Arguments({}, f"{kind} {name}"))
    except TypeError:
        raise origin.error(
            f"its constructor must take one argument, the {kind}'s arguments "
            f"(__init__(self, arguments)), not {signature}",
            obj=label,
        ) from None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _module_file(cls: type) -> str | None:
    module = sys.modules.get(cls.__module__)
    return getattr(module, "__file__", None)


def _line_in(exc: BaseException, file: str | os.PathLike[str] | None) -> str:
    """`` (line N)`` of the last traceback frame in ``file``, or ``""``."""
    if file is None:
        return ""
    target = os.path.realpath(file)
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.realpath(frame.filename) == target:
            line = frame.lineno
    return f" (line {line})" if line is not None else ""


__all__ = ["ExtensionRegistry", "Origin", "Registries", "load_registries"]
