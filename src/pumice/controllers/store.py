"""What a controller needs from a cluster, and the in-memory store that gives it.

Controllers are level-based, as Kubernetes' are: a controller is told *which* object
changed (a key from a watch event), reads the state it needs from the store's local
view, and writes what is missing. It keeps no copy of the world, so the same code runs
on a real API server (reads from informers, writes through the REST API; see
:mod:`pumice.controllers.kube_store`) and in ``pumice simulate`` (an in-memory
:class:`pumice.cluster.memory.MemoryCluster`, through :class:`MemoryStore`).

Contracts of :class:`Store`:

- ``get`` and ``list`` read the store's local view (``list`` sorted by key). On a real
  cluster the view lags the writes: a controller must accept reading a state older than
  its own last write (it writes again, and ``create`` of what exists is not an error).
- ``create`` returns the object as created (``metadata.uid`` and ``creationTimestamp``
  filled in), or None when an object of that kind and key already exists;
  ``create_all`` does it for several independent objects, which a store may send at
  once (the API server's: in parallel; the in-memory one: in order).
- ``patch`` applies a JSON merge patch (RFC 7386: a ``None`` value deletes the key);
  ``subresource="status"`` writes the status. False when the object is gone.
- ``metadata.generation`` is the API server's: 1 on create, one more on every write
  that changes the object's desired state (anything but ``metadata`` and ``status``),
  never on a status write. A controller compares it to tell a change of spec from its
  own status write coming back (an object a store holds without one, made by another
  client of the in-memory cluster, tells nothing: every change counts).
- ``delete`` deletes; with ``cascade`` (the default) the objects it owns (by an
  ``ownerReference`` to its uid) go too, as the API server's garbage collector does in
  the background. False when the object was already gone.
- ``now`` is the controllers' clock in seconds (wall clock on a cluster, the virtual
  clock in a simulation); ``stamp`` the same instant as an RFC 3339 string.

Keys are ``namespace/name`` for namespaced kinds and ``name`` otherwise, as everywhere
in pumice (:func:`pumice.cluster.protocol.object_key`).
"""

from __future__ import annotations

import builtins
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeGuard

from pumice.cluster.kube_client import rfc3339
from pumice.cluster.memory import MemoryCluster
from pumice.cluster.protocol import ADDED, DELETED, NAMESPACED, Watch, object_key


def key_of(kind: str, obj: Mapping[str, Any]) -> str:
    """The store key of ``obj`` of ``kind`` (``namespace/name`` or ``name``)."""
    return object_key(kind, obj)


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, at the cost of a type check for the plain dicts
    and scalars that make up nearly every Kubernetes object."""
    kind = type(value)
    if kind is dict:
        return True
    if kind is str or kind is int or kind is float or kind is bool or kind is list:
        return False
    return isinstance(value, Mapping)


def merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Apply a JSON merge patch (RFC 7386) to ``target`` in place."""
    for k, v in patch.items():
        t = type(v)  # (texts, counts and lists told without a call: most values)
        if v is None:
            target.pop(k, None)
        elif t is dict or (t is not str and t is not int and t is not list and is_mapping(v)):
            cur = target.get(k)
            if not isinstance(cur, dict):
                cur = target[k] = {}
            merge_patch(cur, v)
        else:
            target[k] = v


