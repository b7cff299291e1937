"""A report drawn partly in a forked child: the same files as in one process, the
child's errors raised in the parent, and no child left behind."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from pumice.scheduler import Scheduler
from pumice.sim import report, report_plots
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import simulate
from pumice.sim.parallel import run_parallel
from pumice.sim.report import CHILD_PLOTS, write_report
from pumice.sim.report_fork import ForkedWork, fork_pays
from pumice.sim.synthetic import generate
from pumice.sim.workload import GPU

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

GiB = float(2**30)


@pytest.fixture(scope="module")
def result():
    nodes = [
        node_object(f"n{i}", {"cpu": 96000.0, "memory": 768 * GiB, GPU: 8.0}) for i in range(4)
    ]
    w = generate(30, seed=2, n_queues=5, capacity_gpus=32, max_gang=4)
    return simulate(nodes, w, Scheduler.from_file(None))


@pytest.fixture
def children(monkeypatch):
    """The pids of the children the report forks (each must be reaped by the end)."""
    pids: list[int] = []
    real = ForkedWork.__init__

    def init(self, work):
        real(self, work)
        pids.append(self.pid)

    monkeypatch.setattr(ForkedWork, "__init__", init)
    return pids


def reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_forked_and_in_process_reports_are_byte_identical(result, tmp_path, children):
    """Every file, the page with its embedded plots included, is the same whether a
    child drew part of the plots or not."""
    run = {"wall_seconds": 1.0, "nodes": 4}
    here = write_report(result, tmp_path / "here", run, fork=False)
    assert children == []
    forked = write_report(result, tmp_path / "forked", run, fork=True)
    assert len(children) == 1 and reaped(children[0])
    assert forked.name == here.name
    assert files(tmp_path / "forked") == files(tmp_path / "here")
    assert {f"{n}.png" for n in CHILD_PLOTS} <= set(files(tmp_path / "forked"))


def test_a_refused_fork_draws_everything_here(result, tmp_path, monkeypatch):
    def refused() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    run = {"wall_seconds": 1.0}
    write_report(result, tmp_path / "here", run, fork=False)
    monkeypatch.setattr(os, "fork", refused)
    write_report(result, tmp_path / "refused", run, fork=True)
    assert files(tmp_path / "refused") == files(tmp_path / "here")


def boom(results, path, span):
    raise ValueError("no room for the legend")


@pytest.mark.parametrize("fork", [False, True])
def test_a_plot_that_fails_raises_the_same_error_either_way(
    result, tmp_path, monkeypatch, children, fork
):
    """The drawer of a child's plot raises: the parent raises that error (same type and
    message), with the child reaped and no page written."""
    monkeypatch.setitem(report_plots._DRAW, CHILD_PLOTS[0], boom)
    with pytest.raises(ValueError, match="no room for the legend") as caught:
        write_report(result, tmp_path, {}, fork=fork)
    assert not (tmp_path / "index.html").exists()
    if fork:
        assert len(children) == 1 and reaped(children[0])
        assert "raised in the drawing process" in "\n".join(caught.value.__notes__)


class Unpicklable(Exception):
    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what} ({code})")
        self.lock = threading.Lock()  # (no pickling support installed by a library helps)


def test_an_error_that_does_not_pickle_comes_back_as_runtime_error(
    result, tmp_path, monkeypatch, children
):
    def raise_unpicklable(results, path, span):
        raise Unpicklable("odd", 7)

    monkeypatch.setitem(report_plots._DRAW, CHILD_PLOTS[0], raise_unpicklable)
    with pytest.raises(RuntimeError, match=r"Unpicklable: odd \(7\)"):
        write_report(result, tmp_path, {}, fork=True)
    assert reaped(children[0])


def test_a_child_that_dies_is_an_error_not_a_missing_plot(result, tmp_path, monkeypatch):
    def die(results, path, span):
        os._exit(3)

    monkeypatch.setitem(report_plots._DRAW, CHILD_PLOTS[0], die)
    with pytest.raises(RuntimeError, match=r"ended without an answer \(exit code 3\)"):
        write_report(result, tmp_path, {}, fork=True)
    assert not (tmp_path / "index.html").exists()


def test_ctrl_c_in_the_parent_kills_and_reaps_the_child(result, tmp_path, monkeypatch, children):
    """A KeyboardInterrupt while the parent draws its share ends the child at once (it
    would otherwise draw for a minute) and reaps it."""

    def slow(results, path, span):
        time.sleep(60)

    def interrupted(result, out):
        raise KeyboardInterrupt

    monkeypatch.setitem(report_plots._DRAW, CHILD_PLOTS[0], slow)
    monkeypatch.setattr(report, "plot_cycle_cost", interrupted)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        write_report(result, tmp_path, {}, fork=True)
    assert time.monotonic() - t0 < 30
    assert len(children) == 1 and reaped(children[0])


def test_a_child_ignores_ctrl_c_and_its_answer_still_arrives():
    """A Ctrl-C at a terminal reaches the whole process group: the child ignores it (the
    parent decides), so the work finishes and comes back."""

    def work() -> int:
        os.kill(os.getpid(), 2)  # SIGINT, as a terminal sends it
        return 42

    with ForkedWork(work) as child:
        assert child.result() == 42


def test_what_the_child_prints_reaches_the_same_stderr(capfd):
    """The child writes through streams of its own, on the parent's descriptors."""

    def work() -> None:
        print("a warning from the child", file=sys.stderr)

    with ForkedWork(work) as child:
        child.result()
    assert "a warning from the child" in capfd.readouterr().err


def _fork_pays_here(shared: None, index: int, progress: object) -> bool:
    return fork_pays()


def test_fork_pays_only_with_a_free_cpu_in_a_main_process(monkeypatch):
    """Not in a worker of a what-if's or a sweep's pool, not in a side thread, not with
    one CPU: there the report is drawn in one process."""
    assert run_parallel(_fork_pays_here, None, 1, 1) == [False]
    seen: list[bool] = []
    side = threading.Thread(target=lambda: seen.append(fork_pays()))
    side.start()
    side.join()
    assert seen == [False]
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert not fork_pays()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert fork_pays()
    monkeypatch.delattr(os, "fork")
    assert not fork_pays()
