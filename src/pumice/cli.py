"""The ``pumice`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pumice import __version__
from pumice.cli_args import add_plugins_dir
from pumice.errors import InputError, one_line, shown

if TYPE_CHECKING:
    from pumice.conf.config import SchedulerConfig
    from pumice.scheduler import Scheduler

EXIT_BAD_INPUT = 2


def show_warnings(config: SchedulerConfig) -> None:
    """The configuration's warnings (what pumice does not implement of it), on stderr."""
    for warning in config.warnings:
        print(one_line(f"pumice: warning: {config.source}: {warning}"), file=sys.stderr)


def _cmd_cycle(args: argparse.Namespace) -> int:
    from pumice.cache.build import build_snapshot
    from pumice.cache.load import load_objects
    from pumice.output import print_eta, print_table, to_json
    from pumice.scheduler import Scheduler

    if args.eta:
        for flag, value in (("--eta-horizon", args.eta_horizon), ("--eta-step", args.eta_step)):
            if not value > 0:
                raise InputError(f"must be positive, got {value:g}", field=flag)
    scheduler = Scheduler.from_file(args.config, args.plugins_dir)
    show_warnings(scheduler.config)
    objects, expanded = _with_jobs_expanded(load_objects(args.snapshot))
    snapshot = build_snapshot(objects, scheduler_name=args.scheduler_name)
    now = snapshot.now
    decisions = scheduler.cycle(snapshot)
    eta = None
    if args.eta:
        from pumice.forecast import forecast_starts

        eta = forecast_starts(
            [o.obj for o in objects],
            scheduler,
            now,
            horizon=args.eta_horizon,
            step=args.eta_step,
            scheduler_name=args.scheduler_name,
        )
    for note in expanded:
        print(one_line(f"pumice: note: {note}"), file=sys.stderr)
    for note in decisions.notes:
        print(one_line(f"pumice: note: {note}"), file=sys.stderr)
    if args.format == "table":  # (it lists the skipped objects in a section of its own)
        print_table(decisions)
        if eta is not None:
            print_eta(eta, now)
    else:
        for name, why in decisions.skipped.items():
            note = f"{name} skipped, as pumice run skips it: {why}"
            print(one_line(f"pumice: note: {note}"), file=sys.stderr)
        sys.stdout.buffer.write(to_json(decisions, eta))
    return 0


def _with_jobs_expanded(objects: list) -> tuple[list, list[str]]:
    """The snapshot's ``batch.volcano.sh`` Jobs without a PodGroup, expanded into what
    the job controller makes of them (see :mod:`pumice.controllers.job.expand`)."""
    from pumice.cache.build import SourcedObject
    from pumice.controllers.job.expand import JOB_API, expand_jobs

    jobs = [o for o in objects if o.obj.get("kind") == "Job" and o.obj.get("apiVersion") == JOB_API]
    if not jobs:
        return objects, []
    try:
        _rest, made, notes = expand_jobs(o.obj for o in objects)
    except InputError as err:
        raise err.located(file=jobs[0].source) from None
    kept = [o for o in objects if o not in jobs]
    return kept + [SourcedObject(m, jobs[0].source) for m in made], notes


def _scheduler_from_text(text: str) -> Scheduler:
    """A scheduler for a configuration given as YAML text (a benchmark's own)."""
    from pumice.conf.config import parse_config
    from pumice.documents import load_one_yaml
    from pumice.scheduler import Scheduler

    document = load_one_yaml(text, source="<scenario>")
    return Scheduler.create(parse_config(document, source="<scenario>"))


def _cmd_bench(args: argparse.Namespace) -> int:
    from pumice.bench.report import print_results, write_json
    from pumice.bench.runner import Result, run_isolated, run_one
    from pumice.bench.scenarios import DEFAULT, known, resolve
    from pumice.scheduler import Scheduler

    if "e2e" in (args.scenario or ()):
        from pumice.bench.e2e_command import run_command

        return run_command(args)
    if "faults" in (args.scenario or ()):
        from pumice.faults.command import run_command as run_faults

        return run_faults(args)
    if args.list:
        for name, description in known():
            print(f"{name:<18} {description}")
        return 0
    try:
        scenarios = resolve(args.scenario or DEFAULT)
    except KeyError as err:
        names = ", ".join(name for name, _ in known())
        raise InputError(f"unknown scenario {shown(err.args[0])} (known: {names})") from None
    scheduler = Scheduler.from_file(args.config, args.plugins_dir)
    show_warnings(scheduler.config)
    run = run_one if args.in_process else run_isolated
    results = []
    for s in scenarios:
        print(f"pumice: bench: {s.name}: {s.description}", file=sys.stderr)
        own = getattr(s, "config", None)
        chosen = scheduler if args.config or own is None else _scheduler_from_text(own)
        results.append(run(s, chosen, args.repeat, not args.no_check))
    print_results(results)
    if args.json:
        write_json(results, args.json)
    if args.plot:
        from pumice.bench.plot import plot_scale

        if not plot_scale([r for r in results if isinstance(r, Result)], args.plot):
            print("pumice: bench: no scale-NxP results to plot", file=sys.stderr)
    return 0 if all(r.valid for r in results) else 1


