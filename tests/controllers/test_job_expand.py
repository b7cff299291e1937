"""``pumice cycle`` on a snapshot of Volcano Jobs: the examples of Volcano's
network-topology user guide, applied as written (section 3.3), decide as the guide says.

The guide's cluster: eight 4-CPU nodes, s0 (node0-3) and s1 (node4-7) at tier 1 under
s2 at tier 2; every pod asks for a node's whole CPU.
"""

from __future__ import annotations

import json

import yaml

from pumice.cli import main

CONFIG = "src/pumice/examples/configs/network-topology.yaml"

CLUSTER = [
    {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
     "metadata": {"name": "default"}, "spec": {"weight": 1}, "status": {"state": "Open"}},
    *[
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node{i}"},
         "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
        for i in range(8)
    ],
    {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
     "metadata": {"name": "s0"}, "spec": {"tier": 1, "members": [
         {"type": "Node", "selector": {"regexMatch": {"pattern": "^node[0-3]$"}}}]}},
    {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
     "metadata": {"name": "s1"}, "spec": {"tier": 1, "members": [
         {"type": "Node", "selector": {"regexMatch": {"pattern": "^node[4-7]$"}}}]}},
    {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
     "metadata": {"name": "s2"}, "spec": {"tier": 2, "members": [
         {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}},
         {"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}}]}},
]  # fmt: skip

TEMPLATE = """
      template:
        spec:
          containers:
            - name: c0
              image: nginx:latest
              resources:
                requests:
                  cpu: "4"
                limits:
                  cpu: "4"
"""


def job(spec: str) -> dict:
    text = (
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n"
        "  name: network-topology-job\n  namespace: default\nspec:\n" + spec + TEMPLATE
    )
    return yaml.safe_load(text)


def cycle(tmp_path, capsys, objects: list[dict]) -> tuple[dict, str]:
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    assert main(["cycle", str(path), "--config", CONFIG]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def nodes_of(binds: dict) -> set[str]:
    return set(binds.values())


def test_a_hard_tier_one_job_runs_four_pods_within_one_switch(tmp_path, capsys) -> None:
    spec = """  schedulerName: volcano
  minAvailable: 4
  networkTopology:
    mode: hard
    highestTierAllowed: 1
  tasks:
    - name: t0
      replicas: 8"""
    out, err = cycle(tmp_path, capsys, [*CLUSTER, job(spec)])
    assert "expanded into its PodGroup and 8 pods" in err
    assert len(out["binds"]) == 4
    used = nodes_of(out["binds"])
    assert used in ({"node0", "node1", "node2", "node3"}, {"node4", "node5", "node6", "node7"})
    (waiting,) = out["pending"]  # the other four, their switch full
    assert waiting.startswith("default/network-topology-job-")


def test_partitions_each_within_one_switch_the_job_within_tier_two(tmp_path, capsys) -> None:
    spec = """  schedulerName: volcano
  minAvailable: 4
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  tasks:
    - name: t0
      replicas: 8
      partitionPolicy:
        totalPartitions: 2
        partitionSize: 4
        networkTopology:
          mode: hard
          highestTierAllowed: 1"""
    out, _err = cycle(tmp_path, capsys, [*CLUSTER, job(spec)])
    binds = out["binds"]
    assert len(binds) == 8
    first = {binds[f"default/network-topology-job-t0-{i}"] for i in range(4)}
    second = {binds[f"default/network-topology-job-t0-{i}"] for i in range(4, 8)}
    switches = ({"node0", "node1", "node2", "node3"}, {"node4", "node5", "node6", "node7"})
    assert first in switches and second in switches and first != second


def test_pods_without_constraints_fill_the_fuller_switch(tmp_path, capsys) -> None:
    busy = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "busy", "namespace": "default"},
            "spec": {"schedulerName": "other", "nodeName": "node0", "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "4"}}}]},
            "status": {"phase": "Running"}}  # fmt: skip
    spec = """  schedulerName: volcano
  minAvailable: 2
  tasks:
    - name: t0
      replicas: 2"""
    out, _err = cycle(tmp_path, capsys, [*CLUSTER, busy, job(spec)])
    # node0 is taken, so s0 is fuller: both pods go there, leaving s1 whole.
    assert nodes_of(out["binds"]) <= {"node1", "node2", "node3"}
    assert len(out["binds"]) == 2


def test_a_job_the_webhook_would_refuse_is_left_out_with_its_reason(tmp_path, capsys) -> None:
    spec = """  minAvailable: 9
  tasks:
    - name: t0
      replicas: 8"""
    out, err = cycle(tmp_path, capsys, [*CLUSTER, job(spec)])
    assert out["binds"] == {}
    assert "left out" in err and "minAvailable (9) is greater than the total replicas" in err
