"""The ``pumice`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pumice import __version__
from pumice.errors import InputError

EXIT_BAD_INPUT = 2


def _cmd_cycle(args: argparse.Namespace) -> int:
    from pumice.cache.build import build_snapshot
    from pumice.cache.load import load_objects
    from pumice.output import print_table, to_json
    from pumice.scheduler import Scheduler

    scheduler = Scheduler.from_file(args.config)
    snapshot = build_snapshot(load_objects(args.snapshot), scheduler_name=args.scheduler_name)
    decisions = scheduler.cycle(snapshot)
    for note in decisions.notes:
        print(f"pumice: note: {note}", file=sys.stderr)
    if args.format == "table":
        print_table(decisions)
    else:
        sys.stdout.buffer.write(to_json(decisions))
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
        "`kubectl get nodes,pods,podgroups,queues,priorityclasses -A -o yaml`) and print "
        "binds, evictions, pipelined pods, podgroup phases and why each waiting job waits.",
    )
    c.add_argument("snapshot", nargs="+", help="YAML/JSON files or directories")
    c.add_argument("--config", help="Volcano scheduler configuration (default: Volcano's)")
    c.add_argument("--format", choices=("json", "table"), default="json")
    c.add_argument(
        "--scheduler-name",
        default="volcano",
        help="pods with this schedulerName (or none) are ours (default: volcano)",
    )
    c.set_defaults(func=_cmd_cycle)
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
