"""``pumice run``: arguments, and the wiring of client, elector, servers and runner.

Kept apart from :mod:`pumice.cli` (which only registers the subcommand), like
``simulate``'s command module; the flags it shares with ``pumice controllers`` come
from :mod:`pumice.cli_args`. Everything that can be refused is checked before the
first request: durations, addresses, the config and its plugins (exit code 2 with the
reason, nothing started).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from pumice.cli_args import (
    add_controllers_flag,
    add_plugins_dir,
    address,
    duration,
    lease_namespace,
)
from pumice.errors import InputError

log = logging.getLogger("pumice.run")


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        help="schedule a real Kubernetes cluster",
        description="Schedule the pods, PodGroups and Queues of a Kubernetes cluster, as "
        "Volcano's vc-scheduler does, with the same scheduler configuration: binds through "
        "the API, podgroup and queue status, pod conditions and events, leader election, "
        "/metrics and /healthz, config hot reload, SIGUSR1 cache dumps.",
    )
    r.add_argument(
        "--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    r.add_argument("--context", help="kubeconfig context to use")
    r.add_argument("--config", help="Volcano scheduler configuration file, re-read on change "
                   "(default: Volcano's default configuration)")  # fmt: skip
    add_plugins_dir(r)
    r.add_argument(
        "--scheduler-name",
        action="append",
        default=[],
        help="schedule pods with this schedulerName; repeatable (default: volcano)",
    )
    r.add_argument("--schedule-period", default="1s", help="time between cycles (default 1s)")
    r.add_argument(
        "--default-queue",
        default="default",
        help="queue of podgroups and pods that name none; created (weight 1, reclaimable) "
        "when absent, as Volcano's scheduler does (default: default)",
    )
    r.add_argument(
        "--leader-elect",
        action="store_true",
        help="run as one of several replicas: only the holder of a Lease schedules",
    )
    r.add_argument(
        "--lock-object-namespace",
        default=None,
        help="namespace of the Lease (default: this pod's, else default)",
    )
    r.add_argument(
        "--lock-object-name", default="pumice", help="name of the Lease (default pumice)"
    )
    r.add_argument("--leader-elect-lease-duration", default="15s")
    r.add_argument("--leader-elect-renew-deadline", default="10s")
    r.add_argument("--leader-elect-retry-period", default="2s")
    r.add_argument("--metrics-address", default=None, help="serve /metrics here (e.g. :8080)")
    r.add_argument("--healthz-address", default=None,
                   help="serve /healthz and /readyz here (e.g. :11251)")  # fmt: skip
    r.add_argument("--dump-dir", default=None,
                   help="where SIGUSR1 writes the cache as a snapshot (default: .)")  # fmt: skip
    r.add_argument("--eviction-api", action="store_true",
                   help="evict through the Eviction API (PodDisruptionBudget-checked) "
                   "instead of deleting the pod")  # fmt: skip
    r.add_argument("--bind-workers", type=int, default=16, help="binds in flight at once (16)")
    from pumice.visibility.eta_flags import add_run_flags

    add_run_flags(r)
    add_controllers_flag(r, optional=True)
    r.add_argument("--log-format", choices=("text", "json"), default="text")
    r.add_argument("-v", "--verbosity", type=int, default=0, help="log verbosity (0-5)")
    r.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    from pumice.cluster.kube_client import KubeClient
    from pumice.run.reload import ConfigWatcher
    from pumice.run.runner import Runner, RunOptions
    from pumice.scheduler import Scheduler

    period = duration(args.schedule_period, "--schedule-period")
    metrics_at = (
        address(args.metrics_address, "--metrics-address") if args.metrics_address else None
    )
    health_at = address(args.healthz_address, "--healthz-address") if args.healthz_address else None
    if args.bind_workers < 1:
        raise InputError("must be at least 1", field="--bind-workers")
    plugins_dir = args.plugins_dir
    controllers: tuple[str, ...] = ()
    if args.controllers is not None:
        from pumice.controllers.registry import controller_class, parse_names

        controllers = parse_names(args.controllers)
        for name in controllers:  # a missing controller stops the start (exit 2)
            controller_class(name)

    def build(path: str | None) -> Scheduler:
        """The scheduler of a config file; also what a hot reload builds."""
        return Scheduler.from_file(path, plugins_dir=plugins_dir)

    scheduler = build(args.config)  # a bad config stops the start (exit 2)
    from pumice.run.logs import setup_logging

    setup_logging(args.log_format, args.verbosity)
    try:
        client = KubeClient.from_config(
            args.kubeconfig, args.context, pool_size=args.bind_workers + 16
        )
    except Exception as err:  # the client's loaders raise their own types
        raise InputError(f"cannot load cluster credentials: {err}", field="--kubeconfig") from None
    from pumice.run.leader import LeaderElector, default_identity

    identity = default_identity()
    elector = None
    if args.leader_elect:
        lease = duration(args.leader_elect_lease_duration, "--leader-elect-lease-duration")
        renew = duration(args.leader_elect_renew_deadline, "--leader-elect-renew-deadline")
        retry = duration(args.leader_elect_retry_period, "--leader-elect-retry-period")
        try:
            elector = LeaderElector(
                client,
                namespace=lease_namespace(args.lock_object_namespace),
                name=args.lock_object_name,
                identity=identity,
                lease_duration=lease,
                renew_deadline=renew,
                retry_period=retry,
            )
        except ValueError as err:
            raise InputError(str(err), field="--leader-elect-*") from None
    from prometheus_client import disable_created_metrics

    from pumice.run.http import Health, serve
    from pumice.run.metrics import SchedulerMetrics

    disable_created_metrics()  # (Volcano's series have no *_created twins)
    metrics = SchedulerMetrics()
    health = Health(period)
    from pumice.visibility.endpoint import PendingEndpoint
    from pumice.visibility.eta import run_forecast_of

    forecast = run_forecast_of(args)
    runners: list[Runner] = []  # (the runner is made once the servers listen)
    pending = PendingEndpoint(
        lambda: runners[0].last_decisions if runners else None, forecast.background
    )
    try:
        servers = serve(
            metrics_at, health_at, metrics=metrics, health=health, visibility=pending.answer
        )
    except OSError as err:
        raise InputError(f"cannot listen: {err}", field="--metrics-address") from None
    options = RunOptions(
        scheduler_names=tuple(args.scheduler_name) or ("volcano",),
        period=period,
        default_queue=args.default_queue,
        eviction_api=args.eviction_api,
        dump_dir=args.dump_dir,
        identity=identity,
        bind_workers=args.bind_workers,
        controllers=controllers,
    )
    runner = Runner(
        client, ConfigWatcher(args.config, build), scheduler, options,
        elector=elector, metrics=metrics, health=servers,
    )  # fmt: skip
    runners.append(runner)
    runner.between_cycles.append(forecast.turn)
    metrics.follow_binds_in_flight(runner.cluster.binds_in_flight)
    runner.install_signals()
    log.info("pumice run: scheduler names %s, period %.3gs, identity %s",
             ", ".join(options.scheduler_names), period, identity)  # fmt: skip
    try:
        return runner.run()
    finally:
        servers.close()


__all__ = ["add_parser", "run_command"]
