"""One fuzz case in a forked child, under a time and a memory limit.

The parent imports pumice once and forks a child per case: the child writes the case's
files into a fresh directory, runs the program on them (pumice's command line,
``pumice.cli.main``, which the caller passes in: the fuzzer sits below the command line
it drives) with its standard output and error sent to files, and (for a cycle that
printed decisions) checks the invariants there too, so that nothing a case does can
crash or hang the fuzzer itself. A child that overruns its time is killed by its own
alarm (SIGALRM), one that takes more memory than allowed gets a ``MemoryError`` or dies;
either way the parent reads how it ended.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pumice.fuzz.cases import CYCLE, Case

#: Exit status of a child whose command raised (as Python's own for an uncaught error).
EXIT_TRACEBACK = 1
INVARIANTS = "invariants.txt"

#: What a case runs: a command line's arguments in, its exit status out.
Program = Callable[[list[str]], int]


@dataclass(slots=True)
class Outcome:
    """How a case's run ended: exit status or the signal that killed it, what it
    printed, and the invariant violations of its decisions."""

    status: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    violations: list[str]


@dataclass(slots=True)
class Running:
    pid: int
    case: Case
    workdir: Path


def preload(warm: list[Case], program: Program) -> None:
    """Import what the commands import and run each of ``warm`` once, in the parent,
    so that each child is a fork of a warm interpreter (modules imported on first use,
    caches filled) and a case costs only its own work."""
    import pumice.cache.build
    import pumice.cache.load
    import pumice.controllers.job.expand
    import pumice.explain
    import pumice.fuzz.invariants
    import pumice.output
    import pumice.scheduler
    import pumice.sim.command  # noqa: F401

    with tempfile.TemporaryDirectory(prefix="pumice-fuzz-warm-") as d:
        for case in warm:  # (the first builds the program's parser: every mode's module)
            _quietly(case, Path(d), program)


def _quietly(case: Case, where: Path, program: Program) -> None:
    """Run ``case`` in this process with its output discarded."""
    for name, data in case.files.items():
        (where / name).write_bytes(data)
    here = os.getcwd()
    streams = sys.stdout, sys.stderr
    try:
        os.chdir(where)
        with open(os.devnull, "w", encoding="utf-8") as null:
            sys.stdout = sys.stderr = null
            with contextlib.suppress(Exception, SystemExit):
                program(list(case.args))
    finally:
        sys.stdout, sys.stderr = streams
        os.chdir(here)


def start(case: Case, base: Path, timeout: float, memory: int, program: Program) -> Running:
    """Fork a child running ``case`` in a new directory under ``base``."""
    workdir = Path(tempfile.mkdtemp(prefix=f"case-{case.index}-", dir=base))
    for name, data in case.files.items():
        (workdir / name).write_bytes(data)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its outcome is what the parent reads
        code = EXIT_TRACEBACK
        try:
            code = _child(case, workdir, timeout, memory, program)
        finally:
            os._exit(code)
    return Running(pid, case, workdir)


def _child(case: Case, workdir: Path, timeout: float, memory: int, program: Program) -> int:
    os.chdir(workdir)
    out = os.open("stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open("stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    # (the streams a caller may have put in place, pytest's capture, are not fd 1 and 2)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the parent stops the run)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    soft = memory + _mapped()
    resource.setrlimit(resource.RLIMIT_AS, (soft, soft))
    try:
        code = program(list(case.args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # (what a user would see as a traceback)
        traceback.print_exc()
        code = EXIT_TRACEBACK
    sys.stdout.flush()
    sys.stderr.flush()
    if code == 0 and case.target == CYCLE:
        _check(case)
    return code


def _check(case: Case) -> None:
    """The invariants of the decisions just printed, into ``invariants.txt``."""
    import orjson

    from pumice.cache.load import load_objects
    from pumice.conf.config import load_config
    from pumice.controllers.job.expand import expand_jobs
    from pumice.fuzz.invariants import check, gangs_whole

    try:
        decisions = orjson.loads(Path("stdout").read_bytes())
        rest, made, _notes = expand_jobs(o.obj for o in load_objects(["snapshot.yaml"]))
        config = load_config("config.yaml" if "config.yaml" in case.files else None)
        found = check([*rest, *made], decisions, gangs_whole(config))
    except Exception as exc:  # (a checker that cannot read is a finding too)
        found = [f"checker: {type(exc).__name__}: {str(exc)[:200]}"]
    Path(INVARIANTS).write_text("".join(f"{v}\n" for v in found))


def _mapped() -> int:
    """The address space the child already maps (the warm interpreter), in bytes."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 30


def finish(run: Running, status: int) -> Outcome:
    """The outcome of a child reaped with wait ``status``; its directory is removed."""
    d = run.workdir
    inv = d / INVARIANTS
    outcome = Outcome(
        status=os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
        signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        stdout=_read(d / "stdout"),
        stderr=_read(d / "stderr"),
        violations=inv.read_text().splitlines() if inv.is_file() else [],
    )
    shutil.rmtree(d, ignore_errors=True)
    return outcome


def _read(path: Path, limit: int = 1 << 20) -> bytes:
    """The file, or its first and last ``limit`` bytes when it is longer (a traceback's
    last line is what names the error)."""
    try:
        with path.open("rb") as f:
            head = f.read(2 * limit)
            if len(head) < 2 * limit:
                return head
            f.seek(-limit, os.SEEK_END)
            return head[:limit] + b"\n...\n" + f.read()
    except OSError:
        return b""


def run_one(case: Case, base: Path, timeout: float, memory: int, program: Program) -> Outcome:
    """Run ``case`` and wait for it."""
    running = start(case, base, timeout, memory, program)
    _pid, status = os.waitpid(running.pid, 0)
    return finish(running, status)
