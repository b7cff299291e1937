"""Read snapshot files: YAML or JSON, multi-document, ``kind: List``, or directories.

Files are read by :mod:`pumice.documents` (which refuses text that is not UTF-8, too
deep, or an alias bomb); every object found must be a map."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence

from pumice.cache.build import SourcedObject
from pumice.documents import read_file
from pumice.errors import InputError, shown

_EXTENSIONS = (".yaml", ".yml", ".json")


def _files(path: str) -> list[str]:
    if os.path.isdir(path):
        out: list[str] = []
        for root, _dirs, files in sorted(os.walk(path)):
            out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(_EXTENSIONS))
        if not out:
            raise InputError("directory holds no .yaml, .yml or .json files", file=path)
        return out
    if not os.path.exists(path):
        raise InputError("no such file or directory", file=path)
    return [path]


def _flatten(doc: object, where: str, path: str) -> Iterator[SourcedObject]:
    """The objects of one document: itself, or the items of a ``List`` or a YAML list
    (nested ones too, without recursing). Anything else is an InputError naming the
    document and item."""
    pending: list[tuple[object, str]] = [(doc, where)]
    while pending:
        item, at = pending.pop()
        if isinstance(item, list):
            pending.extend((x, f"{at}[{i}]") for i, x in reversed(list(enumerate(item))))
            continue
        if not isinstance(item, Mapping):
            raise InputError(f"expected an object (a map), got {shown(item)}", file=path, obj=at)
        kind = item.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in item:
            items = item.get("items") or []
            if not isinstance(items, list):
                raise InputError("expected a list", file=path, obj=at, field="items")
            pending.extend((x, f"{at} items[{i}]") for i, x in reversed(list(enumerate(items))))
            continue
        yield SourcedObject(item, path)


def load_objects(paths: Sequence[str]) -> list[SourcedObject]:
    """Every object in ``paths`` (files or directories), in a stable order.

    A file named on its own with no document at all (empty, or only comments and
    ``---``) is an :class:`InputError`, as a directory without snapshot files or
    objects is: a cycle over it would decide nothing and say nothing, which reads as
    success. (A ``List`` with no items is what kubectl prints for an empty namespace,
    and is kept; so are empty files among others in a directory.)"""
    out: list[SourcedObject] = []
    for p in paths:
        documents = 0
        for f in _files(p):
            for i, doc in enumerate(read_file(f)):
                documents += 1
                out.extend(_flatten(doc, f"document {i + 1}", f))
        if not documents:
            what = "its files are" if os.path.isdir(p) else "it is"
            raise InputError(f"holds no objects: {what} empty or only comments", file=p)
    return out
