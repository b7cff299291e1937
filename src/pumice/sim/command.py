"""``pumice simulate``: arguments, the run(s), the terminal summary, the report.

Kept apart from :mod:`pumice.cli` (which only registers the subcommand) so the command's
options and its wiring live next to the simulator they drive.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pumice.errors import InputError
from pumice.sim.workload import Workload

if TYPE_CHECKING:
    from rich.progress import TaskID

    from pumice.scheduler import Scheduler
    from pumice.sim.engine import Progress, SimOptions, SimResult

TRACE_FORMATS = ("alibaba2020", "alibaba2023", "philly")
GPU = "nvidia.com/gpu"


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "simulate",
        help="run the scheduler on a simulated cluster and write a report",
        description="Replay a workload (Volcano Jobs or PodGroup manifests, a compact "
        "workload file, a public trace, or a generated one) on a simulated cluster, with "
        "the same scheduling code as a real cluster on a virtual clock, and write a "
        "report: metrics (JSON, CSV), plots and an HTML page. With no arguments: the "
        "built-in scenario (a multi-tenant GPU cluster of 56 nodes, 3,000 jobs in 12 "
        "queues). Several --config files run the same workload under each and write a "
        "side-by-side comparison (what-if).",
    )
    s.add_argument(
        "workload",
        nargs="*",
        help="workload files or directories (YAML/JSON), or trace files with --trace-format",
    )
    s.add_argument(
        "--cluster",
        help="nodes: Node manifests or a compact {nodes: [...]} file "
        "(default: the built-in 56-node GPU cluster)",
    )
    s.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="CONF",
        help="Volcano scheduler configuration; repeat for a what-if comparison "
        "(default: Volcano's default configuration)",
    )
    from pumice.cli import add_plugins_dir

    add_plugins_dir(s)
    s.add_argument("--seed", type=int, default=1, help="seed of generated workloads (default 1)")
    s.add_argument(
        "--out", default="pumice-report", help="report directory (default: ./pumice-report)"
    )
    s.add_argument(
        "--trace-format",
        choices=TRACE_FORMATS,
        help="read WORKLOAD as a public trace of this format",
    )
    s.add_argument(
        "--jobs",
        type=int,
        help="generate a synthetic workload of this many jobs "
        "(calibrated to published GPU-cluster traces) instead of the built-in one",
    )
    s.add_argument(
        "--nodes",
        type=int,
        help="use a cluster of this many 8-GPU nodes (96 cpu, 768Gi) instead of the built-in one",
    )
    s.add_argument(
        "--load",
        type=float,
        default=0.9,
        help="with --jobs: offered GPU load, the work arriving per unit of cluster "
        "capacity (default 0.9; above 1 the backlog, and each cycle's cost, keeps growing)",
    )
    s.add_argument(
        "--limit", type=int, help="with --trace-format: replay only the first LIMIT jobs"
    )
    s.add_argument(
        "--period",
        type=float,
        default=1.0,
        help="schedule period in simulated seconds (default 1, as Volcano)",
    )
    s.add_argument(
        "--startup-delay", type=float, default=5.0, help="seconds from bind to Running (default 5)"
    )
    s.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="termination grace period of evicted pods (default 30)",
    )
    s.add_argument(
        "--no-skip",
        action="store_true",
        help="run a cycle every period even when nothing changed (slow; for "
        "checking that skipping changes nothing)",
    )
    s.add_argument(
        "--pods-upfront",
        action="store_true",
        help="create a job's pods when it arrives (default: when its PodGroup is admitted, "
        "as Volcano's job controller does)",
    )
    s.add_argument(
        "--job-controller",
        action="store_true",
        help="run every job as a batch.volcano.sh Job through pumice's job controller "
        "(restart on eviction, as the default model; slower). Jobs read from Job "
        "manifests always go through it",
    )
    s.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="what-if: run the configurations in N processes at once (default: one per "
        "configuration, up to the number of CPUs; 1 runs them one after the other)",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=run)


def _cluster(args: argparse.Namespace) -> list[dict[str, Any]]:
    from pumice.sim.cluster_spec import default_cluster, load_cluster, node_object

    if args.nodes is not None:
        if args.nodes < 1:
            raise InputError("must be >= 1", field="--nodes")
        if args.cluster:
            raise InputError("give --cluster or --nodes, not both")
        width = max(4, len(str(args.nodes - 1)))
        return [
            node_object(
                f"gpu-{i:0{width}d}",
                {"cpu": 96000.0, "memory": 768.0 * 2**30, GPU: 8.0},
                labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            )
            for i in range(args.nodes)
        ]
    if args.cluster and args.trace_format == "alibaba2023" and args.cluster.endswith(".csv"):
        from pumice.sim.traces import alibaba2023

        return alibaba2023.load_nodes(args.cluster)
    if args.cluster:
        notes: list[str] = []
        nodes = load_cluster(args.cluster, notes)
        for note in notes:
            print(f"pumice: note: {note}", file=sys.stderr)
        return nodes
    return default_cluster()


def _gpus(nodes: list[dict[str, Any]]) -> int:
    from pumice.sim.engine import node_allocatable

    return int(sum(a.get(GPU, 0.0) for a in node_allocatable(nodes)))


def _workload(args: argparse.Namespace, nodes: list[dict[str, Any]]):
    from pumice.sim import synthetic
    from pumice.sim.loader import load_workload

    if args.trace_format:
        if not args.workload:
            raise InputError(f"--trace-format {args.trace_format} needs a trace file or directory")
        if len(args.workload) > 1:
            raise InputError("one trace at a time (a file or a directory)")
        import importlib

        mod = importlib.import_module(f"pumice.sim.traces.{args.trace_format}")
        return mod.load(args.workload[0], limit=args.limit)
    if args.workload:
        if args.jobs is not None:
            raise InputError("give WORKLOAD files or --jobs, not both")
        return load_workload(args.workload)
    if args.jobs is not None:
        if args.jobs < 0:
            raise InputError("must be >= 0", field="--jobs")
        gpus = max(_gpus(nodes), 8)
        if args.load <= 0:
            raise InputError("must be > 0", field="--load")
        return synthetic.generate(
            args.jobs,
            seed=args.seed,
            capacity_gpus=gpus,
            n_queues=12 if args.jobs < 20000 else 20,
            max_gang=max(1, min(32, gpus // 8)),  # no gang wider than the cluster
            load=args.load,
        )
    if args.nodes is None and not args.cluster:
        return synthetic.default_workload(args.seed)
    return synthetic.generate(3000, seed=args.seed, capacity_gpus=max(_gpus(nodes), 8))


class _Bars:
    """Rich progress bars on stderr, one per simulation run at once (nothing when stderr
    is not a terminal or the bar is turned off). The entered value is the update
    function ``(index, done, total, now)``."""

    def __init__(self, labels: Sequence[str], enabled: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("jobs done, sim {task.fields[sim]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not enabled or not console.is_terminal,
        )
        self.labels = list(labels)
        self.tasks: list[TaskID] = []

    @property
    def enabled(self) -> bool:
        return not self.progress.disable

    def __enter__(self) -> _Bars:
        self.progress.start()
        self.tasks = [self.progress.add_task(lb, total=None, sim="0 h") for lb in self.labels]
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, index: int, done: int, total: int, now: float) -> None:
        self.progress.update(
            self.tasks[index], completed=done, total=total, sim=f"{now / 3600:.1f} h"
        )


@dataclass(frozen=True)
class _Plan:
    """Everything the runs of one invocation share; handed to each worker process once
    (inherited, not pickled, with ``fork``)."""

    nodes: list[dict[str, Any]]
    workload: Workload
    options: SimOptions
    schedulers: tuple[Scheduler, ...]
    names: tuple[str, ...]
    targets: tuple[Path, ...]  # report directory of each configuration


#: What a worker sends back instead of the workload, which the parent already holds.
_DETACHED = Workload(jobs=(), queues=())


def _run_config(
    plan: _Plan, index: int, progress: Progress | None
) -> tuple[SimResult, dict[str, Any], Path]:
    """Simulate configuration ``index`` and write its report directory; return the
    result, the run's wall-clock facts and the report page."""
    from pumice.sim.engine import Simulation
    from pumice.sim.report import write_report

    name = plan.names[index]
    workload = plan.workload
    sim = Simulation(plan.nodes, workload, plan.schedulers[index], plan.options, config_name=name)
    t0 = time.perf_counter()
    result = sim.run(progress)
    wall = time.perf_counter() - t0
    run_info = {
        "config": name,
        "nodes": len(plan.nodes),
        "jobs": len(workload.jobs),
        "events": result.events,
        "simulated_seconds": round(result.sim_time, 3),
        "wall_seconds": round(wall, 3),
        "jobs_per_second": round(len(workload.jobs) / wall, 1) if wall > 0 else None,
        "cycles": result.summary["cycles"],
    }
    page = write_report(result, plan.targets[index], run_info)
    return result, run_info, page


