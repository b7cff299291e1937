"""A run's outcome judged: fine, or a finding with its class and a one-line complaint.

Fine is exit status 0 with decisions whose invariants hold, or exit status 2 with
exactly one ``pumice: error:`` line (warnings and notes may precede it) and nothing
else. A finding's class groups findings of one cause: a traceback by exception type and
the innermost frame in pumice, a signal by name, an invariant by its name, so that a
report counts causes rather than cases.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from pumice.fuzz.cases import CYCLE, Case
from pumice.fuzz.runner import Outcome

EXIT_BAD_INPUT = 2
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_EXCEPTION = re.compile(r"^(\w[\w.]*(?:Error|Exception|Exit|Interrupt|Warning)?):?")


@dataclass(frozen=True, slots=True)
class Finding:
    """``kind`` (traceback, signal, timeout, exit, error, output, invariant), the class
    key (what groups findings of one cause), and a one-line complaint."""

    kind: str
    key: str
    complaint: str


def judge(case: Case, out: Outcome, timeout: float) -> Finding | None:
    """The finding ``out`` is, or None when the run did what pumice promises."""
    err = out.stderr.decode("utf-8", "replace")
    if out.signal is not None:
        if out.signal == signal.SIGALRM:
            return Finding("timeout", f"timeout {case.target}", f"no end after {timeout:g} s")
        name = signal.Signals(out.signal).name
        return Finding("signal", f"signal {name} {case.target}", f"killed by {name}")
    if "Traceback (most recent call last)" in err:
        return _traceback(case, err)
    if out.status == 0:
        return _decisions(case, out)
    if out.status == EXIT_BAD_INPUT:
        errors = [line for line in err.splitlines() if line.startswith("pumice: error:")]
        others = [line for line in err.splitlines() if line and not line.startswith("pumice: ")]
        if len(errors) == 1 and not others:
            return None
        first = (errors or others or ["(nothing)"])[0][:160]
        return Finding(
            "error",
            f"error not one line {case.target}",
            f"exit 2 with {len(errors)} error line(s) and {len(others)} other(s): {first}",
        )
    last = err.strip().splitlines()[-1][:160] if err.strip() else "(nothing on stderr)"
    key = re.sub(r"\d+", "N", last)[:80]
    return Finding("exit", f"exit {out.status} {case.target}: {key}", f"exit {out.status}: {last}")


def _traceback(case: Case, err: str) -> Finding:
    frames = _FRAME.findall(err)
    ours = [f for f in frames if "/pumice/" in f[0] and "/pumice/fuzz/" not in f[0]]
    where = ours[-1] if ours else (frames[-1] if frames else ("?", "0", "?"))
    lines = [line for line in err.splitlines() if line and not line.startswith(" ")]
    last = lines[-1] if lines else "?"
    m = _EXCEPTION.match(last)
    exc = m.group(1) if m else last[:40]
    short = where[0].split("/pumice/")[-1]
    return Finding(
        "traceback",
        f"traceback {exc} in {short}:{where[2]}",
        f"{case.target}: traceback {last[:160]} (at {short}:{where[1]} in {where[2]})",
    )


def _decisions(case: Case, out: Outcome) -> Finding | None:
    if case.target != CYCLE:
        return None
    if out.violations:
        first = out.violations[0]
        return Finding("invariant", first.split(":", 1)[0], first[:200])
    if not out.stdout.lstrip().startswith(b"{"):
        return Finding("output", "cycle output not JSON", "exit 0 without JSON decisions")
    return None
