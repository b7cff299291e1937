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

from pumice.cli_args import add_plugins_dir
from pumice.errors import InputError, shown
from pumice.sim.inputs import cluster_from_args, workload_from_args
from pumice.sim.workload import Workload

if TYPE_CHECKING:
    from rich.progress import TaskID

    from pumice.scheduler import Scheduler
    from pumice.sim.cluster_spec import ClusterSpec
    from pumice.sim.engine import Progress, SimOptions, SimResult
    from pumice.sim.topology import Slowdown

TRACE_FORMATS = ("alibaba2020", "alibaba2023", "philly")
TOPOLOGY_PLUGIN = "network-topology-aware"


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
        help="nodes: Node manifests or a compact {nodes: [...]} file, with HyperNodes, "
        "storage (StorageClasses, PersistentVolumes, CSINodes, CSIDrivers, a node group's "
        "localVolumes) and devices (ResourceSlices, DeviceClasses, a node group's devices) "
        "if any (default: the built-in 56-node GPU cluster)",
    )
    s.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="CONF",
        help="Volcano scheduler configuration; repeat for a what-if comparison "
        "(default: Volcano's default configuration)",
    )
    add_plugins_dir(s)
    s.add_argument(
        "--seed",
        type=int,
        action="append",
        metavar="N",
        help="seed of generated workloads (default 1); repeat it for a grid over seeds",
    )
    s.add_argument(
        "--seeds",
        metavar="LIST",
        help="a grid over seeds of the generated workload: every configuration with each "
        "seed, e.g. 1,2,3 or 1-5; the report aggregates each configuration over the seeds",
    )
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
        "--simple-jobs",
        action="store_true",
        help="run PodGroup-shaped jobs (compact form, traces, generated, the built-in "
        "scenario) through the simulator's lighter PodGroup model instead of pumice's "
        "job controller (faster; restarts on eviction, ends a job when its bound pods "
        "end). Jobs read from Job manifests always go through the job controller",
    )
    s.add_argument(
        "--pods-upfront",
        action="store_true",
        help="create a job's pods with its PodGroup when it arrives, as for PodGroups and "
        "pods submitted directly (implies --simple-jobs; by default a job's pods are "
        "created once its PodGroup is admitted, as Volcano's job controller does)",
    )
    s.add_argument("--job-controller", action="store_true", help=argparse.SUPPRESS)
    s.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="what-if: run the configurations in N processes at once (default: one per "
        "configuration, up to the number of CPUs; 1 runs them one after the other)",
    )
    s.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="run the simulations on this Dask distributed scheduler, e.g. "
        "tcp://host:8786 (default: $PUMICE_DASK_ADDRESS; without either, or with "
        "--workers, on local processes); needs pumice[dask]",
    )
    net = s.add_argument_group("network topology (HyperNodes)")
    net.add_argument(
        "--topology",
        nargs="?",
        const="",
        metavar="SHAPE",
        help="give the cluster a leaf-spine HyperNode tree over its nodes, in order: "
        "nodesPerLeaf=4,leavesPerSpine=4,tiers=2 (the defaults; any subset). A --cluster "
        "file may carry its own (HyperNode objects or a topology: block)",
    )
    net.add_argument(
        "--topology-slowdown",
        metavar="FACTORS",
        help="run-time factor by the tier a gang spans when it starts, e.g. "
        "1=1.0,2=1.15,3=1.4 (the whole cluster is the highest tier; default: none)",
    )
    net.add_argument(
        "--network-topology",
        metavar="MODES",
        help="set the large gangs' PodGroup networkTopology to each of these modes, "
        "hard, soft or none (comma-separated; several: a what-if, one run per mode)",
    )
    net.add_argument(
        "--topology-tier",
        type=int,
        default=2,
        metavar="T",
        help="with --network-topology: highestTierAllowed of hard and soft (default 2)",
    )
    net.add_argument(
        "--topology-min-pods",
        type=int,
        default=4,
        metavar="N",
        help="with --network-topology: the gangs of at least N pods are the large ones (default 4)",
    )
    s.add_argument(
        "--gpu-sharing",
        metavar="MODES",
        help="GPU sharing what-if: run the workload as written (shared) and with every pod "
        "asking a share of a GPU card (volcano.sh/gpu-memory) given a whole card (whole); "
        "comma-separated, e.g. shared,whole",
    )
    s.add_argument(
        "--usage-factor",
        type=float,
        default=0.6,
        metavar="F",
        help="with the usage plugin: nodes' measured load is F times the requests of their "
        "pods (default 0.6)",
    )
    s.add_argument(
        "--metrics-period",
        type=float,
        metavar="S",
        help="with the usage plugin: seconds between measurements of the nodes' load "
        "(default: the configuration's metrics.interval, else 30)",
    )
    fc = s.add_argument_group("start forecasts")
    fc.add_argument(
        "--forecast-error",
        action="store_true",
        help="forecast the start of a sample of the jobs when they are first seen waiting "
        "(the scheduler replayed forward, no new arrivals assumed) and report the absolute "
        "error against their real start (summary and metrics.json: forecast)",
    )
    fc.add_argument(
        "--forecast-sample",
        type=int,
        default=50,
        metavar="N",
        help="with --forecast-error: forecast at most N jobs, spread over the arrivals "
        "(default 50)",
    )
    fc.add_argument(
        "--forecast-durations",
        choices=("learned", "annotation"),
        default="learned",
        help="with --forecast-error: the forecast knows run times as a cluster would, "
        "learned per queue from the jobs that ended (learned, the default), or exactly, "
        "from the workload's pumice.sim/duration annotation (annotation)",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=run)


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
    workloads: tuple[Workload, ...]  # of each run (a topology what-if varies it)
    options: SimOptions
    schedulers: tuple[Scheduler, ...]
    names: tuple[str, ...]
    targets: tuple[Path, ...]  # report directory of each run
    hypernodes: tuple[dict[str, Any], ...] = ()
    #: The cluster's StorageClasses, PersistentVolumes, CSINodes and CSIDrivers.
    storage: tuple[dict[str, Any], ...] = ()
    #: The cluster's ResourceSlices and DeviceClasses.
    devices: tuple[dict[str, Any], ...] = ()
    seeds: tuple[int, ...] = ()  # of each run, in a grid over seeds (else empty)
    label_errors: bool = False  # an InputError names the run it came from


