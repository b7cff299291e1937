"""Until when a session's answers stand, for the cycles that repeat them.

The clock is the dependency a stamp (see :mod:`pumice.api.verdicts`) cannot name:
plugins and actions that read the session's time say until when their answers stand.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pumice.framework.session import Session


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


__all__ = ["timeless", "valid_until"]
