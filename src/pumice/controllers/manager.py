"""Running controllers: watch events in, reconciles out, requeues on a clock.

A :class:`Controller` names the kinds it watches, maps a watch event to the keys of
the objects it owns that the change concerns (a pod event concerns its Job), and
reconciles one key at a time. The :class:`Manager` drains one watch over every kind its
controllers watch, collects the keys per controller (each key once per step, in the
order first seen: a burst of pod events costs one reconcile of their job), and calls
``reconcile``. A reconcile may ask to be called again after some seconds (a timeout, a
TTL, a retry after a failed write); the manager keeps those in a heap on the store's
clock, so the simulator's virtual time drives them exactly as the wall clock does on a
cluster.

``step`` is the whole loop body and returns when nothing is left to do now; ``next_due``
says when the next requeue falls due, so a caller sleeps (or advances virtual time)
until then or until new events arrive; ``idle`` says whether a step now would do
nothing (no event unread, no requeue due), which the simulator asks before stepping at
the end of every instant, and again once its kubelet took in what a step wrote. A
reconcile that raises is logged and retried with a backoff; it never stops the other
controllers.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from pumice.cluster.protocol import WatchEvent
from pumice.controllers.store import Store

log = logging.getLogger("pumice.controllers")

#: Retry delays after a reconcile that raised: doubles from the first to the last.
ERROR_BACKOFF = (1.0, 60.0)


class Controller(Protocol):
    """One controller (see the module docstring)."""

    name: str

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds whose events the controller needs."""
        ...

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        """The keys of the objects this controller reconciles that ``event`` concerns."""
        ...

    def resync(self) -> Iterable[str]:
        """Every key the controller owns, for the first step (state that existed before
        the watch began)."""
        ...

    def reconcile(self, key: str) -> float | None:
        """Bring the object ``key`` to its desired state; seconds after which to be
        called again for it (None: only on a new event)."""
        ...


class Manager:
    """Controllers over one store (see the module docstring)."""

    def __init__(self, store: Store, controllers: Sequence[Controller]) -> None:
        self.store = store
        self.controllers = list(controllers)
        kinds = sorted({k for c in self.controllers for k in c.kinds})
        self._watch = store.watch(kinds)
        #: How many events wait unread, where the watch can tell (see :meth:`idle`).
        self._unread: Callable[[], int] | None = getattr(self._watch, "pending", None)
        #: Per kind, the controllers (by number) whose ``kinds`` name it.
        self._routes: dict[str, list[tuple[int, Controller]]] = {
            k: [(i, c) for i, c in enumerate(self.controllers) if k in c.kinds] for k in kinds
        }
        self._due: list[tuple[float, int, int, str]] = []
        self._seq = itertools.count()
        self._errors: dict[tuple[int, str], int] = {}
        #: The one due time kept per (controller, key): the earliest asked for.
        self._when: dict[tuple[int, str], float] = {}
        self._started = False
        #: Reconciles done, per controller name (for tests and metrics).
        self.reconciles: dict[str, int] = {c.name: 0 for c in self.controllers}

    def close(self) -> None:
        self._watch.close()

    def next_due(self) -> float | None:
        """When the earliest requeue falls due (store clock), None when none is set."""
        while self._due:
            t, _s, i, key = self._due[0]
            if self._when.get((i, key)) == t:
                return t
            heapq.heappop(self._due)  # superseded by an earlier due time
        return None

    def idle(self) -> bool:
        """Whether a :meth:`step` now would do nothing and leave :meth:`next_due` as it
        is: the first step was taken, no event waits (False where the watch cannot
        tell) and no requeue is due. A caller that steps after every change asks this
        first, which costs no drain."""
        unread = self._unread
        if not self._started or unread is None or unread():
            return False
        return not (self._due and self._due[0][0] <= self.store.now())

    def step(self) -> int:
        """Reconcile every key that events or due requeues concern; how many reconciles
        ran. Events caused by this step's own writes are handled in the same call, until
        nothing is left (a bounded number of rounds, so a controller fighting itself
        cannot hang the caller)."""
        done = 0
        routes = self._routes
        for _round in range(100):
            events = self._watch.drain()
            now = self.store.now() if self._due else 0.0  # (only the requeues read it)
            if self._started and not events and not (self._due and self._due[0][0] <= now):
                return done  # idle: no event, nothing due (most calls in a simulation)
            work: list[dict[str, None]] = [{} for _ in self.controllers]
            if not self._started:
                self._started = True
                for i, c in enumerate(self.controllers):
                    for key in c.resync():
                        work[i][key] = None
            for event in events:
                for i, c in routes.get(event.kind, ()):
                    for key in c.keys_for(event):
                        work[i][key] = None
            while self._due and self._due[0][0] <= now:
                t, _s, i, key = heapq.heappop(self._due)
                if self._when.get((i, key)) == t:
                    del self._when[(i, key)]
                    work[i][key] = None
            if not any(work):
                return done
            for i, keys in enumerate(work):
                for key in keys:
                    self._run(i, key)
                    done += 1
        log.warning("controllers: still busy after 100 rounds in one step")
        return done

    def _run(self, i: int, key: str) -> None:
        c = self.controllers[i]
        self.reconciles[c.name] += 1
        try:
            after = c.reconcile(key)
        except Exception:
            n = self._errors.get((i, key), 0)
            self._errors[(i, key)] = n + 1
            delay = min(ERROR_BACKOFF[0] * 2**n, ERROR_BACKOFF[1])
            log.exception("controller %s: reconcile %s failed; again in %.0f s", c.name, key, delay)
            self.requeue(i, key, delay)
            return
        if self._errors:  # (none failed: most runs)
            self._errors.pop((i, key), None)
        if after is not None:
            self.requeue(i, key, after)

    def requeue(self, index: int, key: str, after: float) -> None:
        """Reconcile ``key`` of controller number ``index`` again ``after`` seconds on."""
        t = self.store.now() + max(after, 0.0)
        kept = self._when.get((index, key))
        if kept is not None and kept <= t:
            return
        self._when[(index, key)] = t
        heapq.heappush(self._due, (t, next(self._seq), index, key))


__all__ = ["Controller", "Manager"]
