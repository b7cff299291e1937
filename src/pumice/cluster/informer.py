"""Informers: one kind of the API kept as a local store by ``list`` then ``watch``.

The semantics are client-go's reflector, which every proven scheduler relies on:

- One paginated ``list`` gives the objects and the ``resourceVersion`` they hold at; a
  ``watch`` from that version then delivers every later change, in order. The
  scheduler never reads the API server in its cycle.
- ``allowWatchBookmarks`` keeps the resume point fresh on quiet kinds, so a reconnect
  after hours of silence does not fall out of etcd's compaction window.
- A watch that ends (the server's timeout) resumes from the last version seen. One that
  breaks (connection reset, API server restarting) resumes after a backoff.
- ``410 Gone`` (the version was compacted away) triggers a relist, and the new list is
  *diffed* into the store: objects that appeared are ADDED, changed ones MODIFIED, and
  vanished ones DELETED, so a consumer sees each object once in its latest state and
  none lost or doubled.
- A kind the server does not serve (404: the PodGroup CRD not installed yet, or no
  HyperNode CRD in a cluster that does not describe its network) counts as synced and
  empty (:attr:`Informer.served` says so), and is listed again after a backoff: the
  scheduler starts and schedules what it can.
- A kind the API lists but cannot watch (``Resource.watch`` False: metrics.k8s.io's
  NodeMetrics) is listed again every ``Resource.poll`` seconds, each list diffed into
  the store by content (such objects carry no resource version). Its list failing
  (metrics-server down: 503) counts as not served, never holds the sync up: such a
  kind is an extra the scheduler does without.

Events go to ``sink(type, kind, key, obj)`` on the informer's thread; the sink must be
thread-safe and quick (see :class:`pumice.cluster.kube.KubeCluster`).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from pumice.cluster.kube_client import (
    RESOURCES,
    ApiUnavailable,
    KubeClient,
    list_items,
    status_message,
)
from pumice.cluster.protocol import ADDED, DELETED, MODIFIED, object_key

log = logging.getLogger("pumice.informer")

Sink = Callable[[str, str, str, dict[str, Any]], None]

#: Backoff after a failed list or a broken watch: doubles from the first to the last.
BACKOFF = (0.2, 30.0)
#: Server-side watch timeout, randomized per watch like client-go (5-10 minutes).
WATCH_SECONDS = (300, 600)
PAGE_SIZE = 500


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


class _Gone(Exception):
    """The resume point fell out of the server's window: relist."""