#: What a worker sends back instead of the workload, which the parent already holds.
_DETACHED = Workload(jobs=(), queues=())


def _run_config(
    plan: _Plan, index: int, progress: Progress | None
) -> tuple[SimResult, dict[str, Any], Path]:
    """Simulate configuration ``index`` and write its report directory; return the
    result, the run's wall-clock facts and the report page."""
    if plan.label_errors:
        try:
            return _run_config(dataclasses.replace(plan, label_errors=False), index, progress)
        except InputError as err:
            where = f"seed {plan.seeds[index]}, " if plan.seeds else ""
            source = plan.schedulers[index].config.source
            raise InputError(
                f"in the run of {plan.names[index]} ({where}config {source}): {err.render()}"
            ) from None
    from pumice.sim.engine import Simulation
    from pumice.sim.report import write_report

    name = plan.names[index]
    workload = plan.workloads[index]
    sim = Simulation(
        plan.nodes,
        workload,
        plan.schedulers[index],
        plan.options,
        config_name=name,
        hypernodes=plan.hypernodes,
        storage=plan.storage,
        devices=plan.devices,
    )
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
        "scheduling_seconds": round(result.scheduling_seconds, 3),
        "cycle_seconds": round(result.cycle_seconds, 3),
        "cycles": result.summary["cycles"],
    }
    if "forecast" in result.summary:
        run_info["forecast_seconds"] = round(result.forecast_seconds, 3)
    if plan.seeds:
        run_info["seed"] = plan.seeds[index]
    page = write_report(result, plan.targets[index], run_info)
    return result, run_info, page


