"""How a fuzz case damages an input: mutations of the parsed documents and of the bytes.

A tree mutation changes the parsed YAML documents in place (a value deleted, retyped,
made huge or negative, nested deep, a resource quantity set near or past the largest
pumice accepts, a pod bound elsewhere...). A text mutation changes the file's bytes
after the documents are written back (an alias bomb, a bad encoding, a YAML tag, a
5,000-digit integer, a truncation, nesting 30,000 deep...). Each takes a
``random.Random`` and returns a short description, so a case is reproducible from its
seed alone and a finding can say what was done.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import yaml

#: Values of another type, or no value, for any node of a document.
OTHER_TYPES: tuple[Any, ...] = (None, True, False, 0, 1, -1, 1.5, "", "x", [], {}, [1], {"a": 1})
#: Numbers no float holds, int64 edges, non-numbers.
HUGE: tuple[Any, ...] = (
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    10**30,
    10**400,
    1e308,
    float("inf"),
    float("nan"),
    "1e400",
    "9" * 400,
    "99999999999999999999Ei",
)
NEGATIVE: tuple[Any, ...] = (-1, -(2**63), -1e308, float("-inf"), "-1", "-5Gi", "-1m", -0.5)
#: Quantities at and around the largest amount pumice computes exactly (2**52 bytes or
#: millis), and plainly beyond it.
QUANTITIES: tuple[Any, ...] = (
    "4Pi",
    "4503599627370495",
    "4503599627370496",
    "4503599627370497",
    "4503599627370496m",
    "4503599627370497m",
    "4503599627370",
    "4503599627371",
    "4503599627370.496",
    "2251799813685248",
    "2251799813685249",
    "1Pi",
    "3Pi",
    "4Ei",
    "8Ei",
    "9223372036854775807",
    "1e15",
    "1e16",
    "1E",
    "0.001",
    "1n",
    "0",
    2**52,
    2**52 + 1,
    2**51 + 1,
    4503599627370,
)
STRINGS: tuple[Any, ...] = (
    "",
    "a" * 100_000,
    "\x00",
    "\u202e\U0001f4a5",
    "-",
    "0x10",
    "1e3",
    "null",
    "~",
    "yes",
    "a/b/c",
    "default/x",
    "$(x)",
    "  ",
    "2024-13-45T99:99:99Z",
)
#: Keys under which a value is a resource list (requests, capacities, queue shares...).
RESOURCE_KEYS = frozenset(
    {
        "requests",
        "limits",
        "allocatable",
        "capacity",
        "capability",
        "deserved",
        "guarantee",
        "hard",
        "overhead",
        "minResources",
        "resources",
        "used",
    }
)
#: Depths of nested lists: within Python's recursion limit, past it, and past PyYAML's
#: C parser's stack.
DEPTHS = (10, 200, 1_100, 5_000, 30_000)
DEEP = "ZZDEEP{}ZZ"
_DEEP_TOKEN = re.compile(rb"ZZDEEP(\d+)ZZ")

Slot = tuple[Any, Any]  # (container, key or index)


def _slots(docs: list[Any]) -> list[tuple[Slot, tuple[Any, ...]]]:
    """Every (container, key) below the documents, with the keys leading to it."""
    out: list[tuple[Slot, tuple[Any, ...]]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(docs, ())]
    while stack:
        node, path = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in list(items):
            out.append(((node, k), (*path, k)))
            if isinstance(v, dict | list) and len(path) < 40:
                stack.append((v, (*path, k)))
    return out


def _pick(
    rng: random.Random,
    docs: list[Any],
    want: Callable[[tuple[Slot, tuple[Any, ...]]], bool] | None = None,
) -> tuple[Slot, tuple[Any, ...]] | None:
    slots = [s for s in _slots(docs) if want is None or want(s)]
    return rng.choice(slots) if slots else None


def _where(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path[-4:])


def _set(
    rng: random.Random,
    docs: list[Any],
    values: tuple[Any, ...],
    what: str,
    want: Callable[[tuple[Slot, tuple[Any, ...]]], bool] | None = None,
) -> str:
    got = _pick(rng, docs, want)
    if got is None:
        return f"{what}: nothing to change"
    (node, key), path = got
    value = rng.choice(values)
    node[key] = value
    return f"{what} {_where(path)} = {_short(value)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def _leaf(slot: tuple[Slot, tuple[Any, ...]]) -> bool:
    (node, key), _ = slot
    return not isinstance(node[key], dict | list)


def delete(rng: random.Random, docs: list[Any]) -> str:
    got = _pick(rng, docs, lambda s: s[0][0] is not docs)
    if got is None:
        return "delete: nothing to delete"
    (node, key), path = got
    del node[key]
    return f"delete {_where(path)}"


def retype(rng: random.Random, docs: list[Any]) -> str:
    return _set(rng, docs, OTHER_TYPES, "retype")


def huge(rng: random.Random, docs: list[Any]) -> str:
    return _set(rng, docs, HUGE, "huge", _leaf)


def negative(rng: random.Random, docs: list[Any]) -> str:
    return _set(rng, docs, NEGATIVE, "negative", _leaf)


def strings(rng: random.Random, docs: list[Any]) -> str:
    return _set(rng, docs, STRINGS, "string", _leaf)


def quantity(rng: random.Random, docs: list[Any]) -> str:
    """A resource amount near or past the largest pumice accepts."""

    def in_resources(slot: tuple[Slot, tuple[Any, ...]]) -> bool:
        (_node, _key), path = slot
        return len(path) >= 2 and path[-2] in RESOURCE_KEYS and _leaf(slot)

    return _set(rng, docs, QUANTITIES, "quantity", in_resources)


def deep(rng: random.Random, docs: list[Any]) -> str:
    """A value replaced by lists nested DEPTH deep (written out by :func:`dump`)."""
    return _set(rng, docs, tuple(DEEP.format(d) for d in DEPTHS), "deep")


def duplicate(rng: random.Random, docs: list[Any]) -> str:
    """A list item or a whole document twice (the same pod or node twice)."""
    lists = [s for s in _slots(docs) if isinstance(s[0][0], list)]
    if not lists:
        return "duplicate: nothing to duplicate"
    (node, key), path = rng.choice(lists)
    node.insert(key, _copy(node[key]))
    return f"duplicate {_where(path)}"


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def rename(rng: random.Random, docs: list[Any]) -> str:
    """A key renamed to another key of the documents (a field in the wrong place)."""
    maps = [s for s in _slots(docs) if isinstance(s[0][0], dict)]
    if len(maps) < 2:
        return "rename: nothing to rename"
    (node, key), path = rng.choice(maps)
    other = rng.choice(maps)[0][1]
    if other in node:
        return "rename: same key"
    node[other] = node.pop(key)
    return f"rename {_where(path)} -> {other}"


def _pods(docs: list[Any]) -> list[dict[str, Any]]:
    out = []
    for d in docs:
        items = d.get("items") if isinstance(d, dict) and d.get("kind") == "List" else [d]
        for o in items if isinstance(items, list) else []:
            if isinstance(o, dict) and o.get("kind") == "Pod" and isinstance(o.get("spec"), dict):
                out.append(o)
    return out


def _node_names(docs: list[Any]) -> list[str]:
    names = []
    for d in docs:
        items = d.get("items") if isinstance(d, dict) and d.get("kind") == "List" else [d]
        for o in items if isinstance(items, list) else []:
            if isinstance(o, dict) and o.get("kind") == "Node":
                meta = o.get("metadata")
                if isinstance(meta, dict) and isinstance(meta.get("name"), str):
                    names.append(meta["name"])
    return names


def rebind(rng: random.Random, docs: list[Any]) -> str:
    """A pod bound to another node, unbound, or given another phase: states a
    snapshot can hold (another scheduler's pods, overcommitted nodes)."""
    pods = _pods(docs)
    if not pods:
        return "rebind: no pod"
    pod = rng.choice(pods)
    nodes = _node_names(docs) or ["nowhere"]
    choice = rng.randrange(4)
    if choice == 0:
        pod["spec"]["nodeName"] = rng.choice(nodes)
        return f"rebind pod to {pod['spec']['nodeName']}"
    if choice == 1:
        pod["spec"].pop("nodeName", None)
        return "unbind pod"
    if choice == 2:
        pod["metadata"] = pod.get("metadata") or {}
        if isinstance(pod["metadata"], dict):
            pod["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        return "pod terminating"
    phase = rng.choice(["Pending", "Running", "Succeeded", "Failed", "Unknown", "Bogus"])
    pod["status"] = {"phase": phase}
    return f"pod phase {phase}"


TREE: dict[str, Callable[[random.Random, list[Any]], str]] = {
    "delete": delete,
    "retype": retype,
    "huge": huge,
    "negative": negative,
    "string": strings,
    "quantity": quantity,
    "deep": deep,
    "duplicate": duplicate,
    "rename": rename,
    "rebind": rebind,
}


def dump(docs: list[Any]) -> bytes:
    """The documents as YAML, with :func:`deep`'s markers written as nested lists."""
    text = yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=True, width=10**9)
    data = text.encode("utf-8", "surrogatepass")
    return _DEEP_TOKEN.sub(lambda m: b"[" * int(m.group(1)) + b"]" * int(m.group(1)), data)


# -- text mutations ----------------------------------------------------------------------


_VALUE = re.compile(rb"(?m)^(\s*(?:- )?[\w./-]+: )(\S.*)$")


def _replace_value(rng: random.Random, data: bytes, new: bytes) -> tuple[bytes, bool]:
    values = list(_VALUE.finditer(data))
    if not values:
        return data, False
    m = rng.choice(values)
    return data[: m.start(2)] + new + data[m.end(2) :], True


def alias_bomb(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    levels = rng.choice([5, 9, 12])
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    bomb = ("\n".join(lines) + "\n").encode()
    if rng.random() < 0.5:
        return data + b"\n---\n" + bomb, f"alias bomb of 10^{levels} as a document"
    return bomb + data, f"alias bomb of 10^{levels} before the first document"


def bad_utf8(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    at = rng.randrange(len(data) + 1)
    junk = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xfe\xff", b"\x80\x80"])
    return data[:at] + junk + data[at:], f"bytes {junk!r} at {at}"


def utf16(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    codec = rng.choice(["utf-16", "utf-16-be", "utf-32"])
    return data.decode("utf-8", "replace").encode(codec), f"encoded as {codec}"


def tag(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    new = rng.choice(
        [
            b"!!int abc",
            b"!!float x",
            b"!!timestamp 2020-13-45",
            b"!!binary ###",
            b"!!python/object/apply:os.system ['true']",
            b"!!set {a, b}",
            b"!!omap [a: 1]",
            b"!!bool maybe",
            b"!custom 1",
            b"*undefined",
            b"&a [*a]",
        ]
    )
    data, done = _replace_value(rng, data, new)
    return data, f"value tagged {new.decode()}" if done else "tag: no value"


def bigint(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    digits = rng.choice([4_301, 5_000, 100_000])
    data, done = _replace_value(rng, data, b"9" * digits)
    return data, f"a {digits}-digit integer" if done else "bigint: no value"


def deep_text(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    depth = rng.choice(DEPTHS)
    opener, closer = rng.choice([(b"[", b"]"), (b"{a: ", b"}")])
    data, done = _replace_value(rng, data, opener * depth + closer * depth)
    return data, f"{opener.decode().strip()} nested {depth} deep" if done else "deep: no value"


def truncate(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    at = rng.randrange(len(data) + 1)
    return data[:at], f"truncated at byte {at}"


def flip(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    if not data:
        return data, "flip: empty"
    at = rng.randrange(len(data))
    byte = rng.choice(b":-[]{}&*!|>'\"#%@`\t\n\x00 ")
    return data[:at] + bytes([byte]) + data[at + 1 :], f"byte {bytes([byte])!r} at {at}"


def dup_line(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    lines.insert(i, lines[i])
    return b"\n".join(lines), f"line {i + 1} twice"


TEXT: dict[str, Callable[[random.Random, bytes], tuple[bytes, str]]] = {
    "alias_bomb": alias_bomb,
    "bad_utf8": bad_utf8,
    "utf16": utf16,
    "tag": tag,
    "bigint": bigint,
    "deep_text": deep_text,
    "truncate": truncate,
    "flip": flip,
    "dup_line": dup_line,
}
