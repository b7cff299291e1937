"""The one reader of YAML and JSON text: bytes in, documents out, or one InputError.

Every mode reads its files through here (snapshots, workloads, cluster files, scheduler
configurations, sandbox manifests), so every mode refuses the same bad input the same
way, with one line naming the file and, where the parser knows it, the line and column:

- text that is not UTF-8;
- malformed YAML or JSON, including values PyYAML cannot build (``!!int abc``, a date
  that does not exist, an integer of more than 4,300 digits);
- nesting deeper than :data:`MAX_DEPTH` (PyYAML's C composer recurses once per level
  and overflows the C stack, a crash no ``except`` catches, near 25,000 levels; pumice's
  own code walks documents recursively too);
- aliases that expand to more than :data:`MAX_ALIASED` nodes in a document (a
  "billion laughs" of a few hundred bytes), or an alias inside the collection it names
  (``&a [*a]``, a value that contains itself).

Depth and aliases are checked on PyYAML's event stream (its C parser, which does not
recurse) before the document is built, counting the nodes each anchor stands for, so a
bomb is refused in time proportional to its text. The documents are then built by the C
loader as before; the garbage collector is paused meanwhile (a snapshot builds millions
of objects, none of them cyclic, and collecting during the build costs more than the
build). What the documents mean is the caller's business.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import numpy as np
import orjson
import yaml

from pumice.errors import InputError, one_line

#: Deepest nesting of collections accepted. Kubernetes objects nest about 15 deep and
#: CRD schemas about 40; pumice walks documents recursively, so this stays well below
#: Python's recursion limit.
MAX_DEPTH = 200

#: Most nodes that the aliases of one document may stand for, counted as if expanded.
#: Real manifests rarely use aliases at all; a document of that size is far beyond any.
MAX_ALIASED = 1_000_000

_STARTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_ENDS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def read_file(path: str | os.PathLike[str], *, keep_empty: bool = False) -> list[Any]:
    """The documents of the file at ``path``: JSON when its name ends in ``.json``
    (one document), else YAML (every document of the stream); empty documents (and a
    JSON ``null``) are dropped, or kept as None with ``keep_empty`` (for messages that
    number documents as they are in the file)."""
    file = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=file) from None
    if file.lower().endswith(".json"):
        doc = load_json(data, source=file) if data.strip() else None
        return [] if doc is None and not keep_empty else [doc]
    return load_yaml(data, source=file, keep_empty=keep_empty)


def load_yaml(data: bytes | str, *, source: str, keep_empty: bool = False) -> list[Any]:
    """Every non-empty document of the YAML stream ``data`` (every one, empty ones as
    None, with ``keep_empty``), or an :class:`InputError` naming ``source``."""
    raw = _encoded(data, source) if isinstance(data, str) else _utf8(data, source)
    with _paused_gc():
        _check_shape(raw, source)
        try:
            docs = list(yaml.load_all(raw, Loader=_Loader))
        except yaml.YAMLError as exc:
            raise InputError(f"malformed YAML{_describe(exc)}", file=source) from None
        except (ValueError, OverflowError) as exc:  # what no constructor below wraps
            raise InputError(f"malformed YAML: {_short(str(exc))}", file=source) from None
    return docs if keep_empty else [d for d in docs if d is not None]


def load_one_yaml(data: bytes | str, *, source: str) -> Any:
    """The single document of ``data`` (None when it has none)."""
    docs = load_yaml(data, source=source)
    if len(docs) > 1:
        raise InputError(f"expected one YAML document, found {len(docs)}", file=source)
    return docs[0] if docs else None


def load_json(data: bytes, *, source: str) -> Any:
    """The JSON document ``data``, or an :class:`InputError` naming ``source``."""
    _utf8(data, source)
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH:
        depth = _json_depth(data)
        if depth > MAX_DEPTH:
            raise InputError(f"nested {depth} deep, more than {MAX_DEPTH}", file=source)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {_short(str(exc))}", file=source) from None


# -- checks before parsing ----------------------------------------------------------------


def _encoded(text: str, source: str) -> bytes:
    """``text`` (a YAML text held inside another document) as UTF-8: a lone surrogate
    (``"\\ud800"`` in the outer document) has no UTF-8 form."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"not UTF-8 text: character U+{ord(text[exc.start]):04X} at offset {exc.start}",
            file=source,
        ) from None


def _utf8(data: bytes, source: str) -> bytes:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (offset {exc.start})",
            file=source,
        ) from None
    return data


