"""``pumice fuzz``: cases are reproducible, the invariant checks catch what they name,
outcomes are judged as the CLI promises, and (marked ``fuzz``) a short run finds
nothing."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from pumice.cli import main
from pumice.fuzz.cases import CYCLE, Case, build, make_case
from pumice.fuzz.corpus import load_corpus
from pumice.fuzz.invariants import check, gangs_whole
from pumice.fuzz.runner import Outcome
from pumice.fuzz.verdict import judge

CORPUS = load_corpus()


def test_a_case_is_the_same_from_the_same_seed_and_index() -> None:
    for index in range(40):
        a, b = make_case(CORPUS, 7, index), make_case(CORPUS, 7, index)
        assert (a.target, a.args, a.done, a.files) == (b.target, b.args, b.done, b.files)
    targets = {make_case(CORPUS, 1, i).target for i in range(60)}
    assert targets == {"cycle", "explain-config", "simulate"}


def test_the_corpus_holds_real_snapshots_configs_and_workloads() -> None:
    assert len(CORPUS.snapshots) > 100 and len(CORPUS.configs) > 50
    assert any(p.name == "gpu-cluster.yaml" for p, _ in CORPUS.snapshots)
    assert len(CORPUS.simulations) >= 2


def _node(name: str, cpu: str, memory: str = "1Gi") -> dict:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory}},
    }


def _pod(name: str, cpu: str, node: str = "", group: str = "", phase: str = "") -> dict:
    meta: dict = {"name": name, "namespace": "ns"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict = {"containers": [{"resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Running" if node else "Pending")},
    }


def _decisions(binds=None, evictions=(), pipelined=None) -> dict:
    return {"binds": binds or {}, "evictions": list(evictions), "pipelined": pipelined or {}}


def test_capacity_is_checked_to_the_millicore() -> None:
    objects = [_node("n", "1"), _pod("a", "400m", node="n"), _pod("b", "601m"), _pod("c", "600m")]
    over = check(objects, _decisions({"ns/b": "n"}), True)
    assert over == ["capacity: node n ends with cpu 1001 of 1000 millicores requested"]
    assert check(objects, _decisions({"ns/c": "n"}), True) == []


def _memory_pod(name: str, amount: int, node: str = "") -> dict:
    pod = _pod(name, "0", node=node)
    pod["spec"]["containers"] = [{"resources": {"requests": {"memory": amount}}}]
    return pod


def test_ended_pods_free_their_node_and_large_amounts_are_exact() -> None:
    big = 2**62  # (floats there are 1024 apart: 2**62 + 1 is not one)
    objects = [
        _node("n", "1", str(big)),
        _pod("done", "1", node="n", phase="Succeeded"),
        _pod("q", "1", node="n"),
        _memory_pod("p", big),
    ]
    assert check(objects, _decisions({"ns/p": "n"}), True) == []
    objects.append(_memory_pod("r", 1, node="n"))
    got = check(objects, _decisions({"ns/p": "n"}), True)
    assert got == [f"capacity: node n ends with memory {big + 1} of {big} bytes requested"]


def test_numbers_written_for_names_are_read_as_pumice_reads_them() -> None:
    pod = _pod("a", "1")
    pod["metadata"]["namespace"] = 0  # (YAML's ``namespace: 0``: pumice's namespace "0")
    objects = [_node("n", "4"), pod]
    assert check(objects, _decisions({"0/a": "n"}), True) == []
    assert check(objects, _decisions({"default/a": "n"}), True) == [
        "double bind: default/a is bound but is not in the snapshot"
    ]


def test_double_binds_unknown_nodes_and_bad_evictions_are_named() -> None:
    objects = [_node("n", "4"), _pod("a", "1", node="n"), _pod("b", "1")]
    found = check(objects, _decisions({"ns/a": "n", "ns/b": "m"}, evictions=["ns/b"]), True)
    assert sorted(v.split(":")[0] for v in found) == [
        "double bind",
        "double bind",
        "double bind",
        "eviction",
    ]


def test_a_gang_placed_in_part_is_named_only_while_job_ready_is_on() -> None:
    group = {
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"minMember": 3},
    }
    objects = [_node("n", "8"), group, *(_pod(f"w{i}", "1", group="g") for i in range(3))]
    partial = _decisions({"ns/w0": "n", "ns/w1": "n"})
    assert check(objects, partial, True) == [
        "gang: ns/g gets 2 binds but ends with 2 of its minMember 3 ready"
    ]
    assert check(objects, partial, False) == []
    whole = _decisions({"ns/w0": "n", "ns/w1": "n", "ns/w2": "n"})
    assert check(objects, whole, True) == []


def _case() -> Case:
    return build(
        Case(1, 0, CYCLE, "test", {"snapshot.yaml": b"{}"}, (), ("cycle", "snapshot.yaml"))
    )


def _outcome(status=None, sig=None, stderr=b"", stdout=b"{}", violations=()) -> Outcome:
    return Outcome(status, sig, stdout, stderr, list(violations))


def test_outcomes_are_judged_as_the_cli_promises() -> None:
    case = _case()
    assert judge(case, _outcome(0), 5) is None
    assert (
        judge(case, _outcome(2, stderr=b"pumice: warning: x\npumice: error: f: bad\n"), 5) is None
    )
    assert (
        judge(case, _outcome(2, stderr=b"pumice: error: f: bad\n  in line 3\n"), 5).kind == "error"
    )
    assert judge(case, _outcome(None, signal.SIGSEGV), 5).key == "signal SIGSEGV cycle"
    assert judge(case, _outcome(None, signal.SIGALRM), 5).kind == "timeout"
    tb = (
        b"Traceback (most recent call last):\n"
        b'  File "/x/src/pumice/cache/load.py", line 45, in _documents\n'
        b"    boom()\n"
        b"KeyError: 'maybe'\n"
    )
    found = judge(case, _outcome(1, stderr=tb), 5)
    assert found.key == "traceback KeyError in cache/load.py:_documents"
    assert judge(case, _outcome(3, stderr=b"pumice: odd\n"), 5).kind == "exit"
    assert judge(case, _outcome(0, violations=["capacity: node n ..."]), 5).key == "capacity"


def test_a_finding_is_saved_with_its_files_and_how_to_replay_it(tmp_path: Path, capsys) -> None:
    """Case 3 of seed 1 writes a 100,000-digit integer into a snapshot: a traceback
    until the loader refuses such integers, one line of error after; either way the
    run reports and saves consistently."""
    code = main(["fuzz", "--seed", "1", "--case", "3", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "1 cases" in out or "1 case" in out
    saved = list((tmp_path / "findings").glob("*/complaint.txt"))
    if code == 1:
        assert len(saved) == 1
        d = saved[0].parent
        assert (d / "snapshot.yaml").is_file()
        assert "pumice fuzz --seed 1 --case 3" in (d / "case.txt").read_text()
        assert len(saved[0].read_text().splitlines()) == 1
    else:
        assert code == 0 and saved == [] and "no findings" in out
    assert (tmp_path / "report.json").is_file()


@pytest.mark.fuzz
def test_a_short_fuzz_run_finds_nothing(tmp_path: Path, capsys) -> None:
    """120 mutated cases (cycle, explain-config, simulate) end in decisions that keep
    the invariants, or in one line of error with exit status 2: no traceback, no
    signal, no hang, no node over capacity, no gang in part. What it found is printed
    (each class with the command that replays it)."""
    code = main(["fuzz", "--cases", "120", "--seed", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out


def test_whole_gangs_are_promised_unless_volcano_arithmetic_is_asked() -> None:
    from pumice.conf.config import load_config, parse_config

    assert gangs_whole(load_config(None))
    tiers = [{"plugins": [{"name": "gang", "arguments": {"gang.bestEffortReady": "optimistic"}}]}]
    assert not gangs_whole(parse_config({"actions": "allocate", "tiers": tiers}))
    off = [{"plugins": [{"name": "gang", "enableJobReady": False}]}]
    assert not gangs_whole(parse_config({"actions": "allocate", "tiers": off}))