def _run_config_detached(
    plan: _Plan, index: int, progress: Progress | None
) -> tuple[SimResult, dict[str, Any], Path]:
    """:func:`_run_config` in a worker process: the result goes back without its
    workload (pickling it back would cost time for nothing); the parent reattaches it."""
    result, run_info, page = _run_config(plan, index, progress)
    return dataclasses.replace(result, workload=_DETACHED), run_info, page


def _run_config_shipped(
    plan: _Plan, index: int, progress: Progress | None
) -> tuple[SimResult, dict[str, Any], dict[str, bytes], str]:
    """:func:`_run_config` on a Dask worker, which may be another machine: the report
    is written into a scratch directory and its files travel back (with the result,
    detached as above, and the page's relative path) for the parent to write under the
    run's own directory, so the report is the one a local run writes."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pumice-run-") as tmp:
        targets = list(plan.targets)
        targets[index] = Path(tmp)
        result, run_info, page = _run_config(
            dataclasses.replace(plan, targets=tuple(targets)), index, progress
        )
        files = {
            f.relative_to(tmp).as_posix(): f.read_bytes()
            for f in sorted(Path(tmp).rglob("*"))
            if f.is_file()
        }
        rel = page.relative_to(tmp).as_posix()
    return dataclasses.replace(result, workload=_DETACHED), run_info, files, rel


def _write_shipped(target: Path, files: dict[str, bytes], page: str) -> Path:
    """Write a report that came back from a Dask worker; return its page's path."""
    for rel, data in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return target / page


def _seeded(args: argparse.Namespace, seed: int) -> argparse.Namespace:
    """The arguments with one seed, as :func:`workload_from_args` reads them."""
    return argparse.Namespace(**{**vars(args), "seed": seed})


def _cpus() -> int:
    """CPUs this process may run on (the affinity mask, e.g. a container's cpuset)."""
    count = getattr(os, "process_cpu_count", None)  # Python >= 3.13
    if count is not None:
        return count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def _modes(args: argparse.Namespace) -> list[str]:
    """The ``--network-topology`` modes, checked (none: the workload as it is)."""
    from pumice.sim.topology import MODES

    if args.network_topology is None:
        return []
    modes = [m.strip() for m in args.network_topology.split(",") if m.strip()]
    if not modes:
        raise InputError(f"expected modes among {', '.join(MODES)}", field="--network-topology")
    for m in modes:
        if m not in MODES:
            raise InputError(
                f"expected one of {', '.join(MODES)}, got {shown(m)}", field="--network-topology"
            )
    if len(set(modes)) != len(modes):
        raise InputError("a mode is given twice", field="--network-topology")
    if args.topology_tier < 1:
        raise InputError("must be >= 1", field="--topology-tier")
    if args.topology_min_pods < 2:
        raise InputError("must be >= 2 (a gang)", field="--topology-min-pods")
    return modes


def _slowdown(args: argparse.Namespace, cluster: ClusterSpec) -> Slowdown:
    from pumice.sim.topology import Slowdown

    slowdown = Slowdown.parse(args.topology_slowdown, "--topology-slowdown")
    if slowdown and not cluster.hypernodes:
        raise InputError(
            "needs a cluster with HyperNodes (--topology, or HyperNodes in --cluster)",
            field="--topology-slowdown",
        )
    return slowdown


