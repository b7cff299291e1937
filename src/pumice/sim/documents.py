"""Reading YAML and JSON input files into the objects they hold.

Workload files and cluster files share this reader so that both accept the same forms
(multi-document YAML, a JSON document or array, ``kind: List`` documents) and report an
unreadable or malformed file the same way: as :class:`~pumice.errors.InputError` naming
the file. What the objects mean is the caller's business.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pumice.documents import read_file
from pumice.errors import InputError


def read_documents(path: str | os.PathLike[str]) -> list[Any]:
    """The documents of a YAML (multi-document) or JSON file; ``kind: List`` is not expanded.

    A JSON file holding an array yields its elements. Empty YAML documents are dropped.
    The file is read by :func:`pumice.documents.read_file`."""
    docs = read_file(path)
    if str(path).lower().endswith(".json") and len(docs) == 1 and isinstance(docs[0], list):
        return list(docs[0])
    return docs


def iter_objects(docs: Iterable[Any], *, file: str) -> Iterator[Mapping[str, Any]]:
    """Objects of ``docs`` with ``kind: List`` (and ``*List``) documents expanded (a
    List inside a List too). Anything that is not a mapping is an InputError naming
    the document (and the item of its List)."""
    for i, doc in enumerate(docs):
        yield from _expanded(doc, f"document {i + 1}", file)


def _expanded(doc: Any, where: str, file: str) -> Iterator[Mapping[str, Any]]:
    if not isinstance(doc, Mapping):
        raise InputError(f"is {_a(doc)}, not a map", file=file, obj=where)
    kind = doc.get("kind")
    if not (isinstance(kind, str) and kind.endswith("List") and "items" in doc):
        yield doc
        return
    items = doc.get("items") or []
    if not isinstance(items, list):
        raise InputError("must be a list", file=file, obj=where, field="items")
    for j, item in enumerate(items):
        yield from _expanded(item, f"{where} items[{j}]", file)


def _a(value: Any) -> str:
    """What a value is, for a message: ``a list``, ``a string``..."""
    names = {list: "a list", str: "a string", int: "a number", float: "a number",
             bool: "a boolean"}  # fmt: skip
    return names.get(type(value), f"a {type(value).__name__}")