def _run_config_detached(
    plan: _Plan, index: int, progress: Progress | None
) -> tuple[SimResult, dict[str, Any], Path]:
    """:func:`_run_config` in a worker process: the result goes back without its
    workload (pickling it back would cost time for nothing); the parent reattaches it."""
    result, run_info, page = _run_config(plan, index, progress)
    return dataclasses.replace(result, workload=_DETACHED), run_info, page


def _cpus() -> int:
    """CPUs this process may run on (the affinity mask, e.g. a container's cpuset)."""
    count = getattr(os, "process_cpu_count", None)  # Python >= 3.13
    if count is not None:
        return count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from pumice.scheduler import Scheduler
    from pumice.sim.engine import SimOptions
    from pumice.sim.report import summary_rows
    from pumice.sim.whatif import config_names, write_comparison

    if args.period <= 0:
        raise InputError("must be > 0", field="--period")
    if args.workers is not None and args.workers < 1:
        raise InputError("must be >= 1", field="--workers")
    configs: list[str | None] = list(args.config) or [None]
    names = config_names(args.config) if args.config else ["default"]
    # A bad config or plugin fails first. With worker processes, each scheduler (its
    # registries included) reaches the workers in the plan: inherited with fork,
    # pickled with spawn (extension registries pickle as "load the directory again").
    schedulers = [Scheduler.from_file(c, args.plugins_dir) for c in configs]
    for scheduler in schedulers:
        for warning in scheduler.config.warnings:
            print(f"pumice: warning: {scheduler.config.source}: {warning}", file=sys.stderr)
    nodes = _cluster(args)
    workload = _workload(args, nodes)
    if workload.skipped:
        first = workload.warnings[0] if workload.warnings else "?"
        print(
            f"pumice: warning: skipped {workload.skipped} input row(s) or object(s); "
            f"first: {first}",
            file=sys.stderr,
        )
    options = SimOptions(
        period=args.period,
        startup_delay=args.startup_delay,
        grace=args.grace,
        skip_idle=not args.no_skip,
        pods_on_admission=not args.pods_upfront,
        job_controller=args.job_controller,
    )
    out = Path(args.out)
    plan = _Plan(
        nodes=nodes,
        workload=workload,
        options=options,
        schedulers=tuple(schedulers),
        names=tuple(names),
        targets=tuple(out / n if len(names) > 1 else out for n in names),
    )
    workers = min(args.workers if args.workers is not None else _cpus(), len(names))
    labels = [f"simulating {n}" if len(names) > 1 else "simulating" for n in names]
    results: list[tuple[SimResult, dict[str, Any], Path]] = []
    if workers == 1:  # in this process, one after the other
        for i, label in enumerate(labels):
            with _Bars([label], not args.no_progress) as bars:
                results.append(_run_config(plan, i, functools.partial(bars, 0)))
    else:
        from pumice.sim.parallel import run_parallel

        bars = _Bars(labels, not args.no_progress)
        done = run_parallel(
            _run_config_detached, plan, len(names), workers, bars if bars.enabled else None
        )
        results = [
            (dataclasses.replace(r, workload=workload), info, page) for r, info, page in done
        ]

    console = Console()
    if len(results) == 1:
        result, info, page = results[0]
        t = Table(
            title=f"pumice simulate: {len(workload.jobs):,} jobs on {len(nodes)} nodes, "
            f"{info['wall_seconds']:.1f} s ({info['jobs_per_second']:,.0f} jobs/s)",
            title_justify="left",
            show_header=False,
        )
        t.add_column("metric", style="bold", no_wrap=True)
        t.add_column("value")
        for label, value in summary_rows(result.summary):
            t.add_row(label, value)
        console.print(t)
        print(f"report: {page}")
    else:
        from pumice.sim.report import minutes

        run_all = {"workers": workers, "configs": [info for _r, info, _p in results]}
        page = write_comparison([r for r, _i, _p in results], out, run_all)
        t = Table(
            title=f"pumice simulate: what-if on {len(workload.jobs):,} jobs", title_justify="left"
        )
        t.add_column("metric", style="bold")
        for n in names:
            t.add_column(n, justify="right")
        rs = [r.summary for r, _i, _p in results]
        for key in ("wait", "completion"):
            for stat in ("mean", "p95"):
                t.add_row(f"{key} {stat}", *(minutes(s[key][stat]) for s in rs))
        for res in rs[0]["utilization"]:
            t.add_row(f"utilization {res}", *(f"{s['utilization'][res]:.1%}" for s in rs))
        t.add_row("fairness gap", *(f"{s['fairness_gap']:.3f}" for s in rs))
        for key in ("evictions", "jobs_never_ran", "gang_violations"):
            t.add_row(key.replace("_", " "), *(str(s[key]) for s in rs))
        console.print(t)
        print(f"report: {page}")
    bad = sum(r.summary["gang_violations"] for r, _i, _p in results)
    if bad:
        print(f"pumice: error: {bad} gang atomicity violation(s)", file=sys.stderr)
        return 1
    return 0


__all__ = ["add_parser", "run"]
