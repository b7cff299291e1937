"""The HTTP endpoints of ``pumice run``: ``/metrics``, ``/healthz`` and ``/readyz``,
and the pending jobs under ``/apis/visibility/v1/`` (beside ``/metrics``; see
:mod:`pumice.visibility.endpoint`).

``/metrics`` serves :class:`~pumice.run.metrics.SchedulerMetrics`' registry in
Prometheus' text format. ``/healthz`` is the liveness probe: 200 ``ok`` while the
scheduling loop keeps calling :meth:`Health.heartbeat`, 500 once it has not for longer
than a number of schedule periods (a loop stuck in a call that never returns; restart
the process). ``/readyz`` is the readiness probe: 503 with the reason until the caches
have synced (:meth:`Health.set_ready`), then 200.

Each address gets one :class:`HealthServer`: a stdlib ``ThreadingHTTPServer`` in a
daemon thread, so a slow scrape never holds up a cycle and a stuck server never keeps
the process alive. :func:`serve` puts ``--metrics-address`` and ``--healthz-address``
on one server when they are the same address, on two otherwise.

Addresses are ``HOST:PORT``, ``:PORT`` (every interface) or ``[IPv6]:PORT``; port 0
picks a free port, which :attr:`HealthServer.port` tells (tests use ``127.0.0.1:0``).
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from pumice.run.exposition import render
from pumice.run.metrics import SchedulerMetrics

log = logging.getLogger("pumice.run.http")

METRICS = "/metrics"
HEALTHZ = "/healthz"
READYZ = "/readyz"
ALL_PATHS = (METRICS, HEALTHZ, READYZ)
#: The pending jobs (:mod:`pumice.visibility.endpoint`), served beside ``/metrics``.
VISIBILITY = "/apis/visibility/v1/"

_TEXT = "text/plain; charset=utf-8"

#: (status, content type, body)
Response = tuple[int, str, bytes]
#: Answers every path under a prefix: (path, query string) -> response.
PrefixRoute = Callable[[str, str], Response]


def parse_address(text: str) -> tuple[str, int]:
    """``"HOST:PORT"`` -> ``(host, port)``; ``":PORT"`` gives host ``""`` (every
    interface), ``"[::1]:PORT"`` host ``"::1"``. ValueError for anything else."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not an address (HOST:PORT, :PORT or [IPv6]:PORT)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 host in brackets, [{host}]:{port}")
    return host, int(port)


