"""Watch the benchmark's pods get bound, and check gangs while it happens.

One watch on the benchmark's pods (by label) from before the first create to the last
bind gives everything measured at the pods: when each pod was first seen (ADDED) and
when it was first seen with a ``spec.nodeName`` (its bind), by this process's monotonic
clock at the moment the event arrived, the same clock the creators use.

Gangs are checked on the same stream. The API server delivers a watch's events in
etcd's order, so after each event this module's counts are the API's state at that
revision; every event is one observation. Per PodGroup it keeps pods seen, pods bound,
and:

- ``created_at_first_bind``: pods of the group that existed when its first pod was
  bound. A gang scheduler binds nothing of a group before ``minMember`` of its pods exist
  (pods are created while the scheduler runs, so a scheduler without gangs binds the
  first ones as they come): fewer is a violation, ``early``.
- the group's bound count at the end: ``0 < bound < minMember`` is a violation,
  ``partial at the end``.
- how long it stayed partly bound: from its first bind to its ``minMember``-th. Kubernetes
  binds one pod per request, so even a perfect gang scheduler shows a group partly
  bound for the length of its bind burst; this span and the most groups partly bound at
  any one observation are reported, not judged.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pumice.bench.e2e_load import GROUP_ANNOTATION, LABEL, NAMESPACE
from pumice.cluster.kube_client import RESOURCES, ApiUnavailable, KubeClient, status_message

WATCH_SECONDS = 3600


@dataclass(slots=True)
class GroupWatch:
    """One PodGroup as seen on the watch (see the module docstring)."""

    min_member: int
    created: int = 0
    bound: int = 0
    created_at_first_bind: int | None = None
    first_bind: float | None = None
    full_bind: float | None = None  # when bound reached min_member

    @property
    def partial(self) -> bool:
        return 0 < self.bound < self.min_member

    @property
    def early(self) -> bool:
        return self.created_at_first_bind is not None and (
            self.created_at_first_bind < self.min_member
        )


@dataclass(slots=True)
class GangCheck:
    """What the watch saw of the gangs (violations first, then what is only reported)."""

    groups: int
    early: list[str] = field(default_factory=list)
    partial_at_end: list[str] = field(default_factory=list)
    max_partial_groups: int = 0
    observations: int = 0
    longest_partial_s: float = 0.0

    @property
    def violations(self) -> int:
        return len(set(self.early) | set(self.partial_at_end))


class BindWatch:
    """Watches pods labelled ``LABEL=<workload>``; :meth:`wait` blocks until a number
    of them is bound. ``groups`` maps each PodGroup of the workload to its minMember
    (pods naming another group, or none, are timed but not gang-checked)."""

    def __init__(self, client: KubeClient, workload: str, groups: dict[str, int]) -> None:
        self.client = client
        self.workload = workload
        self.groups = {name: GroupWatch(m) for name, m in groups.items()}
        self.added: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.nodes: dict[str, str] = {}
        self.partial: set[str] = set()
        self.max_partial = 0
        self.observations = 0
        self.error: str | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bind-watch", daemon=True)
        self._rv = ""

    def start(self) -> None:
        """List (to learn the resource version to watch from), then watch on a thread."""
        status, body = self.client.request(
            "GET", RESOURCES["Pod"].path(NAMESPACE), query=self._query()
        )
        if status != 200:
            raise RuntimeError(f"list pods: HTTP {status}: {status_message(body)}")
        for item in body.get("items") or []:
            self._observe("ADDED", item, time.monotonic())
        self._rv = str(body["metadata"]["resourceVersion"])
        self._thread.start()

    def _query(self) -> dict[str, Any]:
        return {"labelSelector": f"{LABEL}={self.workload}"}

    def _run(self) -> None:
        path = RESOURCES["Pod"].path(NAMESPACE)
        while not self._stop.is_set():
            query = {
                **self._query(),
                "watch": True,
                "resourceVersion": self._rv,
                "allowWatchBookmarks": True,
                "timeoutSeconds": WATCH_SECONDS,
            }
            try:
                for status, event in self.client.stream(path, query, timeout=WATCH_SECONDS + 60):
                    now = time.monotonic()
                    if status != 200 or event.get("type") == "ERROR":
                        self._fail(f"watch: HTTP {status}: {status_message(event)}")
                        return
                    obj = event.get("object") or {}
                    self._rv = str((obj.get("metadata") or {}).get("resourceVersion") or self._rv)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._observe(event["type"], obj, now)
            except ApiUnavailable as err:
                if self._stop.is_set():
                    return
                self._fail(f"watch broke: {err}")
                return

    def _fail(self, message: str) -> None:
        with self._cond:
            self.error = message
            self._cond.notify_all()

    def _observe(self, type_: str, obj: dict[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        group = self.groups.get((meta.get("annotations") or {}).get(GROUP_ANNOTATION, ""))
        node = (obj.get("spec") or {}).get("nodeName")
        with self._cond:
            self.observations += 1
            if name not in self.added:
                self.added[name] = now
                if group is not None:
                    group.created += 1
            if node and name not in self.bound:
                self.bound[name] = now
                self.nodes[name] = node
                if group is not None:
                    self._bound_in(group, meta, now)
                self._cond.notify_all()

    def _bound_in(self, group: GroupWatch, meta: dict[str, Any], now: float) -> None:
        key = meta["annotations"][GROUP_ANNOTATION]
        if group.bound == 0:
            group.first_bind = now
            group.created_at_first_bind = group.created
        group.bound += 1
        if group.bound == group.min_member:
            group.full_bind = now
        if group.partial:
            self.partial.add(key)
            self.max_partial = max(self.max_partial, len(self.partial))
        else:
            self.partial.discard(key)

    def wait(self, count: int, timeout: float) -> bool:
        """Block until ``count`` pods are bound (True), the watch fails or ``timeout``
        seconds pass (False)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.bound) < count and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 1.0))
            return len(self.bound) >= count

    def settle(self, quiet: float, timeout: float) -> None:
        """Wait until no new bind for ``quiet`` seconds (bounded by ``timeout``): after
        the expected count, so that a late extra bind would still be seen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._cond:
                last = max(self.bound.values(), default=0.0)
            if time.monotonic() - last >= quiet:
                return
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()

    def last_bind(self) -> float | None:
        with self._cond:
            return max(self.bound.values(), default=None)

    def latencies(self) -> list[float]:
        """Per pod, seconds from first seen to bound (the watch's view of queueing and
        scheduling together)."""
        with self._cond:
            return sorted(t - self.added[n] for n, t in self.bound.items() if n in self.added)

    def gang_check(self) -> GangCheck:
        with self._cond:
            check = GangCheck(
                groups=len(self.groups),
                max_partial_groups=self.max_partial,
                observations=self.observations,
            )
            for name, g in sorted(self.groups.items()):
                if g.early:
                    check.early.append(name)
                if g.partial:
                    check.partial_at_end.append(name)
                if g.first_bind is not None:
                    end = g.full_bind if g.full_bind is not None else time.monotonic()
                    check.longest_partial_s = max(check.longest_partial_s, end - g.first_bind)
            return check


__all__ = ["BindWatch", "GangCheck", "GroupWatch"]