def resource_version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    """List and watch one kind into :attr:`store`, telling ``sink`` of every change."""

    def __init__(
        self,
        client: KubeClient,
        kind: str,
        sink: Sink,
        *,
        stop: threading.Event,
        backoff: tuple[float, float] = BACKOFF,
        watch_seconds: tuple[int, int] = WATCH_SECONDS,
    ) -> None:
        self.client = client
        self.kind = kind
        self.resource = RESOURCES[kind]
        #: Where the kind may be served, newest API version first (see ``Resource``).
        self._versions = self.resource.versions()
        self.sink = sink
        self.stop = stop
        self.backoff = backoff
        self.watch_seconds = watch_seconds
        #: key -> the object as the server last said (read-only for others).
        self.store: dict[str, dict[str, Any]] = {}
        self.version = ""
        self.synced = threading.Event()
        #: Counters for metrics and tests.
        self.lists = 0
        self.relists = 0
        #: Watch events by type (ADDED, MODIFIED, DELETED, BOOKMARK).
        self.events: dict[str, int] = {}
        self.reconnects = 0
        self.served = True
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """Whether :meth:`start` was called (an informer starts once)."""
        return self._thread is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        delay = self.backoff[0]
        need_list = True
        while not self.stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                if not self.served:
                    self.stop.wait(self.backoff[1])
                    need_list = True
                    continue
                if not self.resource.watch:
                    self.stop.wait(self.resource.poll)
                    need_list = True
                    continue
                self._watch()
                delay = self.backoff[0]
            except _Gone:
                need_list = True
                self.relists += 1
                # (after an outage every kind relists: the outage's own lines say it)
                level = logging.DEBUG if self._troubled() else logging.INFO
                log.log(
                    level, "%s: resource version %s is gone; relisting", self.kind, self.version
                )
            except ApiUnavailable as err:
                if self.stop.is_set():
                    return
                self.reconnects += 1
                # An outage is said once by the client's Reachability, not per kind;
                # a refusal while the server answers (403: RBAC) is said here.
                level = logging.DEBUG if self._troubled() else logging.WARNING
                log.log(level, "%s: %s; retrying in %.1fs", self.kind, err, delay)
                self.stop.wait(delay * (0.5 + random.random()))
                delay = min(delay * 2, self.backoff[1])
            except Exception:  # a bug or a server answer we do not understand
                log.exception("%s: informer error; relisting in %.1fs", self.kind, delay)
                self.stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])
                need_list = True

    def _troubled(self) -> bool:
        """Whether the client is in (or just out of) an outage, which it says itself."""
        reachability = getattr(self.client, "reachability", None)
        return reachability is not None and reachability.troubled()

    def _list(self) -> None:
        """List every page, then replace the store by the result, telling the sink
        the difference."""
        items: dict[str, dict[str, Any]] = {}
        query: dict[str, Any] = {"limit": PAGE_SIZE}
        while True:
            status, body = self.client.request("GET", self.resource.path(), query=query)
            if status == 410:  # the continue token expired: start over
                query = {"limit": PAGE_SIZE}
                items = {}
                continue
            if status == 404 and not items:
                newer = self._versions.index(self.resource)
                if newer + 1 < len(self._versions):  # (an older API version may be served)
                    self.resource = self._versions[newer + 1]
                    continue
                self.resource = self._versions[0]
            if status == 404:
                if self.served:
                    # At the start, the owner says in one line which kinds are not
                    # served (most clusters lack some optional API); a kind that
                    # disappears later (a CRD removed) is news.
                    log.log(
                        logging.WARNING if self.lists else logging.DEBUG,
                        "%s: the API server does not serve %s (a CRD not installed, or an "
                        "API this Kubernetes version does not serve); "
                        "treating it as empty",
                        self.kind,
                        self.resource.path(),
                    )
                self.served = False
                items = {}
                version = ""
                break
            if status != 200 and not self.resource.watch:
                if self.served:
                    log.warning(
                        "%s: list %s: HTTP %s: %s; treating it as empty",
                        self.kind,
                        self.resource.path(),
                        status,
                        status_message(body),
                    )
                self.served = False
                items = {}
                version = ""
                break
            if status != 200:
                raise ApiUnavailable(
                    f"list {self.resource.path()}: HTTP {status}: {status_message(body)}"
                )
            self.served = True
            for obj in list_items(self.kind, body):
                items[object_key(self.kind, obj)] = obj
            meta = body.get("metadata") or {}
            version = str(meta.get("resourceVersion") or "")
            cont = meta.get("continue")
            if not cont:
                break
            query = {"limit": PAGE_SIZE, "continue": cont}
        self.lists += 1
        old, self.store = self.store, dict(items)
        self.version = version
        for key, obj in items.items():
            prev = old.get(key)
            if prev is None:
                self.sink(ADDED, self.kind, key, obj)
            elif _uid(prev) != _uid(obj):  # deleted and made again while we looked away
                self.sink(DELETED, self.kind, key, prev)
                self.sink(ADDED, self.kind, key, obj)
            elif resource_version(prev) != resource_version(obj) or (
                not resource_version(obj) and prev != obj
            ):
                self.sink(MODIFIED, self.kind, key, obj)
        for key in old.keys() - items.keys():
            self.sink(DELETED, self.kind, key, old[key])
        self.synced.set()

    def _watch(self) -> None:
        query = {
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": self.version,
            "timeoutSeconds": random.randint(*self.watch_seconds),
        }
        for status, event in self.client.stream(
            self.resource.path(), query, timeout=self.watch_seconds[1] + 30
        ):
            if status == 410:
                raise _Gone()
            if status != 200:
                raise ApiUnavailable(
                    f"watch {self.resource.path()}: HTTP {status}: {status_message(event)}"
                )
            if self.stop.is_set():
                return
            kind = event.get("type")
            obj = event.get("object") or {}
            self.events[kind] = self.events.get(kind, 0) + 1
            if kind == "BOOKMARK":
                self.version = resource_version(obj) or self.version
                continue
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise _Gone()
                raise ApiUnavailable(f"watch {self.kind}: {status_message(obj)}")
            obj.setdefault("kind", self.kind)
            key = object_key(self.kind, obj)
            self.version = resource_version(obj) or self.version
            if kind == DELETED:
                self.store.pop(key, None)
            else:
                self.store[key] = obj
            self.sink(kind, self.kind, key, obj)


__all__ = ["Informer", "resource_version"]
