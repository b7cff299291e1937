"""Leader election against a real API server (etcd + kube-apiserver, no mocks).

Durations are short (lease 1.5 s, renew deadline 1.0 s, retry 0.2 s) and assertions
are about order and state, never about how long something took.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.run.leader import LeaderElector, default_identity

FAST = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.2}
NAMESPACE = "default"
MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


# -- the control plane ----------------------------------------------------------------


@pytest.fixture
def kubeconfig(shared_plane) -> Path:
    """The admin kubeconfig of this worker's control plane (tests/run/conftest.py);
    each test uses a Lease name of its own."""
    return Path(shared_plane.kubeconfig)


# -- helpers --------------------------------------------------------------------------

_names = itertools.count()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dead_host() -> str:
    """An address where nothing listens (connections are refused at once)."""
    return f"https://127.0.0.1:{_free_port()}"


def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


class Events:
    """Callbacks of several electors in the order they happened."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def add(self, who: str, what: str, also: Callable[[], None] | None = None) -> None:
        if also is not None:
            also()
        with self._lock:
            self.seen.append((who, what))

    def has(self, who: str, what: str) -> bool:
        with self._lock:
            return (who, what) in self.seen

    def index(self, who: str, what: str) -> int:
        with self._lock:
            return self.seen.index((who, what))


def note_a(events: Events, a: LeaderElector) -> None:
    """Called as b starts leading: what a's gate says at that moment."""
    events.add("b", f"a={a.is_leader()}")


@pytest.fixture
def make(kubeconfig: Path) -> Iterator[Callable[..., tuple[LeaderElector, KubeClient]]]:
    """``make(lease, **kwargs)``: an elector on its own client, stopped at teardown."""
    made: list[tuple[LeaderElector, KubeClient]] = []

    def build(lease: str, **kwargs: object) -> tuple[LeaderElector, KubeClient]:
        client = KubeClient.from_config(str(kubeconfig))
        options = {**FAST, "identity": default_identity(), **kwargs}
        elector = LeaderElector(client, namespace=NAMESPACE, name=lease, **options)
        made.append((elector, client))
        return elector, client

    yield build
    for elector, client in made:
        elector.stop(release=False)
        client.close()


@pytest.fixture
def lease_name() -> str:
    return f"pumice-test-{os.getpid()}-{next(_names)}"


@pytest.fixture
def admin(kubeconfig: Path) -> Iterator[KubeClient]:
    client = KubeClient.from_config(str(kubeconfig))
    yield client
    client.close()


def _lease(admin: KubeClient, name: str) -> dict:
    status, body = admin.request("GET", RESOURCES["Lease"].path(NAMESPACE, name))
    assert status == 200, body
    return body


# -- tests ----------------------------------------------------------------------------


def test_one_of_two_leads_and_the_lease_says_so(make, lease_name, admin):
    events = Events()
    a, _ = make(lease_name, identity="a", on_started=lambda: events.add("a", "started"))
    b, _ = make(lease_name, identity="b", on_started=lambda: events.add("b", "started"))
    a.start()
    b.start()
    assert _until(lambda: a.is_leader() or b.is_leader())
    leader, standby = (a, b) if a.is_leader() else (b, a)
    assert _until(lambda: standby.holder() == leader.identity)
    for _ in range(50):  # a few retry periods: the roles hold
        assert leader.is_leader() and not standby.is_leader()
        time.sleep(0.01)
    assert events.seen == [(leader.identity, "started")]
    assert not standby.wait_leading(0.0)

    spec = _lease(admin, lease_name)["spec"]
    assert spec["holderIdentity"] == leader.identity
    assert spec["leaseDurationSeconds"] == 2  # 1.5 s rounded up to whole seconds
    assert spec["leaseTransitions"] == 0
    assert MICROTIME.match(spec["acquireTime"]) and MICROTIME.match(spec["renewTime"])
    first = spec["renewTime"]
    assert _until(lambda: _lease(admin, lease_name)["spec"]["renewTime"] != first)
    assert _lease(admin, lease_name)["spec"]["acquireTime"] == spec["acquireTime"]


