"""A binary heap ordered by a comparison function.

Job and queue order change while a cycle runs (a queue's share grows as its jobs are
placed), and Volcano's heap does not re-sort items already inside it. To make the same
choices, this heap follows Go's ``container/heap`` step for step (``heapq`` sifts
differently, which gives different results once keys have gone stale).

Where every order function offers a sort key and no key can change while its item
waits, :class:`KeyedQueue` gives the same pops for a fraction of the cost (tuple
comparisons in C instead of a chain of Python order functions per comparison).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

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


class KeyedQueue(Generic[T]):
    """Pop returns the item with the smallest key (``heapq``, keys computed at push).

    The same pops as :class:`PriorityQueue` whenever ``less(a, b)`` is ``key(a) <
    key(b)``, keys form a total order and an item's key does not change while it is
    inside: any correct heap then returns the minimum. :func:`ordered` decides when
    that holds; a job's own state (priority, readiness, its DRF share) changes only
    while the job is out of allocate's heap, being served.

    An item alone inside is compared with nothing: its key is made only once a second
    item comes (the same key, as it cannot change while the item waits). Most of a
    cycle's lines hold one job, and a job's key costs a call to every order function.
    """

    __slots__ = ("_items", "_key", "_lone", "_seq")

    def __init__(self, key: Callable[[T], Any], items: Iterable[T] = ()) -> None:
        self._key = key
        found = items if isinstance(items, list) else list(items)
        #: The one item inside has no key yet (its entry holds None in its place).
        self._lone = len(found) == 1
        if self._lone:
            self._items: list[tuple[Any, int, T]] = [(None, 0, found[0])]
        else:
            self._items = [(key(x), i, x) for i, x in enumerate(found)]
            heapq.heapify(self._items)
        self._seq = itertools.count(len(found))

    def __len__(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def push(self, item: T) -> None:
        h = self._items
        if not h:
            h.append((None, next(self._seq), item))
            self._lone = True
            return
        if self._lone:
            _, seq, lone = h[0]
            h[0] = (self._key(lone), seq, lone)
            self._lone = False
        heapq.heappush(h, (self._key(item), next(self._seq), item))

    def pop(self) -> T:
        h = self._items
        if len(h) == 1:
            self._lone = False
            return h.pop()[2]
        return heapq.heappop(h)[2]


class Lines(Generic[T]):
    """Items waiting in named lines (a queue's jobs), each line a heap of its own.

    With a sort key, a line is ordered only when first asked for (:meth:`of`): the
    contract of :func:`ordered` (no item's key changes while it waits) holds for items
    not yet in the heap too, so the pops are the same, and a line never served (a queue
    that has used its share) costs no key. Without one, items are pushed as they come,
    as :class:`PriorityQueue` must see them for Volcano's pops."""

    __slots__ = ("_heaps", "_key", "_less", "_waiting")

    def __init__(self, less: Callable[[T, T], bool], key: Callable[[T], tuple] | None) -> None:
        self._less, self._key = less, key
        self._waiting: dict[str, list[T]] = {}
        self._heaps: dict[str, PriorityQueue[T] | KeyedQueue[T]] = {}

    def add(self, name: str, item: T) -> bool:
        """Put ``item`` at the end of line ``name``; True when the line is new."""
        if self._key is None:
            heap = self._heaps.get(name)
            if heap is None:
                self._heaps[name] = PriorityQueue(self._less, (item,))
                return True
            heap.push(item)
            return False
        waiting = self._waiting.get(name)
        if waiting is None:
            self._waiting[name] = [item]
            return True
        waiting.append(item)
        return False

    def of(self, name: str) -> PriorityQueue[T] | KeyedQueue[T] | None:
        """Line ``name``'s heap (None when nothing was added to it)."""
        heap = self._heaps.get(name)
        if heap is None:
            items = self._waiting.pop(name, None)
            if items is None:
                return None
            heap = self._heaps[name] = ordered(self._less, self._key, items)
        return heap


def order_key(
    keys: Sequence[Callable | None], fallback: Callable[[T], tuple]
) -> Callable[[T], tuple] | None:
    """A sort key equivalent to walking the order functions and then ``fallback``, when
    every function offers one (``keys``: each function's ``key`` facet, where ``fn(a,
    b)`` is the sign of ``key(a) - key(b)``); otherwise None."""
    offered = [k for k in keys if k is not None]
    if len(offered) < len(keys):
        return None
    # Keys are computed at every push: spelled out for the usual few functions.
    if len(offered) == 1:
        k0 = offered[0]
        return lambda x: (k0(x), *fallback(x))
    if len(offered) == 2:
        k0, k1 = offered
        return lambda x: (k0(x), k1(x), *fallback(x))
    if len(offered) == 3:
        k0, k1, k2 = offered
        return lambda x: (k0(x), k1(x), k2(x), *fallback(x))
    return lambda x: (*[k(x) for k in offered], *fallback(x))


def ordered(
    less: Callable[[T, T], bool], key: Callable[[T], tuple] | None, items: Iterable[T] = ()
) -> PriorityQueue[T] | KeyedQueue[T]:
    """A :class:`KeyedQueue` when ``key`` is given, else a :class:`PriorityQueue`.

    Callers pass a key only where no item's order changes while it waits inside."""
    if key is None:
        return PriorityQueue(less, items)
    return KeyedQueue(key, items)
