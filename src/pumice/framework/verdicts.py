"""Answers kept from cycle to cycle, each with the stamp of what it depends on.

A scheduler that rebuilds every answer each cycle pays for its whole backlog every
period, although most cycles of a busy cluster repeat the last one's verdicts: the same
jobs refused for the same reasons. :class:`Verdicts` is the one place such answers are
kept. Whoever keeps an answer names it (``key``) and says what it was computed from
(``stamp``: any value compared with ``==``, such as a change counter, a job's version or
the configuration); the answer is handed back only while the stamp is the same, so
forgetting is never needed for correctness, only for memory.

The snapshot's owner keeps one store for the life of the cluster it follows (the
scheduler cache hands the same store to every snapshot, ``Snapshot.verdicts``); a
snapshot built from files starts with an empty one, so ``pumice cycle`` computes
everything afresh.

The clock is the dependency a stamp cannot name: plugins and actions that read the
session's time say until when their answers stand (see :func:`valid_until`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pumice.framework.session import Session

_MISSING: Any = object()


class Verdicts:
    """A store of answers by key, each valid for one stamp (see the module docstring)."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[Hashable, tuple[Any, Any]] = {}

    def recall(self, key: Hashable, stamp: Any, default: Any = None) -> Any:
        """The answer kept under ``key`` if it was kept with an equal ``stamp``, else
        ``default``."""
        got = self._kept.get(key, _MISSING)
        if got is _MISSING or got[0] != stamp:
            return default
        return got[1]

    def keep(self, key: Hashable, stamp: Any, value: Any) -> Any:
        """Keep ``value`` under ``key`` for ``stamp`` (replacing what was there);
        return it."""
        self._kept[key] = (stamp, value)
        return value

    def forget(self, key: Hashable) -> None:
        self._kept.pop(key, None)

    def __len__(self) -> int:
        return len(self._kept)


def timeless(_self: object, _ssn: Session) -> float:
    """``valid_until`` of a plugin or action whose answers do not depend on the clock."""
    return math.inf


def valid_until(ssn: Session, parts: Iterable[object]) -> float:
    """Until when (on the session's clock, exclusive) the session's answers stand if
    nothing in the cluster changes: the earliest ``valid_until(ssn)`` of ``parts`` (the
    session's plugins and actions).

    A plugin or action that reads ``Session.now``, or keeps state in
    ``Snapshot.carried``, answers with the first time any answer it gave in this session
    would differ; one whose answers do not depend on time declares
    ``valid_until = timeless``. One that says nothing (a plugin from elsewhere) may
    depend on anything: the session's answers then stand for no later cycle."""
    until = math.inf
    for part in parts:
        fn = getattr(part, "valid_until", None)
        if fn is None:
            return -math.inf
        until = min(until, fn(ssn))
    return until


__all__ = ["Verdicts", "timeless", "valid_until"]