class Health:
    """Liveness and readiness, as the loop reports them; read by the probe handlers.

    Live while the last :meth:`heartbeat` is at most ``stuck_periods * period`` seconds
    old. Before the first heartbeat the allowance is ``startup_grace`` seconds from
    creation (the initial lists of a large cluster take a while, and the loop beats
    only once it runs). Ready once :meth:`set_ready` says so, until it says otherwise.
    ``clock`` is monotonic seconds; tests inject one. Safe from any thread."""

    def __init__(
        self,
        period: float = 1.0,
        *,
        stuck_periods: float = 10.0,
        startup_grace: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if period <= 0 or stuck_periods <= 0:
            raise ValueError("period and stuck_periods must be positive")
        self.limit = stuck_periods * period
        self.startup_grace = startup_grace
        self._clock = clock
        self._started = clock()
        self._beat: float | None = None
        self._ready = False
        self._reason = "caches not synced yet"
        self._lock = threading.Lock()

    def heartbeat(self) -> None:
        """The loop is alive: call it once per loop turn (and while waiting for the
        caches to sync)."""
        now = self._clock()
        with self._lock:
            self._beat = now

    def set_ready(self, ready: bool, reason: str = "") -> None:
        """Ready (the caches synced), or not any more, with ``reason`` for the body of
        ``/readyz`` (e.g. "shutting down")."""
        with self._lock:
            self._ready = ready
            self._reason = reason or ("" if ready else "not ready")

    def liveness(self) -> tuple[bool, str]:
        """(alive, what ``/healthz`` says)."""
        now = self._clock()
        with self._lock:
            beat = self._beat
        if beat is None:
            waited = now - self._started
            if waited > self.startup_grace:
                return False, f"loop not started: no heartbeat in {waited:.1f}s since start"
            return True, "ok"
        silent = now - beat
        if silent > self.limit:
            return False, f"loop stuck: no heartbeat for {silent:.1f}s (limit {self.limit:g}s)"
        return True, "ok"

    def readiness(self) -> tuple[bool, str]:
        """(ready, what ``/readyz`` says)."""
        with self._lock:
            return self._ready, "ok" if self._ready else self._reason


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        host: str,
        port: int,
        routes: dict[str, Callable[[], Response]],
        prefixed: dict[str, PrefixRoute] | None = None,
    ) -> None:
        self.routes = routes
        self.prefixed = prefixed or {}
        self._dual = False
        if host == "":
            if socket.has_dualstack_ipv6():
                host, self._dual = "::", True
            else:
                host = "0.0.0.0"
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), _Handler)

    def server_bind(self) -> None:
        # (HTTPServer's own looks the host name up, which can take seconds; not needed.)
        if self._dual:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "pumice"

    def do_GET(self) -> None:
        self._respond(with_body=True)

    def do_HEAD(self) -> None:
        self._respond(with_body=False)

    def _respond(self, with_body: bool) -> None:
        url = urlsplit(self.path)
        route = self.server.routes.get(url.path)
        if route is None:
            under = next((p for p in self.server.prefixed if url.path.startswith(p)), None)
            if under is not None:
                route = partial(self.server.prefixed[under], url.path, url.query)
        if route is None:
            status, ctype, body = 404, _TEXT, b"not found\n"
        else:
            try:
                status, ctype, body = route()
            except Exception:  # a handler must answer; the failure goes to the log
                log.exception("serving %s failed", self.path)
                status, ctype, body = 500, _TEXT, b"internal error\n"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class HealthServer:
    """One HTTP server on one address, serving some of ``/metrics``, ``/healthz`` and
    ``/readyz`` (``paths``; ``/metrics`` only when there are ``metrics``).

    The socket is bound here (a busy port fails at once, :attr:`port` is known);
    :meth:`start` begins answering. ``health`` is shared when several servers serve the
    probes; without one the server makes its own from ``period``. :meth:`heartbeat`
    and :meth:`set_ready` forward to it, so a server can be handed to the runner as its
    health."""

    def __init__(
        self,
        address: str | tuple[str, int],
        *,
        metrics: SchedulerMetrics | CollectorRegistry | None = None,
        health: Health | None = None,
        period: float = 1.0,
        paths: Iterable[str] = ALL_PATHS,
        visibility: PrefixRoute | None = None,
    ) -> None:
        host, port = parse_address(address) if isinstance(address, str) else address
        self.health = health if health is not None else Health(period)
        registry = metrics.registry if isinstance(metrics, SchedulerMetrics) else metrics
        wanted = set(paths)
        routes: dict[str, Callable[[], Response]] = {}
        if METRICS in wanted and registry is not None:
            routes[METRICS] = lambda: (200, CONTENT_TYPE_LATEST, render(registry))
        if HEALTHZ in wanted:
            routes[HEALTHZ] = lambda: _probe(*self.health.liveness(), failing=500)
        if READYZ in wanted:
            routes[READYZ] = lambda: _probe(*self.health.readiness(), failing=503)
        prefixed = {}
        if VISIBILITY in wanted and visibility is not None:
            prefixed[VISIBILITY] = visibility
        self.paths = tuple(sorted([*routes, *prefixed]))
        self._httpd = _Server(host, port, routes, prefixed)
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        """The port bound (the one picked, for port 0)."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if host == "0.0.0.0" else "::1"
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start(self) -> HealthServer:
        """Answer requests from a daemon thread (once; later calls do nothing)."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.2},
                name=f"pumice-http-{self.port}",
                daemon=True,
            )
            self._thread.start()
            log.info("serving %s on %s", ", ".join(self.paths), self.url)
        return self

    def heartbeat(self) -> None:
        self.health.heartbeat()

    def set_ready(self, ready: bool, reason: str = "") -> None:
        self.health.set_ready(ready, reason)

    def close(self) -> None:
        """Stop answering and release the port (waits for the serving thread; requests
        in progress on their own threads are not waited for)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()


def _probe(ok: bool, text: str, *, failing: int) -> Response:
    return (200 if ok else failing), _TEXT, (text + "\n").encode()


class Servers:
    """The servers :func:`serve` started, and the health they share (the runner may
    use this as its health: :meth:`heartbeat`, :meth:`set_ready`)."""

    def __init__(self, health: Health, servers: list[HealthServer]) -> None:
        self.health = health
        self.servers = servers

    def server_for(self, path: str) -> HealthServer | None:
        """The server answering ``path`` (None: not served)."""
        return next((s for s in self.servers if path in s.paths), None)

    def port(self, path: str) -> int:
        """The port ``path`` is served on (KeyError when it is not served)."""
        server = self.server_for(path)
        if server is None:
            raise KeyError(path)
        return server.port

    def heartbeat(self) -> None:
        self.health.heartbeat()

    def set_ready(self, ready: bool, reason: str = "") -> None:
        self.health.set_ready(ready, reason)

    def close(self) -> None:
        for s in self.servers:
            s.close()


def serve(
    metrics_address: str | tuple[str, int] | None,
    healthz_address: str | tuple[str, int] | None,
    *,
    metrics: SchedulerMetrics | CollectorRegistry | None,
    health: Health,
    visibility: PrefixRoute | None = None,
) -> Servers:
    """Start ``/metrics`` on ``metrics_address`` and ``/healthz``, ``/readyz`` on
    ``healthz_address``: one server when both are the same address, two otherwise;
    None leaves that part out. Raises OSError when a port is taken (nothing is left
    running then)."""

    def key(a: str | tuple[str, int]) -> tuple[str, int]:
        return parse_address(a) if isinstance(a, str) else a

    wanted: dict[tuple[str, int], list[str]] = {}
    if metrics_address is not None:
        wanted.setdefault(key(metrics_address), []).extend((METRICS, VISIBILITY))
    if healthz_address is not None:
        wanted.setdefault(key(healthz_address), []).extend((HEALTHZ, READYZ))
    servers: list[HealthServer] = []
    try:
        for at, paths in wanted.items():
            servers.append(
                HealthServer(at, metrics=metrics, health=health, paths=paths, visibility=visibility)
            )
    except OSError:
        for s in servers:
            s.close()
        raise
    for s in servers:
        s.start()
    return Servers(health, servers)


__all__ = ["ALL_PATHS", "VISIBILITY", "Health", "HealthServer", "Servers", "parse_address", "serve"]
