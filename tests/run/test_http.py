"""The /metrics, /healthz and /readyz servers, on 127.0.0.1 with ports picked by the
system. The health clock is injected: no test sleeps or reads a wall-clock duration."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.cache.build import build_snapshot
from pumice.cache.load import load_objects
from pumice.run.http import Health, HealthServer, Servers, parse_address, serve
from pumice.run.metrics import SchedulerMetrics
from pumice.scheduler import Scheduler

GANG = Path(__file__).resolve().parents[1] / "scenarios/volcano/allocate/gang-two-jobs-one-fits"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def get(port: int, path: str, method: str = "GET") -> tuple[int, str, str]:
    """(status, content type, body) of one request."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def health(clock: Clock) -> Health:
    return Health(1.0, stuck_periods=5, startup_grace=30, clock=clock)


@pytest.fixture
def servers(health: Health) -> Iterator[Servers]:
    metrics = SchedulerMetrics(process_metrics=False)
    s = serve("127.0.0.1:0", "127.0.0.1:0", metrics=metrics, health=health)
    s.metrics = metrics  # type: ignore[attr-defined]
    yield s
    s.close()


def test_metrics_served_after_a_real_cycle(servers: Servers) -> None:
    metrics: SchedulerMetrics = servers.metrics  # type: ignore[attr-defined]
    sched = Scheduler.from_file(str(GANG / "config.yaml"))
    snapshot = build_snapshot(load_objects([str(GANG / "snapshot.yaml")]))
    record = metrics.observer()
    metrics.observe_cycle(sched.cycle(snapshot, record), record)
    status, ctype, body = get(servers.port("/metrics"), "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    assert 'volcano_action_scheduling_latency_milliseconds_count{action="allocate"} 1.0' in body
    assert 'volcano_queue_allocated_milli_cpu{queue_name="q1"} 2000.0' in body
    assert 'volcano_unschedule_task_count{job_id="c1/pg1"} 3.0' in body


def test_one_address_serves_all_three(servers: Servers) -> None:
    assert len(servers.servers) == 1
    port = servers.port("/metrics")
    assert servers.port("/healthz") == servers.port("/readyz") == port
    assert get(port, "/healthz")[0] == 200
    assert get(port, "/nothing")[0] == 404
    assert get(port, "/healthz", method="HEAD")[0] == 200


def test_two_addresses_split_the_paths(health: Health) -> None:
    metrics = SchedulerMetrics(process_metrics=False)
    s = serve("127.0.0.1:0", ":0", metrics=metrics, health=health)
    try:
        assert len(s.servers) == 2
        m, h = s.port("/metrics"), s.port("/healthz")
        assert m != h and s.port("/readyz") == h
        assert get(m, "/metrics")[0] == 200
        assert get(m, "/healthz")[0] == 404
        assert get(h, "/healthz")[0] == 200  # ":PORT" listens on every interface
        assert get(h, "/metrics")[0] == 404
    finally:
        s.close()


def test_only_one_of_the_two(health: Health) -> None:
    s = serve(None, "127.0.0.1:0", metrics=None, health=health)
    try:
        assert s.server_for("/metrics") is None
        with pytest.raises(KeyError):
            s.port("/metrics")
        assert get(s.port("/readyz"), "/readyz")[0] == 503
    finally:
        s.close()


def test_healthz_fails_when_heartbeats_stop(servers: Servers, clock: Clock) -> None:
    port = servers.port("/healthz")
    assert get(port, "/healthz")[:1] == (200,)  # not started yet, within the grace
    servers.heartbeat()
    clock.now += 5.0  # 5 periods of 1 s: the limit, not beyond
    assert get(port, "/healthz")[0] == 200
    clock.now += 0.5
    status, _, body = get(port, "/healthz")
    assert status == 500 and "no heartbeat for 5.5s" in body
    servers.heartbeat()
    assert get(port, "/healthz")[0] == 200


def test_healthz_fails_when_the_loop_never_starts(servers: Servers, clock: Clock) -> None:
    clock.now += 31.0  # past the startup grace without a heartbeat
    status, _, body = get(servers.port("/healthz"), "/healthz")
    assert status == 500 and "loop not started" in body


def test_readyz_503_until_synced(servers: Servers) -> None:
    port = servers.port("/readyz")
    status, _, body = get(port, "/readyz")
    assert status == 503 and "caches not synced" in body
    servers.set_ready(True)
    assert get(port, "/readyz")[0::2] == (200, "ok\n")
    servers.set_ready(False, "shutting down")
    assert get(port, "/readyz")[0::2] == (503, "shutting down\n")


def test_health_server_on_its_own(clock: Clock) -> None:
    """The shape runner.py uses: one server per address, with its own health."""
    server = HealthServer(("127.0.0.1", 0), metrics=SchedulerMetrics(process_metrics=False))
    try:
        server.start()
        assert get(server.port, "/readyz")[0] == 503
        server.set_ready(True)
        server.heartbeat()
        assert get(server.port, "/readyz")[0] == 200
        assert get(server.port, "/healthz")[0] == 200
        assert get(server.port, "/metrics")[0] == 200
    finally:
        server.close()


def test_close_releases_the_port(health: Health) -> None:
    server = HealthServer("127.0.0.1:0", health=health).start()
    port = server.port
    server.close()
    server.close()  # (twice is fine)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))


def test_a_port_in_use_fails_and_leaves_nothing_running(health: Health) -> None:
    first = HealthServer("127.0.0.1:0", health=health)
    try:
        with pytest.raises(OSError):
            serve(":0", f"127.0.0.1:{first.port}", metrics=None, health=health)
    finally:
        first.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":8080", ("", 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("localhost:9090", ("localhost", 9090)),
        ("[::1]:8080", ("::1", 8080)),
        (" 0.0.0.0:11251 ", ("0.0.0.0", 11251)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["8080", "host:", "host:http", ":70000", "::1:8080"])
def test_parse_address_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)
