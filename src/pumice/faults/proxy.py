"""A fault-injecting HTTPS proxy in front of a real kube-apiserver.

``pumice run`` is pointed at the proxy through a kubeconfig of its own (:meth:`FaultProxy.
kubeconfig`); the proxy terminates TLS with its own certificate, opens a TLS connection
of its own to the API server (trusting the server's CA, sending the client's bearer token
on) and forwards every request, streaming watch responses chunk by chunk. On the way it
can:

- answer a bind (``POST .../pods/NAME/binding``) itself with a status (``409``, ``500``)
  without forwarding it (:class:`BindFault` ``before=True``), or forward it and replace
  the server's answer (``before=False``: the bind landed, the scheduler is told it did
  not), or forward it and hold the answer ``hold`` seconds before closing the connection
  without one (status ``0``: a timeout, the bind landed or not, the client cannot tell);
- drop every open watch stream (:meth:`FaultProxy.drop_watches`);
- blackhole everything (:meth:`FaultProxy.partition`): requests are held unanswered and
  never forwarded, open streams are cut, until :meth:`FaultProxy.heal` (then the held
  connections are closed), which is what a network partition of one client looks like;
- call ``on_bind`` with the count of binds seen, before forwarding one (a scenario
  kills the scheduler behind the proxy there: between a gang's binds).

Every bind forwarded is recorded in :attr:`FaultProxy.binds` (pod, node, the server's
status), so a check can tell whether a pod was ever bound twice. Faults injected are
counted in :attr:`FaultProxy.injected` by kind.

Contract: ``start()`` returns once listening; ``stop()`` closes the listener and every
connection. Methods are safe to call from any thread.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import yaml

BIND_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}


@dataclass(frozen=True, slots=True)
class BindFault:
    """Every ``every``-th bind (counted from 1) gets ``status`` (0: no answer after
    ``hold`` seconds); ``before``: answered by the proxy, never forwarded."""

    every: int
    status: int
    before: bool = True
    hold: float = 0.0

    @property
    def kind(self) -> str:
        if self.status == 0:
            return "bind timeout" + (" (not forwarded)" if self.before else " (landed)")
        return f"bind {self.status}" + (" (not forwarded)" if self.before else " (landed)")


@dataclass(slots=True)
class BindRecord:
    """One bind forwarded to the API server and its answer (0: none came, e.g. the
    server died with it: it may have landed)."""

    pod: str
    node: str
    status: int
    at: float = field(default_factory=time.monotonic)


class FaultProxy:
    """See the module docstring. ``upstream``: the API server's ``https://host:port``;
    ``ca_file``: what to trust there; ``cert``/``key``: the proxy's own serving pair."""

    def __init__(self, upstream: str, ca_file: str | Path, cert: Path, key: Path) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 443
        self.cert = cert
        self.upstream_tls = ssl.create_default_context(cafile=str(ca_file))
        self.bind_faults: list[BindFault] = []
        self.on_bind: Callable[[int], None] | None = None
        self.binds: list[BindRecord] = []
        self.injected: Counter[str] = Counter()
        self.bind_count = 0
        #: Binds received and not answered yet (held ones included).
        self.in_flight = 0
        #: Guards the counters and records (held briefly).
        self.lock = threading.Lock()
        self._streams: dict[socket.socket, socket.socket | None] = {}
        self._held: set[socket.socket] = set()
        self._healed = threading.Event()
        self._healed.set()
        serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        serving.load_cert_chain(str(cert), str(key))
        proxy = self

        class Handler(_Forwarder):
            owner = proxy

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = serving.wrap_socket(self._server.socket, server_side=True)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.heal()
        self.drop_watches(count=False)

    def kubeconfig(self, path: Path, token: str) -> str:
        """Write a kubeconfig that reaches the API server through this proxy."""
        data = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "proxy",
                    "cluster": {"server": self.url, "certificate-authority": str(self.cert)},
                }
            ],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "admin"}}],
            "current-context": "proxy",
        }
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        path.chmod(0o600)
        return str(path)

    # -- faults ---------------------------------------------------------------------

    def drop_watches(self, *, count: bool = True) -> int:
        """Cut every open watch stream; how many were cut."""
        with self.lock:
            streams = list(self._streams.items())
            self._streams.clear()
        for down, up in streams:
            _cut(down)
            if up is not None:
                _cut(up)
        if count and streams:
            self.count("watch drop")
        return len(streams)

    def partition(self) -> None:
        """Blackhole this client: hold every request unanswered until :meth:`heal`."""
        self._healed.clear()
        self.count("partition")
        self.drop_watches(count=False)

    def heal(self) -> None:
        """End a partition: the held connections are closed, never forwarded."""
        self._healed.set()
        with self.lock:
            held = list(self._held)
            self._held.clear()
        for sock in held:
            _cut(sock)

    @property
    def partitioned(self) -> bool:
        return not self._healed.is_set()

    def bind_fault(self) -> tuple[int, BindFault | None]:
        """Count a bind; the fault planned for it, if any."""
        with self.lock:
            self.bind_count += 1
            n = self.bind_count
        for fault in self.bind_faults:
            if n % fault.every == 0:
                return n, fault
        return n, None

    def hold(self, sock: socket.socket) -> None:
        with self.lock:
            self._held.add(sock)
        self._healed.wait()

    def track(self, down: socket.socket, up: socket.socket | None) -> None:
        """A watch stream opened (``up``: its upstream socket) or, with None, ended."""
        with self.lock:
            if up is None:
                self._streams.pop(down, None)
            else:
                self._streams[down] = up

    def count(self, kind: str) -> None:
        with self.lock:
            self.injected[kind] += 1

    def record(self, pod: str, node: str, status: int) -> None:
        with self.lock:
            self.binds.append(BindRecord(pod, node, status))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """Connections broken by the faults themselves are not news."""


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Forwarder(BaseHTTPRequestHandler):
    """One client connection: forward its requests on one upstream connection."""

    protocol_version = "HTTP/1.1"
    owner: FaultProxy
    upstream: http.client.HTTPSConnection | None = None

    def log_message(self, format: str, *args: object) -> None:
        pass

    def finish(self) -> None:
        super().finish()
        if self.upstream is not None:
            self.upstream.close()

    def do_GET(self) -> None:
        self.forward()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def forward(self) -> None:
        bind = BIND_PATH.match(self.path.split("?", 1)[0]) if self.command == "POST" else None
        if bind is None:
            self.pass_on(None)
            return
        with self.owner.lock:
            self.owner.in_flight += 1
        try:
            self.pass_on(bind)
        finally:
            with self.owner.lock:
                self.owner.in_flight -= 1

    def pass_on(self, bind: re.Match[str] | None) -> None:
        proxy = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if proxy.partitioned:
            proxy.hold(self.connection)
            self.close_connection = True
            return
        fault = None
        pod = node = ""
        if bind is not None:
            pod = f"{bind.group(1)}/{bind.group(2)}"
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                node = json.loads(body or b"{}")["target"]["name"]
            n, fault = proxy.bind_fault()
            if proxy.on_bind is not None:
                proxy.on_bind(n)
            if fault is not None:
                proxy.count(fault.kind)
            if fault is not None and fault.before:
                if fault.status == 0:
                    time.sleep(fault.hold)
                    self.close_connection = True
                else:
                    self.answer(fault.status, pod)
                return
        try:
            resp = self.send_upstream(body)
        except (OSError, http.client.HTTPException):
            self.upstream = None
            self.close_connection = True  # the client sees the connection break
            if bind is not None:  # sent, maybe landed: nobody knows
                proxy.record(pod, node, 0)
            return
        if bind is not None:
            data = resp.read()
            proxy.record(pod, node, resp.status)
            if fault is not None:  # landed (or not: the server's answer is in binds)
                if fault.status == 0:
                    time.sleep(fault.hold)
                    self.close_connection = True
                else:
                    self.answer(fault.status, pod)
                return
            self.relay(resp, data)
            return
        if "watch=" in self.path and resp.status == 200:
            self.stream(resp)
        else:
            self.relay(resp, resp.read())

    def send_upstream(self, body: bytes | None) -> http.client.HTTPResponse:
        proxy = self.owner
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        for attempt in (0, 1):  # a kept-alive upstream connection may have gone stale
            if self.upstream is None:
                self.upstream = http.client.HTTPSConnection(
                    proxy.upstream_host,
                    proxy.upstream_port,
                    context=proxy.upstream_tls,
                    timeout=120,
                )
            try:
                self.upstream.request(self.command, self.path, body=body, headers=headers)
                return self.upstream.getresponse()
            except (OSError, http.client.HTTPException):
                self.upstream.close()
                self.upstream = None
                if attempt or body is not None:  # never send a write twice
                    raise
        raise OSError("unreachable")

    def relay(self, resp: http.client.HTTPResponse, data: bytes) -> None:
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def answer(self, status: int, pod: str) -> None:
        reason = {409: "Conflict", 500: "InternalError"}.get(status, "Unknown")
        data = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": status,
                "reason": reason,
                "message": f"injected by the fault proxy: {pod}",
            }
        ).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, resp: http.client.HTTPResponse) -> None:
        """A watch: chunks as they come, until either side closes or the proxy cuts."""
        proxy = self.owner
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP:
                self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        upstream = self.upstream
        self.upstream = None  # (a watch's connection is not reused)
        if upstream is not None and upstream.sock is not None:
            proxy.track(self.connection, upstream.sock)
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
        except (OSError, http.client.HTTPException, ValueError):
            self.close_connection = True
        finally:
            proxy.track(self.connection, None)
            if upstream is not None:
                upstream.close()
        self.close_connection = True


__all__ = ["BIND_PATH", "BindFault", "BindRecord", "FaultProxy"]
