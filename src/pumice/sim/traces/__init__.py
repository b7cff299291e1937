"""Importers for public GPU-cluster traces, each turning a trace into a :class:`Workload`.

- :mod:`~pumice.sim.traces.alibaba2020`: Alibaba cluster-trace-gpu-v2020 (PAI, NSDI'22);
- :mod:`~pumice.sim.traces.alibaba2023`: Alibaba cluster-trace-gpu-v2023 (openb, ATC'23);
- :mod:`~pumice.sim.traces.philly`: Microsoft Philly (ATC'19).

Each offers ``load(path_or_dir, *, limit=None, ...) -> Workload``. Real traces have rows
that are broken or that cannot be replayed (jobs still running when the trace was cut);
an importer skips such a row, counts it in ``Workload.skipped`` and keeps the first few
messages (``file:line: why``) in ``Workload.warnings``, so one bad row among millions does
not stop a run. A file that cannot be read at all raises :class:`InputError`.
``docs/traces.md`` documents every field and what pumice maps it to.

This module holds what the importers share: the skip log, Kubernetes-safe names, the
user-to-queue mapping and CSV reading.
"""

from __future__ import annotations

import csv
import math
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pumice.errors import InputError
from pumice.sim.workload import JobSpec, QueueSpec, Workload, sort_jobs

MAX_WARNINGS = 10


@dataclass(slots=True)
class SkipLog:
    """Counts skipped rows and keeps the first :data:`MAX_WARNINGS` messages."""

    count: int = 0
    messages: list[str] = field(default_factory=list)

    def skip(self, message: str) -> None:
        self.count += 1
        if len(self.messages) < MAX_WARNINGS:
            self.messages.append(message)


_INVALID = re.compile(r"[^a-z0-9-]+")


def k8s_name(raw: str, *, max_len: int = 63) -> str:
    """``raw`` as a DNS label: lower case, other characters as ``-``, trimmed.

    Trace identifiers are hashes or ids such as ``application_1506638472019_14199``; the
    mapping keeps them readable and recognisable. Returns ``""`` when nothing is left.
    """
    name = _INVALID.sub("-", raw.strip().lower()).strip("-")
    return name[:max_len].rstrip("-")


@dataclass(slots=True)
class QueueMapper:
    """Maps trace tenants (users, virtual clusters) to queues.

    With at most ``max_queues`` distinct tenants each gets its own queue, named
    ``{prefix}-{tenant}``; with more, tenants are hashed (CRC-32, stable across runs and
    Python versions) into ``max_queues`` queues ``{prefix}-NN``, since thousands of
    one-user queues would make fair share meaningless. All queues have weight 1.
    """

    tenants: Sequence[str]
    max_queues: int = 16
    prefix: str = "q"
    _names: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_queues < 1:
            raise ValueError("max_queues must be >= 1")
        distinct = sorted(set(self.tenants))
        if len(distinct) <= self.max_queues:
            for t in distinct:
                self._names[t] = k8s_name(f"{self.prefix}-{t}") or f"{self.prefix}-unknown"
        else:
            width = len(str(self.max_queues - 1))
            for t in distinct:
                bucket = zlib.crc32(t.encode()) % self.max_queues
                self._names[t] = f"{self.prefix}-{bucket:0{width}d}"

    def __call__(self, tenant: str) -> str:
        return self._names[tenant]

    def queues(self) -> tuple[QueueSpec, ...]:
        """The queues in use, sorted by name."""
        return tuple(QueueSpec(name) for name in sorted(set(self._names.values())))


def finish(
    jobs: Sequence[JobSpec],
    queues: Sequence[QueueSpec],
    skips: SkipLog,
    priority_classes: dict[str, int] | None = None,
) -> Workload:
    """The importer's result: jobs sorted, only queues that some job uses."""
    used = {j.queue for j in jobs}
    return Workload(
        jobs=sort_jobs(jobs),
        queues=tuple(q for q in queues if q.name in used),
        priority_classes=dict(priority_classes or {}),
        skipped=skips.count,
        warnings=tuple(skips.messages),
    )


def find_file(path_or_dir: str, names: Sequence[str]) -> Path:
    """``path_or_dir`` itself when it is a file, else the first of ``names`` inside it."""
    path = Path(path_or_dir)
    if path.is_file():
        return path
    if path.is_dir():
        for name in names:
            if (path / name).is_file():
                return path / name
        raise InputError(f"none of {', '.join(names)} in this directory", file=str(path))
    raise InputError("no such file or directory", file=str(path))


def read_rows(
    path: Path, columns: Sequence[str], *, header: bool | None = None
) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a CSV file as ``(line number, {column: text})``.

    ``header=None`` detects a header: the first row is one when its first cell is the
    name of a known column, and its order then wins (columns it lacks are simply absent
    from the rows). Otherwise ``columns`` give the order (the Alibaba 2020 tables have no
    header). Cells are stripped; empty cells are left out of the row.
    """
    try:
        f = path.open(newline="", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from exc
    with f:
        reader = csv.reader(f)
        order = list(columns)
        first = True
        for row in reader:
            if first:
                first = False
                has_header = header if header is not None else bool(row) and row[0] in columns
                if has_header:
                    order = [c.strip() for c in row]
                    continue
            cells = [c.strip() for c in row]
            if not any(cells):
                continue
            yield reader.line_num, {k: v for k, v in zip(order, cells, strict=False) if v}


def parse_float(row: dict[str, str], column: str) -> float | None:
    """A column as a finite float; ``None`` when absent (empty, ``nan``, ``None``);
    :class:`ValueError` naming the column when it is not a number."""
    text = row.get(column)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        if text.lower() in ("none", "null"):
            return None
        raise ValueError(f"{column} is not a number: {text!r}") from None
    if value != value:  # "nan" is how pandas-written traces spell a missing value
        return None
    if math.isinf(value):
        raise ValueError(f"{column} is not a finite number: {text!r}")
    return value


def require_float(row: dict[str, str], column: str) -> float:
    """A required column as a finite float; :class:`ValueError` names the column."""
    value = parse_float(row, column)
    if value is None:
        raise ValueError(f"missing {column}")
    return value