def _variants(
    args: argparse.Namespace, modes: list[str], workload: Workload, cluster: ClusterSpec
) -> list[tuple[str | None, Workload]]:
    """The workload of each run: as given, or with the large gangs' networkTopology set
    to each mode; notes on constraints the cluster cannot honour."""
    from pumice.sim.engine import node_allocatable
    from pumice.sim.topology import cluster_topology, unplaceable_hard_gangs, with_network_topology

    if modes and not cluster.hypernodes:
        raise InputError(
            "needs a cluster with HyperNodes (--topology, or HyperNodes in --cluster)",
            field="--network-topology",
        )
    variants: list[tuple[str | None, Workload]] = [(None, workload)]
    if modes:
        variants = [
            (
                m,
                with_network_topology(
                    workload, m, highest_tier=args.topology_tier, min_pods=args.topology_min_pods
                ),
            )
            for m in modes
        ]
    topology = cluster_topology(cluster.nodes, cluster.hypernodes)
    if topology is None:
        asking = sum(1 for j in workload.jobs if j.network_topology is not None)
        if asking:
            print(
                f"pumice: note: {asking} job(s) ask for a networkTopology, but the cluster "
                f"has no HyperNodes (see --topology)",
                file=sys.stderr,
            )
        return variants
    for note in topology.notes:
        print(f"pumice: note: {note}", file=sys.stderr)
    allocs = {
        n["metadata"]["name"]: a
        for n, a in zip(cluster.nodes, node_allocatable(cluster.nodes), strict=True)
    }
    for mode, variant in variants:
        never = unplaceable_hard_gangs(variant, allocs, topology)
        if never:
            where = f" ({mode})" if mode else ""
            print(
                f"pumice: warning{where}: {len(never)} hard gang(s) are larger than every "
                f"HyperNode of the tiers they allow: they never run where it is enforced; "
                f"first: {never[0]}",
                file=sys.stderr,
            )
    return variants


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from pumice.scheduler import Scheduler
    from pumice.sim import gpu_sharing
    from pumice.sim.engine import SimOptions, node_allocatable
    from pumice.sim.report_folder import prepare_out
    from pumice.sim.summary_text import summary_rows
    from pumice.sim.whatif import config_names, has_topology, topology_rows, write_comparison

    if args.period <= 0:
        raise InputError("must be > 0", field="--period")
    if args.usage_factor < 0:
        raise InputError("must be >= 0", field="--usage-factor")
    if args.metrics_period is not None and args.metrics_period <= 0:
        raise InputError("must be > 0", field="--metrics-period")
    if args.workers is not None and args.workers < 1:
        raise InputError("must be >= 1", field="--workers")
    from pumice.sim import sweep

    seeds = sweep.seeds(args.seed, args.seeds)
    grid = len(seeds) > 1
    if grid and (args.workload or args.trace_format):
        raise InputError(
            "seeds vary generated workloads only (--jobs, --nodes, --cluster, the built-in "
            "scenario); workload files and traces are the same for every seed",
            field="--seeds" if args.seeds is not None else "--seed",
        )
    address = sweep.dask_address(args.dask, args.workers)
    configs: list[str | None] = list(args.config) or [None]
    config_labels = config_names(args.config) if args.config else ["default"]
    modes = _modes(args)
    # A bad config or plugin fails first. With worker processes, each scheduler (its
    # registries included) reaches the workers in the plan: inherited with fork,
    # pickled with spawn (extension registries pickle as "load the directory again").
    schedulers = [Scheduler.from_file(c, args.plugins_dir) for c in configs]
    for scheduler in schedulers:
        for warning in scheduler.config.warnings:
            print(f"pumice: warning: {scheduler.config.source}: {warning}", file=sys.stderr)
        if set(modes) - {"none"} and TOPOLOGY_PLUGIN not in scheduler.config.plugin_names():
            print(
                f"pumice: warning: {scheduler.config.source} has no {TOPOLOGY_PLUGIN} "
                f"plugin: as in Volcano, a gang's networkTopology is then not enforced "
                f"(see src/pumice/examples/configs/network-topology.yaml)",
                file=sys.stderr,
            )
    cluster = cluster_from_args(args)
    nodes = cluster.nodes
    workloads = {s: workload_from_args(_seeded(args, s), nodes) for s in seeds}
    workload = workloads[seeds[0]]
    if workload.skipped:
        first = workload.warnings[0] if workload.warnings else "?"
        print(
            f"pumice: warning: skipped {workload.skipped} input row(s) or object(s); "
            f"first: {first}",
            file=sys.stderr,
        )
    slowdown = _slowdown(args, cluster)
    options = SimOptions(
        period=args.period,
        startup_delay=args.startup_delay,
        grace=args.grace,
        skip_idle=not args.no_skip,
        pods_on_admission=not args.pods_upfront,
        job_controller=not (args.simple_jobs or args.pods_upfront),
        topology_slowdown=slowdown,
        usage_factor=args.usage_factor,
        metrics_period=args.metrics_period,
        forecast_sample=max(args.forecast_sample, 1) if args.forecast_error else 0,
        forecast_durations=args.forecast_durations,
    )
    # One run per configuration, or per configuration and network-topology mode.
    run_schedulers: list[Scheduler] = []
    run_workloads: list[Workload] = []
    names: list[str] = []
    run_seeds: list[int] = []  # in a grid, ordered by (configuration, seed)
    by_seed = {s: _variants(args, modes, workloads[s], cluster) for s in seeds}
    sharing = gpu_sharing.parse_modes(args.gpu_sharing)
    if sharing:
        if modes:
            raise InputError("give --gpu-sharing or --network-topology, not both")
        allocs = node_allocatable(nodes)
        by_seed = {
            s: list[tuple[str | None, Workload]](
                gpu_sharing.variants(sharing, workloads[s], allocs)
            )
            for s in seeds
        }
    for ci, label in enumerate(config_labels):
        for k in range(len(by_seed[seeds[0]])):
            for si, seed in enumerate(seeds):
                mode, variant = by_seed[seed][k]
                if mode is None:
                    names.append(label)
                else:
                    names.append(mode if len(config_labels) == 1 else f"{label}-{mode}")
                # each run its own scheduler: a second one for the same file is read again
                run_schedulers.append(
                    schedulers[ci]
                    if k == 0 and si == 0
                    else Scheduler.from_file(configs[ci], args.plugins_dir)
                )
                run_workloads.append(variant)
                run_seeds.append(seed)
    from pumice.sim.engine import check_workload

    checked: set[int] = set()  # (refused before anything is written)
    for i, run_workload in enumerate(run_workloads):
        if id(run_workload) in checked:
            continue
        checked.add(id(run_workload))
        try:
            check_workload(run_workload, nodes)
        except InputError as err:
            if not grid:
                raise
            source = run_schedulers[i].config.source
            raise InputError(
                f"in the run of {names[i]} (seed {run_seeds[i]}, config {source}): {err.render()}"
            ) from None
    out = prepare_out(args.out)  # refuses a folder that is not a report: exit 2
    if grid:
        targets = tuple(out / n / f"seed-{s}" for n, s in zip(names, run_seeds, strict=True))
    else:
        targets = tuple(out / n if len(names) > 1 else out for n in names)
    plan = _Plan(
        nodes=nodes,
        workloads=tuple(run_workloads),
        options=options,
        schedulers=tuple(run_schedulers),
        names=tuple(names),
        targets=targets,
        hypernodes=tuple(cluster.hypernodes),
        storage=tuple(cluster.storage),
        devices=tuple(cluster.devices),
        seeds=tuple(run_seeds) if grid else (),
        label_errors=grid or address is not None,
    )
    workers = min(args.workers if args.workers is not None else _cpus(), len(names))
    labels = [f"simulating {n}" if len(names) > 1 else "simulating" for n in names]
    if grid:
        labels = [f"simulating {n} seed {s}" for n, s in zip(names, run_seeds, strict=True)]
    results: list[tuple[SimResult, dict[str, Any], Path]] = []
    if address is not None:  # on the Dask cluster; the reports are written here
        bars = _Bars(labels, not args.no_progress)
        shipped = sweep.run_on_dask(
            _run_config_shipped, plan, len(names), address, bars if bars.enabled else None
        )
        results = [
            (
                dataclasses.replace(r, workload=run_workloads[i]),
                info,
                _write_shipped(plan.targets[i], files, rel),
            )
            for i, (r, info, files, rel) in enumerate(shipped)
        ]
        workers = 0  # not this machine's processes
    elif workers == 1:  # in this process, one after the other
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
            (dataclasses.replace(r, workload=run_workloads[i]), info, page)
            for i, (r, info, page) in enumerate(done)
        ]

    console = Console()
    if grid:
        _print_grid(console, results, names, seeds, workloads, out, address, workers)
    elif len(results) == 1:
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
        wall, scheduling = info["wall_seconds"], info["scheduling_seconds"]
        print(
            f"wall time {wall:.1f} s: {scheduling:.1f} s scheduling "
            f"({info['cycles']:,} cycles), {max(wall - scheduling, 0.0):.1f} s the simulated "
            "cluster (controllers, kubelets, metrics)"
        )
        if "forecast_seconds" in info:
            fc = result.summary["forecast"]
            print(
                f"start forecasts: {fc['forecasts']:,} replays ({fc['replayed_cycles']:,} "
                f"cycles) took {info['forecast_seconds']:.1f} s of the wall time"
            )
        print(f"report: {page}")
    else:
        from pumice.sim.summary_text import UTILIZATION_NOTE, minutes, utilization_rows

        run_all: dict[str, Any] = {"workers": workers}
        if address is not None:
            run_all["dask"] = address
        run_all["configs"] = [info for _r, info, _p in results]
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
        for key, window, values in utilization_rows(rs[0]):
            for res in values or rs[0]["utilization"]:
                shown = [(s.get(key) or {}).get(res) for s in rs]
                t.add_row(
                    f"utilization {res} ({window})",
                    *("–" if v is None else f"{v:.1%}" for v in shown),
                )
        t.add_row("fairness gap", *(f"{s['fairness_gap']:.3f}" for s in rs))
        for key in ("evictions", "jobs_never_ran", "gang_violations"):
            t.add_row(key.replace("_", " "), *(str(s[key]) for s in rs))
        done_results = [r for r, _i, _p in results]
        if has_topology(done_results):
            for label, vals in topology_rows(done_results):
                if label.startswith(("wait", "completion", "utilization")):
                    continue  # shown above
                if label.endswith("(s)"):
                    t.add_row(label.removesuffix(" (s)"), *(minutes(v) for v in vals))
                else:
                    t.add_row(label, *("–" if v is None else f"{v:g}" for v in vals))
        console.print(t)
        print(UTILIZATION_NOTE)
        for line in gpu_sharing.what_sharing_bought(names, rs):
            print(line)
        print(f"report: {page}")
    bad = sum(r.summary["gang_violations"] for r, _i, _p in results)
    if bad:
        print(f"pumice: error: {bad} gang atomicity violation(s)", file=sys.stderr)
        return 1
    return 0


