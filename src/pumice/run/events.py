"""Kubernetes Events for what users read with ``kubectl describe``, without flooding.

A backlog of thousands of pending pods would, naively, post an event per pod per
cycle. client-go's event correlator aggregates and rate-limits; pumice does the part
that matters for a scheduler:

- **Deduplicated**: the same (object, reason, message) is posted once, and again only
  after ``repeat_after`` seconds (a pod pending for an hour for the same reason gets
  an event now and then, not every second).
- **Rate-limited**: a token bucket (``rate`` per second, ``burst`` at once) over all
  events; what does not fit is dropped and counted (``dropped``), never queued up.

Events are posted by the cluster's writer threads, off the scheduling path.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pumice.cluster.kube_client import API_VERSIONS, rfc3339

COMPONENT = "pumice"
#: Longest message the API server takes in an Event (it truncates beyond 1 KiB).
MAX_MESSAGE = 1024


class TokenBucket:
    """``rate`` tokens per second up to ``burst``; ``take()`` spends one if there is one."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, float(burst), clock
        self.tokens = float(burst)
        self.at = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


def object_reference(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion") or API_VERSIONS.get(kind, "v1"),
        "kind": kind,
        "name": meta.get("name", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    return ref


class EventRecorder:
    """Builds core/v1 Events and hands them to ``post(namespace, event)``."""

    def __init__(
        self,
        post: Callable[[str, dict[str, Any]], None],
        *,
        instance: str,
        rate: float = 20.0,
        burst: int = 200,
        repeat_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.post = post
        self.instance = instance
        self.bucket = TokenBucket(rate, burst, clock)
        self.repeat_after = repeat_after
        self.clock = clock
        self.wall = wall
        self._seen: dict[tuple[str, str, str], float] = {}
        self.posted = 0
        self.dropped = 0

    def record(
        self, kind: str, obj: Mapping[str, Any], type_: str, reason: str, message: str
    ) -> bool:
        """Post an event about ``obj`` unless the same one was posted lately or the
        rate is spent; True when posted."""
        meta = obj.get("metadata") or {}
        ident = (f"{kind}/{meta.get('namespace', '')}/{meta.get('name', '')}", reason, message)
        now = self.clock()
        last = self._seen.get(ident)
        if last is not None and now - last < self.repeat_after:
            return False
        if not self.bucket.take():
            self.dropped += 1
            return False
        self._seen[ident] = now
        if len(self._seen) > 100_000:  # forget the oldest half (objects come and go)
            for k, _ in sorted(self._seen.items(), key=lambda kv: kv[1])[:50_000]:
                del self._seen[k]
        namespace = meta.get("namespace") or "default"
        stamp = rfc3339(self.wall())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'pumice')}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "involvedObject": object_reference(kind, obj),
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "type": type_,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self.post(namespace, event)
        self.posted += 1
        return True


__all__ = ["EventRecorder", "TokenBucket", "object_reference"]
