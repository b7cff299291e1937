"""A binary heap ordered by a comparison function.

Job and queue order change while a cycle runs (a queue's share grows as its jobs are
placed), and Volcano's heap does not re-sort items already inside it. To make the same
choices, this heap follows Go's ``container/heap`` step for step (``heapq`` sifts
differently, which gives different results once keys have gone stale).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    """Pop returns the item that ``less`` puts first."""

    __slots__ = ("_items", "_less")

    def __init__(self, less: Callable[[T, T], bool], items: Iterable[T] = ()) -> None:
        self._less = less
        self._items: list[T] = []
        for item in items:
            self.push(item)

    def __len__(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def push(self, item: T) -> None:
        h, less = self._items, self._less
        h.append(item)
        j = len(h) - 1
        while j > 0:
            i = (j - 1) // 2
            if not less(h[j], h[i]):
                break
            h[i], h[j] = h[j], h[i]
            j = i

    def pop(self) -> T:
        h, less = self._items, self._less
        n = len(h) - 1
        h[0], h[n] = h[n], h[0]
        i = 0
        while True:
            j = 2 * i + 1
            if j >= n:
                break
            if j + 1 < n and less(h[j + 1], h[j]):
                j += 1
            if not less(h[j], h[i]):
                break
            h[i], h[j] = h[j], h[i]
            i = j
        return h.pop()
