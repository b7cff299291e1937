"""A Volcano Job's network topology, as Volcano's job controller maps it: the Job's
``networkTopology`` onto its PodGroup, each task's ``partitionPolicy`` onto one
``subGroupPolicy`` entry, a partition label on the pods the entry groups, the task's
minimum from ``minPartitions``, and what Volcano's webhook refuses in a partition
policy. The last test runs the controller against a real API server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from tests.controllers.test_job_world import World, job_yaml
from tests.run import kube_kit as k

from pumice.api.parse import parse_podgroup
from pumice.api.topology_spec import sub_group_of
from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, KubeClient
from pumice.controllers.kube_store import KubeStore
from pumice.controllers.loop import ControllerLoop
from pumice.sandbox import ControlPlane

PARTITION = "volcano.sh/partition-id"

# Volcano's user guide to network topology aware scheduling (3.3.2): the job within a
# tier-2 HyperNode, its 8 pods in 2 partitions of 4, each within a tier-1 HyperNode.
GUIDE = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: network-topology-job
  namespace: default
spec:
  schedulerName: volcano
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
          highestTierAllowed: 1
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

# A parameter server beside partitioned workers: only the workers get a sub-group.
PS_WORKERS = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: llm, namespace: ml}
spec:
  networkTopology: {mode: soft, highestTierName: spine}
  tasks:
    - name: ps
      replicas: 1
      template:
        spec:
          containers: [{name: ps, image: x}]
    - name: worker
      replicas: 6
      partitionPolicy:
        totalPartitions: 3
        partitionSize: 2
        minPartitions: 2
        networkTopology: {highestTierName: leaf}
      template:
        spec:
          containers: [{name: w, image: x}]
"""

T0_POLICY = {
    "name": "t0",
    "subGroupSize": 4,
    "minSubGroups": 0,
    "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "t0"}},
    "matchLabelKeys": [PARTITION],
    "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
}


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def test_the_guides_job_gets_its_topology_and_one_sub_group_per_partitioned_task():
    w = World()
    key = w.submit(job_yaml(GUIDE))
    spec = w.podgroup(key)["spec"]
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert spec["subGroupPolicy"] == [T0_POLICY]
    # no minPartitions: the task needs all its replicas, the job its own minAvailable
    assert spec["minMember"] == 4 and spec["minTaskMember"] == {"t0": 8}


def test_min_partitions_set_the_tasks_minimum_and_tier_names_pass_through():
    w = World(queues=("default",))
    key = w.submit(job_yaml(PS_WORKERS))
    spec = w.podgroup(key)["spec"]
    assert spec["networkTopology"] == {"mode": "soft", "highestTierName": "spine"}
    assert spec["subGroupPolicy"] == [{
        "name": "worker", "subGroupSize": 2, "minSubGroups": 2,
        "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
        "matchLabelKeys": [PARTITION],
        "networkTopology": {"mode": "hard", "highestTierName": "leaf"},
    }]  # fmt: skip
    # 2 partitions of 2 workers, and the ps: the webhook's defaults, then their sum
    assert spec["minTaskMember"] == {"ps": 1, "worker": 4}
    assert spec["minMember"] == 5
    assert w.status(key)["minAvailable"] == 5


def test_a_job_without_topology_gets_neither_field():
    job = job_yaml(GUIDE)
    del job["spec"]["networkTopology"]
    del job["spec"]["tasks"][0]["partitionPolicy"]
    w = World()
    key = w.submit(job)
    spec = w.podgroup(key)["spec"]
    assert "networkTopology" not in spec and "subGroupPolicy" not in spec
    w.admit(key)
    assert all(PARTITION not in p["metadata"]["labels"] for p in w.pods(key))


