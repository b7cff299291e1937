"""A fake kubelet for the fake nodes of a real API server: pods bound there live.

The real-cluster counterpart of the simulator's kubelet model
(:mod:`pumice.sim.kubelet`), with its defaults and its idea of time (a heap of timed
events, :class:`~pumice.sim.clock.Clock`, here fed by the monotonic clock). Nothing
runs: only the status a kubelet would report is written, so that a scheduler, kubectl
and controllers see pods start, finish and leave their nodes. For a pod bound to a node
it owns:

- after ``startup_delay`` it writes ``status.phase: Running`` through ``pods/status``
  (``startTime``, one running status per container, ``Ready`` conditions);
- after the pod's run duration, read from the annotation ``sandbox.pumice.dev/duration``
  (``90s``, ``5m``, ``1h30m``, or seconds; the simulator's ``pumice.sim/duration`` is read
  when it is absent), it writes ``Succeeded``. Without either the pod runs until it is
  deleted; an unreadable value is logged and treated as absent;
- a pod with a ``deletionTimestamp`` (a graceful delete: ``kubectl delete``, an eviction
  by the scheduler) is deleted for good after ``min(its grace period, grace_cap)``, with
  ``gracePeriodSeconds: 0`` and a uid precondition, as a kubelet does once the containers
  stopped; a finished pod at once.

Pods on other nodes are left alone. A pod already ``Running`` when the kubelet starts
(a sandbox started again on its old data) keeps its ``startTime``: it ends when its
duration is over, counted from then.

Threads: the informer's (events into a table of pods, under one lock), one timer thread
(the heap) and ``workers`` writer threads. Every write is conditioned on the pod's uid,
and a 404, 409 or uid refusal means the pod went away or was replaced: it is counted,
never raised, and the pod is forgotten when the watch shows it deleted. A write that
got no answer, or a 5xx or 429, is retried with a doubling backoff until it is answered
(or the kubelet stops, or the pod goes).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pumice.cluster.informer import Informer
from pumice.cluster.kube_client import (
    RESOURCES,
    STRATEGIC_PATCH,
    ApiUnavailable,
    KubeClient,
    rfc3339,
    status_message,
)
from pumice.cluster.protocol import DELETED
from pumice.errors import InputError
from pumice.sim.clock import RELEASE, START, Clock
from pumice.sim.fields import parse_seconds
from pumice.sim.kubelet import DEFAULT_GRACE, DEFAULT_STARTUP_DELAY, deletion_grace
from pumice.sim.workload import ANNOTATION_DURATION as SIM_DURATION

log = logging.getLogger("pumice.sandbox.kubelet")

#: How long a pod runs once Running; absent: until deleted.
DURATION_ANNOTATION = "sandbox.pumice.dev/duration"
#: The longest a terminating pod waits before it is gone (a sandbox has no containers
#: to stop: a 30 s grace period would only make evictions slow to watch).
GRACE_CAP = 2.0
#: Writer threads.
WORKERS = 4
#: A write that got no answer (or a 5xx, 429) is tried again after this long, doubling
#: up to ``MAX_RETRY_DELAY``, until it is answered: a kubelet never gives up on a pod
#: bound to its node (after an API server outage, pods must still start).
RETRY_DELAY = 1.0
MAX_RETRY_DELAY = 30.0
#: After this many attempts the retrying is logged (once per write).
ATTEMPTS = 5
#: Per-request timeout of the kubelet's writes.
REQUEST_TIMEOUT = 10.0

_START, _END, _DELETE = "start", "end", "delete"


@dataclass(slots=True)
class KubeletStats:
    """What the kubelet did (counters only grow; read them under no lock, for tests)."""

    seen: int = 0  # pods bound to owned nodes taken in
    started: int = 0  # Running written
    succeeded: int = 0  # Succeeded written
    deleted: int = 0  # terminating pods deleted for good
    gone: int = 0  # writes that found the pod deleted or replaced (404, 409)
    retries: int = 0  # writes tried again after no answer
    errors: int = 0  # writes refused for another reason, or given up


@dataclass(slots=True)
class _Pod:
    """One incarnation (uid) of a pod on an owned node."""

    key: str
    uid: str
    duration: float | None
    containers: tuple[tuple[str, str], ...]  # (name, image)
    state: str = "starting"  # starting | running | ended
    started_at: str = ""  # RFC 3339, as written in status.startTime
    terminating: bool = False
    delete_at: float | None = None  # monotonic
    deleting: bool = False


def pod_duration(pod: Mapping[str, Any]) -> float | None:
    """The run duration a pod asks for in seconds, or None (runs until deleted)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    for key in (DURATION_ANNOTATION, SIM_DURATION):
        if key in annotations:
            try:
                return parse_seconds(annotations[key], field=key)
            except InputError as err:
                meta = pod.get("metadata") or {}
                log.warning(
                    "pod %s/%s: %s; it runs until deleted",
                    meta.get("namespace"), meta.get("name"), err.render(),
                )  # fmt: skip
                return None
    return None


