"""Events on their way to the API server, kept through an outage.

An Event says what happened (``Scheduled``, ``Preempted``, ``InvalidSpec``) once, when
it happens: a status is derived again next cycle, an Event is not. So Events are not
dropped when the API server does not answer: :class:`EventOutbox` keeps them in order
in a bounded queue and one thread posts them, retrying the one at the head with a
doubling backoff until the server answers. The bound keeps a long outage from growing
memory without end: beyond ``capacity`` the oldest waiting Event is dropped and
counted (``dropped``). An answer that refuses the Event (403, 404: its namespace gone,
422) drops it; 409 means an earlier attempt arrived after all. Events are posted only
while ``may_write`` says so (a standby replica posts nothing).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from pumice.cluster.kube_client import RESOURCES, ApiUnavailable, KubeClient, status_message

log = logging.getLogger("pumice.cluster")

#: Events kept while the API server does not answer.
CAPACITY = 5000
#: Backoff between attempts at the head Event: doubles from the first to the last.
BACKOFF = (0.2, 10.0)


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


class EventOutbox:
    """Posts core/v1 Events in order on one thread, retrying through outages (see the
    module docstring). ``counted(status)`` is told every answer (metrics)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        may_write: Callable[[], bool] = lambda: True,
        counted: Callable[[int], None] | None = None,
        capacity: int = CAPACITY,
        backoff: tuple[float, float] = BACKOFF,
    ) -> None:
        self.client = client
        self.may_write = may_write
        self.counted = counted
        self.capacity = capacity
        self.backoff = backoff
        self._queue: collections.deque[tuple[str, dict[str, Any]]] = collections.deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._flush_until: float | None = None
        self._thread: threading.Thread | None = None
        #: Counters (only grow): posted, dropped for room, refused by the server.
        self.sent = 0
        self.dropped = 0
        self.refused = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def put(self, namespace: str, event: Mapping[str, Any]) -> None:
        """Queue ``event`` for ``namespace``; never blocks."""
        with self._cond:
            if len(self._queue) >= self.capacity:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append((namespace, dict(event)))
            self._cond.notify()

    def waiting(self) -> int:
        return len(self._queue)

    def close(self, flush: float = 2.0) -> None:
        """Post what is queued for up to ``flush`` seconds while the server answers,
        then stop; what is left is abandoned."""
        with self._cond:
            self._flush_until = time.monotonic() + flush
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(flush + 1.0)
        self._stop.set()
        with self._cond:
            self._cond.notify()

    def _run(self) -> None:
        delay = self.backoff[0]
        while not self._stop.is_set():
            with self._cond:
                while not self._queue and self._flush_until is None and not self._stop.is_set():
                    self._cond.wait()
                if not self._queue or self._stop.is_set():
                    return
                namespace, event = self._queue[0]
            done = self._post(namespace, event)
            if done:
                delay = self.backoff[0]
                with self._cond:
                    if self._queue and self._queue[0][1] is event:
                        self._queue.popleft()
            flush_until = self._flush_until
            if flush_until is not None and (not done or time.monotonic() >= flush_until):
                return  # (stopping: no waiting for a server that does not answer)
            if not done:
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])

    def _post(self, namespace: str, event: dict[str, Any]) -> bool:
        """One attempt; True when the Event is done with (posted, or refused for good)."""
        if not self.may_write():
            return True  # (not the leader: not ours to say)
        try:
            status, body = self.client.request(
                "POST", RESOURCES["Event"].path(namespace), body=event
            )
        except ApiUnavailable:
            return False
        if self.counted is not None:
            self.counted(status)
        if status in (200, 201, 409):
            self.sent += 1
            return True
        if _retryable(status):
            return False
        self.refused += 1
        log.info(
            "event %s %s on %s refused: HTTP %s: %s",
            event.get("type"),
            event.get("reason"),
            (event.get("involvedObject") or {}).get("name"),
            status,
            status_message(body),
        )
        return True


__all__ = ["EventOutbox"]
