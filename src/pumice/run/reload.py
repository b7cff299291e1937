"""Config hot reload: a changed scheduler config takes effect at the next cycle.

A ConfigMap mounted in a pod is updated by the kubelet swapping a ``..data`` symlink
inside the mount, not by writing the file: watching the file's inode or mtime alone
misses it, and inotify needs the directory. Reading the (small) file's bytes before a
cycle and comparing them is immune to how it changed, costs one read a period, and
needs no extra thread. A config that fails to load or to build is refused: the last
good one stays, and the refusal is reported once per distinct bad content.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pumice.errors import InputError
from pumice.scheduler import Scheduler

log = logging.getLogger("pumice.config")


@dataclass(slots=True)
class Reload:
    """What one look at the config found: a new scheduler, or why it was refused."""

    scheduler: Scheduler | None = None
    error: str = ""


class ConfigWatcher:
    """Watches ``path`` (None: the built-in default, never changes)."""

    def __init__(self, path: str | None, build: Callable[[str | None], Scheduler]) -> None:
        self.path = path
        self.build = build
        self._digest = self._read()
        self._refused: str | None = None
        self.reloads = 0
        self.refusals = 0

    def _read(self) -> str | None:
        if self.path is None:
            return None
        try:
            with open(self.path, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        except OSError as err:
            return f"unreadable: {err}"

    def poll(self) -> Reload | None:
        """None when nothing changed (or the same bad content was refused before)."""
        digest = self._read()
        if digest == self._digest or digest == self._refused:
            return None
        try:
            if digest is not None and digest.startswith("unreadable: "):
                raise InputError(digest.removeprefix("unreadable: "), file=self.path)
            scheduler = self.build(self.path)
        except InputError as err:
            self._refused = digest
            self.refusals += 1
            msg = f"config refused, keeping the last good one: {err.render()}"
            log.error(msg)
            return Reload(error=msg)
        self._digest, self._refused = digest, None
        self.reloads += 1
        log.info("config reloaded from %s: actions %s", self.path,
                 ", ".join(scheduler.config.actions))  # fmt: skip
        for warning in scheduler.config.warnings:
            log.warning("config %s: %s", self.path, warning)
        return Reload(scheduler=scheduler)


__all__ = ["ConfigWatcher", "Reload"]
