"""``pumice queue pending [QUEUE]``: a queue's waiting jobs, in the order the scheduler
tries them, with the stage that stops each and why.

With ``--server URL`` (or ``$PUMICE_SERVER``) the command asks a running ``pumice run``
for its last cycle's list (``GET URL/apis/visibility/v1/...``, see
:mod:`pumice.visibility.endpoint`). Without one, or when that server cannot be reached,
it lists the cluster's objects and runs one scheduling cycle on them here, with the
configuration given (the code ``pumice cycle`` runs; nothing is written to the
cluster), and says so.

``--eta`` adds an estimated start to each job, with the assumption it rests on: the
server's last forecast (``?eta=1``; the command waits up to ``--eta-wait`` seconds while
the server computes one), or here a forecast of the same objects the cycle read
(:func:`pumice.forecast.forecast_starts`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import orjson

from pumice.errors import InputError
from pumice.visibility.endpoint import ALL, PREFIX
from pumice.visibility.eta_flags import add_step_horizon, check
from pumice.visibility.line import (
    FROM_LOCAL_CYCLE,
    FROM_SCHEDULER,
    PendingJob,
    PendingList,
    pending_jobs,
    select,
)
from pumice.visibility.render import print_pending

#: Exit status when neither the scheduler nor the cluster answers.
EXIT_UNAVAILABLE = 1
#: How long the local cycle waits for the cluster's objects to be listed.
SYNC_TIMEOUT = 60.0


class Unreachable(Exception):
    """The scheduler's server or the cluster did not answer (the message says which)."""


def add_pending_parser(qsub: Any) -> None:
    """``pumice queue pending``, under ``pumice queue``'s subcommands."""
    p = qsub.add_parser(
        "pending",
        help="waiting jobs in the order the scheduler tries them: position, stage, why",
        description="The jobs waiting in a queue (or in all), in the order the scheduler "
        "tries them: position in the queue and in the cluster, priority, the stage that "
        "stops each (not-schedulable, enqueue, queue, allocate) and why. Asks the running "
        "scheduler given by --server; without it (or when it does not answer) runs one "
        "cycle here on the cluster's objects. Exit status 1 when neither answers.",
    )
    p.add_argument("queue", nargs="?", help="the queue (default: all queues)")
    p.add_argument(
        "-k", "--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument(
        "--server",
        metavar="URL",
        default=os.environ.get("PUMICE_SERVER") or None,
        help="a running `pumice run`'s --metrics-address, e.g. http://pumice.volcano-system"
        ":8080 (default: $PUMICE_SERVER)",
    )
    p.add_argument(
        "--config", help="the scheduler configuration for a cycle run here (default: built-in)"
    )
    p.add_argument(
        "--scheduler-name",
        default="volcano",
        help="the schedulerName whose pods a cycle run here schedules (default: volcano)",
    )
    p.add_argument("--limit", type=int, default=None, help="show at most this many jobs")
    p.add_argument(
        "--eta",
        action="store_true",
        help="also estimate when each job starts, with the assumption it rests on: the "
        "running scheduler's last forecast, or a forecast run here (the scheduler replayed "
        "forward, running pods ending at their duration annotation, activeDeadlineSeconds "
        "or their queue's learned run time; no new arrivals)",
    )
    add_step_horizon(p, "with --eta, run here: ")
    p.add_argument(
        "--eta-wait", type=float, default=60.0, metavar="S",
        help="with --eta and --server: wait up to S seconds while the scheduler computes "
        "its forecast (default 60)",
    )  # fmt: skip
    p.set_defaults(func=pending_command)


