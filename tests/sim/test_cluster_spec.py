"""Tests for the simulated cluster's node list: files, the compact form, the demo cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from pumice.api.quantity import to_canonical
from pumice.errors import InputError
from pumice.sim.cluster_spec import default_cluster, load_cluster

DATA = Path(__file__).parent.parent / "data" / "workloads" / "clusters"
GPU = "nvidia.com/gpu"


def alloc(node: dict, name: str) -> float:
    return to_canonical(name, node["status"]["allocatable"].get(name, 0))


def test_default_cluster_shape():
    """The demo cluster has 48 eight-GPU nodes of two models and 8 CPU-only nodes."""
    nodes = default_cluster()
    assert len(nodes) == 56
    names = [n["metadata"]["name"] for n in nodes]
    assert len(set(names)) == 56
    assert sum(alloc(n, GPU) for n in nodes) == 384
    gpu_nodes = [n for n in nodes if alloc(n, GPU)]
    assert len(gpu_nodes) == 48 and all(alloc(n, GPU) == 8 for n in gpu_nodes)
    models = {n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in gpu_nodes}
    assert len(models) == 2
    assert all(alloc(n, "pods") == 110 for n in nodes)
    assert all(n["status"]["conditions"][0] == {"type": "Ready", "status": "True"} for n in nodes)


def test_load_cluster_none_is_the_default():
    """Without a file the simulator gets the demo cluster."""
    assert load_cluster(None) == default_cluster()


def test_compact_groups_number_per_prefix_and_default_pods():
    """Node names continue per prefix across groups, zero-padded; pods default to 110."""
    nodes = load_cluster(str(DATA / "compact.yaml"))
    names = [n["metadata"]["name"] for n in nodes]
    assert names == [f"gpu-a100-{i:03d}" for i in range(6)] + ["infra-000"]
    assert alloc(nodes[0], "pods") == 110 and alloc(nodes[4], "pods") == 64
    assert alloc(nodes[0], "cpu") == 96000 and alloc(nodes[0], "memory") == 768 * 2**30
    assert nodes[0]["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert nodes[0]["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-a100-000"
    assert nodes[-1]["spec"]["taints"] == [
        {"key": "dedicated", "effect": "NoSchedule", "value": "infra"}
    ]
    assert nodes[-1]["status"]["capacity"] == nodes[-1]["status"]["allocatable"]


def test_names_sort_with_many_nodes(tmp_path):
    """With more than 1000 nodes the padding widens, so names still sort numerically."""
    path = tmp_path / "big.yaml"
    path.write_text("nodes: [{count: 1200, allocatable: {cpu: 1}}]")
    names = [n["metadata"]["name"] for n in load_cluster(str(path))]
    assert names[0] == "node-0000" and names[-1] == "node-1199"
    assert names == sorted(names)


def test_node_manifests_fill_allocatable_from_capacity():
    """Node objects are kept; a missing allocatable is taken from capacity."""
    n1, n2 = load_cluster(str(DATA / "nodes.yaml"))
    assert n1["status"]["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "110"}
    assert n1["metadata"]["labels"] == {"zone": "a"}
    assert alloc(n2, "cpu") == 7500


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("nodes: [{count: 2, allocatable: {cpu: 1}, colour: red}]", "nodes[0].colour", "unknown"),
        ("nodes: [{count: -1, allocatable: {cpu: 1}}]", "nodes[0].count", ">= 1"),
        ("nodes: [{allocatable: {cpu: fast}}]", "nodes[0].allocatable.cpu", "invalid quantity"),
        ("nodes: [{count: 1}]", "nodes[0].allocatable", "missing allocatable"),
        (
            "nodes: [{allocatable: {cpu: 1}, taints: [{key: k, effect: Never}]}]",
            "nodes[0].taints[0].effect",
            "NoSchedule",
        ),
    ],
)
def test_compact_errors_name_the_field(tmp_path, text, field, message):
    """Mistakes in the compact form are refused naming file and field."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_cluster(str(path))
    assert err.value.field == field and message in str(err.value)
    assert err.value.file == str(path)


def test_duplicate_node_names(tmp_path):
    """Two groups producing the same name (explicit Node plus generated) are refused."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "nodes: [{allocatable: {cpu: 1}}]\n---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-000}\n"
        "status: {allocatable: {cpu: '1'}}\n"
    )
    with pytest.raises(InputError, match="duplicate node node-000"):
        load_cluster(str(path))


def test_node_without_resources(tmp_path):
    """A Node with neither allocatable nor capacity cannot hold anything and is refused."""
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
    with pytest.raises(InputError, match="neither"):
        load_cluster(str(path))


def test_missing_file():
    """A cluster path that does not exist is an InputError."""
    with pytest.raises(InputError, match="no such file"):
        load_cluster("/nonexistent/cluster.yaml")


def test_a_node_count_beyond_any_real_cluster_is_refused(tmp_path: Path) -> None:
    from pumice.api.limits import MAX_NODES

    path = tmp_path / "c.yaml"
    path.write_text(
        f"nodes:\n- {{count: {MAX_NODES}, allocatable: {{cpu: '1'}}}}\n"
        "- {count: 1, namePrefix: gpu, allocatable: {cpu: '1'}}\n"
    )
    with pytest.raises(InputError) as err:
        load_cluster(str(path))
    assert err.value.render() == (
        f"{path}: cluster: field nodes[1].count: 100,001 nodes in all, more than the "
        "100,000 a cluster may have"
    )


def test_a_node_whose_name_or_metadata_is_not_what_a_node_has(tmp_path: Path) -> None:
    path = tmp_path / "n.yaml"
    cases = [
        ("[a]", "field metadata: expected a map, got ['a']"),
        ("{name: {a: 1}}", "field metadata.name: expected a string, got {'a': 1}"),
    ]
    for meta, says in cases:
        path.write_text(f"kind: Node\nmetadata: {meta}\nstatus: {{allocatable: {{cpu: '1'}}}}\n")
        with pytest.raises(InputError) as err:
            load_cluster(str(path))
        assert err.value.render() == f"{path}: Node: {says}"
