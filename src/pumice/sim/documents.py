"""Reading YAML and JSON input files into the objects they hold.

Workload files and cluster files share this reader so that both accept the same forms
(multi-document YAML, a JSON document or array, ``kind: List`` documents) and report an
unreadable or malformed file the same way: as :class:`~pumice.errors.InputError` naming
the file. What the objects mean is the caller's business.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from pumice.errors import InputError


def read_documents(path: str | os.PathLike[str]) -> list[Any]:
    """The documents of a YAML (multi-document) or JSON file; ``kind: List`` is not expanded.

    A JSON file holding an array yields its elements. Empty YAML documents are dropped.
    """
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=file) from exc
    if file.lower().endswith(".json"):
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc}", file=file) from exc
        return list(doc) if isinstance(doc, list) else [doc]
    try:
        docs = list(yaml.load_all(data, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"invalid YAML{where}: {problem}", file=file) from exc
    return [d for d in docs if d is not None]


def iter_objects(docs: Iterable[Any], *, file: str) -> Iterator[Mapping[str, Any]]:
    """Objects of ``docs`` with ``kind: List`` (and ``*List``) documents expanded."""
    for i, doc in enumerate(docs):
        if not isinstance(doc, Mapping):
            raise InputError(f"document {i + 1} is not a map", file=file)
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError("items must be a list", file=file, obj=kind, field="items")
            yield from iter_objects(items, file=file)
        else:
            yield doc
