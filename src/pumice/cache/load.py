"""Read snapshot files: YAML or JSON, multi-document, ``kind: List``, or directories."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence

import orjson
import yaml

from pumice.cache.build import SourcedObject
from pumice.errors import InputError

_EXTENSIONS = (".yaml", ".yml", ".json")


def _files(path: str) -> list[str]:
    if os.path.isdir(path):
        out = []
        for root, _dirs, files in sorted(os.walk(path)):
            out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(_EXTENSIONS))
        if not out:
            raise InputError("directory holds no .yaml, .yml or .json files", file=path)
        return out
    if not os.path.exists(path):
        raise InputError("no such file or directory", file=path)
    return [path]


def _documents(path: str) -> Iterator[object]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=path) from None
    if path.endswith(".json"):
        if not data.strip():
            return
        try:
            yield orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"malformed JSON: {exc}", file=path) from None
        return
    try:
        yield from yaml.load_all(data, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"malformed YAML{where}: {problem}", file=path) from None


def _flatten(doc: object, path: str) -> Iterator[SourcedObject]:
    if doc is None:
        return
    if isinstance(doc, Mapping) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise InputError("expected a list", file=path, field="items")
        for item in items:
            yield from _flatten(item, path)
        return
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, path)
        return
    yield SourcedObject(doc, path)  # type: ignore[arg-type]


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
            for doc in _documents(f):
                if doc is not None:
                    documents += 1
                    out.extend(_flatten(doc, f))
        if not documents:
            what = "its files are" if os.path.isdir(p) else "it is"
            raise InputError(f"holds no objects: {what} empty or only comments", file=p)
    return out
