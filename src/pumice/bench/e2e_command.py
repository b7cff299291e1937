"""``pumice bench e2e``'s options and entry point (kept out of :mod:`pumice.cli`, which
only registers them on ``pumice bench`` and dispatches the ``e2e`` scenario here).

Every option is checked before anything starts: an unknown scheduler or workload, a
count below 1, a missing binary folder give exit code 2 with the reason.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pumice.errors import InputError

if TYPE_CHECKING:
    from pumice.bench.e2e_model import E2EOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "e2e",
        "`pumice bench e2e`: pumice, kube-scheduler and Volcano against a real API "
        "server (see docs/performance.md)",
    )
    g.add_argument("--e2e-nodes", type=int, default=1000, metavar="N", help="fake nodes (1000)")
    g.add_argument(
        "--e2e-pods", type=int, default=5000, metavar="P", help="pods of the basic workload (5000)"
    )
    g.add_argument(
        "--e2e-gangs",
        type=int,
        default=20,
        metavar="G",
        help="PodGroups of the gangs workload (20)",
    )
    g.add_argument(
        "--e2e-gang-size",
        type=int,
        default=500,
        metavar="S",
        help="minMember and pods of each gang (500)",
    )
    g.add_argument(
        "--e2e-workloads",
        default="basic,gangs",
        help="comma-separated: basic, gangs, vcjob (default basic,gangs)",
    )
    g.add_argument(
        "--e2e-job-pods",
        type=int,
        default=1000,
        metavar="P",
        help="vcjob: replicas of the Volcano Job's one task (1000)",
    )
    g.add_argument(
        "--e2e-job-min-available",
        type=int,
        default=None,
        metavar="M",
        help="vcjob: the Job's minAvailable (default: all its pods, a gang)",
    )
    g.add_argument(
        "--e2e-inline-controllers",
        action="store_true",
        help="vcjob: run pumice's controllers inside `pumice run --controllers` instead of "
        "a `pumice controllers` process of their own",
    )
    g.add_argument(
        "--schedulers",
        default="pumice,kube-scheduler,volcano",
        help="comma-separated: pumice, kube-scheduler, volcano (default: all)",
    )
    g.add_argument(
        "--churn",
        action="store_true",
        help="rewrite every node's status each --e2e-churn-period and change a "
        "label a second during the run",
    )
    g.add_argument("--e2e-churn-period", type=float, default=10.0, metavar="SECONDS")
    g.add_argument(
        "--e2e-runs",
        type=int,
        default=1,
        metavar="N",
        help="runs of each scheduler and workload; tables show means (1)",
    )
    g.add_argument(
        "--e2e-clients",
        type=int,
        default=16,
        metavar="N",
        help="parallel clients creating the pods (16)",
    )
    g.add_argument(
        "--e2e-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="give up this long after a run's first create (default: by size)",
    )
    g.add_argument(
        "--e2e-workdir",
        default=None,
        metavar="DIR",
        help="keep each run's logs and control plane here (default: a temporary folder, removed)",
    )
    g.add_argument(
        "--e2e-quiet",
        type=float,
        default=None,
        metavar="CORES",
        help="on a shared machine, wait (up to 10 min) before each run until other "
        "processes use fewer than CORES cores",
    )
    g.add_argument(
        "--k8s-dir",
        default=None,
        metavar="DIR",
        help="folder with bin/*.xz and volcano-1.7/ (default $PUMICE_K8S_DIR or /work/shared/k8s)",
    )


def _names(text: str, known: tuple[str, ...], flag: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for n in names:
        if n not in known:
            raise InputError(f"unknown {n!r} (known: {', '.join(known)})", field=flag)
    if not names:
        raise InputError("names at least one", field=flag)
    return names


def options_from(args: argparse.Namespace) -> E2EOptions:
    from pumice.bench.e2e_model import DEFAULT_K8S, WORKLOADS, E2EOptions
    from pumice.bench.e2e_peers import PEERS

    for flag in ("e2e_nodes", "e2e_pods", "e2e_gangs", "e2e_gang_size", "e2e_runs",
                 "e2e_clients", "e2e_job_pods"):  # fmt: skip
        if getattr(args, flag) < 1:
            raise InputError("must be at least 1", field="--" + flag.replace("_", "-"))
    minimum = args.e2e_job_min_available
    if minimum is not None and not 1 <= minimum <= args.e2e_job_pods:
        raise InputError(f"must be between 1 and --e2e-job-pods ({args.e2e_job_pods})",
                         field="--e2e-job-min-available")  # fmt: skip
    k8s_dir = Path(args.k8s_dir) if args.k8s_dir else DEFAULT_K8S
    schedulers = _names(args.schedulers, tuple(PEERS), "--schedulers")
    workloads = _names(args.e2e_workloads, WORKLOADS, "--e2e-workloads")
    _check_binaries(k8s_dir, schedulers, controllers="vcjob" in workloads)
    return E2EOptions(
        nodes=args.e2e_nodes,
        pods=args.e2e_pods,
        gangs=args.e2e_gangs,
        gang_size=args.e2e_gang_size,
        schedulers=schedulers,
        workloads=workloads,
        job_pods=args.e2e_job_pods,
        job_min_available=minimum,
        inline_controllers=args.e2e_inline_controllers,
        churn=args.churn,
        churn_period=args.e2e_churn_period,
        clients=args.e2e_clients,
        runs=args.e2e_runs,
        timeout=args.e2e_timeout,
        quiet=args.e2e_quiet,
        workdir=Path(args.e2e_workdir) if args.e2e_workdir else None,
        k8s_dir=k8s_dir,
        log=lambda line: print(f"pumice: bench e2e: {line}", file=sys.stderr, flush=True),
    )


def _check_binaries(k8s_dir: Path, schedulers: tuple[str, ...], *, controllers: bool = False
                    ) -> None:  # fmt: skip
    """Every binary the runs need can be found (``k8s_dir/bin`` is searched when
    ``$PUMICE_K8S_BIN`` is not set; with ``controllers``, the peers' controllers too), and
    Volcano's configuration file exists."""
    import os

    from pumice.bench.e2e_peers import PEERS
    from pumice.sandbox.binaries import missing_binaries

    if (k8s_dir / "bin").is_dir() and not os.environ.get("PUMICE_K8S_BIN"):
        os.environ["PUMICE_K8S_BIN"] = str(k8s_dir / "bin")
    names = ["kube-apiserver", "etcd"] + [b for s in schedulers if (b := PEERS[s].binary)]
    if controllers:
        names += [b for s in schedulers if (b := PEERS[s].controller_binary)]
    why = missing_binaries(*names)
    if why is not None:
        raise InputError(why, field="--k8s-dir")
    conf = k8s_dir / "volcano-1.7" / "volcano-scheduler.conf"
    if "volcano" in schedulers and not conf.is_file():
        raise InputError(f"{conf} not found (vc-scheduler's configuration)", field="--k8s-dir")


def run_command(args: argparse.Namespace) -> int:
    """Run the benchmark, print the tables, write ``--json``; 1 if a run is invalid."""
    from pumice.bench.e2e import run_e2e
    from pumice.bench.e2e_report import print_report, write_json

    if len(args.scenario) > 1:
        raise InputError("e2e runs alone (the in-memory scenarios are a separate run)")
    options = options_from(args)
    results = run_e2e(options)
    print_report(results, sys.stdout)
    if args.json:
        write_json(results, args.json)
    return 0 if all(r.valid for r in results) else 1


__all__ = ["add_arguments", "options_from", "run_command"]
