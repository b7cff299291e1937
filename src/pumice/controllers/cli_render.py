"""What ``pumice job`` and ``pumice queue`` share in showing objects to people.

Reading the few common fields of an API object (metadata, counts, timestamps, ages as
kubectl writes them) and the pieces of rich output every table uses (the console, a
phase in its colour, a table in the commands' style), and ``--format json``.

Contract: pure, or writes to stdout only; nothing here talks to the cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

PHASE_STYLE = {
    "Running": "green",
    "Completed": "green",
    "Open": "green",
    "Pending": "yellow",
    "Inqueue": "yellow",
    "Restarting": "yellow",
    "Completing": "yellow",
    "Closing": "yellow",
    "Aborting": "magenta",
    "Aborted": "magenta",
    "Closed": "magenta",
    "Terminating": "red",
    "Terminated": "red",
    "Failed": "red",
}


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's metadata (empty when it has none)."""
    return obj.get("metadata") or {}


def as_int(value: Any) -> int:
    """An integer field, 0 when absent or not an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def epoch(stamp: Any) -> float | None:
    """An API timestamp in unix seconds (None: absent or unreadable)."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def human_age(seconds: float) -> str:
    """How long ago, as kubectl writes it: ``45s``, ``3m20s``, ``2h5m``, ``3d4h``, ``2y``."""
    s = int(seconds)
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m, h, d = s // 60, s // 3600, s // 86400
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 730:
        return f"{d}d"
    return f"{d // 365}y"


def age_since(stamp: Any, now: float) -> str:
    """How long before ``now`` the API timestamp ``stamp`` is, as kubectl writes it."""
    at = epoch(stamp)
    return "-" if at is None else human_age(now - at)


def console() -> Console:
    """The console tables are printed on."""
    # Piped output gets a wide page rather than rich's 80 columns (as pumice cycle's).
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


def print_json(data: Any) -> None:
    """What ``--format json`` prints: ``data`` indented, on stdout."""
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def phase_text(phase: str) -> Text:
    """A phase in its colour (``-`` when empty)."""
    return Text(phase or "-", style=PHASE_STYLE.get(phase, ""))


def table(*columns: str, title: str | None = None, numeric: Iterable[str] = ()) -> Table:
    """A table in the commands' style; ``numeric`` columns are right-aligned."""
    t = Table(
        box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False
    )
    numbers = set(numeric)
    for c in columns:
        wide = c in ("MESSAGE", "POLICIES", "REQUESTS")
        t.add_column(
            c, justify="right" if c in numbers else "left", no_wrap=not wide, overflow="fold"
        )
    return t


__all__ = [
    "PHASE_STYLE",
    "age_since",
    "as_int",
    "console",
    "epoch",
    "human_age",
    "meta_of",
    "phase_text",
    "print_json",
    "table",
]
