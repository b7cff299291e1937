"""Bad input through the real command line: every mode ends in exit code 2 and one line
on stderr naming the file (and the object and field where there is one), never a
traceback, a crash, a hang or a memory blow-up, and writes nothing.

Each class of bad input is tried in each mode that reads it: ``cycle`` (snapshots),
``--config`` and ``explain-config`` (scheduler configurations), ``simulate`` (workloads
and cluster files)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pumice.cli import main
from pumice.documents import MAX_DEPTH
from tests.kit import node, pod, podgroup, queue

#: 9 aliases of 9 aliases ... nine levels deep: 9**9 (387 million) strings when expanded.
BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)

CLUSTER = "nodes:\n- {count: 2, allocatable: {cpu: '8', memory: 64Gi, pods: '110'}}\n"

CONFIG = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *names: str) -> str:
    """Run ``pumice argv``: exit 2 and one line of stderr holding every one of
    ``names``; that line."""
    rc = main(argv)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert rc == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("pumice: error: "), err
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return str(p)


def snapshot(tmp_path: Path) -> str:
    docs = [queue(), node("n1"), podgroup("pg"), pod("p", group="pg")]
    return write(tmp_path, "ok.yaml", yaml.safe_dump_all(docs))


def simulate(tmp_path: Path, *args: str) -> list[str]:
    return ["simulate", *args, "--no-progress", "--out", str(tmp_path / "report")]


def workload(jobs: str) -> str:
    return f"kind: Workload\nqueues: [{{name: q}}]\njobs:\n{jobs}"


# -- the shape of documents ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [("hello\n", "document 1"), ("- 1\n- 2\n", "document 1[0]"), ("---\n5\n", "document 1")],
)
def test_a_snapshot_document_that_is_not_an_object(tmp_path, capsys, text, where) -> None:
    bad = write(tmp_path, "bad.yaml", text)
    refused(capsys, ["cycle", snapshot(tmp_path), bad], bad, where)


def test_a_workload_or_cluster_document_that_is_not_an_object(tmp_path, capsys) -> None:
    bad = write(tmp_path, "bad.yaml", "[1, 2]\n---\nplain\n")
    refused(capsys, simulate(tmp_path, bad), bad, "document 1", "not a map")
    cluster = write(tmp_path, "cluster.yaml", "just a string\n")
    refused(capsys, simulate(tmp_path, "--jobs", "2", "--cluster", cluster), cluster)
    assert not (tmp_path / "report").exists()


def test_a_configuration_that_is_not_a_mapping(tmp_path, capsys) -> None:
    conf = write(tmp_path, "conf.yaml", "- allocate\n")
    refused(capsys, ["explain-config", conf], conf, "expected a mapping")
    refused(capsys, ["cycle", "--config", conf, snapshot(tmp_path)], conf)


def test_a_volcano_job_whose_metadata_is_not_a_map(tmp_path, capsys) -> None:
    job = write(
        tmp_path,
        "job.yaml",
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: [a, b]\nspec: {}\n",
    )
    refused(capsys, ["cycle", snapshot(tmp_path), job], job, "Job", "field metadata")
    refused(capsys, simulate(tmp_path, job, "--cluster", write(tmp_path, "c.yaml", CLUSTER)),
            job, "Job", "field metadata")  # fmt: skip


@pytest.mark.parametrize(
    ("data", "field", "says"),
    [
        ("[1, 2]", "field data", "expected a map"),
        ("{volcano-scheduler.conf: 5}", "field data.volcano-scheduler.conf", "as text"),
        ("{volcano-scheduler.conf: 'actions: [a'}", "data.volcano-scheduler.conf", "malformed"),
    ],
)
def test_a_configmap_whose_data_is_not_text(tmp_path, capsys, data, field, says) -> None:
    conf = write(tmp_path, "cm.yaml", f"apiVersion: v1\nkind: ConfigMap\ndata: {data}\n")
    refused(capsys, ["explain-config", conf], conf, "ConfigMap", field, says)


def test_a_cluster_node_whose_name_is_a_list(tmp_path, capsys) -> None:
    cluster = write(
        tmp_path,
        "nodes.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: [a]}\n"
        "status: {allocatable: {cpu: '4', pods: '10'}}\n",
    )
    refused(capsys, simulate(tmp_path, "--jobs", "2", "--cluster", cluster),
            cluster, "Node", "field metadata.name", "expected a string")  # fmt: skip


# -- nesting and aliases -------------------------------------------------------------------


def test_nesting_deep_enough_to_crash_the_yaml_parser_is_refused_first(tmp_path) -> None:
    """25,000 levels overflow the C stack of PyYAML's composer (a SIGSEGV no ``except``
    catches): the reader refuses the text before the composer sees it."""
    deep = write(tmp_path, "deep.yaml", "a: " + "[" * 30_000 + "]" * 30_000 + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "pumice.cli", "cycle", deep],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 2, run.stderr
    # (the mapping is the first level: the bracket refused is the 200th)
    assert run.stderr.splitlines() == [
        f"pumice: error: {deep}: nested more than {MAX_DEPTH} deep at line 1, column "
        f"{MAX_DEPTH + 3}"
    ]
    assert run.stdout == ""


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "[" * 1000 + "]" * 1000,  # flow
        "".join(f"{'  ' * i}k:\n" for i in range(1000)),  # block mappings
        "- " * 1000 + "x\n",  # block sequences on one line
    ],
    ids=["flow", "block", "dashes"],
)
def test_too_deep_nesting_in_every_mode(tmp_path, capsys, text) -> None:
    deep = write(tmp_path, "deep.yaml", text)
    refused(capsys, ["cycle", deep], deep, f"nested more than {MAX_DEPTH} deep")
    refused(capsys, ["explain-config", deep], deep, "nested")
    refused(capsys, simulate(tmp_path, deep), deep, "nested")
    refused(capsys, simulate(tmp_path, "--jobs", "2", "--cluster", deep), deep, "nested")
    assert not (tmp_path / "report").exists()


def test_too_deep_json(tmp_path, capsys) -> None:
    deep = write(tmp_path, "deep.json", '{"a": ' + "[" * 600 + '"[{"' + "]" * 600 + "}")
    refused(capsys, ["cycle", deep], deep, f"nested 601 deep, more than {MAX_DEPTH}")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (BOMB, "aliases expand to more than 1,000,000 nodes"),
        (BOMB.replace("i: &i", "kind: &i"), "aliases expand"),  # where str(kind) would run
        ("kind: &a [*a]\n", "alias *a is inside the node it names"),
        ("apiVersion: v1\nkind: Node\nmetadata: &m {name: n, labels: *m}\n", "inside the node"),
    ],
    ids=["bomb", "bomb-in-kind", "self", "self-in-object"],
)
def test_alias_bombs_and_values_that_contain_themselves(tmp_path, capsys, text, says) -> None:
    bomb = write(tmp_path, "bomb.yaml", text)
    refused(capsys, ["cycle", bomb], bomb, says)
    refused(capsys, ["explain-config", bomb], bomb, says)
    refused(capsys, simulate(tmp_path, bomb), bomb, says)
    assert not (tmp_path / "report").exists()


def test_aliases_of_an_ordinary_manifest_still_work(tmp_path, capsys) -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: a1, labels: &l {zone: a}},\n"
        "   status: {allocatable: &r {cpu: '8', memory: 8Gi, pods: '110'}, capacity: *r}}\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: a2, labels: *l},\n"
        "   status: {allocatable: *r}}\n"
    )
    nodes = write(tmp_path, "nodes.yaml", text)
    assert main(["cycle", nodes, snapshot(tmp_path)]) == 0
    assert '"default/p"' in capsys.readouterr().out


# -- text and scalars ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (b"kind: Node\nmetadata: {name: caf\xe9}\n", "not UTF-8 text: byte 0xe9 at line 2"),
        (b"kind: Node\nmetadata: {name: !!int abc}\n", "line 2, column 18: cannot read int 'abc'"),
        (b"kind: Node\nvalue: " + b"9" * 5000 + b"\n", "line 2, column 8: cannot read int"),
        (b"kind: Node\ncreated: 2024-13-01\n", "cannot read timestamp '2024-13-01'"),
        (b"kind: Node\nmetadata: {name: [a\n", "malformed YAML at line 3, column 1"),
        (b"kind: Node\nname: \x01\n", "malformed YAML at byte 17: control characters"),
    ],
    ids=["latin-1", "bad-tag", "5000-digits", "no-such-date", "unclosed", "control"],
)
def test_text_pyyaml_cannot_read(tmp_path, capsys, text, says) -> None:
    bad = write(tmp_path, "bad.yaml", text)
    line = refused(capsys, ["cycle", bad], bad, says)
    assert "<byte string>" not in line
    refused(capsys, ["explain-config", bad], bad, says)
    refused(capsys, simulate(tmp_path, bad), bad, says)


def test_plugin_arguments_of_thousands_of_digits(tmp_path, capsys) -> None:
    for value, shown in [("'" + "9" * 5000 + "'", "'999"), ("9" * 4000, "number of about")]:
        conf = write(
            tmp_path,
            "conf.yaml",
            f"actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n"
            f"    arguments: {{binpack.weight: {value}}}\n",
        )
        line = refused(capsys, ["explain-config", conf], conf, "plugin binpack",
                       "arguments.binpack.weight", shown)  # fmt: skip
        assert len(line) < 300


#: A run of digits long enough that refusing it in time quadratic in its length (a
#: pattern that can split the run two ways, tried from every position) takes minutes.
LONG_RUN = 100_000


def test_a_long_run_of_digits_with_a_stray_character_is_refused(tmp_path, capsys) -> None:
    digits = "9" * LONG_RUN
    group = podgroup("pg", min_resources={"cpu": "1", "memory": digits[:-8] + "@" + digits[-7:]})
    snap = write(tmp_path, "s.yaml", yaml.safe_dump_all([queue(), node("n1"), group]))
    refused(capsys, ["cycle", snap], snap, "PodGroup default/pg",
            "field spec.minResources.memory", "invalid quantity '999")  # fmt: skip
    conf = write(
        tmp_path,
        "conf.yaml",
        "actions: enqueue\ntiers:\n- plugins:\n  - name: sla\n"
        f"    arguments: {{sla-waiting-time: '{'1' * LONG_RUN}!'}}\n",
    )
    refused(capsys, ["explain-config", conf], conf, "plugin sla",
            "arguments.sla-waiting-time", "invalid duration '111")  # fmt: skip
    cluster = write(tmp_path, "c.yaml", CLUSTER)
    job = write(
        tmp_path,
        "job.yaml",
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n"
        "metadata: {name: j, annotations: {pumice.sim/duration: '60'}}\n"
        "spec:\n  queue: default\n"
        f"  policies: [{{event: PodFailed, action: RestartJob, timeout: '{'1' * LONG_RUN}x'}}]\n"
        "  tasks:\n  - replicas: 1\n    template: {spec: {containers: "
        "[{name: c, image: i, resources: {requests: {cpu: '1'}}}]}}\n",
    )
    refused(capsys, simulate(tmp_path, job, "--cluster", cluster), job, "Job default/j",
            "spec.policies[0].timeout", "invalid duration '111")  # fmt: skip
    assert not (tmp_path / "report").exists()


def test_nested_plugin_numbers_beyond_any_float(tmp_path, capsys) -> None:
    """An int too large for a float (YAML reads 400 digits as one) is refused, naming
    the field, by the readers of nested arguments too (not an OverflowError)."""
    huge = "9" * 400
    for args, field in [
        (f"{{thresholds: {{mem: {huge}}}}}", "arguments.thresholds.mem"),
        (f"{{estimator: {{be_mem: {huge}}}}}", "arguments.estimator.be_mem"),
        (f"{{estimator: {{be_cpu: -{huge}}}}}", "arguments.estimator.be_cpu"),
    ]:
        conf = write(
            tmp_path,
            "conf.yaml",
            f"actions: allocate\ntiers:\n- plugins:\n  - name: usage\n    arguments: {args}\n",
        )
        line = refused(capsys, ["explain-config", conf], conf, "plugin usage", field,
                       "a number of about 40")  # fmt: skip
        assert len(line) < 300


def test_a_name_holding_a_newline_stays_on_one_line(tmp_path, capsys) -> None:
    bad = write(
        tmp_path,
        "n.yaml",
        'apiVersion: v1\nkind: Node\nmetadata: {name: "a\\nb"}\n'
        "status: {allocatable: {cpu: lots}}\n",
    )
    refused(capsys, ["cycle", bad], bad, "Node a\\nb", "status.allocatable.cpu")


# -- sizes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "field", "says"),
    [
        ("- {name: a, queue: q, arrival: 0, duration: 60, replicas: 1000000000000, "
         "requests: {cpu: 1}}\n", "jobs[0].replicas", "must be at most 100,000"),
        ("- {name: a, queue: q, arrival: 100000000000000000000h, duration: 60, replicas: 1, "
         "requests: {cpu: 1}}\n", "jobs[0].arrival", "more than 100 years"),
        ("- {name: a, queue: q, arrival: 0, duration: 1e30, replicas: 1, "
         "requests: {cpu: 1}}\n", "jobs[0].duration", "more than 100 years"),
        ("- {name: a, queue: q, arrival: 0, duration: 60, tasks: [{name: w, replicas: 50000, "
         "requests: {cpu: 1}}, {name: ps, replicas: 60000, requests: {cpu: 1}}]}\n",
         "jobs[0].tasks[1].replicas", "110,000 pods in all, more than the 100,000"),
    ],
    ids=["replicas", "arrival", "duration", "task-replicas"],
)  # fmt: skip
def test_sizes_beyond_any_real_workload(tmp_path, capsys, jobs, field, says) -> None:
    wl = write(tmp_path, "w.yaml", workload(jobs))
    cluster = write(tmp_path, "c.yaml", CLUSTER)
    refused(capsys, simulate(tmp_path, wl, "--cluster", cluster),
            wl, "Workload job a", f"field {field}", says)  # fmt: skip
    assert not (tmp_path / "report").exists()


def test_a_compact_cluster_count_beyond_any_real_cluster(tmp_path, capsys) -> None:
    cluster = write(tmp_path, "c.yaml", CLUSTER.replace("count: 2", "count: 1000000000000"))
    refused(capsys, simulate(tmp_path, "--jobs", "2", "--cluster", cluster),
            cluster, "field nodes[0].count", "must be at most 100,000")  # fmt: skip
    assert not (tmp_path / "report").exists()


def test_a_snapshot_job_of_too_many_pods(tmp_path, capsys) -> None:
    job = write(
        tmp_path,
        "job.yaml",
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: huge}\n"
        "spec:\n  tasks:\n  - replicas: 2000000000\n    template: {spec: {containers: "
        "[{name: c, image: i}]}}\n",
    )
    refused(capsys, ["cycle", snapshot(tmp_path), job], job, "Job default/huge", "replicas")


# -- simulate's refusals of jobs -----------------------------------------------------------


def test_a_workload_whose_every_object_is_skipped(tmp_path, capsys) -> None:
    wl = write(tmp_path, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    refused(capsys, simulate(tmp_path, wl, "--cluster", write(tmp_path, "c.yaml", CLUSTER)),
            wl, "holds no jobs", "ConfigMap x")  # fmt: skip
    assert not (tmp_path / "report").exists()


def test_a_gang_larger_than_the_cluster_in_pod_slots(tmp_path, capsys) -> None:
    """Two nodes of 110 pod slots cannot start a gang of 300 tiny pods, as two nodes
    of 8 cpu cannot start one asking for 20."""
    cluster = write(tmp_path, "c.yaml", CLUSTER)
    tiny = "{name: a, queue: q, arrival: 0, duration: 60, replicas: 300, requests: {cpu: 10m}}"
    wl = write(tmp_path, "w.yaml", workload(f"- {tiny}\n"))
    refused(capsys, simulate(tmp_path, wl, "--cluster", cluster), wl, "Workload job a",
            "field jobs[0].replicas", "300 pods in all, more than the cluster's 220")  # fmt: skip
    big = "{name: a, queue: q, arrival: 0, duration: 60, replicas: 20, requests: {cpu: 1}}"
    wl = write(tmp_path, "w.yaml", workload(f"- {big}\n"))
    refused(capsys, simulate(tmp_path, wl, "--cluster", cluster), wl, "Workload job a",
            "jobs[0].replicas", "20000m cpu in all, more than the cluster's 16000m")  # fmt: skip
    assert not (tmp_path / "report").exists()


def test_job_refusals_name_the_file_and_the_field_as_written(tmp_path, capsys) -> None:
    cluster = write(tmp_path, "c.yaml", CLUSTER)
    job = write(
        tmp_path,
        "job.yaml",
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n"
        "metadata: {name: big, annotations: {pumice.sim/duration: '60'}}\n"
        "spec:\n  queue: default\n  tasks:\n  - replicas: 1\n    template: {spec: {containers: "
        "[{name: c, image: i, resources: {requests: {cpu: '64'}}}]}}\n",
    )
    refused(capsys, simulate(tmp_path, job, "--cluster", cluster), job, "Job default/big",
            "field spec.tasks[0].template.spec.containers[*].resources.requests",
            "no node of the cluster can ever hold it")  # fmt: skip
    wl = write(tmp_path, "w.yaml", workload(
        "- {name: a, queue: q, arrival: 0, duration: 60, tasks: [{name: w, replicas: 1, "
        "requests: {cpu: 1}}, {name: ps, replicas: 1, requests: {cpu: 9}}]}\n"))  # fmt: skip
    refused(capsys, simulate(tmp_path, wl, "--cluster", cluster), wl, "Workload job a",
            "field jobs[0].tasks[1].requests")  # fmt: skip
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        pytest.param("Pod", "spec: {containers: [{name: c, image: i}]}\n", id="Pod"),
        pytest.param("PodGroup", "spec: {minMember: 1}\n", id="PodGroup"),
        pytest.param(
            "Job",
            "spec: {tasks: [{replicas: 1, template: {spec: {containers: [{name: c}]}}}]}\n",
            id="Job",
        ),
    ],
)
@pytest.mark.parametrize("namespace", ["[[[[a]]]]", "7", "Team_A"])
def test_a_workload_manifest_whose_namespace_is_not_a_dns_label(
    tmp_path, capsys, kind, body, namespace
) -> None:
    """Manifests in a workload file: a namespace that is not a DNS label (a list, a
    number, capitals) is refused like a compact workload's, naming the object."""
    api = {"Pod": "v1", "PodGroup": "scheduling.volcano.sh/v1beta1"}.get(
        kind, "batch.volcano.sh/v1alpha1"
    )
    wl = write(tmp_path, "w.yaml",
               f"apiVersion: {api}\nkind: {kind}\nmetadata: {{name: x, namespace: {namespace}}}\n"
               + body)  # fmt: skip
    cluster = write(tmp_path, "c.yaml", CLUSTER)
    refused(capsys, simulate(tmp_path, wl, "--cluster", cluster), wl, f"{kind} x",
            "field metadata.namespace", "invalid namespace")  # fmt: skip
    assert not (tmp_path / "report").exists()


