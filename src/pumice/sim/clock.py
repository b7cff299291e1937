"""A virtual clock: a heap of ``(time, priority, sequence, event)``.

As in SimPy's core, the sequence number breaks ties between events of equal time and
priority in the order they were scheduled, so a run is a deterministic function of its
inputs. Lower priority values run first at the same time; the simulator uses this to
order, within one instant, releases before arrivals before the scheduling cycle (so a
cycle sees everything that happened at its time) before metric samples.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

#: Priorities of the simulator's events at equal times (lower runs first).
RELEASE, ARRIVAL, START, CONTROLLERS, CYCLE, SAMPLE = 0, 1, 2, 3, 5, 9


class Clock:
    """Simulated time in seconds and the events still to come."""

    __slots__ = ("_heap", "_seq", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, time: float, priority: int, event: Any) -> tuple[float, int, int, Any]:
        """Schedule ``event`` at ``time`` (not before now: the past cannot be changed);
        the entry returned is what :meth:`discard` takes."""
        if time < self.now:
            time = self.now
        item = (time, priority, next(self._seq), event)
        heapq.heappush(self._heap, item)
        return item

    def discard(self, item: tuple[float, int, int, Any]) -> None:
        """Take back an entry :meth:`at` returned, if it is still to come (a linear
        scan: for rarely taken paths)."""
        try:
            self._heap.remove(item)
        except ValueError:
            return
        heapq.heapify(self._heap)

    def after(self, delay: float, priority: int, event: Any) -> None:
        self.at(self.now + delay, priority, event)

    def busy(self, ignore: frozenset[str]) -> bool:
        """True when an event is scheduled whose kind (``event[0]``) is not in ``ignore``
        (a linear scan: for rarely taken paths)."""
        return any(item[3][0] not in ignore for item in self._heap)

    def peek(self) -> float | None:
        """Time of the next event, or None when none is left."""
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[float, Any]:
        """Advance to the next event and return ``(time, event)``."""
        time, _prio, _seq, event = heapq.heappop(self._heap)
        self.now = time
        return time, event
