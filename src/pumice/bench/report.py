"""Print and save benchmark figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import orjson

from pumice.bench.runner import Result

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


def print_results(results: Sequence[Result]) -> None:
    print("  ".join(fmt.format(name) for name, fmt in COLUMNS))
    for row in rows(results):
        print("  ".join(fmt.format(v) for (_, fmt), v in zip(COLUMNS, row, strict=True)))
    for r in results:
        for p in r.problems[:10]:
            print(f"{r.name}: INVALID: {p}")


def write_json(results: Sequence[Result], path: str) -> None:
    with open(path, "wb") as fh:
        fh.write(orjson.dumps([asdict(r) for r in results], option=orjson.OPT_INDENT_2))
