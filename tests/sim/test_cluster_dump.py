"""``pumice simulate --cluster`` takes the Nodes of a whole kubectl dump, as ``cycle`` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from pumice.errors import InputError
from pumice.sim.cluster_spec import load_cluster

DUMP = Path(__file__).parents[1] / "scenarios/kubectl/dump-with-noise/snapshot.yaml"


def test_a_kubectl_dump_gives_its_nodes_and_says_what_it_left_out() -> None:
    notes: list[str] = []
    nodes = load_cluster(str(DUMP), notes)
    assert sorted(n["metadata"]["name"] for n in nodes) == ["worker-a", "worker-b"]
    (note,) = notes
    assert "took its 2 Nodes" in note and "Pod" in note and "Service" in note


def test_a_dump_without_nodes_is_still_an_error(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, "
                    "metadata: {name: p}}\n")  # fmt: skip
    with pytest.raises(InputError, match="no nodes"):
        load_cluster(str(path))