def _check_shape(data: bytes, source: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` and aliases standing for more than
    :data:`MAX_ALIASED` nodes, from the event stream (nothing is built).

    Each open collection counts the nodes in it, aliases counted as the nodes their
    anchor stands for; an anchor's count is known when its node ends. A malformed stream
    is left for the loader to report."""
    depth = 0
    open_counts: list[int] = [0]
    open_anchors: list[str | None] = [None]
    sizes: dict[str, int] = {}
    aliased = 0
    loader = yaml.CSafeLoader(data)  # (its C parser alone: events, nothing composed)
    next_event = loader.get_event
    try:
        while (event := next_event()) is not None:
            kind = type(event)
            if kind is yaml.ScalarEvent:
                open_counts[-1] += 1
                anchor = cast(yaml.NodeEvent, event).anchor  # (its class, checked above)
                if anchor is not None:
                    sizes[anchor] = 1
            elif kind in _STARTS:
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(
                        f"nested more than {MAX_DEPTH} deep{_at(event.start_mark)}", file=source
                    )
                open_counts.append(1)
                open_anchors.append(cast(yaml.NodeEvent, event).anchor)  # (a start event)
            elif kind in _ENDS:
                depth -= 1
                count = open_counts.pop()
                anchor = open_anchors.pop()
                open_counts[-1] += count
                if anchor is not None:
                    sizes[anchor] = count
            elif kind is yaml.AliasEvent:
                # (its class, checked above; an alias always names an anchor)
                alias = cast(str, cast(yaml.AliasEvent, event).anchor)
                if alias in open_anchors:
                    raise InputError(
                        f"alias *{_anchor_text(alias)} is inside the node it names"
                        f"{_at(event.start_mark)} (a value that contains itself)",
                        file=source,
                    )
                count = sizes.get(alias, 1)
                aliased += count
                open_counts[-1] += count
                if aliased > MAX_ALIASED:
                    raise InputError(
                        f"aliases expand to more than {MAX_ALIASED:,} nodes{_at(event.start_mark)}",
                        file=source,
                    )
            elif kind is yaml.DocumentStartEvent:
                sizes.clear()
                aliased = 0
    except yaml.YAMLError:
        return  # the loader says what is wrong, and where
    finally:
        loader.dispose()


def _anchor_text(anchor: str) -> str:
    return one_line(anchor if len(anchor) <= 40 else anchor[:37] + "...")


_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[[ord("["), ord("{")]] = 1
_BRACKET_STEP[[ord("]"), ord("}")]] = -1
_JSON_MARKS = np.zeros(256, dtype=bool)
_JSON_MARKS[[ord("["), ord("{"), ord("]"), ord("}"), ord('"')]] = True


def _json_depth(data: bytes) -> int:
    """The deepest nesting of the JSON text ``data`` (exact for valid JSON): brackets
    outside strings, found with array operations rather than a loop over characters."""
    text = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    chars = np.frombuffer(text, dtype=np.uint8)
    marks = chars[_JSON_MARKS[chars]]
    outside = (np.cumsum(marks == ord('"'), dtype=np.int64) & 1) == 0
    steps = np.where(outside, _BRACKET_STEP[marks], 0).astype(np.int64)
    return int(np.cumsum(steps).max()) if steps.size else 0


# -- building -------------------------------------------------------------------------------


class _Loader(yaml.CSafeLoader):
    """PyYAML's C safe loader whose scalar constructors report a value they cannot build
    (``!!int abc``, ``2024-13-01``, a 5,000-digit integer) as a YAML error at its
    position, instead of a bare ValueError."""


def _positioned(base: Any) -> Any:
    def construct(loader: yaml.constructor.SafeConstructor, node: yaml.Node) -> Any:
        try:
            return base(loader, node)
        except (ValueError, OverflowError, KeyError) as exc:  # KeyError: `!!bool maybe`
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"cannot read {node.tag.rsplit(':', 1)[-1]} {_node_text(node)}: "
                f"{_short(str(exc).split(';')[0])}",
                node.start_mark,
            ) from None

    return construct


def _node_text(node: yaml.Node) -> str:
    value = node.value if isinstance(node.value, str) else ""
    return repr(value if len(value) <= 40 else value[:37] + "...")


for _tag, _base in (
    ("tag:yaml.org,2002:int", yaml.constructor.SafeConstructor.construct_yaml_int),
    ("tag:yaml.org,2002:float", yaml.constructor.SafeConstructor.construct_yaml_float),
    ("tag:yaml.org,2002:timestamp", yaml.constructor.SafeConstructor.construct_yaml_timestamp),
    ("tag:yaml.org,2002:bool", yaml.constructor.SafeConstructor.construct_yaml_bool),
):
    _Loader.add_constructor(_tag, _positioned(_base))


@contextmanager
def _paused_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# -- messages -------------------------------------------------------------------------------


def _at(mark: Any) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _describe(exc: yaml.YAMLError) -> str:
    """PyYAML's error on one line: where, then what (its own text spans several lines
    and names the stream ``"<byte string>"``)."""
    if isinstance(exc, yaml.reader.ReaderError):
        return f" at byte {exc.position}: {_short(exc.reason)}"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        parts = [p for p in (exc.context, exc.problem) if p]
        return f"{_at(mark)}: {_short(', '.join(parts))}"
    return f": {_short(str(exc))}"


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.replace('"<byte string>"', "the file").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