def changes(target: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
    """Whether the merge patch ``patch`` would change ``target``."""
    for k, v in patch.items():
        if v is None:
            if k in target:
                return True
        elif is_mapping(v):
            cur = target.get(k)
            if not is_mapping(cur):
                return True
            if changes(cur, v):
                return True
        elif k not in target or target[k] != v:
            return True
    return False


def spec_changes(target: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
    """Whether ``patch`` changes ``target``'s desired state: anything but its
    ``metadata`` and ``status`` (what bumps ``metadata.generation``)."""
    rest = {k: v for k, v in patch.items() if k not in ("metadata", "status")}
    return bool(rest) and changes(target, rest)


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """``obj`` has an ownerReference to ``uid``."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(r.get("uid") == uid for r in refs)


def owner_uids(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The uids ``obj``'s ownerReferences name."""
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    if not refs:
        return ()
    return tuple([str(r.get("uid")) for r in refs if r.get("uid")])


#: Unread events after which the ownership index is brought up to date anyway.
_CATCH_UP_AT = 4096


class _EveryKind:
    """A watch's ``kinds`` that holds every kind, those first created later too."""

    def __contains__(self, kind: object) -> bool:
        return True


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference of ``obj`` marked ``controller: true``, if any."""
    for r in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if r.get("controller"):
            return r
    return None


class Store(Protocol):
    """A cluster as a controller sees it (see the module docstring for the contracts)."""

    def get(self, kind: str, key: str) -> Mapping[str, Any] | None: ...

    def list(self, kind: str) -> Sequence[Mapping[str, Any]]: ...

    def watch(self, kinds: Sequence[str]) -> Watch: ...

    def create(self, obj: dict[str, Any]) -> Mapping[str, Any] | None: ...

    def create_all(self, objs: Sequence[dict[str, Any]]) -> builtins.list[Mapping[str, Any] | None]:
        """``create`` of each object, answers in order; a store may send them at once (a
        Job's pods), so none may depend on another's answer."""
        ...

    def patch(
        self, kind: str, key: str, patch: Mapping[str, Any], *, subresource: str = ""
    ) -> bool: ...

    def delete(self, kind: str, key: str, *, cascade: bool = True) -> bool: ...

    def now(self) -> float: ...

    def stamp(self) -> str: ...


class MemoryStore:
    """:class:`Store` over a :class:`MemoryCluster`: writes are seen at once, uids are
    ``uid-<n>`` in creation order (deterministic), ``metadata.generation`` is kept as
    the API server keeps it (see the module docstring), and a cascading delete removes
    the owned objects depth first, as the garbage collector would (each with its
    DELETED event)."""

    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self._uids = itertools.count(1)
        # Who owns what, so that a cascading delete looks at the owned objects only,
        # not at every object in the cluster. Kept from a watch over every kind and
        # brought up to date when a delete needs it. ``_created`` numbers the objects in
        # the order they were created: the order a kind's objects are stored in, which
        # is the order a cascade deletes them in.
        self._created: dict[tuple[str, str], int] = {}
        self._owners: dict[tuple[str, str], tuple[str, ...]] = {}
        self._owned: dict[str, set[tuple[str, str]]] = {}
        self._seq = itertools.count()
        #: The last instant stamped and its RFC 3339 text, and the day whose date
        #: that text begins with (the time of day is written here: a stamp is made
        #: for most writes, and a date only changes once a day).
        self._stamped: tuple[float, str] = (math.nan, "")
        self._day: tuple[int, str] = (0, rfc3339(0)[:11])
        #: Kinds in the cluster's order, for the order of a cascade (see
        #: :meth:`_dependents`); built again when a kind is first stored.
        self._rank: dict[str, int] = {}
        self._all = cluster.watch(())
        self._all.kinds = _EveryKind()
        for kind, objs in cluster.objects.items():
            for key, obj in objs.items():
                self._created[(kind, key)] = next(self._seq)
                self._index((kind, key), obj)

    def _index(self, ref: tuple[str, str], obj: Mapping[str, Any] | None) -> None:
        new = owner_uids(obj) if obj is not None else ()
        old = self._owners.get(ref, ())
        if new == old:
            return
        for uid in old:
            if uid not in new:
                deps = self._owned[uid]
                deps.discard(ref)
                if not deps:
                    del self._owned[uid]
        for uid in new:
            self._owned.setdefault(uid, set()).add(ref)
        if new:
            self._owners[ref] = new
        else:
            del self._owners[ref]

    def _catch_up(self) -> None:
        # An event carries the object as it is now, so every event of one object in a
        # batch reads the same owners: each object is indexed once, as its last event
        # leaves it (None: gone). Creations are numbered in the order they happened.
        events = self._all.drain()
        if not events:
            return
        last: dict[tuple[str, str], Mapping[str, Any] | None] = {}
        created, seq = self._created, self._seq
        for ev in events:
            ref = (ev.kind, ev.key)
            if ev.type == DELETED:
                created.pop(ref, None)
                last[ref] = None
                continue
            if ev.type == ADDED:
                created[ref] = next(seq)
            last[ref] = ev.obj
        owners = self._owners
        for ref, obj in last.items():
            if obj is not None and owner_uids(obj) == owners.get(ref, ()):
                continue  # (owned as it was, or by none: most objects)
            self._index(ref, obj)

    def _dependents(self, uid: str) -> list[tuple[str, str]]:
        """The objects whose ownerReferences name ``uid``: by kind in the cluster's
        order of kinds, then in order of creation."""
        self._catch_up()
        refs = self._owned.get(uid)
        if not refs:
            return []
        rank = self._rank
        if len(rank) != len(self.cluster.objects):  # (kinds are only ever added)
            rank = self._rank = {kind: i for i, kind in enumerate(self.cluster.objects)}
        return sorted(refs, key=lambda r: (rank.get(r[0], len(rank)), self._created.get(r, -1)))

    def get(self, kind: str, key: str) -> Mapping[str, Any] | None:
        store = self.cluster.objects.get(kind)  # (the cluster's get, inlined: every read)
        return None if store is None else store.get(key)

    def list(self, kind: str) -> Sequence[Mapping[str, Any]]:
        return self.cluster.list(kind)

    def watch(self, kinds: Sequence[str]) -> Watch:
        return self.cluster.watch(kinds)

    def create(self, obj: dict[str, Any]) -> Mapping[str, Any] | None:
        kind = str(obj.get("kind"))
        key = key_of(kind, obj)
        if self.cluster.get(kind, key) is not None:
            return None
        if self._all.pending() > _CATCH_UP_AT:
            self._catch_up()  # keep the unread events few when nothing is deleted
        meta = obj.setdefault("metadata", {})
        if kind in NAMESPACED:
            meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta.setdefault("creationTimestamp", self.stamp())
        meta["generation"] = 1
        self.cluster.create(obj)
        return obj

    def create_all(self, objs: Sequence[dict[str, Any]]) -> builtins.list[Mapping[str, Any] | None]:
        return [self.create(o) for o in objs]  # (in order: uids stay deterministic)

    def patch(
        self, kind: str, key: str, patch: Mapping[str, Any], *, subresource: str = ""
    ) -> bool:
        if subresource and subresource != "status":
            raise ValueError(f"unknown subresource {subresource!r}")
        if subresource:
            body = {"status": patch.get("status") or {}}
            return self.cluster.modify(kind, key, lambda obj: merge_patch(obj, body))

        def write(obj: dict[str, Any]) -> None:
            bump = spec_changes(obj, patch)
            merge_patch(obj, patch)
            meta = obj.get("metadata")
            if bump and isinstance(meta, dict) and isinstance(meta.get("generation"), int):
                meta["generation"] += 1

        return self.cluster.modify(kind, key, write)

    def delete(self, kind: str, key: str, *, cascade: bool = True) -> bool:
        obj = self.cluster.get(kind, key)
        if obj is None:
            return False
        uid = (obj.get("metadata") or {}).get("uid")
        self.cluster.delete(kind, key)
        if cascade and uid:
            for dep_kind, dep_key in self._dependents(str(uid)):
                dep = self.cluster.get(dep_kind, dep_key)
                if dep is not None and owned_by(dep, uid):
                    self.delete(dep_kind, dep_key, cascade=True)
        return True

    def now(self) -> float:
        return self.cluster.clock()

    def stamp(self) -> str:
        now = self.cluster.clock()
        stamped = self._stamped
        if now == stamped[0]:  # (a reconcile and its writes share an instant)
            return stamped[1]
        if not math.isfinite(now):
            text = rfc3339(now)  # (what the API's format makes of it, error or not)
        else:  # rfc3339(now), its date kept per day: whole seconds, UTC
            day, second = divmod(math.floor(now), 86400)
            if day != self._day[0]:
                self._day = (day, rfc3339(day * 86400)[:11])
            hours, rest = divmod(second, 3600)
            minutes, seconds = divmod(rest, 60)
            text = f"{self._day[1]}{hours:02d}:{minutes:02d}:{seconds:02d}Z"
        self._stamped = (now, text)
        return text


__all__ = [
    "MemoryStore",
    "Store",
    "changes",
    "controller_of",
    "is_mapping",
    "key_of",
    "merge_patch",
    "owned_by",
    "spec_changes",
]