def test_pods_carry_their_partition_and_the_scheduler_groups_them_by_it():
    """Pod i of a task cut into partitions of n is in partition i // n; the scheduler,
    reading the PodGroup, puts each worker in its partition's sub-group and the
    parameter server in none."""
    w = World(queues=("default",))
    key = w.submit(job_yaml(PS_WORKERS))
    w.admit(key)
    pods = {p["metadata"]["name"]: p for p in w.pods(key)}
    labels = {name: p["metadata"]["labels"].get(PARTITION) for name, p in pods.items()}
    assert labels == {
        "llm-ps-0": None,
        "llm-worker-0": "0", "llm-worker-1": "0",
        "llm-worker-2": "1", "llm-worker-3": "1",
        "llm-worker-4": "2", "llm-worker-5": "2",
    }  # fmt: skip
    policies = parse_podgroup(w.podgroup(key)).sub_groups
    groups: dict[Any, list[str]] = {}
    for name, pod in sorted(pods.items()):
        found = sub_group_of(policies, pod["metadata"]["labels"])
        group = None if found is None else (found[0].name, found[1])
        groups.setdefault(group, []).append(name)
    assert groups == {
        None: ["llm-ps-0"],
        ("worker", ("0",)): ["llm-worker-0", "llm-worker-1"],
        ("worker", ("1",)): ["llm-worker-2", "llm-worker-3"],
        ("worker", ("2",)): ["llm-worker-4", "llm-worker-5"],
    }


def test_a_podgroup_missing_its_sub_groups_gets_them_back():
    """As Volcano's controller updates subGroupPolicy on an existing PodGroup (one made
    without it), the next reconcile writes it; the network topology stays as made."""
    w = World()
    key = w.submit(job_yaml(GUIDE))
    pg = w.podgroup(key)
    w.store.patch("PodGroup", _key(pg), {"spec": {"subGroupPolicy": None}})
    w.step()
    assert w.podgroup(key)["spec"]["subGroupPolicy"] == [T0_POLICY]


def _refusal(w: World, key: str) -> str:
    state = w.status(key)["state"]
    assert state["phase"] == "Pending" and state["reason"] == "Invalid"
    assert w.podgroup(key) is None and w.pods(key) == []
    warn = [e for e in w.events(key) if e["type"] == "Warning" and e["reason"] == "Invalid"]
    assert warn and warn[0]["message"] == state["message"]
    return state["message"]


def _guide(**partition: Any) -> dict[str, Any]:
    """The guide's Job with its partition policy changed (None: the key removed); a
    ``task_`` key changes the task, a ``job_`` key the job's spec."""
    job = job_yaml(GUIDE)
    task = job["spec"]["tasks"][0]
    for k_, v in partition.items():
        where, name = (
            (task, k_[5:]) if k_.startswith("task_")
            else (job["spec"], k_[4:]) if k_.startswith("job_")
            else (task["partitionPolicy"], k_)
        )  # fmt: skip
        if v is None:
            where.pop(name, None)
        else:
            where[name] = v
    return job


BOTH_TIERS = {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "leaf"}


@pytest.mark.parametrize(
    ("job", "says"),
    [
        (_guide(totalPartitions=0), "task 't0': partitionPolicy: totalPartitions must be at "
                                    "least 1 (it is 0)"),
        (_guide(partitionSize=None), "partitionSize must be at least 1 (it is 0)"),
        (_guide(totalPartitions=3), "totalPartitions (3) times partitionSize (4) is 12, not "
                                    "the task's replicas (8)"),
        (_guide(task_replicas=6), "is 8, not the task's replicas (6)"),
        (_guide(minPartitions=3), "minPartitions (3) is greater than totalPartitions (2)"),
        (_guide(minPartitions=-1), "minPartitions must not be negative"),
        (_guide(minPartitions=1, task_minAvailable=3),
         "the task's minAvailable (3) must be minPartitions (1) times partitionSize (4), 4"),
        (_guide(networkTopology=BOTH_TIERS),
         "partitionPolicy.networkTopology sets both highestTierAllowed and highestTierName"),
        (_guide(networkTopology={"mode": "strict"}), "mode must be hard or soft (it is "
                                                     "'strict')"),
        (_guide(job_networkTopology=BOTH_TIERS),
         "networkTopology sets both highestTierAllowed and highestTierName"),
        (_guide(job_networkTopology={"highestTierAllowed": -1}),
         "networkTopology: highestTierAllowed must not be negative (it is -1)"),
        (_guide(networkTopology="tier1"), "expected a mapping"),
    ],
)  # fmt: skip
def test_partition_policies_volcanos_webhook_refuses(job: dict, says: str):
    w = World()
    key = w.submit(job)
    assert says in _refusal(w, key)


