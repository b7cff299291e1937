"""The cluster protocol over a real Kubernetes API server.

:class:`KubeCluster` is what :class:`~pumice.cache.cache.SchedulerCache` consumes in
``pumice run``, exactly as it consumes the in-memory store in ``pumice simulate``: it
lists, it watches, it binds, evicts and writes podgroup status. What is new against a
real API server is *time*: a bind takes milliseconds and may fail later, a watch event
arrives after the write that caused it. The proven schedulers answer with
*assume, then confirm or forget*, and so does this module:

- ``bind`` assumes at once: the pod is shown bound to its node in an event queued for
  the cache (so the next cycle sees the resources taken), and the ``pods/binding`` call
  goes to a pool of workers. The cycle never waits for it. When the watch later shows
  the pod bound, the assumption is confirmed and dropped; when the bind fails (409, the
  pod or node gone, the leader lost its lease) it is forgotten and the pod as the server
  has it is queued again, so the next cycle sees the truth. Until then, events about the
  pod that do not show a node yet (its own status updates) carry the assumed node.
- ``evict`` deletes with the pod's grace period (or posts an Eviction with
  ``eviction_api``) and shows the pod terminating at once, the same way.
- ``update_podgroup_status`` shows the new status at once and writes it through the
  status subresource (a JSON merge patch: it cannot conflict) on a writer thread; the
  server's answer is queued as the podgroup's latest state. ``update_gang_status`` does
  the same for the gang objects of other dialects (coscheduling's and Kubernetes'
  PodGroups); writes of one object not started yet are coalesced into the latest.

Events from the server older than the latest one already delivered for an object are
dropped (resource versions compared as numbers where they are numbers, which is what
etcd-backed servers give), so a write's answer overtaking the watch cannot be undone by
the watch catching up. Everything runs on threads: informers, binders, writers; the
cache drains its watch on the scheduling thread, and ``list``/``watch`` are consistent
with each other under one lock.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pumice.cluster.informer import Informer, resource_version
from pumice.cluster.kube_client import (
    MERGE_PATCH,
    RESOURCES,
    STRATEGIC_PATCH,
    ApiUnavailable,
    KubeClient,
    Resource,
    rfc3339,
    status_message,
)
from pumice.cluster.outbox import EventOutbox
from pumice.cluster.prebind import Overlay, PreBinder, overlays
from pumice.cluster.protocol import (
    ADDED,
    DELETED,
    GANG_KINDS,
    KINDS,
    MODIFIED,
    BindWrites,
    WatchEvent,
)

log = logging.getLogger("pumice.cluster")

#: Binds in flight at once (keep-alive connections of the pool).
BIND_WORKERS = 16
#: Status, condition and event writers (off the critical path).
STATUS_WORKERS = 4
#: Attempts for a write that got no answer (connection refused, timeout).
WRITE_ATTEMPTS = 5
#: The kinds whose status the scheduler writes and shows at once.
STATUS_KINDS = frozenset({"PodGroup", *GANG_KINDS})


def _version_number(rv: str) -> int | None:
    return int(rv) if rv.isdigit() else None


_FAILURE_WORDS = {
    "HTTP 409": "conflict",
    "HTTP 404": "not_found",
    "HTTP 403": "forbidden",
    "HTTP 422": "invalid",
    "HTTP 429": "throttled",
    "API server unavailable": "unavailable",
    "not the leader": "not_leader",
    "scheduler stopping": "stopping",
}


def failure_word(reason: str) -> str:
    """A fixed word for a failed write's reason (a metric label, never a message)."""
    return _FAILURE_WORDS.get(reason.split(":")[0], "error")


class KubeWatch:
    """A subscription: the events for the cache, queued across threads."""

    def __init__(self, owner: KubeCluster, kinds: Sequence[str]) -> None:
        self.owner = owner
        self.kinds = frozenset(kinds)
        self._events: list[WatchEvent] = []
        self._lock = threading.Lock()
        self.wakeup = threading.Event()

    def push(self, event: WatchEvent) -> None:
        with self._lock:
            self._events.append(event)
        self.wakeup.set()

    def pending(self) -> int:
        return len(self._events)

    def drain(self) -> list[WatchEvent]:
        with self._lock:
            events, self._events = self._events, []
            self.wakeup.clear()
        return events

    def close(self) -> None:
        self.owner._unwatch(self)


