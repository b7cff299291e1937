"""The controllers' :class:`~pumice.controllers.store.Store` over a Kubernetes API server.

Reads come from informers (:mod:`pumice.cluster.informer`: list, then watch), one per
kind the controllers need, into a local view behind one lock; writes go through
:meth:`KubeClient.request <pumice.cluster.kube_client.KubeClient.request>`. The
controllers never read the API server in a reconcile.

What a write does, against the :class:`Store` contract:

- ``create`` POSTs the object; ``409 AlreadyExists`` returns None (a stale view made
  the controller create what exists).
- ``patch`` sends a JSON merge patch, to the ``/status`` subresource with
  ``subresource="status"``; where the CRD has no status subresource (Volcano 1.7's
  PodGroup), the object itself is patched with the status. ``404`` returns False.
- ``delete`` deletes with ``propagationPolicy: Background`` (the API server's garbage
  collector removes what the object owns). Without ``cascade``, an object that owns
  something the view holds is deleted with ``Orphan`` (its dependents stay); one that
  owns nothing known (a pod, a Command) with the server's default, since ``Orphan``
  holds the object back with a finalizer until the garbage collector lets it go, for
  nothing. ``404`` returns False. A pod is deleted with its own grace period, as
  Volcano's controller deletes it.
- Any other refusal raises :class:`WriteError` (naming the object, the HTTP status and
  the server's message), and no answer at all raises
  :class:`~pumice.cluster.kube_client.ApiUnavailable`: the manager logs the reconcile
  and retries it with a backoff.
- ``may_write`` gates every write: a controller process that may have lost its lease
  raises :class:`WriteError` instead of writing.

The answer of a successful create or patch is the object as the server now has it: it
goes into the view at once, with its watch event, so the next reconcile sees the
controller's own write instead of its stale state. Watch events carry resource versions;
one older than what the view holds (the watch catching up with an answer already
shown) is dropped, so every watcher sees each state once, in order.

``get`` of a Secret or an Event no informer follows is a request of its own
(:data:`DIRECT`); ``get`` or ``list`` of any other kind no informer follows starts one
and waits for its first list (up to ``sync_timeout``): a controller reading a kind it
does not watch still reads a complete view. A kind the server does not serve (a CRD
not installed) reads as empty and is listed again every 30 seconds, as the scheduler's
informers do.

``now`` is the wall clock. :meth:`KubeStore.wait` blocks until an event arrives or a
timeout passes, for the loop that runs the manager.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pumice.cluster.informer import Informer, resource_version
from pumice.cluster.kube_client import (
    MERGE_PATCH,
    RESOURCES,
    KubeClient,
    kind_name,
    rfc3339,
    status_message,
)
from pumice.cluster.protocol import ADDED, DELETED, MODIFIED, NAMESPACED, WatchEvent, object_key

log = logging.getLogger("pumice.controllers")

#: How long a ``get``/``list`` of a kind not followed yet waits for its first list.
SYNC_TIMEOUT = 30.0
#: Uids of deleted objects remembered, so a create's late answer cannot bring one back.
GONE_KEPT = 10_000


#: Kinds read by a request of their own unless a controller watches them: one object
#: at a time is wanted (a Job's SSH Secret, an Event to count again), and following
#: every Secret or Event of a cluster would cost far more (and Volcano's controllers
#: may only ``get`` Secrets).
DIRECT = frozenset({"Secret", "Event"})


class ApiError(Exception):
    """The API server refused a request (other than the 404 and 409 the contract names)."""

    def __init__(self, what: str, status: int, message: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {message}" if status else f"{what}: {message}")
        self.status = status


class WriteError(ApiError):
    """A write refused by the server, or not sent (``may_write`` is False)."""


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _owner_uids(obj: Mapping[str, Any] | None) -> frozenset[str]:
    if obj is None:
        return frozenset()
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return frozenset(str(r.get("uid")) for r in refs if r.get("uid"))


def _version(obj: Mapping[str, Any]) -> int | None:
    rv = resource_version(dict(obj))
    return int(rv) if rv.isdigit() else None


#: Creates :meth:`KubeStore.create_all` keeps in flight at once.
CREATE_WORKERS = 16


class KubeStoreWatch:
    """A subscription to some kinds of a :class:`KubeStore`: events queued across
    threads until :meth:`drain`."""

    def __init__(self, owner: KubeStore, kinds: Iterable[str]) -> None:
        self.owner = owner
        self.kinds = frozenset(kinds)
        self._events: list[WatchEvent] = []
        self._lock = threading.Lock()

    def push(self, event: WatchEvent) -> None:
        with self._lock:
            self._events.append(event)

    def pending(self) -> int:
        with self._lock:
            return len(self._events)

    def drain(self) -> list[WatchEvent]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def close(self) -> None:
        self.owner._unwatch(self)


class KubeStore:
    """A :class:`~pumice.controllers.store.Store` backed by an API server (see the module
    docstring). ``kinds`` are followed from :meth:`start`; others when first read."""

    def __init__(
        self,
        client: KubeClient,
        kinds: Iterable[str] = (),
        *,
        may_write: Callable[[], bool] = lambda: True,
        sync_timeout: float = SYNC_TIMEOUT,
    ) -> None:
        self.client = client
        self.may_write = may_write
        self.sync_timeout = sync_timeout
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._started = False
        #: kind -> key -> the object as last seen (an informer's event or a write's answer).
        self._view: dict[str, dict[str, dict[str, Any]]] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._gone: OrderedDict[str, None] = OrderedDict()
        #: owner uid -> (kind, key) of the followed objects whose ownerReferences name it.
        self._owned: dict[str, set[tuple[str, str]]] = {}
        self._watches: list[KubeStoreWatch] = []
        self._informers: dict[str, Informer] = {}
        self._wakeup = threading.Event()
        #: Writes by result, ``"<kind>:<verb>:<HTTP status>"`` -> count (tests, logs).
        self.writes: dict[str, int] = {}
        #: Threads for :meth:`create_all`, made when first needed.
        self._creators: ThreadPoolExecutor | None = None
        for kind in kinds:
            self.follow(kind)

    # -- life cycle ---------------------------------------------------------------------

    def follow(self, kind: str) -> Informer:
        """The informer of ``kind``, made (and started, once the store is) if new."""
        with self._lock:
            inf = self._informers.get(kind)
            if inf is not None:
                return inf
            if kind not in RESOURCES:
                raise KeyError(f"no API resource known for kind {kind!r}")
            self._view.setdefault(kind, {})
            inf = Informer(self.client, kind, self._on_event, stop=self._stop)
            self._informers[kind] = inf
            if self._started:
                inf.start()
            return inf

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds followed, sorted."""
        with self._lock:
            return tuple(sorted(self._informers))

    def unserved(self) -> tuple[str, ...]:
        """The followed kinds the API server does not serve (read as empty), sorted."""
        with self._lock:
            return tuple(sorted(k for k, inf in self._informers.items() if not inf.served))

    def start(self) -> None:
        with self._lock:
            self._started = True
            for inf in self._informers.values():
                if not inf.started:
                    inf.start()

    def synced(self) -> bool:
        with self._lock:
            informers = list(self._informers.values())
        return all(inf.synced.is_set() for inf in informers)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until every followed kind has been listed once."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            informers = list(self._informers.values())
        for inf in informers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.synced.wait(left):
                return False
        return True

    def close(self, *, close_client: bool = True) -> None:
        """Stop the informers; ``close_client`` also closes the client (which ends the
        watches being read at once; a client shared with others is left open and the
        informer threads end with their watch)."""
        self._stop.set()
        self._wakeup.set()
        if self._creators is not None:
            self._creators.shutdown(wait=True)
            self._creators = None
        if close_client:
            self.client.close()
            with self._lock:
                informers = list(self._informers.values())
            for inf in informers:
                inf.join(2.0)

    def wait(self, timeout: float | None) -> bool:
        """Block until an event arrives (True) or ``timeout`` seconds pass (False).
        An event since the last call counts: nothing delivered is slept through."""
        woke = self._wakeup.wait(timeout)
        self._wakeup.clear()
        return woke

    # -- reading ------------------------------------------------------------------------

    def _ensure(self, kind: str) -> None:
        if kind in self._informers:
            return
        inf = self.follow(kind)
        if self._started and not inf.synced.wait(self.sync_timeout):
            log.warning("%s: not listed after %.0f s; reading what is there", kind,
                        self.sync_timeout)  # fmt: skip
        elif not self._started:
            log.debug("%s: followed from the start", kind)

    def get(self, kind: str, key: str) -> Mapping[str, Any] | None:
        if kind in DIRECT and kind not in self._informers:
            return self._get_direct(kind, key)
        self._ensure(kind)
        with self._lock:
            return self._view[kind].get(key)

    def _get_direct(self, kind: str, key: str) -> Mapping[str, Any] | None:
        status, body = self.client.request("GET", RESOURCES[kind].key_path(key))
        if status == 200 and isinstance(body, dict):
            body.setdefault("kind", kind)
            return body
        if status == 404:
            return None
        raise ApiError(f"get {kind} {key}", status, status_message(body))

    def list(self, kind: str) -> list[Mapping[str, Any]]:
        self._ensure(kind)
        with self._lock:
            view = self._view[kind]
            return [view[k] for k in sorted(view)]

    def watch(self, kinds: Sequence[str]) -> KubeStoreWatch:
        for kind in kinds:
            self.follow(kind)
        with self._lock:
            w = KubeStoreWatch(self, kinds)
            self._watches.append(w)
            return w

    def _unwatch(self, w: KubeStoreWatch) -> None:
        with self._lock:
            if w in self._watches:
                self._watches.remove(w)

    # -- events -------------------------------------------------------------------------

    def _on_event(self, type_: str, kind: str, key: str, obj: dict[str, Any]) -> None:
        """An informer's event or a write's answer: drop what is older than shown."""
        with self._lock:
            view = self._view[kind]
            self._index_owners(kind, key, view.get(key), None if type_ == DELETED else obj)
            if type_ == DELETED:
                self._versions.pop((kind, key), None)
                self._gone[_uid(obj)] = None
                while len(self._gone) > GONE_KEPT:
                    self._gone.popitem(last=False)
                if view.pop(key, None) is not None:
                    self._deliver(WatchEvent(DELETED, kind, key, obj))
                return
            rv = _version(obj)
            seen = self._versions.get((kind, key))
            if rv is not None and seen is not None and rv <= seen:
                return
            if rv is not None:
                self._versions[(kind, key)] = rv
            type_ = MODIFIED if key in view else ADDED
            view[key] = obj
            self._deliver(WatchEvent(type_, kind, key, obj))

    def _index_owners(
        self, kind: str, key: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        """Keep :attr:`_owned` (owner uid -> the objects that name it) up to date."""
        before, after = _owner_uids(old), _owner_uids(new)
        if before == after:
            return
        for uid in before - after:
            deps = self._owned.get(uid)
            if deps is not None:
                deps.discard((kind, key))
                if not deps:
                    del self._owned[uid]
        for uid in after - before:
            self._owned.setdefault(uid, set()).add((kind, key))

    def _deliver(self, event: WatchEvent) -> None:
        for w in self._watches:
            if event.kind in w.kinds:
                w.push(event)
        self._wakeup.set()

    def _answer(self, kind: str, key: str, obj: Any, *, created: bool = False) -> None:
        """Show a write's answer (a followed kind's object) as its latest state, unless
        the watch has shown the object deleted meanwhile (a patch's answer needs it in
        the view; a create's, its uid never seen deleted)."""
        if kind not in self._informers or not isinstance(obj, dict) or "metadata" not in obj:
            return
        obj.setdefault("kind", kind)
        with self._lock:
            if (key not in self._view[kind]) if not created else (_uid(obj) in self._gone):
                return
            self._on_event(MODIFIED, kind, key, obj)

    # -- writing ------------------------------------------------------------------------

    def _gate(self, what: str) -> None:
        if not self.may_write():
            raise WriteError(what, 0, "not the leader: nothing is written")

    def _count(self, kind: str, verb: str, status: int) -> None:
        label = f"{kind}:{verb}:{status}"
        with self._lock:
            self.writes[label] = self.writes.get(label, 0) + 1

    def create(self, obj: dict[str, Any]) -> Mapping[str, Any] | None:
        kind = kind_name(obj)
        res = RESOURCES.get(kind)
        if res is None:
            raise KeyError(f"no API resource known for kind {kind!r}")
        meta = obj.setdefault("metadata", {})
        if kind in NAMESPACED:
            meta.setdefault("namespace", "default")
        key = object_key(kind, obj)
        what = f"create {kind} {key}"
        self._gate(what)
        status, body = self.client.request("POST", res.path(meta.get("namespace", "")), body=obj)
        self._count(kind, "create", status)
        if status in (200, 201):
            self._answer(kind, key, body, created=True)
            return body if isinstance(body, dict) else obj
        if status == 409 and (not isinstance(body, Mapping) or body.get("reason") in
                              (None, "AlreadyExists")):  # fmt: skip
            return None
        raise WriteError(what, status, status_message(body))

    def create_all(self, objs: Sequence[dict[str, Any]]) -> builtins.list[Mapping[str, Any] | None]:
        """:meth:`create` for each of ``objs``, up to :data:`CREATE_WORKERS` requests in
        flight at once (a Job's thousand pods are a thousand round trips; Volcano's
        controller sends them in parallel too). Answers in the order of ``objs``; the
        first error raised is raised once every request has ended."""
        if len(objs) <= 1:
            return [self.create(o) for o in objs]
        with self._lock:
            if self._creators is None:
                self._creators = ThreadPoolExecutor(CREATE_WORKERS, "pumice-create")
            pool = self._creators
        futures = [pool.submit(self.create, o) for o in objs]
        answers: list[Mapping[str, Any] | None] = []
        error: BaseException | None = None
        for f in futures:
            try:
                answers.append(f.result())
            except Exception as exc:  # (kept: the other creates still complete)
                answers.append(None)
                error = error or exc
        if error is not None:
            raise error
        return answers

    def patch(
        self, kind: str, key: str, patch: Mapping[str, Any], *, subresource: str = ""
    ) -> bool:
        if subresource not in ("", "status"):
            raise ValueError(f"unknown subresource {subresource!r}")
        res = RESOURCES[kind]
        what = f"patch {kind} {key}" + (f" {subresource}" if subresource else "")
        self._gate(what)
        body = {"status": patch.get("status") or {}} if subresource else dict(patch)
        status, answer = self.client.request(
            "PATCH", res.key_path(key, subresource), body=body, content_type=MERGE_PATCH
        )
        if status == 404 and subresource and self.get(kind, key) is not None:
            # A CRD with no status subresource (Volcano's PodGroup): the object itself.
            status, answer = self.client.request(
                "PATCH", res.key_path(key), body=body, content_type=MERGE_PATCH
            )
        self._count(kind, "patch", status)
        if status == 200:
            self._answer(kind, key, answer)
            return True
        if status == 404:
            return False
        raise WriteError(what, status, status_message(answer))

    def delete(self, kind: str, key: str, *, cascade: bool = True) -> bool:
        res = RESOURCES[kind]
        what = f"delete {kind} {key}"
        self._gate(what)
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if cascade:
            options["propagationPolicy"] = "Background"
        elif self._owns_something(kind, key):
            options["propagationPolicy"] = "Orphan"
        status, answer = self.client.request("DELETE", res.key_path(key), body=options)
        self._count(kind, "delete", status)
        if status in (200, 202):
            return True
        if status == 404:
            return False
        raise WriteError(what, status, status_message(answer))

    def _owns_something(self, kind: str, key: str) -> bool:
        with self._lock:
            obj = self._view.get(kind, {}).get(key)
            return obj is not None and bool(self._owned.get(_uid(obj)))

    # -- the clock ----------------------------------------------------------------------

    def now(self) -> float:
        return time.time()

    def stamp(self) -> str:
        return rfc3339(self.now())


__all__ = ["DIRECT", "ApiError", "KubeStore", "KubeStoreWatch", "WriteError"]