def test_release_lets_a_standby_lead_without_waiting_out_the_lease(make, lease_name, admin):
    # A 30 s lease: had the leader not released it, the standby would wait 30 s.
    slow = {"lease_duration": 30.0, "renew_deadline": 1.0, "retry_period": 0.2}
    events = Events()
    a, _ = make(lease_name, identity="a", on_stopped=lambda: events.add("a", "stopped"), **slow)
    b, _ = make(
        lease_name,
        identity="b",
        on_started=lambda: events.add("b", "started", lambda: note_a(events, a)),
        **slow,
    )
    a.start()
    assert a.wait_leading(10)
    b.start()
    assert _until(lambda: b.holder() == "a")

    a.stop(release=True)
    assert not a.is_leader()
    assert events.has("a", "stopped")
    assert b.wait_leading(10)
    assert events.seen == [("a", "stopped"), ("b", "a=False"), ("b", "started")]
    spec = _lease(admin, lease_name)["spec"]
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1


def test_released_lease_has_no_holder(make, lease_name, admin):
    a, _ = make(lease_name, identity="a")
    a.start()
    assert a.wait_leading(10)
    a.stop(release=True)
    spec = _lease(admin, lease_name)["spec"]
    assert spec.get("holderIdentity", "") == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert a.holder() == ""


def test_stop_without_release_leaves_the_lease_to_expire(make, lease_name, admin):
    slow = {"lease_duration": 30.0, "renew_deadline": 1.0, "retry_period": 0.2}
    a, _ = make(lease_name, identity="a", **slow)
    b, _ = make(lease_name, identity="b", **slow)
    a.start()
    assert a.wait_leading(10)
    b.start()
    a.stop(release=False)
    assert not a.is_leader()
    assert not b.wait_leading(1.0)  # five retry periods, the lease still names a
    assert b.holder() == "a"
    assert _lease(admin, lease_name)["spec"]["holderIdentity"] == "a"


def test_gate_closes_exactly_at_the_renew_deadline(make, lease_name, admin):
    """With a clock that only the test moves, every renewal starts at the same instant,
    so the deadline is known exactly, whatever the machine's load."""
    now = [1000.0]
    events = Events()
    a, client = make(
        lease_name,
        identity="a",
        clock=lambda: now[0],
        on_started=lambda: events.add("a", "started"),
        on_stopped=lambda: events.add("a", "stopped"),
    )
    a.start()
    assert a.wait_leading(10)
    host, client.host = client.host, _dead_host()  # renewals now fail

    now[0] = 1000.0 + 1.0 - 1e-6
    assert a.is_leader()
    now[0] = 1000.0 + 1.0
    assert not a.is_leader()
    assert _until(lambda: events.has("a", "stopped"))
    assert a._thread is not None and a._thread.is_alive()  # back to acquiring, not gone

    client.host = host  # the API server is back: the lease still names a, a takes it again
    assert _until(lambda: events.seen.count(("a", "started")) == 2)
    assert a.is_leader()
    assert _lease(admin, lease_name)["spec"]["leaseTransitions"] == 0


def _watch_both(a: LeaderElector, b: LeaderElector, stop: threading.Event) -> list[str]:
    problems: list[str] = []

    def sample() -> None:
        while not stop.is_set():
            if a.is_leader() and b.is_leader():
                problems.append("both lead")
            time.sleep(0.002)

    threading.Thread(target=sample, daemon=True).start()
    return problems


