"""The figures of ``pumice bench faults``: per scenario, runs, faults injected by kind and
violations by check; then every violation found, one line each."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from pumice.faults.checks import CHECKS
from pumice.faults.scenarios import RunResult


def print_report(results: Sequence[RunResult], out: TextIO) -> None:
    """A table per scenario and a total; the violations and failed runs listed after."""
    names = list(dict.fromkeys(r.scenario for r in results))
    out.write(f"{'scenario':<18} {'runs':>4} {'bound':>6}  faults injected\n")
    for name in names:
        mine = [r for r in results if r.scenario == name]
        faults: Counter[str] = Counter()
        for r in mine:
            faults.update(r.faults)
        shown = ", ".join(f"{k} {v}" for k, v in sorted(faults.items())) or "none"
        bound = sum(r.bound for r in mine) / len(mine)
        out.write(f"{name:<18} {len(mine):>4} {bound:>6.1f}  {shown}\n")
    total: Counter[str] = Counter()
    for r in results:
        total.update(r.faults)
    out.write(
        f"\nruns {len(results)}, faults injected {sum(total.values())}"
        f" ({', '.join(f'{k} {v}' for k, v in sorted(total.items())) or 'none'})\n"
    )
    by_check = Counter(v.check for r in results for v in r.violations)
    out.write("violations: " + ", ".join(f"{c} {by_check[c]}" for c in CHECKS) + "\n")
    errors = [r for r in results if r.error]
    if errors:
        out.write(f"runs that could not run: {len(errors)}\n")
    for r in results:
        for v in r.violations:
            out.write(f"  {r.scenario}: {v.check}: {v.message}\n")
        if r.error:
            out.write(f"  {r.scenario}: error: {r.error}\n")


def valid(results: Sequence[RunResult]) -> bool:
    return all(not r.violations and not r.error for r in results)


__all__ = ["print_report", "valid"]
