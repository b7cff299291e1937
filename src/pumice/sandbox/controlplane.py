"""A real etcd and kube-apiserver on this machine, for tests, benchmarks and the sandbox.

:class:`ControlPlane` starts a fresh etcd (own data directory) and a kube-apiserver on
free loopback ports chosen at start, so several can run at once (one per test, per
pytest-xdist worker, per benchmark run). It authenticates with static tokens: ``admin``
(group ``system:masters``) and any extra identities given, and authorizes with
``AlwaysAllow`` (the default) or ``RBAC``. Nothing here is a kubelet or a controller
manager: nodes are objects a test creates, and bound pods stay ``Pending`` until something
writes their status.

Contract:

- ``start()`` (or ``with ControlPlane() as cp:``) returns once ``/readyz`` answers ``ok``;
  a failure raises :class:`ControlPlaneError` quoting the last lines of the failing
  server's log, and leaves nothing running.
- ``server``, ``ca_file``, ``admin_token`` and ``kubeconfig`` (an admin kubeconfig file)
  are set once started; ``kubeconfig_for(user)`` writes one for another identity.
- ``restart_apiserver()`` stops and starts the API server on the same port with the same
  etcd (objects survive; watches break), for fault tests; ``stop_apiserver()`` and
  ``start_apiserver()`` do it in two steps, for an outage of some length.
- ``stop()`` (also on ``with`` exit and at interpreter exit) kills both servers and
  removes the work directory, unless the caller passed one in.
- ``pids`` and ``logs`` name the servers' processes and log files (in the work directory).

Binaries come from :func:`pumice.sandbox.binaries.find_binary` (``PUMICE_K8S_BIN``,
``KUBEBUILDER_ASSETS``, ``PATH``).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import re
import secrets
import shutil
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from pumice.sandbox.binaries import find_binary
from pumice.sandbox.pki import Pki, make_pki
from pumice.sandbox.process import Child

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

ADMIN = "admin"
_T = TypeVar("_T")
_PORT_IN_USE = "address already in use"
_ATTEMPTS = 4  # fresh ports tried when another process took the one picked


class ControlPlaneError(RuntimeError):
    """The control plane could not be started (or restarted); the message quotes logs."""


@dataclass(frozen=True, slots=True)
class Identity:
    """A static-token user of the API server."""

    user: str
    groups: tuple[str, ...]
    token: str


class ControlPlane:
    """etcd plus kube-apiserver on loopback ports; see the module docstring.

    ``authorization_mode`` is passed to ``--authorization-mode`` (``"AlwaysAllow"``,
    ``"RBAC"``, or e.g. ``"Node,RBAC"``). ``identities`` maps extra user names to their
    groups; each gets a random token (``token_for(user)``). ``workdir``, if given, is used
    and kept at stop (each start begins afresh: new keys, tokens and etcd data, logs
    truncated); otherwise a temporary directory is made and removed. ``port`` fixes the
    API server's port; by default a free one is picked (and another, should a different
    process take it first).
    ``apiserver_args`` and ``etcd_args`` are appended to the servers' command lines.
    """

    def __init__(
        self,
        *,
        authorization_mode: str = "AlwaysAllow",
        identities: Mapping[str, Sequence[str]] | None = None,
        workdir: str | Path | None = None,
        port: int | None = None,
        apiserver_args: Sequence[str] = (),
        etcd_args: Sequence[str] = (),
        start_timeout: float = 60.0,
    ) -> None:
        self.authorization_mode = authorization_mode
        self.start_timeout = start_timeout
        self._fixed_port = port
        self.apiserver_args = list(apiserver_args)
        self.etcd_args = list(etcd_args)
        self._own_workdir = workdir is None
        self._workdir_arg = Path(workdir) if workdir is not None else None
        self.identities: dict[str, Identity] = {
            ADMIN: Identity(ADMIN, ("system:masters",), secrets.token_hex(16))
        }
        for user, groups in (identities or {}).items():
            if user in self.identities:
                raise ValueError(f"identity {user!r} is given twice")
            self.identities[user] = Identity(user, tuple(groups), secrets.token_hex(16))
        self.workdir: Path | None = None
        self.port: int | None = None
        self.etcd_port: int | None = None
        self._pki: Pki | None = None
        self._etcd: Child | None = None
        self._apiserver: Child | None = None
        self._kubeconfigs: dict[str, str] = {}

    # -- attributes -----------------------------------------------------------------

    @property
    def server(self) -> str:
        """The API server's URL, ``https://127.0.0.1:PORT``."""
        return f"https://127.0.0.1:{self._started(self.port)}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self._started(self.etcd_port)}"

    @property
    def ca_file(self) -> Path:
        """The serving certificate, which is also the CA clients should trust."""
        return self._started(self._pki).serving_cert

    @property
    def admin_token(self) -> str:
        return self.identities[ADMIN].token

    @property
    def kubeconfig(self) -> str:
        """Path of the admin's kubeconfig file (``system:masters``)."""
        return self.kubeconfig_for(ADMIN)

    @property
    def running(self) -> bool:
        return bool(self._apiserver and self._apiserver.alive)

    @property
    def pids(self) -> dict[str, int]:
        """Process id of each running server, by name (``etcd``, ``kube-apiserver``)."""
        children = (self._etcd, self._apiserver)
        return {c.name: c.pid for c in children if c is not None and c.pid and c.alive}

    @property
    def logs(self) -> dict[str, Path]:
        """Log file of each server, by name (``etcd``, ``kube-apiserver``)."""
        return {c.name: c.log for c in (self._etcd, self._apiserver) if c is not None}

    def token_for(self, user: str) -> str:
        return self._identity(user).token

    def kubeconfig_for(self, user: str) -> str:
        """Write (once) and return the path of a kubeconfig authenticating as ``user``.

        A ``str``, as the ``kubernetes`` client's kubeconfig loader wants (it splits a
        path list the way ``$KUBECONFIG`` is split, which a ``Path`` cannot do).
        """
        identity = self._identity(user)
        if user not in self._kubeconfigs:
            workdir = self._started(self.workdir)
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", user)
            path = workdir / f"{safe}.kubeconfig"
            path.write_text(yaml.safe_dump(self._kubeconfig_data(identity), sort_keys=False))
            path.chmod(0o600)
            self._kubeconfigs[user] = str(path)
        return self._kubeconfigs[user]

    def client(self, user: str = ADMIN) -> ApiClient:
        """A ``kubernetes`` client ``ApiClient`` authenticated as ``user``."""
        from kubernetes import config

        return config.new_client_from_config(config_file=self.kubeconfig_for(user))

    # -- life cycle -----------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start etcd, then the API server; return once it is ready.

        Raises :class:`~pumice.sandbox.binaries.BinaryNotFoundError` before starting
        anything if a binary is missing, :class:`ControlPlaneError` if a server fails.
        """
        if self.workdir is not None:
            raise ControlPlaneError("this control plane was already started")
        apiserver_bin, etcd_bin = find_binary("kube-apiserver"), find_binary("etcd")
        if self._workdir_arg is not None:
            self._workdir_arg.mkdir(parents=True, exist_ok=True)
            self.workdir = self._workdir_arg
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="pumice-cp-"))
        _live.add(self)
        for log in ("etcd.log", "kube-apiserver.log"):
            (self.workdir / log).unlink(missing_ok=True)
        try:
            self._pki = make_pki(self.workdir / "pki")
            (self.workdir / "pki" / "generated").mkdir(exist_ok=True)
            self._write_tokens()
            self._start_etcd(etcd_bin)
            self._start_apiserver(apiserver_bin)
            self.kubeconfig_for(ADMIN)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill both servers and remove the work directory we made; idempotent.

        SIGKILL, not a graceful shutdown: the state is thrown away, and a graceful stop
        of the API server costs a second per test.
        """
        for child in (self._apiserver, self._etcd):
            if child is not None:
                child.stop(kill=True)
        self._apiserver = self._etcd = None
        if self.workdir is not None and self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        _live.discard(self)

    def stop_apiserver(self, *, graceful: bool = True) -> None:
        """Stop only the API server (etcd and its data stay), e.g. to test an outage.

        ``graceful`` sends SIGTERM (open watches are closed, as in a rolling upgrade);
        otherwise SIGKILL (connections just drop, as in a crash).
        """
        self._started(self._apiserver).stop(kill=not graceful)

    def start_apiserver(self) -> None:
        """Start the API server again, on the same port, after :meth:`stop_apiserver`."""
        child = self._started(self._apiserver)
        deadline = time.monotonic() + self.start_timeout
        while True:
            child.start()
            try:
                self._wait_ready(child, deadline)
                return
            except ControlPlaneError as err:
                # The old listener's port can linger for a moment; anyone else holding
                # it is an error.
                if _PORT_IN_USE not in str(err) or time.monotonic() > deadline:
                    raise
                child.stop()
                time.sleep(0.2)

    def restart_apiserver(self, *, graceful: bool = True) -> None:
        """Stop and start the API server on the same port and etcd."""
        self.stop_apiserver(graceful=graceful)
        self.start_apiserver()

    # -- internals ------------------------------------------------------------------

    def _start_etcd(self, etcd_bin: Path) -> None:
        workdir = self._started(self.workdir)
        for attempt in range(_ATTEMPTS):
            client, peer = _free_ports(2)
            data = workdir / "etcd-data"
            shutil.rmtree(data, ignore_errors=True)
            argv = [
                str(etcd_bin), "--name", "pumice", "--data-dir", str(data),
                "--listen-client-urls", f"http://127.0.0.1:{client}",
                "--advertise-client-urls", f"http://127.0.0.1:{client}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"pumice=http://127.0.0.1:{peer}",
                "--quota-backend-bytes", str(4 << 30),
                "--logger", "zap", "--log-level", "warn",
                *self.etcd_args,
            ]  # fmt: skip
            child = Child("etcd", argv, workdir / "etcd.log")
            self._etcd = child
            child.start()
            try:
                self._wait(child, f"http://127.0.0.1:{client}/health", None, _etcd_healthy)
            except ControlPlaneError as err:
                child.stop()
                if _PORT_IN_USE in str(err) and attempt + 1 < _ATTEMPTS:
                    continue
                raise
            self.etcd_port = client
            return

    def _start_apiserver(self, apiserver_bin: Path) -> None:
        workdir, pki = self._started(self.workdir), self._started(self._pki)
        attempts = 1 if self._fixed_port else _ATTEMPTS
        for attempt in range(attempts):
            port = self._fixed_port or _free_ports(1)[0]
            argv = [
                str(apiserver_bin),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--token-auth-file={workdir / 'pki' / 'tokens.csv'}",
                f"--authorization-mode={self.authorization_mode}",
                f"--cert-dir={workdir / 'pki' / 'generated'}",
                "--disable-admission-plugins=ServiceAccount",
                "--endpoint-reconciler-type=none",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--profiling=false",
                *self.apiserver_args,
            ]
            child = Child("kube-apiserver", argv, workdir / "kube-apiserver.log")
            self._apiserver = child
            child.start()
            self.port = port
            try:
                self._wait_ready(child, time.monotonic() + self.start_timeout)
            except ControlPlaneError as err:
                child.stop()
                if _PORT_IN_USE in str(err) and attempt + 1 < attempts:
                    continue
                raise
            return

    def _wait_ready(self, child: Child, deadline: float) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        self._wait(
            child,
            f"{self.server}/readyz",
            context,
            lambda body: body.strip() == b"ok",
            deadline=deadline,
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )

    def _wait(
        self,
        child: Child,
        url: str,
        context: ssl.SSLContext | None,
        ok: Callable[[bytes], bool],
        *,
        deadline: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Poll ``url`` until ``ok(body)``; raise with the log tail if the child dies."""
        deadline = deadline if deadline is not None else time.monotonic() + self.start_timeout
        request = urllib.request.Request(url, headers=dict(headers or {}))
        pause = 0.05
        while True:
            if not child.alive:
                raise ControlPlaneError(
                    f"{child.name} exited with code {child.returncode} while starting; "
                    f"last lines of {child.log}:\n{child.tail()}"
                )
            with (
                contextlib.suppress(OSError, urllib.error.URLError, ValueError),
                urllib.request.urlopen(request, timeout=2, context=context) as resp,
            ):
                if ok(resp.read()):
                    return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{child.name} not ready at {url} after {self.start_timeout:.0f} s; "
                    f"last lines of {child.log}:\n{child.tail()}"
                )
            time.sleep(pause)
            pause = min(pause * 1.5, 0.25)

    def _write_tokens(self) -> None:
        lines = []
        for ident in self.identities.values():
            for field in (ident.user, *ident.groups):
                if any(c in field for c in ',"\n'):
                    raise ValueError(f'identity field {field!r} may not hold , or " or newline')
            groups = ",".join(ident.groups)
            lines.append(f'{ident.token},{ident.user},{ident.user},"{groups}"\n')
        path = self._started(self.workdir) / "pki" / "tokens.csv"
        path.write_text("".join(lines))
        path.chmod(0o600)

    def _kubeconfig_data(self, identity: Identity) -> dict[str, Any]:
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "pumice-sandbox",
                    "cluster": {"server": self.server, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": identity.user, "user": {"token": identity.token}}],
            "contexts": [
                {
                    "name": "pumice-sandbox",
                    "context": {"cluster": "pumice-sandbox", "user": identity.user},
                }
            ],
            "current-context": "pumice-sandbox",
        }

    def _identity(self, user: str) -> Identity:
        try:
            return self.identities[user]
        except KeyError:
            known = ", ".join(sorted(self.identities))
            raise KeyError(f"no identity {user!r} (known: {known})") from None

    def _started(self, value: _T | None) -> _T:
        if value is None:
            raise ControlPlaneError("the control plane is not started")
        return value

    def __repr__(self) -> str:
        where = self.server if self.port else "not started"
        return f"ControlPlane({where}, authorization={self.authorization_mode})"


def service_account(namespace: str, name: str) -> tuple[str, tuple[str, ...]]:
    """The user name and groups the API server gives a ServiceAccount's tokens.

    Pass them as an identity (``identities=dict([service_account(ns, name)])``) to act as
    that ServiceAccount with a static token: RBAC bindings to the ServiceAccount apply.
    """
    user = f"system:serviceaccount:{namespace}:{name}"
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
    return user, (*groups, "system:authenticated")


def _etcd_healthy(body: bytes) -> bool:
    try:
        return json.loads(body).get("health") == "true"
    except ValueError:
        return False


def _free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free right now (held open until all are picked,
    so they differ; the caller retries if another process takes one before it binds)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


_live: set[ControlPlane] = set()  # started and not yet stopped, for the atexit hook


@atexit.register
def _stop_all() -> None:
    for plane in list(_live):
        plane.stop()