def pending_command(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        raise InputError("must be 0 or more", field="--limit")
    check(args)
    if args.eta_wait < 0:
        raise InputError(f"must be 0 or more, got {args.eta_wait:g}", field="--eta-wait")
    page: PendingList | None = None
    eta = (args.eta_step, args.eta_horizon) if args.eta else None
    try:
        if args.server:
            try:
                page = ask_server(
                    args.server, args.queue, args.limit, eta=args.eta, wait=args.eta_wait
                )
            except Unreachable as err:
                print(f"pumice: note: {err}; running a cycle here instead", file=sys.stderr)
        if page is None:
            forecast: dict[str, Any] = {}
            page = select(
                local_cycle(args.kubeconfig, args.context, args.config, args.scheduler_name,
                            args.queue, eta=eta, forecast=forecast),
                args.queue, limit=args.limit, source=FROM_LOCAL_CYCLE,
            )  # fmt: skip
            if eta is not None:
                page.forecast = forecast
    except Unreachable as err:
        print(f"pumice: error: {err}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(page.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_pending(page)
    return 0


def ask_server(
    url: str, queue: str | None, limit: int | None, *, eta: bool = False, wait: float = 0.0
) -> PendingList:
    """The scheduler's last list, from its visibility endpoint (Unreachable when it
    does not answer as one). With ``eta``, its start estimates, waiting up to ``wait``
    seconds while it computes its first forecast (202)."""
    base = url if "://" in url else f"http://{url}"
    path = ALL if queue is None else f"queues/{urllib.parse.quote(queue, safe='')}/{ALL}"
    params = ([] if limit is None else [f"limit={limit}"]) + (["eta=1"] if eta else [])
    query = f"?{'&'.join(params)}" if params else ""
    full = f"{base.rstrip('/')}{PREFIX}{path}{query}"
    deadline = time.monotonic() + wait
    while True:
        try:
            with urllib.request.urlopen(full, timeout=10) as resp:
                status, body = resp.status, orjson.loads(resp.read())
        except urllib.error.HTTPError as err:
            detail = err.read().decode().strip()
            raise Unreachable(f"{full} answered {err.code}: {detail}") from None
        except (OSError, ValueError) as err:
            raise Unreachable(f"cannot reach the scheduler at {base}: {err}") from None
        if status != 202 or time.monotonic() >= deadline:
            break
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    if eta and status == 202:
        print(
            f"pumice: note: the scheduler is still computing its first forecast after "
            f"{wait:g}s; no start estimates yet",
            file=sys.stderr,
        )
    try:
        jobs = [_job(item) for item in body["items"]]
        return PendingList(
            jobs, body.get("queue"), FROM_SCHEDULER, int(body["total"]), int(body["offset"]),
            {str(k): int(v) for k, v in body["stages"].items()}, body.get("forecast"),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError):
        raise Unreachable(f"{full} did not answer with a list of pending jobs") from None


def _job(item: dict[str, Any]) -> PendingJob:
    return PendingJob(
        name=item["name"],
        namespace=item["namespace"],
        queue=item["queue"],
        priority=int(item["priority"]),
        position_in_queue=int(item["positionInQueue"]),
        position_in_cluster=int(item["positionInCluster"]),
        stage=item["stage"],
        reason=item["reason"],
        eta=None if item.get("eta") is None else float(item["eta"]),
        assumption=item.get("assumption"),
    )


def local_cycle(
    kubeconfig: str | None,
    context: str | None,
    config: str | None,
    scheduler_name: str,
    queue: str | None = None,
    *,
    eta: tuple[float | None, float] | None = None,
    forecast: dict[str, Any] | None = None,
) -> list[PendingJob]:
    """One cycle on the cluster's objects, run here: its pending jobs (InputError for a
    queue the cluster does not have; Unreachable when the cluster cannot be listed).
    With ``eta`` (step or None for the automatic one, horizon), each job's start
    estimate from a forecast of the same objects; ``forecast`` is then filled with
    what the forecast was (:func:`pumice.visibility.eta.forecast_info`)."""
    from pumice.cache.build import SourcedObject, build_snapshot
    from pumice.cluster.kube import KubeCluster
    from pumice.cluster.kube_client import KubeClient
    from pumice.cluster.protocol import KINDS
    from pumice.scheduler import Scheduler

    scheduler = Scheduler.from_file(config)
    try:
        client = KubeClient.from_config(kubeconfig, context, pool_size=4)
    except Exception as err:  # the client's loaders raise their own types
        raise InputError(f"cannot load cluster credentials: {err}", field="--kubeconfig") from None
    cluster = KubeCluster(client, may_write=lambda: False)
    cluster.start()
    try:
        if not cluster.wait_synced(SYNC_TIMEOUT):
            raise Unreachable(
                f"the cluster's objects could not be listed in {SYNC_TIMEOUT:g}s ({client.host})"
            )
        objects = [SourcedObject(o, "cluster") for kind in KINDS for o in cluster.list(kind)]
    finally:
        cluster.close()
    now = time.time()
    snapshot = build_snapshot(objects, scheduler_name=scheduler_name, now=now)
    if queue is not None and queue not in snapshot.queues:
        raise InputError("no such queue", obj=f"Queue {queue}")
    jobs = pending_jobs(scheduler.cycle(snapshot))
    if eta is not None:
        from pumice.forecast.durations import QueueDurations
        from pumice.visibility.eta import choose_step, fill, forecast_info, run_forecast

        step, reason = choose_step(eta[0], len(snapshot.nodes.names), 1.0)
        raw = [o.obj for o in objects]
        queue_of = {uid: job.queue for uid, job in snapshot.jobs.items()}
        learned = QueueDurations.from_pods(
            (o for o in raw if o.get("kind") == "Pod"), queue_of
        )  # (the finished pods still in the cluster: what their queues' jobs take)
        done = run_forecast(
            raw, scheduler, now, durations=learned, horizon=eta[1],
            step=step, step_reason=reason, period=1.0, scheduler_name=scheduler_name,
        )  # fmt: skip
        fill(jobs, done.estimates, now)
        if forecast is not None:
            forecast.update(forecast_info(done, now))
    return jobs


__all__ = ["add_pending_parser", "ask_server", "local_cycle", "pending_command"]
