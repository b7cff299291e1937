"""The `pumice cycle` command as a user meets it: output, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pumice.cli import main
from tests.kit import node, pod, podgroup, queue

EXAMPLE = Path(__file__).parent.parent / "src/pumice/examples/gpu-cluster.yaml"


def write(tmp_path: Path, name: str, docs) -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(docs) if isinstance(docs, list) else docs)
    return str(p)


def test_cycle_prints_json_decisions(capsys) -> None:
    assert main(["cycle", str(EXAMPLE)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"binds", "evictions", "pipelined", "podgroups", "pending"}
    assert out["binds"]
    assert "team-b/gpt" in out["pending"]


def test_table_format_for_people(capsys) -> None:
    assert main(["cycle", str(EXAMPLE), "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "Binds" in out and "Pending" in out


def test_kubectl_list_and_directory_inputs(tmp_path, capsys) -> None:
    items = [queue(), node("n1"), podgroup("pg"), pod("p", group="pg")]
    lst = write(tmp_path, "dump.yaml", [{"apiVersion": "v1", "kind": "List", "items": items}])
    assert main(["cycle", lst]) == 0
    assert json.loads(capsys.readouterr().out)["binds"] == {"default/p": "n1"}
    d = tmp_path / "dir"
    d.mkdir()
    (d / "a.json").write_text(json.dumps({"kind": "List", "items": items[:2]}))
    (d / "b.yaml").write_text(
        yaml.safe_dump_all([*items[2:], {"kind": "Service", "metadata": {"name": "s"}}])
    )
    assert main(["cycle", str(d)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["binds"] == {"default/p": "n1"}
    assert "skipped 1 object of kind Service" in captured.err


@pytest.mark.parametrize(
    ("docs", "needles"),
    [
        ("kind: Node\nmetadata: {name: n1\n", ["malformed YAML", "line"]),
        ([node("n1", cpu="-2")], ["Node n1", "status.allocatable.cpu", "negative"]),
        ([node("n1", cpu="lots")], ["Node n1", "invalid quantity"]),
        ([{"kind": "Pod", "metadata": {}}], ["metadata.name", "is required"]),
        ([{"kind": "Node", "metadata": {"name": "x"}}], ["Node x", "status.allocatable"]),
        ([queue("a", parent="b"), queue("b", parent="a")], ["cycle", "spec.parent"]),
        ([podgroup("pg", min_member=-1)], ["PodGroup default/pg", "spec.minMember"]),
    ],
)
def test_bad_snapshot_exits_2_naming_object_and_field(tmp_path, capsys, docs, needles) -> None:
    path = write(tmp_path, "bad.yaml", docs)
    assert main(["cycle", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "bad.yaml" in captured.err
    for needle in needles:
        assert needle in captured.err


@pytest.mark.parametrize(
    ("config", "needles"),
    [
        ('actions: "enqueue, allocat"\ntiers: []\n', ["unknown action 'allocat'"]),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gangg\n',
            ["unknown plugin 'gangg'", "tiers[0].plugins[0].name"],
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrdr: true\n',
            ["unknown enable flag 'enableJobOrdr'"],
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n'
            "      binpack.weight: heavy\n",
            ["plugin binpack", "binpack.weight"],
        ),
    ],
)
def test_bad_config_exits_2(tmp_path, capsys, config, needles) -> None:
    cfg = tmp_path / "conf.yaml"
    cfg.write_text(config)
    assert main(["cycle", str(EXAMPLE), "--config", str(cfg)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    for needle in needles:
        assert needle in captured.err


def test_configmap_form_is_accepted(tmp_path, capsys) -> None:
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano"},
        "data": {"volcano-scheduler.conf": conf},
    }
    path = write(tmp_path, "cm.yaml", [cm])
    assert main(["cycle", str(EXAMPLE), "--config", path]) == 0
    assert json.loads(capsys.readouterr().out)["binds"]


def test_cycle_warns_once_on_stderr_about_what_pumice_skips(
    tmp_path, capsys, plugin_pumice_lacks
) -> None:
    conf = (
        'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'
        "  - name: predicates\n  - name: reservation\n"
    )
    path = write(tmp_path, "conf.yaml", conf)
    assert main(["cycle", str(EXAMPLE), "--config", path]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["binds"]
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"pumice: warning: {path}: plugin reservation")
    assert "not supported by pumice" in warnings[0]


def test_cycle_refuses_a_misspelt_flag_with_the_closest_one(tmp_path, capsys) -> None:
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enabledJobReady: false\n'
    path = write(tmp_path, "conf.yaml", conf)
    assert main(["cycle", str(EXAMPLE), "--config", path]) == 2
    err = capsys.readouterr().err
    assert "tiers[0].plugins[0].enabledJobReady" in err
    assert "did you mean enableJobReady?" in err


def test_the_table_says_what_the_binds_write_first(capsys) -> None:
    """`--format table` lists the PV chosen for each claim, as the JSON's volumes does."""
    snap = Path(__file__).parent / "scenarios/kubernetes/local-pv-statefulset/snapshot.yaml"
    assert main(["cycle", str(snap), "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "Written before the binds (1)" in out
    assert "PersistentVolumeClaim default/www-web-0" in out and "bound to PV example-pv" in out