def _cmd_explain_config(args: argparse.Namespace) -> int:
    import orjson

    from pumice.explain import explain, print_text
    from pumice.scheduler import Scheduler

    exp = explain(Scheduler.from_file(args.conf, args.plugins_dir))
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(exp.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_text(exp)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pumice",
        description="A batch and gang scheduler for Kubernetes, compatible with Volcano.",
    )
    p.add_argument("--version", action="version", version=f"pumice {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser(
        "cycle",
        help="run one scheduling cycle on a snapshot and print the decisions",
        description="Replay one scheduling cycle on a snapshot of cluster state (e.g. "
        "`kubectl get nodes,pods,podgroups.scheduling.volcano.sh,queues,priorityclasses "
        "-A -o yaml`) and print binds, evictions, pipelined pods, podgroup phases and "
        "why each waiting job waits.",
    )
    c.add_argument("snapshot", nargs="+", help="YAML/JSON files or directories")
    c.add_argument("--config", help="Volcano scheduler configuration (default: Volcano's)")
    add_plugins_dir(c)
    c.add_argument("--format", choices=("json", "table"), default="json")
    c.add_argument(
        "--scheduler-name",
        default="volcano",
        help="pods with this schedulerName (or none) are ours (default: volcano)",
    )
    c.add_argument(
        "--eta",
        action="store_true",
        help="also estimate when each waiting job starts: the scheduler replayed forward, "
        "running pods ending at their pumice.sim/duration annotation or "
        "activeDeadlineSeconds, no new arrivals assumed (JSON key eta)",
    )
    c.add_argument(
        "--eta-horizon",
        type=float,
        default=7 * 24 * 3600.0,
        metavar="S",
        help="with --eta: how far ahead to look, in seconds (default 7 days)",
    )
    c.add_argument(
        "--eta-step",
        type=float,
        default=1.0,
        metavar="S",
        help="with --eta: take running pods' ends in at multiples of S seconds (default 1; "
        "300 replays a 1,000-node cluster in a few hundred cycles, each estimate up to S "
        "late)",
    )
    c.set_defaults(func=_cmd_cycle)

    b = sub.add_parser(
        "bench",
        help="time the scheduling core on built-in cluster scenarios",
        description="Build cluster states in memory, run them through the same snapshot "
        "builder and scheduling cycle as `pumice cycle`, and print pods decided per "
        "second, cycle latency (p50, p99 over repeats), peak memory and a validity check "
        "(no node over capacity, gangs whole). The sim-* scenarios instead run a generated "
        "`pumice simulate` workload to its daily peak and time every cycle of a window "
        "there. Exit status 1 if a check fails.",
    )
    b.add_argument(
        "scenario",
        nargs="*",
        help="scenario names; --list lists them all with what each builds (default: "
        "basic, large, gang, constraints, memory, scale; the others, such as topology, "
        "volumes, deviceshare, quiet or the simulator windows sim-peak-small, sim-peak, "
        "sim-backlog, run by name); e2e alone runs pumice and its peers against a real "
        "API server (the --e2e-* options); faults alone runs pumice run against a real "
        "API server under injected faults and checks the cluster (the --faults-* options)",
    )
    b.add_argument("--list", action="store_true", help="list the scenarios and exit")
    b.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="cycles per scenario (default 3; a sim-* scenario runs its window once)",
    )
    b.add_argument("--config", help="Volcano scheduler configuration (default: Volcano's)")
    add_plugins_dir(b)
    b.add_argument("--json", help="also write the figures to this JSON file")
    b.add_argument("--plot", help="also plot the scale curve (scale-NxP results) to this PNG")
    b.add_argument("--no-check", action="store_true", help="skip the validity check")
    b.add_argument(
        "--in-process",
        action="store_true",
        help="run scenarios in this process (peak memory is then cumulative)",
    )
    from pumice.bench.e2e_command import add_arguments as add_e2e

    add_e2e(b)
    from pumice.faults.command import add_arguments as add_faults

    add_faults(b)
    b.set_defaults(func=_cmd_bench)

    e = sub.add_parser(
        "explain-config",
        help="say what a scheduler configuration does, and what in it may surprise",
        description="Read a Volcano scheduler configuration (default: the built-in one) "
        "and print, for each extension point, which plugins decide it in which tier and "
        "how their answers combine; then findings: flags with no effect, orders that "
        "surprise, plugins listed twice, actions whose plugins are missing, and what "
        "pumice does not implement. Exit status 0 when the configuration loads (findings "
        "are advice), 2 when it is invalid.",
    )
    e.add_argument("conf", nargs="?", help="configuration file or ConfigMap (default: built-in)")
    add_plugins_dir(e)
    e.add_argument("--format", choices=("text", "json"), default="text")
    e.set_defaults(func=_cmd_explain_config)

    from pumice.sim.command import add_parser as add_simulate

    add_simulate(sub)
    from pumice.sandbox.command import add_parser as add_sandbox

    add_sandbox(sub)
    from pumice.run.command import add_parser as add_run

    add_run(sub)
    from pumice.controllers.command import add_parser as add_controllers

    add_controllers(sub)
    from pumice.controllers.job_cli import add_job_parser

    add_job_parser(sub)
    from pumice.controllers.queue_cli import add_queue_parser
    from pumice.visibility.command import add_pending_parser

    add_pending_parser(add_queue_parser(sub))
    from pumice.fuzz.command import add_parser as add_fuzz

    add_fuzz(sub, main)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as err:
        print(f"pumice: error: {err.render()}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
