"""The controllers' loop: Volcano's controllers over a real API server until stopped.

:class:`ControllerLoop` runs a :class:`~pumice.controllers.manager.Manager` over a
:class:`~pumice.controllers.kube_store.KubeStore`: once the informers have listed
everything, it steps the manager, then sleeps until an event arrives or the next
requeue falls due, and again, until stopped. ``pumice controllers``
(:mod:`pumice.controllers.command`) runs it as the process's work, with its own leader
election; ``pumice run --controllers`` runs it on a thread beside the scheduler, under
the scheduler's lease.

Leadership: only a leader steps. A Manager (and its watch) exists only while leading,
so a standby keeps its informers warm without queueing events, and a new leader begins
with a full resync of every key; writes are gated on the lease, so a leader that lost
it mid-step writes nothing more.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pumice.controllers.registry import ALL, Settings, build, kinds_of

log = logging.getLogger("pumice.controllers")

#: The longest the loop sleeps with nothing to do (it re-checks leadership and beats).
IDLE_SECONDS = 1.0


class ControllerLoop:
    """Controllers over a KubeStore until :attr:`stop` is set (see the module docstring).

    ``may_run`` says whether this process leads (default: always); ``health`` gets a
    heartbeat per turn and readiness once synced. :attr:`manager` is the current
    Manager (None while not leading), for tests and metrics.
    """

    def __init__(
        self,
        store: Any,
        names: Sequence[str] = ALL,
        settings: Settings | None = None,
        *,
        may_run: Callable[[], bool] = lambda: True,
        health: Any = None,
        stop: threading.Event | None = None,
        idle: float = IDLE_SECONDS,
    ) -> None:
        self.store = store
        self.names = tuple(names)
        self.settings = settings or Settings()
        self.may_run = may_run
        self.health = health
        self.stop = stop if stop is not None else threading.Event()
        self.idle = idle
        self.manager: Any = None
        self.steps = 0
        # Built once to learn the kinds (the informers start before any leadership).
        from pumice.controllers.kube_store import DIRECT

        for kind in kinds_of(build(self.names, store, self.settings), direct=DIRECT):
            store.follow(kind)

    def run(self) -> int:
        """Step until stopped; 0 on a clean stop."""
        from pumice.controllers.manager import Manager

        store = self.store
        store.start()
        try:
            while not self.stop.is_set() and not store.wait_synced(self.idle):
                self._beat()
            if self.stop.is_set():
                return 0
            log.info("controllers %s: caches synced (%s)", ", ".join(self.names),
                     ", ".join(store.kinds))  # fmt: skip
            unserved = getattr(store, "unserved", None)
            missing = unserved() if unserved is not None else ()
            if missing:
                log.info("controllers: not served by this API server, so read as empty "
                         "(and looked for again later): %s", ", ".join(missing))  # fmt: skip
            if self.health is not None:
                self.health.set_ready(True)
            while not self.stop.is_set():
                self._beat()
                if not self.may_run():
                    if self.manager is not None:
                        log.info("controllers: not leading; stopped reconciling")
                        self.manager.close()
                        self.manager = None
                    store.wait(self.idle)
                    continue
                if self.manager is None:
                    self.manager = Manager(store, build(self.names, store, self.settings))
                    log.info("controllers: leading; reconciling everything once")
                try:
                    self.manager.step()
                    self.steps += 1
                except Exception:  # a bug in a step must not stop the controllers
                    log.exception("controllers: step failed; the next one starts afresh")
                due = self.manager.next_due()
                wait = self.idle if due is None else max(0.0, min(self.idle, due - store.now()))
                store.wait(wait)
            return 0
        finally:
            if self.manager is not None:
                self.manager.close()
            if self.health is not None:
                self.health.set_ready(False, "shutting down")

    def _beat(self) -> None:
        if self.health is not None:
            self.health.heartbeat()
        reachability = getattr(getattr(self.store, "client", None), "reachability", None)
        if reachability is not None:
            reachability.poll()  # (an outage's end, said once, on a quiet cluster too)

    def start_thread(self) -> threading.Thread:
        """Run on a daemon thread (``pumice run --controllers``)."""
        thread = threading.Thread(target=self.run, name="pumice-controllers", daemon=True)
        thread.start()
        return thread


__all__ = ["IDLE_SECONDS", "ControllerLoop"]