def _wall_of(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return None


def owner(nodes: Collection[str] | None = None, prefix: str | None = None) -> Callable[[str], bool]:
    """A node-name test: in ``nodes``, or starting with ``prefix``."""
    names = frozenset(nodes or ())
    if prefix is None:
        return names.__contains__
    return lambda name: name in names or name.startswith(prefix)


class FakeKubelet:
    """The kubelet of a set of fake nodes (see the module docstring).

    ``nodes`` names the owned nodes, ``prefix`` owns every node whose name starts with
    it (either or both). ``start()`` lists and watches pods; ``stop()`` ends the timer,
    the writers (writes in flight finish) and the watch, and does not close ``client``.
    """

    def __init__(
        self,
        client: KubeClient,
        nodes: Collection[str] | None = None,
        *,
        prefix: str | None = None,
        startup_delay: float = DEFAULT_STARTUP_DELAY,
        grace_cap: float = GRACE_CAP,
        default_grace: float = DEFAULT_GRACE,
        workers: int = WORKERS,
        retry_delay: float = RETRY_DELAY,
    ) -> None:
        if nodes is None and prefix is None:
            raise ValueError("a fake kubelet needs nodes or a prefix to own")
        self.client = client
        self.owns = owner(nodes, prefix)
        self.startup_delay = startup_delay
        self.grace_cap = grace_cap
        self.default_grace = default_grace
        self.retry_delay = retry_delay
        self.stats = KubeletStats()
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._clock = Clock(time.monotonic())
        self._pods: dict[str, _Pod] = {}
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="fake-kubelet")
        # The watch has a connection of its own, closed at stop() so that the informer's
        # thread returns at once (``client`` is the caller's, left open).
        self._watch_client = KubeClient(client.configuration, pool_size=2)
        self._informer = Informer(self._watch_client, "Pod", self._event, stop=self._stop)
        self._timer = threading.Thread(target=self._run_timer, name="fake-kubelet-timer",
                                       daemon=True)  # fmt: skip
        self._res = RESOURCES["Pod"]

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        self._timer.start()
        self._informer.start()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the first list of pods has been taken in."""
        return self._informer.synced.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._timer.is_alive():
            self._timer.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._watch_client.close()
        self._informer.join(min(timeout, 1.0))

    def __enter__(self) -> FakeKubelet:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def tracked(self) -> int:
        """Pods on owned nodes the kubelet is looking after."""
        with self._cond:
            return len(self._pods)

    # -- events from the informer -------------------------------------------------------

    def _event(self, kind: str, _k: str, key: str, obj: dict[str, Any]) -> None:
        if self._stop.is_set():
            return
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        with self._cond:
            rec = self._pods.get(key)
            if kind == DELETED:
                if rec is not None and rec.uid == uid:
                    del self._pods[key]
                return
            node = (obj.get("spec") or {}).get("nodeName")
            if not node or not self.owns(node):
                if rec is not None and rec.uid != uid:
                    del self._pods[key]  # replaced by a pod that is not ours
                return
            if rec is None or rec.uid != uid:
                rec = self._take_in(key, uid, obj)
            if meta.get("deletionTimestamp") is not None:
                self._terminating(rec, obj)

    def _take_in(self, key: str, uid: str, obj: dict[str, Any]) -> _Pod:
        containers = tuple(
            (str(c.get("name") or ""), str(c.get("image") or ""))
            for c in (obj.get("spec") or {}).get("containers") or ()
        )
        rec = _Pod(key, uid, pod_duration(obj), containers)
        self._pods[key] = rec
        self.stats.seen += 1
        status = obj.get("status") or {}
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            rec.state = "ended"
        elif phase == "Running":
            rec.state = "running"
            rec.started_at = str(status.get("startTime") or "")
            if rec.duration is not None:
                began = _wall_of(rec.started_at)
                left = rec.duration if began is None else began + rec.duration - time.time()
                self._after(max(0.0, left), RELEASE, (_END, key, uid, 1))
        else:
            self._after(self.startup_delay, START, (_START, key, uid, 1))
        return rec

    def _terminating(self, rec: _Pod, obj: dict[str, Any]) -> None:
        rec.terminating = True
        if rec.state == "ended":
            delay = 0.0
        else:
            delay = max(0.0, min(deletion_grace(obj, self.default_grace), self.grace_cap))
        at = time.monotonic() + delay
        if rec.delete_at is None or at < rec.delete_at:
            rec.delete_at = at
            self._after(delay, RELEASE, (_DELETE, rec.key, rec.uid, 1))

    # -- the timer ----------------------------------------------------------------------

    def _after(self, delay: float, priority: int, event: tuple[str, str, str, int]) -> None:
        """Schedule ``event`` (caller holds the lock)."""
        self._clock.now = time.monotonic()
        self._clock.after(delay, priority, event)
        self._cond.notify()

    def _run_timer(self) -> None:
        while not self._stop.is_set():
            due: list[tuple[str, str, str, int]] = []
            with self._cond:
                nxt = self._clock.peek()
                now = time.monotonic()
                if nxt is None or nxt > now:
                    self._cond.wait(None if nxt is None else nxt - now)
                    continue
                while (nxt := self._clock.peek()) is not None and nxt <= now:
                    due.append(self._clock.pop()[1])
            for event in due:
                try:
                    self._pool.submit(self._fire, event)
                except RuntimeError:  # the pool shut down: stopping
                    return

    # -- writes (worker threads) --------------------------------------------------------

    def _fire(self, event: tuple[str, str, str, int]) -> None:
        what, key, uid, _ = event
        with self._cond:
            rec = self._pods.get(key)
            if rec is None or rec.uid != uid:
                return  # gone, or an earlier incarnation's timer
            if what == _START and (rec.state != "starting" or rec.terminating):
                return
            if what == _END and (rec.state != "running" or rec.terminating):
                return
            if what == _DELETE:
                if rec.deleting:
                    return
                rec.deleting = True
            started_at = rec.started_at or rfc3339()
        try:
            if what == _DELETE:
                status, body = self._delete(key, uid)
            else:
                status, body = self._write_status(rec, what, started_at)
        except ApiUnavailable as err:
            self._retry(event, str(err))
            return
        if status == 429 or status >= 500:  # (a server starting, or overloaded)
            self._retry(event, f"HTTP {status}: {status_message(body)}")
            return
        self._answered(event, rec, status, body, started_at)

    def _write_status(self, rec: _Pod, what: str, started_at: str) -> tuple[int, Any]:
        now = rfc3339()
        if what == _START:
            body = running_status(rec.containers, now)
        else:
            body = succeeded_status(rec.containers, started_at, now)
        body["metadata"] = {"uid": rec.uid}  # a replaced pod refuses the write
        return self.client.request(
            "PATCH",
            self._res.key_path(rec.key, "status"),
            body=body,
            content_type=STRATEGIC_PATCH,
            timeout=REQUEST_TIMEOUT,
        )

    def _delete(self, key: str, uid: str) -> tuple[int, Any]:
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": uid},
        }
        return self.client.request(
            "DELETE", self._res.key_path(key), body=options, timeout=REQUEST_TIMEOUT
        )

    def _answered(
        self, event: tuple[str, str, str, int], rec: _Pod, status: int, body: Any, started: str
    ) -> None:
        what, key, uid, _ = event
        with self._cond:
            if status in (200, 201, 202):
                if what == _START:
                    self.stats.started += 1
                    rec.state, rec.started_at = "running", started
                    if rec.duration is not None and not rec.terminating:
                        self._after(rec.duration, RELEASE, (_END, key, uid, 1))
                elif what == _END:
                    self.stats.succeeded += 1
                    rec.state = "ended"
                else:
                    self.stats.deleted += 1  # forgotten at the watch's DELETED
                return
            if status in (404, 409) or (status == 422 and "metadata.uid" in status_message(body)):
                # Deleted or replaced: the watch will say so; no more writes for it.
                self.stats.gone += 1
                rec.state, rec.deleting = "ended", True
                return
            self.stats.errors += 1
            if what == _DELETE:
                rec.deleting = False
        log.warning("pod %s: %s refused: HTTP %d: %s", key, what, status, status_message(body))

    def _retry(self, event: tuple[str, str, str, int], why: str) -> None:
        what, key, uid, attempt = event
        with self._cond:
            rec = self._pods.get(key)
            if rec is not None and what == _DELETE:
                rec.deleting = False
            if self._stop.is_set() or rec is None or rec.uid != uid:
                return  # (stopping, or the pod went: nothing left to write)
            self.stats.retries += 1
            delay = min(self.retry_delay * 2 ** (attempt - 1), MAX_RETRY_DELAY)
            self._after(delay, RELEASE, (what, key, uid, attempt + 1))
        if attempt == ATTEMPTS:
            log.warning(
                "pod %s: %s not written after %d attempts (%s); still retrying, every %.0fs "
                "at most",
                key,
                what,
                attempt,
                why,
                MAX_RETRY_DELAY,
            )


def running_status(containers: tuple[tuple[str, str], ...], now: str) -> dict[str, Any]:
    """The status patch of a pod whose containers all started at ``now``."""
    return {
        "status": {
            "phase": "Running",
            "startTime": now,
            "conditions": [
                _condition(t, "True", now) for t in ("Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": name,
                    "image": image,
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for name, image in containers
            ],
        }
    }


def succeeded_status(
    containers: tuple[tuple[str, str], ...], started: str, now: str
) -> dict[str, Any]:
    """The status patch of a pod whose containers all exited 0 at ``now``."""
    return {
        "status": {
            "phase": "Succeeded",
            "conditions": [
                _condition(t, "False", now, "PodCompleted") for t in ("ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": name,
                    "image": image,
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": started,
                            "finishedAt": now,
                        }
                    },
                }
                for name, image in containers
            ],
        }
    }


def _condition(kind: str, status: str, now: str, reason: str = "") -> dict[str, Any]:
    cond: dict[str, Any] = {"type": kind, "status": status, "lastTransitionTime": now}
    if reason:
        cond["reason"] = reason
    return cond


__all__ = [
    "DURATION_ANNOTATION",
    "GRACE_CAP",
    "FakeKubelet",
    "KubeletStats",
    "owner",
    "pod_duration",
    "running_status",
    "succeeded_status",
]
