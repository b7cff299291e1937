"""The plugin and action protocols and their registries.

A plugin is a class with a ``name`` and ``on_session_open(session)`` that registers
functions on the session's hook table (and, optionally, ``on_session_close``). A plugin
that also declares ``on_cycle_open(session)`` is *living*: built once, it keeps its
registrations while the session lives from cycle to cycle, and refreshes the cycle's
state in ``on_cycle_open`` (see :func:`pumice.framework.session.renew_session`). An action
has a ``name`` and ``execute(session)``. Registries are values: a duplicate name is an
error, and the configuration is checked against them before any cycle runs.

A class may also declare ``argument_keys``: the argument keys it reads, a tuple of
strings, ``"prefix.*"`` standing for every key that starts with ``prefix.``. The loader
then refuses a key it does not declare (a misspelling) unless it is one of Volcano's,
which only warns (see :mod:`pumice.conf.check`). A class without ``argument_keys`` (a
custom plugin) has its arguments passed through unchecked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from pumice.conf.arguments import Arguments

if TYPE_CHECKING:
    from pumice.framework.session import Session


class Named(Protocol):
    """What a registry needs of a class: its name, and to be built from arguments."""

    name: str

    def __init__(self, arguments: Arguments) -> None: ...


N = TypeVar("N", bound=type[Named])


class Plugin(Protocol):
    name: ClassVar[str]

    def __init__(self, arguments: Arguments) -> None: ...

    def on_session_open(self, session: Session) -> None:
        """Register hook functions and event handlers; read the snapshot, never write it."""

    def on_session_close(self, session: Session) -> None:
        """Record what the plugin concludes about the cycle (e.g. podgroup conditions)."""

    # Optional: ``on_cycle_open(session)``, which makes the plugin living (see above).


class LivingPlugin(Plugin, Protocol):
    """A plugin that keeps its registrations from cycle to cycle (see above)."""

    def on_cycle_open(self, session: Session) -> None:
        """Refresh the per-cycle state its hook functions read."""


class Action(Protocol):
    name: ClassVar[str]

    def __init__(self, arguments: Arguments) -> None: ...

    def execute(self, session: Session) -> None:
        """Make decisions through Statements; must not touch the cluster directly."""


class Registry:
    """Named classes (plugins or actions); a duplicate name is an error."""

    def __init__(self, kind: str, classes: Iterable[type[Named]] = ()) -> None:
        self.kind = kind
        self._classes: dict[str, type[Named]] = {}
        for cls in classes:
            self.register(cls)

    def register(self, cls: N) -> N:
        name = cls.name
        if name in self._classes:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._classes[name] = cls
        return cls

    def names(self) -> set[str]:
        return set(self._classes)

    def cls(self, name: str) -> type[Named]:
        """The class registered as ``name`` (KeyError if none is)."""
        return self._classes[name]

    def create(self, name: str, arguments: Arguments) -> Any:
        """A new instance of ``name``'s class (a plugin or an action, by the registry)."""
        return self._classes[name](arguments)

    def argument_keys(self, name: str) -> tuple[str, ...] | None:
        """The argument keys ``name``'s class declares, or None if it declares none."""
        keys = getattr(self._classes[name], "argument_keys", None)
        return None if keys is None else tuple(keys)