def test_the_scheduler_config_is_read_by_the_same_reader(tmp_path, capsys) -> None:
    conf = write(tmp_path, "conf.yaml", CONFIG + "  - name: priority\n" + BOMB)
    refused(capsys, ["cycle", "--config", conf, snapshot(tmp_path)], conf, "aliases expand")
    refused(capsys, simulate(tmp_path, "--jobs", "2", "--config", conf), conf, "aliases")


def test_json_nested_deep_inside_an_annotation(tmp_path, capsys) -> None:
    """An annotation a plugin reads as JSON is refused by the plugin like any malformed
    one (the queue's limits are left out, with the reason), not with a RecursionError
    in the middle of a cycle."""
    from pumice.plugins.nodegroup import LIMITS_ANNOTATION

    q = queue()
    q["metadata"]["annotations"] = {LIMITS_ANNOTATION: "[" * 100_000}
    docs = [q, node("n1"), podgroup("pg"), pod("p", group="pg")]
    snap = write(tmp_path, "s.yaml", yaml.safe_dump_all(docs))
    conf = write(tmp_path, "c.yaml", CONFIG + "  - name: nodegroup\n")
    assert main(["cycle", "--config", conf, snap]) == 0
    captured = capsys.readouterr()
    assert "annotation invalid (queue default: nested 100000 deep, more than 200)" in captured.out
    assert captured.err == ""


def test_notes_about_names_holding_a_newline_stay_on_one_line(tmp_path, capsys) -> None:
    odd = write(
        tmp_path, "odd.yaml", 'apiVersion: v1\nkind: "Widget\\nGadget"\nmetadata: {name: w}\n'
    )
    assert main(["cycle", snapshot(tmp_path), odd]) == 0
    err = capsys.readouterr().err
    assert "of kind Widget\\nGadget" in err
    assert all(line.startswith("pumice: ") for line in err.splitlines()), err
