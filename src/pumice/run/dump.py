"""The cache dumper: the cluster as the scheduler sees it, as a snapshot file.

Volcano writes its cache on SIGUSR1 for debugging. pumice writes what its cache is fed
(every object of every kind it watches, with the binds and evictions it has assumed
and not yet seen confirmed) as a ``kind: List`` that ``pumice cycle`` reads: replaying
the file with the same config gives the decisions the next cycle would make.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from pumice.cluster.protocol import KINDS, Cluster


def write_dump(cluster: Cluster, directory: str, *, clock: Callable[[], float] = time.time) -> Path:
    """Write ``pumice-dump-<UTC time>.json`` into ``directory`` (made if missing),
    atomically (a reader never sees half a file); returns its path."""
    items = [obj for kind in KINDS for obj in cluster.list(kind)]
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(clock()))
    path = folder / f"pumice-dump-{stamp}-{os.getpid()}.json"
    n = 1
    while path.exists():
        path = folder / f"pumice-dump-{stamp}-{os.getpid()}-{n}.json"
        n += 1
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    tmp.replace(path)
    return path


__all__ = ["write_dump"]
