"""Leader election on a ``coordination.k8s.io/v1`` Lease, so replicas of ``pumice run``
never bind at the same time.

Several replicas run for availability; one leads (schedules and writes), the others
stand by and take over when it goes away. The rules are client-go's ``leaderelection``
(what kube-scheduler and Volcano use), so a pumice replica and those tools read a Lease
the same way:

- **Acquire.** Read the Lease; create it when missing. A Lease held by someone else is
  taken over only when its record (the spec) has not changed for the holder's
  ``leaseDurationSeconds`` *as timed by the local clock* from the moment this replica
  first saw it that way. The remote ``renewTime`` is never compared with the local
  clock, so clock skew between machines does not matter (only a difference in clock
  *rate* would). A Lease with no holder (released) is taken at once.
- **Optimistic concurrency.** Every write carries the ``resourceVersion`` that was read;
  ``409 Conflict`` means another replica wrote first and this attempt lost.
- **Renew.** The leader rewrites ``renewTime`` every ``retry_period``. With no
  successful renewal for ``renew_deadline`` it has lost leadership: ``on_stopped`` is
  called and the elector goes back to acquiring (the process keeps running as a
  standby). Seeing another holder on the Lease loses leadership at once.
- **The write gate.** :meth:`LeaderElector.is_leader` is true only while
  ``clock() < start of the last successful renewal + renew_deadline``. A standby can
  take over no earlier than ``lease_duration`` after it saw that renewal, which it saw
  after it was sent; since ``lease_duration > renew_deadline``, a leader that cannot
  renew stops writing strictly before anyone else may start. This needs no working
  loop: a leader whose thread is stuck in a request closes its gate all the same.
- **Release.** :meth:`LeaderElector.stop` closes the gate, calls ``on_stopped``, then
  (with ``release=True``) writes the Lease with no holder and ``leaseDurationSeconds:
  1``, as client-go's ``ReleaseOnCancel`` does, so a standby takes over at its next
  try instead of waiting out the lease. Stop the work the lease guards first.

Times in the Lease are RFC 3339 with microseconds in UTC; ``leaseDurationSeconds`` is
whole seconds, rounded up from ``lease_duration`` so others wait at least that long.
A standby honours the duration the *holder* wrote, so replicas configured differently
stay safe with each other.

The API server being unreachable, or answering 5xx, is retried every ``retry_period``;
nothing raises out of the election thread. Messages go to the ``pumice.leader`` logger
(a repeated failure is logged once at WARNING, then at DEBUG). Callbacks run on the
election thread and must return quickly: renewals wait for them.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pumice.cluster.kube_client import (
    API_VERSIONS,
    RESOURCES,
    ApiUnavailable,
    KubeClient,
    status_message,
)

log = logging.getLogger("pumice.leader")

_NEVER = -math.inf


def default_identity() -> str:
    """``hostname_<random uuid>``, as kube-scheduler builds its identity: the host name
    for people reading the Lease, the suffix so two processes on one host (or a restart
    before the old lease expired) are never mistaken for each other."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def microtime(moment: datetime | None = None) -> str:
    """A Kubernetes ``MicroTime``: ``2006-01-02T15:04:05.000000Z`` (UTC)."""
    moment = datetime.now(UTC) if moment is None else moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One replica's side of the election on the Lease ``namespace/name``.

    Safe to share between threads: :meth:`is_leader` and :meth:`holder` read without
    locking and cost next to nothing, so they can sit in front of every write.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
    ) -> None:
        for label, value in (("namespace", namespace), ("name", name), ("identity", identity)):
            if not value:
                raise ValueError(f"leader election: the lease {label} must not be empty")
        for label, seconds in (
            ("lease_duration", lease_duration),
            ("renew_deadline", renew_deadline),
            ("retry_period", retry_period),
        ):
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(
                    f"leader election: {label} must be a positive number of seconds, "
                    f"got {seconds!r}"
                )
        if not lease_duration > renew_deadline:
            raise ValueError(
                f"leader election: lease_duration ({lease_duration:g} s) must be greater "
                f"than renew_deadline ({renew_deadline:g} s), or a standby could take "
                "over while the leader still writes"
            )
        if not renew_deadline > retry_period:
            raise ValueError(
                f"leader election: renew_deadline ({renew_deadline:g} s) must be greater "
                f"than retry_period ({retry_period:g} s), or one slow renewal loses "
                "leadership"
            )
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = float(lease_duration)
        self.renew_deadline = float(renew_deadline)
        self.retry_period = float(retry_period)
        self._clock = clock
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._path = RESOURCES["Lease"].path(namespace, name)
        self._collection = RESOURCES["Lease"].path(namespace)
        self._duration_seconds = max(1, math.ceil(self.lease_duration))

        # Written by the election thread (and stop()); read lock-free elsewhere.
        self._until = _NEVER  # the write gate: leader while clock() < _until
        self._holder = ""
        self._leading = False  # on_started called, on_stopped not yet
        self._gate = threading.Lock()  # orders writes of _until against stop()
        self._stopping = False
        self._stop = threading.Event()
        self._leading_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._release_on_stop = True

        # The election thread's own state.
        self._lease: dict[str, Any] | None = None  # last Lease read or written
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = _NEVER  # local time the spec was last seen to change
        self._last_warning = ""
        self._warned = False

    # -- what other threads ask --------------------------------------------------------

    def is_leader(self) -> bool:
        """True while this replica may write: within ``renew_deadline`` of the start of
        its last successful renewal, and not stopped."""
        return self._clock() < self._until

    def holder(self) -> str:
        """The holder identity last seen on the Lease ("" when none or not read yet)."""
        return self._holder

    def wait_leading(self, timeout: float | None = None) -> bool:
        """Block until this replica leads (True) or ``timeout`` seconds pass (False)."""
        return self._leading_event.wait(timeout) and self.is_leader()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Run the election on a daemon thread; returns at once."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("leader election is already running")
        with self._gate:
            self._stopping = False
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"pumice-leader-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        """Stop the election. The gate closes before this returns; if this replica held
        the Lease, ``on_stopped`` is called and, with ``release``, the Lease is handed
        back so a standby need not wait for it to expire."""
        self._release_on_stop = release
        with self._gate:
            self._stopping = True
            self._until = _NEVER
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            # Requests time out after renew_deadline; the release is one more request.
            thread.join(2 * self.renew_deadline + self.retry_period)
            if thread.is_alive():
                log.warning("leader election for %s did not stop in time", self._describe())

    # -- the loop ----------------------------------------------------------------------

    def _run(self) -> None:
        log.info("%s: trying to acquire lease %s", self.identity, self._describe())
        while not self._stop.is_set():
            started = self._clock()
            self._warned = False
            try:
                ok = self._attempt(started)
            except ApiUnavailable as err:
                if getattr(self.client, "reachability", None) is not None and (
                    self.client.reachability.troubled()
                ):  # (the outage is said once by the client)
                    self._warned = True
                    log.debug("leader election on %s: %s", self._describe(), err)
                else:
                    self._warn(f"API server unavailable: {err}")
                ok = False
            except Exception:  # the thread must outlive any surprise
                log.exception("leader election attempt on %s failed", self._describe())
                ok = False
            self._settle(started, ok)
            if not self._warned:  # a clean attempt: the next failure is news again
                self._last_warning = ""
            self._stop.wait(self.retry_period)
        self._step_down("stopping", logging.INFO, verb="stepped down from")
        if self._release_on_stop:
            try:
                self._release()
            except Exception as err:
                log.warning("could not release lease %s: %s", self._describe(), err)

    def _settle(self, started: float, ok: bool) -> None:
        """Turn an attempt's outcome into leadership changes. A renewal that began after
        the deadline had passed is a new term: the old one ends first."""
        if self._leading and (started if ok else self._clock()) >= self._until:
            reason = (
                f"lease held by {self._holder}"
                if self._holder != self.identity
                else f"no renewal within {self.renew_deadline:g} s"
            )
            self._step_down(reason)
        if ok:
            self._step_up(started)

    def _step_up(self, started: float) -> None:
        until = started + self.renew_deadline
        with self._gate:
            if self._stopping or until <= self._clock():
                return
            self._until = until
        if not self._leading:
            self._leading = True
            self._leading_event.set()
            log.info("%s: acquired lease %s", self.identity, self._describe())
            self._callback(self._on_started, "on_started")

    def _step_down(self, reason: str, level: int = logging.WARNING, verb: str = "lost") -> None:
        with self._gate:
            self._until = _NEVER
        if self._leading:
            self._leading = False
            self._leading_event.clear()
            log.log(level, "%s: %s lease %s (%s)", self.identity, verb, self._describe(), reason)
            self._callback(self._on_stopped, "on_stopped")

    def _callback(self, fn: Callable[[], None] | None, label: str) -> None:
        if fn is None:
            return
        try:
            fn()
        except Exception:
            log.exception("leader election %s callback raised", label)

    # -- one try: client-go's tryAcquireOrRenew -------------------------------------------

    def _attempt(self, started: float) -> bool:
        now = microtime()
        # Fast path: the leader renews on the version it wrote last.
        if self._leading and self._lease is not None:
            spec = dict(self._lease.get("spec") or {})
            spec.update(
                renewTime=now,
                holderIdentity=self.identity,
                leaseDurationSeconds=self._duration_seconds,
            )
            status, body = self._put(self._lease, spec)
            if status == 200:
                self._observe(body)
                return True
            if status != 409:
                self._warn(f"renewing: HTTP {status} {status_message(body)}")

        status, body = self._request("GET", self._path)
        if status == 404:
            return self._create(now)
        if status != 200 or not isinstance(body, dict):
            self._warn(f"reading: HTTP {status} {status_message(body)}")
            return False
        self._observe(body)
        old = body.get("spec") or {}
        holder = old.get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(old):
            if self._leading:  # someone else holds it: stop writing now, not at the deadline
                with self._gate:
                    self._until = _NEVER
            else:
                log.debug("lease %s is held by %s", self._describe(), holder)
            return False

        transitions = int(old.get("leaseTransitions") or 0)
        ours = holder == self.identity  # our own term, after a lapse: not a transition
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self._duration_seconds,
            "acquireTime": (old.get("acquireTime") or now) if ours else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours else transitions + 1,
        }
        status, body = self._put(body, spec)
        if status == 200:
            self._observe(body)
            return True
        if status == 409:
            log.debug("lease %s: another replica wrote first", self._describe())
        else:
            self._warn(f"updating: HTTP {status} {status_message(body)}")
        return False

    def _create(self, now: str) -> bool:
        lease = {
            "apiVersion": API_VERSIONS["Lease"],
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self._duration_seconds,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        status, body = self._request("POST", self._collection, lease)
        if status in (200, 201):
            self._observe(body)
            return True
        if status == 409:
            log.debug("lease %s: another replica created it first", self._describe())
        else:
            self._warn(f"creating: HTTP {status} {status_message(body)}")
        return False

    def _release(self) -> None:
        """Hand the Lease back if the last record seen names this replica."""
        lease = self._lease
        spec = (lease or {}).get("spec") or {}
        if lease is None or spec.get("holderIdentity") != self.identity:
            return
        now = microtime()
        released = {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": int(spec.get("leaseTransitions") or 0),
        }
        status, body = self._put(lease, released)
        if status == 200:
            self._observe(body)
            log.info("%s: released lease %s", self.identity, self._describe())
        else:
            log.warning(
                "could not release lease %s: HTTP %s %s",
                self._describe(),
                status,
                status_message(body),
            )

    # -- helpers -----------------------------------------------------------------------

    def _observe(self, lease: dict[str, Any]) -> None:
        """Remember the Lease; restart the local expiry timer when its spec changed."""
        spec = lease.get("spec") or {}
        self._lease = lease
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = self._clock()
        self._holder = spec.get("holderIdentity") or ""

    def _expired(self, spec: dict[str, Any]) -> bool:
        seconds = spec.get("leaseDurationSeconds")
        duration = seconds if isinstance(seconds, int) and seconds > 0 else self.lease_duration
        return self._clock() >= self._observed_at + duration

    def _put(self, lease: dict[str, Any], spec: dict[str, Any]) -> tuple[int, Any]:
        """Replace the Lease's spec, on the resourceVersion ``lease`` carries."""
        return self._request("PUT", self._path, {**lease, "spec": spec})

    def _request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.client.request(method, path, body=body, timeout=self.renew_deadline)

    def _warn(self, message: str) -> None:
        self._warned = True
        text = f"leader election on {self._describe()}: {message}"
        if text == self._last_warning:
            log.debug("%s", text)
        else:
            log.warning("%s", text)
            self._last_warning = text

    def _describe(self) -> str:
        return f"{self.namespace}/{self.name}"


__all__ = ["LeaderElector", "default_identity", "microtime"]
