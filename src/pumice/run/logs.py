"""Logging of ``pumice run``: text or JSON lines on stderr, verbosity as klog's ``-v``.

pumice logs through the standard :mod:`logging` module, under loggers named
``pumice.*`` (``pumice.run``, ``pumice.run.http``, ...). :func:`setup_logging` installs
one handler on the root logger, so the Kubernetes client's and urllib3's warnings come
out in the same format, and sets the levels from the verbosity, as Volcano's ``-v``:

- ``-v 0``, ``1``: pumice's info, warnings and errors; other libraries' warnings and
  errors;
- ``-v 2``, ``3``: also pumice's debug lines: one per cycle and what it decided;
- ``-v 4``, ``5``: also :data:`TRACE` lines: one per pod bound, pipelined or evicted
  and per job left waiting;
- ``-v 6`` and up: also every library's debug lines (the Kubernetes client's requests).

Structured fields go with a record as ``extra={"fields": {...}}``, or through
:func:`log`: ``log(logger, logging.INFO, "bound", pod="ns/p", node="n1")``. In text
they follow the message as ``key=value``; in JSON they are keys of the line, next to
``ts`` (RFC 3339, UTC, milliseconds), ``level``, ``logger``, ``msg`` and ``caller``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from pumice.framework.decisions import Decisions

#: Below DEBUG: per-pod lines (``-v 4`` and up).
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

FORMATS = ("text", "json")
_CORE = ("ts", "level", "logger", "msg", "caller")
_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def level_for(verbosity: int) -> int:
    """The level of pumice's loggers at klog verbosity ``verbosity``."""
    if verbosity >= 4:
        return TRACE
    if verbosity >= 2:
        return logging.DEBUG
    return logging.INFO


def log(logger: logging.Logger, level: int, msg: str, /, **fields: Any) -> None:
    """Log ``msg`` with structured ``fields`` (nothing is built when ``level`` is off).
    ``msg`` is taken as it is, not %-formatted."""
    if logger.isEnabledFor(level):
        logger.log(level, "%s", msg, extra={"fields": fields}, stacklevel=2)


def _fields(record: logging.LogRecord) -> Mapping[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


def _timestamp(record: logging.LogRecord) -> str:
    t = datetime.fromtimestamp(record.created, UTC)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else _dumps(value).decode()
    if text == "" or any(c in text for c in ' ="\n\t'):
        return _dumps(text).decode()
    return text


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=str, option=_OPTIONS)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level`` (lower case), ``logger``, ``msg``,
    ``caller`` (file:line), the record's fields, and ``exc`` with a traceback. A field
    named like one of those keys is written with a trailing underscore."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "caller": f"{record.filename}:{record.lineno}",
        }
        for key, value in _fields(record).items():
            line[f"{key}_" if key in _CORE or key in ("exc", "stack") else key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return _dumps(line).decode()


class TextFormatter(logging.Formatter):
    """``2026-01-02T03:04:05.678Z INFO  pumice.run: message key=value ...``, then the
    traceback, if any, on the lines below."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), f"{record.levelname:<5}", f"{record.name}:"]
        parts.append(record.getMessage())
        parts.extend(f"{k}={_text_value(v)}" for k, v in _fields(record).items())
        text = " ".join(parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text


class _PumiceHandler(logging.StreamHandler):
    """(Marks the handler :func:`setup_logging` installed, to replace it on a second
    call.)"""


def setup_logging(
    format: str = "text", verbosity: int = 0, *, stream: TextIO | None = None
) -> logging.Handler:
    """Send every log record to ``stream`` (default stderr) as ``format`` ("text" or
    "json") lines, with the levels of verbosity ``verbosity`` (see the module
    docstring). Calling it again replaces the handler it installed; other handlers
    are left alone. Returns the handler. ValueError for an unknown format."""
    if format not in FORMATS:
        raise ValueError(f"unknown log format {format!r}: expected one of {', '.join(FORMATS)}")
    handler = _PumiceHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _PumiceHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbosity >= 6 else logging.WARNING)
    logging.getLogger("pumice").setLevel(level_for(verbosity))
    logging.captureWarnings(True)
    return handler


def log_decisions(logger: logging.Logger, decisions: Decisions, **fields: Any) -> None:
    """One :data:`TRACE` line per pod bound, pipelined or evicted and per job left
    waiting, with ``fields`` (e.g. ``cycle=12``) on each; nothing at lower verbosity."""
    if not logger.isEnabledFor(TRACE):
        return
    for pod, node in sorted(decisions.binds.items()):
        logger.log(TRACE, "bind", extra={"fields": {**fields, "pod": pod, "node": node}})
    for pod, node in sorted(decisions.pipelined.items()):
        logger.log(TRACE, "pipelined", extra={"fields": {**fields, "pod": pod, "node": node}})
    for pod in sorted(decisions.evictions):
        logger.log(TRACE, "evict", extra={"fields": {**fields, "pod": pod}})
    for job, reason in sorted(decisions.pending.items()):
        logger.log(TRACE, "waiting", extra={"fields": {**fields, "job": job, "reason": reason}})


__all__ = [
    "FORMATS",
    "TRACE",
    "JsonFormatter",
    "TextFormatter",
    "level_for",
    "log",
    "log_decisions",
    "setup_logging",
]
