"""The tally of a fuzz run, printed for people and saved as JSON; and the saved findings.

Each finding class keeps its count and its first case, whose input files are written to
``OUT/findings/<class>/`` with the one-line complaint and the command that replays it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from pumice.fuzz.cases import Case
from pumice.fuzz.verdict import Finding


@dataclass(slots=True)
class Seen:
    """One finding class: its first finding, the case that showed it, how many did."""

    finding: Finding
    case: Case
    count: int = 1
    saved: str = ""


@dataclass(slots=True)
class Tally:
    seed: int
    cases: dict[str, int] = field(default_factory=dict)
    findings: dict[str, Seen] = field(default_factory=dict)
    seconds: float = 0.0
    interrupted: bool = False

    def ran(self, case: Case) -> None:
        self.cases[case.target] = self.cases.get(case.target, 0) + 1

    def found(self, case: Case, finding: Finding) -> bool:
        """Count ``finding``; True when its class is new (the caller saves it)."""
        seen = self.findings.get(finding.key)
        if seen is None:
            self.findings[finding.key] = Seen(finding, case)
            return True
        seen.count += 1
        return False

    @property
    def total(self) -> int:
        return sum(self.cases.values())

    def to_json(self) -> dict:
        return {
            "seed": self.seed,
            "cases": self.cases,
            "seconds": round(self.seconds, 1),
            "interrupted": self.interrupted,
            "findings": [
                {
                    "class": key,
                    "kind": s.finding.kind,
                    "count": s.count,
                    "complaint": s.finding.complaint,
                    "case": s.case.index,
                    "saved": s.saved,
                }
                for key, s in sorted(self.findings.items())
            ],
        }


def replay_command(case: Case) -> str:
    return f"pumice fuzz --seed {case.seed} --case {case.index}"


def save(out: Path, seen: Seen) -> Path:
    """Write a finding's input files, its complaint and how to replay it."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", seen.finding.key).strip("-")[:80] or "finding"
    d = out / "findings" / slug
    d.mkdir(parents=True, exist_ok=True)
    case = seen.case
    for name, data in case.files.items():
        (d / name).write_bytes(data)
    (d / "complaint.txt").write_text(seen.finding.complaint + "\n")
    (d / "case.txt").write_text(
        f"target: {case.target}\nseed file: {case.origin}\n"
        + "".join(f"mutation: {m}\n" for m in case.done)
        + f"run: pumice {shlex.join(case.args)}   (in this directory)\n"
        + f"replay: {replay_command(case)}\n"
    )
    seen.saved = str(d)
    return d


def print_report(tally: Tally, out: Path) -> None:
    per = ", ".join(f"{k} {v:,}" for k, v in sorted(tally.cases.items()))
    rate = tally.total / tally.seconds if tally.seconds else 0.0
    print(
        f"pumice fuzz: seed {tally.seed}: {tally.total:,} cases ({per}) in "
        f"{tally.seconds:.0f} s ({rate:.1f} cases/s)"
        + (", interrupted" if tally.interrupted else "")
    )
    if not tally.findings:
        print("no findings")
    else:
        n = sum(s.count for s in tally.findings.values())
        print(f"{n:,} findings in {len(tally.findings)} classes:")
        for key, s in sorted(tally.findings.items(), key=lambda kv: (-kv[1].count, kv[0])):
            print(f"  {s.count:6,}  {key}")
            print(f"          {s.finding.complaint[:150]}")
            print(f"          {replay_command(s.case)}; saved in {s.saved}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(tally.to_json(), indent=2) + "\n")
    print(f"report: {out / 'report.json'}")