@pytest.mark.parametrize(
    "job",
    [
        _guide(minPartitions=1, task_minAvailable=4),  # minAvailable = 1 x 4
        _guide(task_minAvailable=3),  # no minPartitions: minAvailable is free
        _guide(networkTopology=None, job_networkTopology={"mode": "soft"}),
    ],
)
def test_partition_policies_volcano_accepts(job: dict):
    w = World()
    key = w.submit(job)
    assert "reason" not in w.status(key)["state"]
    assert w.podgroup(key)["spec"]["subGroupPolicy"][0]["name"] == "t0"


# -- against a real API server ------------------------------------------------------------


@pytest.fixture(scope="module")
def plane(k8s_binaries: None) -> Iterator[ControlPlane]:
    """An API server with pumice's CRDs and the default queue (no kubelet: the pods the
    controller makes are only read)."""
    cp = ControlPlane().start()
    client = KubeClient.from_config(cp.kubeconfig)
    k.install_crds(client)
    k.wait_for("the Job CRD", lambda: client.request("GET", RESOURCES["Job"].path())[0] == 200)
    k.queue(client)
    client.close()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def job_controller(plane: ControlPlane) -> Iterator[ControllerLoop]:
    """pumice's job controller alone, on a thread, for the test."""
    store = KubeStore(KubeClient.from_config(plane.kubeconfig))
    loop = ControllerLoop(store, ("job",), idle=0.2)
    thread: threading.Thread = loop.start_thread()
    yield loop
    loop.stop.set()
    thread.join(10)
    assert not thread.is_alive(), "the controller loop did not stop"
    store.close()


@pytest.mark.k8s
def test_the_guides_job_on_an_api_server(
    job_controller: ControllerLoop, admin: KubeClient, ns: str
) -> None:
    """The guide's Job through pumice's Job CRD and controller: the PodGroup written
    carries the topology and the sub-group, and once admitted the pods their
    partition; the CRD refuses a partition policy without a size."""
    job = yaml.safe_load(GUIDE)
    job["metadata"]["namespace"] = ns
    created = k.ok(admin.request("POST", RESOURCES["Job"].path(ns), body=job))
    assert created["spec"]["tasks"][0]["partitionPolicy"]["minPartitions"] == 0  # defaulted

    pg_key = f"{ns}/network-topology-job-{created['metadata']['uid']}"
    pg = k.wait_for("the PodGroup", lambda: k.get(admin, "PodGroup", pg_key))
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert pg["spec"]["subGroupPolicy"] == [T0_POLICY]
    assert pg["spec"]["minMember"] == 4 and pg["spec"]["minTaskMember"] == {"t0": 8}

    name = pg["metadata"]["name"]
    admitted = {"status": {"phase": "Inqueue"}}  # as the scheduler's enqueue
    path = RESOURCES["PodGroup"].path(ns, name, "status")
    k.ok(admin.request("PATCH", path, body=admitted, content_type=MERGE_PATCH))

    def all_pods() -> dict[str, dict] | None:
        got = k.pods(admin, ns)
        return got if len(got) == 8 else None

    pods = k.wait_for("the job's 8 pods", all_pods)
    assert {n: p["metadata"]["labels"][PARTITION] for n, p in pods.items()} == {
        f"network-topology-job-t0-{i}": str(i // 4) for i in range(8)
    }

    bad = yaml.safe_load(GUIDE)
    bad["metadata"] = {"name": "no-size", "namespace": ns}
    del bad["spec"]["tasks"][0]["partitionPolicy"]["partitionSize"]
    status, body = admin.request("POST", RESOURCES["Job"].path(ns), body=bad)
    assert status == 422 and "partitionSize" in str(body)