@dataclass(slots=True)
class WriteStats:
    """What the cluster did, for metrics and tests (counters only grow)."""

    binds: int = 0
    bind_failures: dict[str, int] = field(default_factory=dict)
    evictions: int = 0
    eviction_failures: int = 0
    writes: dict[str, int] = field(default_factory=dict)
    write_failures: dict[str, int] = field(default_factory=dict)

    def failed(self, table: dict[str, int], reason: str) -> None:
        table[reason] = table.get(reason, 0) + 1


class KubeCluster:
    """A :class:`~pumice.cluster.protocol.Cluster` backed by a Kubernetes API server.

    ``may_write`` gates every write (binds, evictions, status): a leader that may have
    lost its lease returns False and nothing more is written. ``on_bound(pod_key, node,
    seconds)`` (how long the API call took) and ``on_bind_failed(pod_key, node, word)``
    (a fixed word: ``conflict``, ``not_found``, ...) are called from worker threads.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        kinds: Sequence[str] = KINDS,
        bind_workers: int = BIND_WORKERS,
        status_workers: int = STATUS_WORKERS,
        eviction_api: bool = False,
        may_write: Callable[[], bool] = lambda: True,
        on_bound: Callable[[str, str, float], None] | None = None,
        on_bind_failed: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.client = client
        self.kinds = tuple(kinds)
        self.eviction_api = eviction_api
        self.may_write = may_write
        self.on_bound = on_bound
        self.on_bind_failed = on_bind_failed
        self.stats = WriteStats()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        #: kind -> key -> the object as delivered to watchers (overlays applied).
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in self.kinds}
        #: kind -> key -> the object as the server last said.
        self._truth: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in self.kinds}
        self._versions: dict[tuple[str, str], int] = {}
        self._watches: list[KubeWatch] = []
        #: pod key -> node: binds not yet seen on the watch.
        self._assumed: dict[str, str] = {}
        #: pod key -> deletion time: evictions not yet seen on the watch.
        self._evicting: dict[str, str] = {}
        #: (kind, key) -> status written (or being written) by us, not yet seen.
        self._pg_status: dict[tuple[str, str], dict[str, Any]] = {}
        #: (kind, key) -> what a bind's pre-bind writes show of it until the server does
        #: (see :func:`pumice.cluster.prebind.overlays`), and the binds' keys by pod.
        self._patched: dict[tuple[str, str], Overlay] = {}
        self._patched_by: dict[str, list[tuple[str, str]]] = {}
        self.informers = {
            k: Informer(client, k, self._on_event, stop=self._stop) for k in self.kinds
        }
        self._prebinder = PreBinder(client, self._truth_of, self._stop, self._resource_of)
        self._binder = ThreadPoolExecutor(bind_workers, thread_name_prefix="bind")
        self._writes: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._write_jobs: dict[tuple[str, str], Callable[[], bool]] = {}
        self._write_lock = threading.Lock()
        self._writers = [
            threading.Thread(target=self._writer, name=f"writer-{i}", daemon=True)
            for i in range(status_workers)
        ]
        self._inflight = 0
        self._inflight_lock = threading.Condition()
        #: Events, kept in order through an outage (see :mod:`pumice.cluster.outbox`).
        self.outbox = EventOutbox(
            client, may_write=may_write, counted=lambda status: self._count_write("Event", status)
        )

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        for inf in self.informers.values():
            inf.start()
        for w in self._writers:
            w.start()
        self.outbox.start()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until every kind has been listed once (client-go's WaitForCacheSync)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for inf in self.informers.values():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.synced.wait(left):
                return False
        return True

    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers.values())

    def served(self, kind: str) -> bool:
        """Whether the API server serves ``kind`` as last listed: False for a CRD that
        is not installed (its objects count as none; it is listed again after a
        backoff, so installing it later is seen without a restart)."""
        inf = self.informers.get(kind)
        return inf is not None and inf.served

    def binds_in_flight(self) -> int:
        return self._inflight

    def drain_binds(self, timeout: float) -> bool:
        """Wait until no bind is in flight (SIGTERM: finish what was started)."""
        deadline = time.monotonic() + timeout
        with self._inflight_lock:
            while self._inflight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._inflight_lock.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Stop informers and writers; binds still queued are abandoned (forgotten:
        the gate refuses them once ``may_write`` is False or the pool shuts down)."""
        self.outbox.close(flush=min(2.0, timeout))
        self._stop.set()
        self._binder.shutdown(wait=False, cancel_futures=True)
        for _ in self._writers:
            self._writes.put(None)
        self.client.close()  # (ends the watches being read)
        for inf in self.informers.values():
            inf.join(timeout / 2)

    # -- the protocol: reading ----------------------------------------------------------

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self.objects.get(kind, {}).get(key)

    def list(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            store = self.objects.get(kind, {})
            return [store[k] for k in sorted(store)]

    def watch(self, kinds: Sequence[str] = KINDS) -> KubeWatch:
        with self._lock:
            w = KubeWatch(self, kinds)
            self._watches.append(w)
            return w

    def _unwatch(self, w: KubeWatch) -> None:
        with self._lock:
            if w in self._watches:
                self._watches.remove(w)

    def _deliver(self, type_: str, kind: str, key: str, obj: dict[str, Any]) -> None:
        """Record ``obj`` as what watchers see, and tell them (lock held)."""
        if type_ == DELETED:
            self.objects[kind].pop(key, None)
        else:
            self.objects[kind][key] = obj
        event = WatchEvent(type_, kind, key, obj)
        for w in self._watches:
            if kind in w.kinds:
                w.push(event)

    def _on_event(self, type_: str, kind: str, key: str, obj: dict[str, Any]) -> None:
        """An informer's event: drop what is older than delivered, apply overlays."""
        with self._lock:
            if type_ == DELETED:
                self._truth[kind].pop(key, None)
                self._versions.pop((kind, key), None)
                if kind == "Pod":
                    self._assumed.pop(key, None)
                    self._evicting.pop(key, None)
                elif kind in STATUS_KINDS:
                    self._pg_status.pop((kind, key), None)
                if key in self.objects[kind]:
                    self._deliver(DELETED, kind, key, obj)
                return
            rv = _version_number(resource_version(obj))
            seen = self._versions.get((kind, key))
            if rv is not None and seen is not None and rv <= seen:
                return  # a write's answer already showed a later state
            if rv is not None:
                self._versions[(kind, key)] = rv
            self._truth[kind][key] = obj
            shown = self._overlay(kind, key, obj)
            if type_ == ADDED and key in self.objects[kind]:
                type_ = MODIFIED
            elif type_ == MODIFIED and key not in self.objects[kind]:
                type_ = ADDED
            self._deliver(type_, kind, key, shown)

    def _overlay(self, kind: str, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` with what we wrote and the server has not shown yet (lock held)."""
        if kind == "Pod":
            node = self._assumed.get(key)
            spec = obj.get("spec") or {}
            if node is not None:
                if spec.get("nodeName"):
                    del self._assumed[key]  # confirmed (or bound elsewhere: the truth)
                else:
                    obj = copy.copy(obj)
                    obj["spec"] = {**spec, "nodeName": node}
            stamp = self._evicting.get(key)
            if stamp is not None:
                meta = obj.get("metadata") or {}
                if meta.get("deletionTimestamp"):
                    del self._evicting[key]
                else:
                    obj = copy.copy(obj)
                    obj["metadata"] = {**meta, "deletionTimestamp": stamp}
        elif kind in STATUS_KINDS:
            status = self._pg_status.get((kind, key))
            if status is not None:
                obj = copy.copy(obj)
                obj["status"] = {**(obj.get("status") or {}), **status}
        patch = self._patched.get((kind, key)) if self._patched else None
        if patch is not None:
            shown = patch(obj)
            if shown is None:
                del self._patched[(kind, key)]  # (the server shows it now)
            else:
                obj = shown
        return obj

    def _resource_of(self, kind: str) -> Resource:
        """Where ``kind`` is served: its informer's API version, as last listed."""
        inf = self.informers.get(kind)
        return inf.resource if inf is not None else RESOURCES[kind]

    def _truth_of(self, kind: str, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._truth.get(kind, {}).get(key)

    def _reveal(self, kind: str, key: str) -> None:
        """Show watchers the server's object again (an assumption was forgotten)."""
        with self._lock:
            truth = self._truth[kind].get(key)
            if truth is not None:
                self._deliver(MODIFIED, kind, key, self._overlay(kind, key, truth))

    def _answer(self, kind: str, key: str, obj: Any) -> None:
        """A write's answer: the object's latest state, unless the watch has a later."""
        if not isinstance(obj, dict) or "metadata" not in obj:
            return
        obj.setdefault("kind", kind)
        with self._lock:
            if key in self._truth[kind]:  # (not deleted meanwhile)
                self._on_event(MODIFIED, kind, key, obj)

    # -- the protocol: binding ----------------------------------------------------------

    def bind(self, pod_key: str, node: str, writes: BindWrites | None = None) -> bool:
        """Assume ``pod_key`` on ``node`` now (and ``writes`` on what they write to);
        write them and bind on a worker thread."""
        with self._lock:
            pod = self.objects["Pod"].get(pod_key)
            if pod is None or node not in self.objects.get("Node", {}):
                return False
            meta = pod.get("metadata") or {}
            if (pod.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
                return False
            uid = str(meta.get("uid") or "")
            self._assumed[pod_key] = node
            if writes is not None:
                self._show_writes(pod_key, node, writes)
            self._deliver(MODIFIED, "Pod", pod_key, self._overlay("Pod", pod_key, pod))
        with self._inflight_lock:
            self._inflight += 1
        try:
            self._binder.submit(self._bind, pod_key, node, uid, writes)
        except RuntimeError:  # shutting down
            self._bind_done(pod_key, node, "scheduler stopping", ok=False)
        return True

    def _show_writes(self, pod_key: str, node: str, writes: BindWrites) -> None:
        """Show the cache what ``writes`` will write, at once (lock held)."""
        shown = overlays(pod_key, node, writes, lambda k, key: self._truth.get(k, {}).get(key))
        self._patched.update(shown)
        self._patched_by[pod_key] = list(shown)
        for kind, key in shown:
            if kind != "Pod" and key in self.objects.get(kind, {}):
                truth = self._truth.get(kind, {}).get(key)
                if truth is not None:
                    self._deliver(MODIFIED, kind, key, self._overlay(kind, key, truth))

    def _unshow_writes(self, pod_key: str) -> None:
        """A failed bind's writes: show the server's objects again."""
        with self._lock:
            keys = self._patched_by.pop(pod_key, [])
            for where in keys:
                self._patched.pop(where, None)
        for kind, key in keys:
            self._reveal(kind, key)

    def _bind(self, pod_key: str, node: str, uid: str, writes: BindWrites | None = None) -> None:
        ok, reason = False, ""
        start = time.perf_counter()
        try:
            if not self.may_write():
                reason = "not the leader"
            else:
                ok = True
                if writes is not None:
                    ok, reason = self._prebinder.run(pod_key, node, uid, writes)
                if ok:
                    ok, reason = self._post_binding(pod_key, node, uid)
        except Exception as err:  # never lose the in-flight count
            reason = f"error: {err}"
        self._bind_done(pod_key, node, reason, ok=ok, seconds=time.perf_counter() - start)

    def _post_binding(self, pod_key: str, node: str, uid: str) -> tuple[bool, str]:
        namespace, _, name = pod_key.partition("/")
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = RESOURCES["Pod"].path(namespace, name, "binding")
        for attempt in range(WRITE_ATTEMPTS):
            # The gate again before every attempt: a retry after the API server went
            # unreachable (or a pre-bind's wait) may come after this replica lost its
            # lease, and then another one may have placed the pod, or others on the node.
            if not self.may_write():
                return False, "not the leader"
            try:
                status, answer = self.client.request("POST", path, body=body)
            except ApiUnavailable as err:
                if attempt + 1 == WRITE_ATTEMPTS or self._stop.is_set():
                    return False, f"API server unavailable: {err}"
                self._stop.wait(0.2 * 2**attempt)
                continue
            if status in (200, 201):
                return True, ""
            if status == 409 and attempt:  # a retried bind may have landed the first time
                st, pod = self.client.request("GET", RESOURCES["Pod"].key_path(pod_key))
                if st == 200 and (pod.get("spec") or {}).get("nodeName") == node:
                    return True, ""
            return False, f"HTTP {status}: {status_message(answer)}"
        return False, "gave up"

    def _bind_done(
        self, pod_key: str, node: str, reason: str, *, ok: bool, seconds: float = 0.0
    ) -> None:
        if ok:
            self.stats.binds += 1
            if self._patched_by:
                with self._lock:  # (its overlays stay until the watch shows the writes)
                    self._patched_by.pop(pod_key, None)
            if self.on_bound is not None:
                self.on_bound(pod_key, node, seconds)
        else:
            word = failure_word(reason)
            self.stats.failed(self.stats.bind_failures, word)
            with self._lock:
                if self._assumed.get(pod_key) == node:
                    del self._assumed[pod_key]
            self._unshow_writes(pod_key)
            self._reveal("Pod", pod_key)
            # A bind refused is news (the pod waits for the next cycle); one given up
            # because this replica stopped leading or is stopping is not.
            level = logging.INFO if word in ("not_leader", "stopping") else logging.WARNING
            log.log(level, "bind of %s to %s failed: %s", pod_key, node, reason)
            if self.on_bind_failed is not None:
                self.on_bind_failed(pod_key, node, word)
        with self._inflight_lock:
            self._inflight -= 1
            self._inflight_lock.notify_all()

    # -- the protocol: eviction ---------------------------------------------------------

    def evict(self, pod_key: str, reason: str = "") -> bool:
        """Delete the pod with its own grace period (Volcano's evictor), or post an
        Eviction (``eviction_api``: the PodDisruptionBudget-checked way)."""
        with self._lock:
            pod = self.objects["Pod"].get(pod_key)
            if pod is None:
                return False
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                return False
            uid = str(meta.get("uid") or "")
            self._evicting[pod_key] = rfc3339()
            self._deliver(MODIFIED, "Pod", pod_key, self._overlay("Pod", pod_key, pod))
        self._submit(("Pod-evict", pod_key), lambda: self._evict(pod_key, uid, reason))
        return True

    def _evict(self, pod_key: str, uid: str, reason: str) -> bool:
        namespace, _, name = pod_key.partition("/")
        if not self.may_write():
            with self._lock:
                self._evicting.pop(pod_key, None)
            self._reveal("Pod", pod_key)
            return False
        if self.eviction_api:
            path = RESOURCES["Pod"].path(namespace, name, "eviction")
            body: dict[str, Any] = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"preconditions": {"uid": uid}},
            }
            status, answer = self.client.request("POST", path, body=body)
        else:
            path = RESOURCES["Pod"].path(namespace, name)
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
            status, answer = self.client.request("DELETE", path, body=body)
        if status in (200, 201, 202):
            self.stats.evictions += 1
            log.info("evicted %s: %s", pod_key, reason)
            return True  # (the watch shows the deletion; the overlay holds till then)
        self.stats.eviction_failures += 1
        log.info("eviction of %s refused: HTTP %s: %s", pod_key, status, status_message(answer))
        with self._lock:
            self._evicting.pop(pod_key, None)
        self._reveal("Pod", pod_key)
        return True  # answered: no retry

    # -- the protocol: podgroup status --------------------------------------------------

    def update_podgroup_status(
        self,
        key: str,
        phase: str,
        conditions: Sequence[Mapping[str, Any]] = (),
        *,
        running: int = 0,
        succeeded: int = 0,
        failed: int = 0,
    ) -> bool:
        stamp = rfc3339()
        status = {
            "phase": phase,
            "conditions": [{"lastTransitionTime": stamp, **c} for c in conditions],
            "running": running,
            "succeeded": succeeded,
            "failed": failed,
        }
        with self._lock:
            pg = self.objects.get("PodGroup", {}).get(key)
            if pg is None:
                return False
        return self._show_status("PodGroup", key, status)

    def update_gang_status(self, kind: str, key: str, status: Mapping[str, Any]) -> bool:
        """Show ``status`` merged into the object now; merge-patch it on a writer."""
        if kind not in GANG_KINDS:
            raise ValueError(f"{kind} is not a gang kind of another dialect")
        return self._show_status(kind, key, dict(status))

    def _show_status(self, kind: str, key: str, status: dict[str, Any]) -> bool:
        with self._lock:
            obj = self.objects.get(kind, {}).get(key)
            if obj is None:
                return False
            self._pg_status[(kind, key)] = status
            self._deliver(MODIFIED, kind, key, self._overlay(kind, key, obj))
        self._submit((kind, key), lambda: self._write_pg_status(kind, key, status))
        return True

    def _write_pg_status(self, kind: str, key: str, status: dict[str, Any]) -> bool:
        answer = None
        try:
            answer = self.patch_status(kind, key, {"status": status})
        finally:
            self._pg_written(kind, key, status, answer)
        return answer is not None

    def _pg_written(self, kind: str, key: str, status: dict[str, Any], answer: Any) -> None:
        with self._lock:
            if self._pg_status.get((kind, key)) is status:
                del self._pg_status[(kind, key)]
        if answer is None:
            self._reveal(kind, key)
        else:
            self._answer(kind, key, answer)

    # -- writes beyond the protocol (the runner's) --------------------------------------

    def patch_status(
        self, kind: str, key: str, patch: Mapping[str, Any], content_type: str = MERGE_PATCH
    ) -> Any:
        """Patch an object's status subresource; on a CRD without one (Volcano 1.7's
        PodGroup), the object itself. Returns the server's object, or None."""
        if not self.may_write():
            return None
        res = RESOURCES[kind]
        status, answer = self.client.request(
            "PATCH", res.key_path(key, "status"), body=patch, content_type=content_type
        )
        if status == 404 and kind in ("PodGroup", "Queue") and self.get(kind, key) is not None:
            status, answer = self.client.request(
                "PATCH", res.key_path(key), body=patch, content_type=content_type
            )
        self._count_write(kind, status)
        if status == 200:
            return answer
        log.info("status of %s %s not written: HTTP %s: %s", kind, key, status,
                 status_message(answer))  # fmt: skip
        return None

    def set_pod_condition(self, pod_key: str, condition: Mapping[str, Any]) -> None:
        """Queue a write of one pod condition (strategic merge: by condition type)."""
        patch = {"status": {"conditions": [dict(condition)]}}
        self._submit(
            ("Pod-condition", pod_key),
            lambda: self.patch_status("Pod", pod_key, patch, STRATEGIC_PATCH) is not None,
        )

    def update_queue_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Queue a merge patch of a Queue's status."""
        body = {"status": dict(status)}
        self._submit(
            ("Queue", name),
            lambda: self._answer_of("Queue", name, self.patch_status("Queue", name, body)),
        )

    def _answer_of(self, kind: str, key: str, answer: Any) -> bool:
        if answer is not None:
            self._answer(kind, key, answer)
        return answer is not None

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        """Queue the creation of a core/v1 Event (the caller deduplicates): posted in
        order, kept through an API server outage (see :class:`EventOutbox`)."""
        self.outbox.put(namespace, event)

    def _count_write(self, kind: str, status: int) -> None:
        label = f"{kind}:{status}"
        table = self.stats.writes if status in (200, 201) else self.stats.write_failures
        table[label] = table.get(label, 0) + 1

    # -- the writer queue ---------------------------------------------------------------

    def _submit(self, key: tuple[str, str], job: Callable[[], bool]) -> None:
        """Queue ``job`` under ``key``: a newer job for the same key replaces one not
        started yet (only the latest status of an object is worth writing)."""
        with self._write_lock:
            fresh = key not in self._write_jobs
            self._write_jobs[key] = job
        if fresh:
            self._writes.put(key)

    def pending_writes(self) -> int:
        return len(self._write_jobs)

    def _writer(self) -> None:
        while True:
            key = self._writes.get()
            if key is None:
                return
            with self._write_lock:
                job = self._write_jobs.pop(key, None)
            if job is None:
                continue
            if self._stop.is_set():
                continue
            try:
                job()
            except ApiUnavailable as err:
                # Not retried here: the next cycle derives what is due again and
                # asks for it (status, conditions); Events go through the outbox,
                # which retries. (The outage itself is said by the client.)
                log.debug("write %s: %s", key, err)
            except Exception:
                log.exception("write %s failed", key)


__all__ = ["KubeCluster", "KubeWatch", "WriteStats"]