def _print_grid(
    console: Any,
    results: Sequence[tuple[SimResult, dict[str, Any], Path]],
    names: Sequence[str],
    seeds: Sequence[int],
    workloads: dict[int, Workload],
    out: Path,
    address: str | None,
    workers: int,
) -> None:
    """A grid's report: aggregated over the seeds per configuration (files, page and
    the terminal table, one ``mean ± std`` cell per configuration)."""
    from rich.table import Table

    from pumice.sim import sweep

    unique = list(dict.fromkeys(names))
    rows = sweep.aggregate([r for r, _i, _p in results], unique, seeds)
    run_all: dict[str, Any] = {"workers": workers}
    if address is not None:
        run_all["dask"] = address
    run_all["runs"] = [info for _r, info, _p in results]
    jobs = {s: len(w.jobs) for s, w in workloads.items()}
    page = sweep.write_grid(rows, unique, seeds, out, run_all, jobs)
    t = Table(
        title=f"pumice simulate: what-if grid, {len(unique)} configuration(s) × "
        f"{len(seeds)} seeds (mean ± std over the seeds)",
        title_justify="left",
    )
    t.add_column("metric", style="bold")
    for n in unique:
        t.add_column(n, justify="right")
    for row in sweep.headline(rows):
        label = row.metric.removesuffix(" (s)").removesuffix(" (mean over queues)")
        t.add_row(label, *(sweep.cell_text(row.metric, row.cells.get(n)) for n in unique))
    console.print(t)
    print(f"report: {page}")


__all__ = ["add_parser", "run"]