def test_leader_that_cannot_reach_the_api_stops_before_the_standby_starts(make, lease_name):
    events = Events()
    a, client = make(
        lease_name,
        identity="a",
        on_started=lambda: events.add("a", "started"),
        on_stopped=lambda: events.add("a", "stopped"),
    )
    b, _ = make(
        lease_name,
        identity="b",
        on_started=lambda: events.add("b", "started", lambda: note_a(events, a)),
    )
    a.start()
    assert a.wait_leading(10)
    b.start()
    assert _until(lambda: b.holder() == "a")
    done = threading.Event()
    problems = _watch_both(a, b, done)

    host, client.host = client.host, _dead_host()
    assert b.wait_leading(15)
    done.set()
    assert problems == []
    assert events.has("b", "a=False")  # a's gate was shut when b took over
    assert _until(lambda: events.has("a", "stopped"))

    client.host = host  # a comes back as a standby and sees b
    assert _until(lambda: a.holder() == "b")
    assert not a.is_leader()
    assert a._thread is not None and a._thread.is_alive()
    assert events.seen.count(("a", "started")) == 1


def test_leader_that_finds_another_holder_stops_at_once(make, lease_name, admin):
    events = Events()
    a, _ = make(
        lease_name,
        identity="a",
        on_started=lambda: events.add("a", "started"),
        on_stopped=lambda: events.add("a", "stopped"),
    )
    b, _ = make(lease_name, identity="b", on_started=lambda: events.add("b", "started"))
    a.start()
    assert a.wait_leading(10)
    b.start()
    done = threading.Event()
    problems = _watch_both(a, b, done)

    lease = _lease(admin, lease_name)
    lease["spec"]["holderIdentity"] = "intruder"
    status, body = admin.request("PUT", RESOURCES["Lease"].path(NAMESPACE, lease_name), body=lease)
    assert status == 200, body

    assert _until(lambda: events.has("a", "stopped"))
    assert not a.is_leader()
    assert a.holder() == "intruder"
    # The intruder never renews: once its record has gone unchanged for its lease, one
    # of the two takes over (a is a candidate again too).
    assert _until(lambda: a.is_leader() or b.is_leader(), 15)
    done.set()
    assert problems == []
    assert events.seen[:2] == [("a", "started"), ("a", "stopped")]
    assert len(events.seen) == 3 and events.seen[2][1] == "started"
    spec = _lease(admin, lease_name)["spec"]
    assert spec["holderIdentity"] == events.seen[2][0]
    assert spec["leaseTransitions"] == 1


def test_unreachable_api_server_never_raises_and_never_leads(make, lease_name):
    a, client = make(lease_name, identity="a")
    client.host = _dead_host()
    a.start()
    assert not a.wait_leading(0.6)
    assert a._thread is not None and a._thread.is_alive()
    assert a.holder() == ""


@pytest.mark.parametrize(
    ("lease_duration", "renew_deadline", "retry_period", "words"),
    [
        (10.0, 10.0, 2.0, "lease_duration"),
        (5.0, 10.0, 2.0, "lease_duration"),
        (15.0, 2.0, 2.0, "renew_deadline"),
        (15.0, 1.0, 2.0, "renew_deadline"),
        (15.0, 10.0, 0.0, "retry_period"),
        (15.0, 10.0, -1.0, "retry_period"),
        (float("inf"), 10.0, 2.0, "lease_duration"),
    ],
)
def test_invalid_durations_are_refused(lease_duration, renew_deadline, retry_period, words):
    from kubernetes.client import Configuration

    with pytest.raises(ValueError, match=words):
        LeaderElector(
            KubeClient(Configuration()),
            namespace="kube-system",
            name="pumice",
            identity="a",
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
        )


def test_empty_identity_is_refused():
    from kubernetes.client import Configuration

    with pytest.raises(ValueError, match="identity"):
        LeaderElector(KubeClient(Configuration()), namespace="ns", name="pumice", identity="")


def test_default_identity_is_host_and_a_unique_suffix():
    one, two = default_identity(), default_identity()
    assert one.startswith(socket.gethostname() + "_")
    assert one != two
