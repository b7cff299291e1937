"""Print and save benchmark figures.

Snapshot scenarios (:class:`~pumice.bench.runner.Result`) and simulator windows
(:class:`~pumice.bench.sim_peak.PeakResult`) measure different things, so each kind has
its own table; the JSON file is one list of both, each entry its result's fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import orjson

from pumice.bench.runner import AnyResult, Result
from pumice.bench.sim_peak import PeakResult

COLUMNS = (
    ("scenario", "{:<16}"),
    ("nodes", "{:>6}"),
    ("pending", "{:>7}"),
    ("pods/s", "{:>9}"),
    ("cycle p50", "{:>10}"),
    ("cycle p99", "{:>10}"),
    ("cpu p50", "{:>8}"),
    ("build", "{:>8}"),
    ("bound", "{:>7}"),
    ("waiting", "{:>7}"),
    ("peak MiB", "{:>8}"),
    ("valid", "{:<5}"),
)

#: The simulator window's table: what a cycle costs at the peak, and the deterministic
#: counts (cycles, finished, bound, placements) that say two runs did the same work.
PEAK_COLUMNS = (
    ("scenario", "{:<16}"),
    ("nodes", "{:>5}"),
    ("jobs", "{:>7}"),
    ("window h", "{:>11}"),
    ("backlog", "{:>7}"),
    ("cycles", "{:>6}"),
    ("cycle p50", "{:>9}"),
    ("cycle p99", "{:>9}"),
    ("wall", "{:>7}"),
    ("cpu", "{:>7}"),
    ("finished", "{:>8}"),
    ("jobs/s", "{:>6}"),
    ("bound", "{:>6}"),
    ("build", "{:>7}"),
    ("peak MiB", "{:>8}"),
    ("valid", "{:<5}"),
    ("placements", "{:<16}"),
)


def rows(results: Sequence[Result]) -> list[list[str]]:
    out = []
    for r in results:
        out.append(
            [
                r.name,
                str(r.nodes),
                str(r.pending),
                f"{r.pods_per_s:,.0f}",
                f"{r.cycle_p50_s:.3f}s",
                f"{r.cycle_p99_s:.3f}s",
                f"{r.cycle_cpu_s:.3f}s",
                f"{r.build_s:.2f}s",
                str(r.bound + r.pipelined),
                str(r.waiting),
                f"{r.peak_rss_mib:.0f}",
                "yes" if r.valid else "NO",
            ]
        )
    return out


def peak_rows(results: Sequence[PeakResult]) -> list[list[str]]:
    """Backlog is "pending/admitted" at the window's start; window h the simulated
    times of its first cycle and of where it closed."""
    return [
        [
            r.name,
            str(r.nodes),
            str(r.jobs),
            f"{r.opened_h:.2f}-{r.closed_h:.2f}",
            f"{r.backlog_pending}/{r.backlog_admitted}",
            str(r.cycles),
            f"{r.cycle_p50_s * 1000:.1f}ms",
            f"{r.cycle_p99_s * 1000:.1f}ms",
            f"{r.wall_s:.2f}s",
            f"{r.cpu_s:.2f}s",
            str(r.jobs_finished),
            f"{r.jobs_per_s:.1f}",
            str(r.pods_bound),
            f"{r.build_s:.1f}s",
            f"{r.peak_rss_mib:.0f}",
            "yes" if r.valid else "NO",
            r.placements,
        ]
        for r in results
    ]


#: Steps shown by name in a window's breakdown; the rest are summed on one line.
STEPS_SHOWN = 12


def step_lines(r: PeakResult) -> list[str]:
    """Where the window's time went, per cycle: the largest steps of the cycles (see
    :class:`~pumice.bench.sim_peak.StepTimes`), then the simulator around them (the
    controllers, the kubelet, the cache taking in events and the decisions)."""
    n = max(r.cycles, 1)
    whole = max(r.wall_s, r.cycle_total_s, 1e-12)
    shown = list(r.steps.items())[:STEPS_SHOWN]
    rest = sum(list(r.steps.values())[STEPS_SHOWN:])
    if rest:
        shown.append((f"{len(r.steps) - STEPS_SHOWN} other steps", rest))
    shown.append(("the simulator around the cycles", max(r.wall_s - r.cycle_total_s, 0.0)))
    lines = [f"{r.name}: where the window's time went, per cycle ({r.cycles:,} cycles)"]
    for step, seconds in shown:
        lines.append(f"  {step:<32} {seconds / n * 1e6:>9,.0f} us  {seconds / whole:>4.0%}")
    return lines


def _table(columns: Sequence[tuple[str, str]], table: list[list[str]]) -> None:
    print("  ".join(fmt.format(name) for name, fmt in columns).rstrip())
    for row in table:
        line = "  ".join(fmt.format(v) for (_, fmt), v in zip(columns, row, strict=True))
        print(line.rstrip())


def print_results(results: Sequence[AnyResult]) -> None:
    from pumice.bench.quiet import QUIET_COLUMNS, QuietResult, quiet_rows
    from pumice.bench.visibility import VISIBILITY_COLUMNS, VisibilityResult, visibility_rows

    snapshots = [r for r in results if isinstance(r, Result)]
    windows = [r for r in results if isinstance(r, PeakResult)]
    quiet = [r for r in results if isinstance(r, QuietResult)]
    seen = [r for r in results if isinstance(r, VisibilityResult)]
    if snapshots:
        _table(COLUMNS, rows(snapshots))
    if windows:
        if snapshots:
            print()
        _table(PEAK_COLUMNS, peak_rows(windows))
        for r in windows:
            if r.steps:
                print()
                print("\n".join(step_lines(r)))
    if quiet:
        if snapshots or windows:
            print()
        _table(QUIET_COLUMNS, quiet_rows(quiet))
    if seen:
        if snapshots or windows or quiet:
            print()
        _table(VISIBILITY_COLUMNS, visibility_rows(seen))
    for any_result in results:
        for p in any_result.problems[:10]:
            print(f"{any_result.name}: INVALID: {p}")


def write_json(results: Sequence[AnyResult], path: str) -> None:
    with open(path, "wb") as fh:
        fh.write(orjson.dumps([asdict(r) for r in results], option=orjson.OPT_INDENT_2))
