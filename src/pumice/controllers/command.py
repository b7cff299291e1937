"""``pumice controllers``: Volcano's controllers against a real API server.

The process runs :class:`~pumice.controllers.loop.ControllerLoop` as its work, with its
own leader election (Lease ``pumice-controllers``), ``/healthz`` and ``/readyz``, and a
graceful stop on SIGTERM. (``pumice run --controllers`` runs the same loop on a thread
beside the scheduler instead.)
"""

from __future__ import annotations

import argparse
import logging
import signal
import time
from typing import Any

from pumice.cli_args import add_controllers_flag, address, duration, lease_namespace
from pumice.controllers.loop import IDLE_SECONDS, ControllerLoop
from pumice.controllers.registry import Settings, parse_names
from pumice.errors import InputError

log = logging.getLogger("pumice.controllers")

LEASE_NAME = "pumice-controllers"


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


__all__ = ["add_parser", "controllers_command"]
