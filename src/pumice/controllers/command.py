"""``pumice controllers``: Volcano's controllers against a real API server.

:class:`ControllerLoop` runs a :class:`~pumice.controllers.manager.Manager` over a
:class:`~pumice.controllers.kube_store.KubeStore`: once the informers have listed
everything, it steps the manager, then sleeps until an event arrives or the next
requeue falls due, and again, until stopped. ``pumice controllers`` runs it as the
process's work (with its own leader election, Lease ``pumice-controllers``, and
``/healthz``, ``/readyz``); ``pumice run --controllers`` runs it on a thread beside the
scheduler, under the scheduler's lease.

Leadership: only a leader steps. A Manager (and its watch) exists only while leading,
so a standby keeps its informers warm without queueing events, and a new leader begins
with a full resync of every key; writes are gated on the lease, so a leader that lost
it mid-step writes nothing more.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from pumice.controllers.registry import ALL, CONTROLLERS, Settings, build, kinds_of, parse_names
from pumice.errors import InputError

log = logging.getLogger("pumice.controllers")

#: The longest the loop sleeps with nothing to do (it re-checks leadership and beats).
IDLE_SECONDS = 1.0
LEASE_NAME = "pumice-controllers"


class ControllerLoop:
    """Controllers over a KubeStore until :attr:`stop` is set (see the module docstring).

    ``may_run`` says whether this process leads (default: always); ``health`` gets a
    heartbeat per turn and readiness once synced. :attr:`manager` is the current
    Manager (None while not leading), for tests and metrics.
    """

    def __init__(
        self,
        store: Any,
        names: Sequence[str] = ALL,
        settings: Settings | None = None,
        *,
        may_run: Callable[[], bool] = lambda: True,
        health: Any = None,
        stop: threading.Event | None = None,
        idle: float = IDLE_SECONDS,
    ) -> None:
        self.store = store
        self.names = tuple(names)
        self.settings = settings or Settings()
        self.may_run = may_run
        self.health = health
        self.stop = stop if stop is not None else threading.Event()
        self.idle = idle
        self.manager: Any = None
        self.steps = 0
        # Built once to learn the kinds (the informers start before any leadership).
        from pumice.controllers.kube_store import DIRECT

        for kind in kinds_of(build(self.names, store, self.settings), direct=DIRECT):
            store.follow(kind)

    def run(self) -> int:
        """Step until stopped; 0 on a clean stop."""
        from pumice.controllers.manager import Manager

        store = self.store
        store.start()
        try:
            while not self.stop.is_set() and not store.wait_synced(self.idle):
                self._beat()
            if self.stop.is_set():
                return 0
            log.info("controllers %s: caches synced (%s)", ", ".join(self.names),
                     ", ".join(store.kinds))  # fmt: skip
            unserved = getattr(store, "unserved", None)
            missing = unserved() if unserved is not None else ()
            if missing:
                log.info("controllers: not served by this API server, so read as empty "
                         "(and looked for again later): %s", ", ".join(missing))  # fmt: skip
            if self.health is not None:
                self.health.set_ready(True)
            while not self.stop.is_set():
                self._beat()
                if not self.may_run():
                    if self.manager is not None:
                        log.info("controllers: not leading; stopped reconciling")
                        self.manager.close()
                        self.manager = None
                    store.wait(self.idle)
                    continue
                if self.manager is None:
                    self.manager = Manager(store, build(self.names, store, self.settings))
                    log.info("controllers: leading; reconciling everything once")
                try:
                    self.manager.step()
                    self.steps += 1
                except Exception:  # a bug in a step must not stop the controllers
                    log.exception("controllers: step failed; the next one starts afresh")
                due = self.manager.next_due()
                wait = self.idle if due is None else max(0.0, min(self.idle, due - store.now()))
                store.wait(wait)
            return 0
        finally:
            if self.manager is not None:
                self.manager.close()
            if self.health is not None:
                self.health.set_ready(False, "shutting down")

    def _beat(self) -> None:
        if self.health is not None:
            self.health.heartbeat()
        reachability = getattr(getattr(self.store, "client", None), "reachability", None)
        if reachability is not None:
            reachability.poll()  # (an outage's end, said once, on a quiet cluster too)

    def start_thread(self) -> threading.Thread:
        """Run on a daemon thread (``pumice run --controllers``)."""
        thread = threading.Thread(target=self.run, name="pumice-controllers", daemon=True)
        thread.start()
        return thread


def controllers_help() -> str:
    return "; ".join(f"{name}: {e.about}" for name, e in CONTROLLERS.items())


def add_controllers_flag(parser: argparse.ArgumentParser, *, optional: bool) -> None:
    """``--controllers NAMES`` (comma-separated, or all). In ``pumice run`` the flag
    alone means all."""
    kw: dict[str, Any] = {"nargs": "?", "const": "all", "default": None} if optional else {
        "default": "all"
    }  # fmt: skip
    parser.add_argument(
        "--controllers",
        metavar="NAMES",
        help=f"controllers to run, comma-separated, or all (default all): {controllers_help()}",
        **kw,
    )


def add_parser(sub: Any) -> None:
    c = sub.add_parser(
        "controllers",
        help="run Volcano's controllers (Jobs, PodGroups for plain pods, Queues) on a cluster",
        description="Run Volcano's controllers against a Kubernetes API server, as "
        "vc-controller-manager does: batch.volcano.sh Jobs get their PodGroup and pods and "
        "follow their lifecycle policies, pods of pumice's schedulers that name no group "
        "get one, Queues move between Open, Closing and Closed and count their "
        "PodGroups. Leader election, /healthz and /readyz, graceful stop on SIGTERM.",
    )
    c.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    c.add_argument("--context", help="kubeconfig context to use")
    add_controllers_flag(c, optional=False)
    c.add_argument(
        "--scheduler-name",
        action="append",
        default=[],
        help="pods with this schedulerName are pumice's; repeatable (default: volcano)",
    )
    c.add_argument(
        "--default-queue",
        default="default",
        help="queue of Jobs and pods that name none (default: default)",
    )
    c.add_argument(
        "--leader-elect",
        action="store_true",
        help="run as one of several replicas: only the holder of a Lease reconciles",
    )
    c.add_argument(
        "--lock-object-namespace",
        default=None,
        help="namespace of the Lease (default: this pod's, else default)",
    )
    c.add_argument("--lock-object-name", default=LEASE_NAME,
                   help=f"name of the Lease (default {LEASE_NAME})")  # fmt: skip
    c.add_argument("--leader-elect-lease-duration", default="15s")
    c.add_argument("--leader-elect-renew-deadline", default="10s")
    c.add_argument("--leader-elect-retry-period", default="2s")
    c.add_argument("--healthz-address", default=None,
                   help="serve /healthz and /readyz here (e.g. :11252)")  # fmt: skip
    c.add_argument("--log-format", choices=("text", "json"), default="text")
    c.add_argument("-v", "--verbosity", type=int, default=0, help="log verbosity (0-5)")
    c.set_defaults(func=controllers_command)


def controllers_command(args: argparse.Namespace) -> int:
    from pumice.cluster.kube_client import KubeClient
    from pumice.controllers.kube_store import KubeStore
    from pumice.controllers.registry import controller_class
    from pumice.run.command import address, duration, lease_namespace
    from pumice.run.http import Health, serve
    from pumice.run.leader import LeaderElector, default_identity
    from pumice.run.logs import setup_logging

    names = parse_names(args.controllers)
    for name in names:  # a missing controller stops the start (exit 2)
        controller_class(name)
    health_at = address(args.healthz_address, "--healthz-address") if args.healthz_address else None
    settings = Settings(
        scheduler_names=tuple(args.scheduler_name) or ("volcano",),
        default_queue=args.default_queue,
    )
    setup_logging(args.log_format, args.verbosity)
    try:
        client = KubeClient.from_config(args.kubeconfig, args.context)
    except Exception as err:  # the client's loaders raise their own types
        raise InputError(f"cannot load cluster credentials: {err}", field="--kubeconfig") from None
    identity = default_identity()
    elector = None
    if args.leader_elect:
        try:
            elector = LeaderElector(
                client,
                namespace=lease_namespace(args.lock_object_namespace),
                name=args.lock_object_name,
                identity=identity,
                lease_duration=duration(args.leader_elect_lease_duration,
                                        "--leader-elect-lease-duration"),
                renew_deadline=duration(args.leader_elect_renew_deadline,
                                        "--leader-elect-renew-deadline"),
                retry_period=duration(args.leader_elect_retry_period,
                                      "--leader-elect-retry-period"),
            )  # fmt: skip
        except ValueError as err:
            raise InputError(str(err), field="--leader-elect-*") from None
    health = Health(IDLE_SECONDS)
    try:
        servers = serve(None, health_at, metrics=None, health=health)
    except OSError as err:
        raise InputError(f"cannot listen: {err}", field="--healthz-address") from None
    may_run = elector.is_leader if elector is not None else (lambda: True)
    store = KubeStore(client, may_write=may_run)
    loop = ControllerLoop(store, names, settings, may_run=may_run, health=servers)
    signal.signal(signal.SIGTERM, lambda *_: loop.stop.set())
    signal.signal(signal.SIGINT, lambda *_: loop.stop.set())
    log.info("pumice controllers: %s; scheduler names %s; identity %s", ", ".join(names),
             ", ".join(settings.scheduler_names), identity)  # fmt: skip
    if elector is not None:
        elector.start()
    started = time.monotonic()
    try:
        return loop.run()
    finally:
        if elector is not None:
            elector.stop(release=True)
        store.close()
        servers.close()
        log.info("pumice controllers: stopped after %.0f s", time.monotonic() - started)


__all__ = ["ControllerLoop", "add_controllers_flag", "add_parser", "controllers_command"]
