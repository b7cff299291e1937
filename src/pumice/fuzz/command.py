"""``pumice fuzz``: run N mutated cases, minimize and save each new finding class,
print the tally. Exit status 0 without findings, 1 with some, 2 on bad arguments."""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from pumice.errors import InputError
from pumice.fuzz.cases import Case, make_case, warm_cases
from pumice.fuzz.corpus import Corpus, load_corpus
from pumice.fuzz.report import Tally, print_report, save
from pumice.fuzz.runner import Program, Running, finish, preload, run_one, start
from pumice.fuzz.verdict import Finding, judge

MIB = 1 << 20


def add_parser(sub: argparse._SubParsersAction, program: Program) -> None:
    """``pumice fuzz``, running its cases through ``program`` (pumice's command line,
    passed in by :mod:`pumice.cli`, which this module does not import)."""
    f = sub.add_parser(
        "fuzz",
        help="feed pumice mutated snapshots, configurations and workloads; report crashes",
        description="Mutate real snapshots, scheduler configurations and simulator "
        "workloads (wrong types, deletions, huge and negative numbers, deep nesting, "
        "aliases, bad encodings...) and run `pumice cycle`, `pumice explain-config` and "
        "`pumice simulate` on them, each case in a child process with a time and memory "
        "limit. A case must end in decisions or one line of error with exit status 2, "
        "and a cycle's decisions must leave no node over its allocatable (in exact "
        "arithmetic), bind no pod twice, place no gang in part and evict only bound "
        "pods. Each new kind of finding is minimized and saved with its input files. "
        "Exit status 1 if anything was found. Deterministic from --seed.",
    )
    f.add_argument("--cases", type=int, default=1000, help="cases to run (default 1000)")
    f.add_argument("--seed", type=int, default=1, help="seed of the run (default 1)")
    f.add_argument(
        "--out", default="pumice-fuzz", help="findings directory (default ./pumice-fuzz)"
    )
    f.add_argument(
        "--case",
        type=int,
        action="append",
        metavar="I",
        help="run only case I of the seed (repeatable): replays a finding",
    )
    f.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1)")
    f.add_argument("--timeout", type=float, default=30.0, help="seconds per case (default 30)")
    f.add_argument("--memory", type=int, default=2048, help="MiB per case (default 2048)")
    f.add_argument("--no-minimize", action="store_true", help="save findings as found")
    f.set_defaults(func=functools.partial(run, program=program))


def run(args: argparse.Namespace, program: Program) -> int:
    if args.cases < 0 or args.jobs < 1 or args.timeout <= 0 or args.memory < 64:
        raise InputError("--cases >= 0, --jobs >= 1, --timeout > 0 and --memory >= 64 please")
    corpus = load_corpus()
    out = Path(args.out)
    tally = Tally(args.seed)
    indices = list(args.case) if args.case else list(range(args.cases))
    base = Path(tempfile.mkdtemp(prefix="pumice-fuzz-"))
    began = time.monotonic()
    running: dict[int, Running] = {}
    try:
        preload(warm_cases(corpus), program)
        _loop(args, corpus, indices, base, out, tally, running, program)
    except KeyboardInterrupt:  # (the tally so far is still worth printing)
        tally.interrupted = True
        for pid in running:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        tally.seconds = time.monotonic() - began
        shutil.rmtree(base, ignore_errors=True)
    print_report(tally, out)
    return 1 if tally.findings else 0


def _loop(
    args: argparse.Namespace,
    corpus: Corpus,
    indices: list[int],
    base: Path,
    out: Path,
    tally: Tally,
    running: dict,
    program: Program,
) -> None:
    """Run the cases, ``args.jobs`` at once; ``running`` holds the children alive."""
    memory = args.memory * MIB
    todo = iter(indices)
    left = True
    while left or running:
        while left and len(running) < args.jobs:
            index = next(todo, None)
            if index is None:
                left = False
                break
            r = start(make_case(corpus, args.seed, index), base, args.timeout, memory, program)
            running[r.pid] = r
        if not running:
            break
        pid, status = os.wait()
        r = running.pop(pid, None)
        if r is None:
            continue
        tally.ran(r.case)
        finding = judge(r.case, finish(r, status), args.timeout)
        if args.case:
            print(f"case {r.case.index}: {r.case.target} on {r.case.origin}; {r.case.done}")
            print(f"  {finding.complaint if finding else 'fine'}")
        if finding is not None and tally.found(r.case, finding):
            seen = tally.findings[finding.key]
            if not args.no_minimize:
                seen.case = _minimize(r.case, finding, base, args.timeout, memory, program)
            save(out, seen)
        if tally.total % 1000 == 0:
            print(
                f"pumice fuzz: {tally.total:,} cases, {len(tally.findings)} finding classes",
                file=sys.stderr,
            )


def _minimize(
    case: Case, finding: Finding, base: Path, timeout: float, memory: int, program: Program
) -> Case:
    """The case with every mutation that the finding does not need dropped."""
    plan = case.plan
    best = case
    for m in case.plan:
        if len(plan) == 1:
            break
        fewer = tuple(x for x in plan if x is not m)
        try:
            candidate = case.with_plan(fewer)
        except Exception:  # (a plan that no longer applies is not smaller)
            continue
        again = judge(candidate, run_one(candidate, base, timeout, memory, program), timeout)
        if again is not None and again.key == finding.key:
            plan, best = fewer, candidate
    return best
