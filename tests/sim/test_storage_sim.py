"""Storage in ``pumice simulate``: a cluster file's local volumes and storage objects,
the workload's claims, the job controller's and the ephemeral controller's claims, and
volumes reclaimed when their claims go. Every pod with a claim starts on a node its PV
reaches, and no PV is ever given to two claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pumice.errors import InputError
from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import load_cluster_spec
from pumice.sim.engine import Simulation
from pumice.sim.findings import idle_while_waiting
from pumice.sim.loader import load_workload

CLUSTER = """
nodes:
  - count: 4
    namePrefix: nvme
    allocatable: {cpu: 96, memory: 768Gi, nvidia.com/gpu: 8}
    localVolumes: {storageClass: local-nvme, count: 1, size: 1000Gi}
  - count: 2
    namePrefix: plain
    allocatable: {cpu: 96, memory: 768Gi, nvidia.com/gpu: 8}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: csi.example.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: shared-data}
spec:
  capacity: {storage: 10Ti}
  accessModes: [ReadOnlyMany]
  storageClassName: ""
  persistentVolumeReclaimPolicy: Retain
"""


def _train(name: str, arrival: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "annotations": {"pumice.sim/arrival": str(arrival), "pumice.sim/duration": "600"},
        },
        "spec": {
            "minAvailable": 1,
            "schedulerName": "volcano",
            "volumes": [
                {
                    "mountPath": "/scratch",
                    "volumeClaim": {
                        "storageClassName": "local-nvme",
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "500Gi"}},
                    },
                }
            ],
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "x",
                                    "resources": {"requests": {"nvidia.com/gpu": "8"},
                                                  "limits": {"nvidia.com/gpu": "8"}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }  # fmt: skip


def _pod(name: str, volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {"pumice.sim/arrival": "5", "pumice.sim/duration": "300"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}],
            "volumes": volumes,
        },
    }


def _workload(tmp_path: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": "default"}, "spec": {"weight": 1}},
        *(_train(f"train-{i}", 10 + i) for i in range(6)),
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "dataset"},
         "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "",
                  "resources": {"requests": {"storage": "1Ti"}}}},
        _pod("reader", [{"name": "data", "persistentVolumeClaim": {"claimName": "dataset"}}]),
        _pod("scratchy", [{"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "50Gi"}}}}}}]),
        *(extra or []),
    ]  # fmt: skip
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _cluster(tmp_path: Path, text: str = CLUSTER) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return str(path)


def _reaches(pv: dict[str, Any], node: str) -> bool:
    terms = (((pv["spec"].get("nodeAffinity") or {}).get("required") or {})
             .get("nodeSelectorTerms"))  # fmt: skip
    if not terms:
        return True
    for t in terms:
        for e in t.get("matchExpressions") or ():
            if e["key"] == "kubernetes.io/hostname" and node in e["values"]:
                return True
        for e in t.get("matchFields") or ():
            if e["key"] == "metadata.name" and node in e["values"]:
                return True
    return False


def _claims_of(pod: dict[str, Any]) -> list[str]:
    out = []
    for v in pod["spec"].get("volumes") or ():
        if "persistentVolumeClaim" in v:
            out.append(v["persistentVolumeClaim"]["claimName"])
        elif "ephemeral" in v:
            out.append(f"{pod['metadata']['name']}-{v['name']}")
    return out


def test_every_pod_with_a_claim_starts_where_its_volume_is_and_no_volume_is_shared(tmp_path):
    spec = load_cluster_spec(_cluster(tmp_path))
    assert {o["kind"] for o in spec.storage} == {"StorageClass", "PersistentVolume"}
    local_class = next(o for o in spec.storage if o["metadata"]["name"] == "local-nvme")
    assert local_class["provisioner"] == "kubernetes.io/no-provisioner"
    assert local_class["volumeBindingMode"] == "WaitForFirstConsumer"
    workload = load_workload([str(_workload(tmp_path))])
    sim = Simulation(
        spec.nodes, workload, Scheduler.from_file(None), hypernodes=spec.hypernodes,
        storage=spec.storage,
    )  # fmt: skip
    store = sim.store
    bound: dict[str, tuple[str, str]] = {}  # pod -> (node, PV of its first claim)
    original = store.bind

    def bind(pod_key: str, node: str, writes: Any = None) -> bool:
        ok = original(pod_key, node, writes)
        if not ok:
            return ok
        pod = store.get("Pod", pod_key)
        namespace = pod["metadata"]["namespace"]
        for claim in _claims_of(pod):
            pvc = store.get("PersistentVolumeClaim", f"{namespace}/{claim}")
            assert pvc is not None and pvc["status"]["phase"] == "Bound", (pod_key, claim)
            pv = store.get("PersistentVolume", pvc["spec"]["volumeName"])
            assert pv["spec"]["claimRef"]["name"] == claim
            assert _reaches(pv, node), (pod_key, node, pv["metadata"]["name"])
            bound.setdefault(pod_key, (node, pv["metadata"]["name"]))
        # no PV is given to two claims that exist at once
        names = [
            c["spec"]["volumeName"]
            for c in store.list("PersistentVolumeClaim")
            if (c.get("spec") or {}).get("volumeName")
        ]
        assert len(names) == len(set(names)), names
        return ok

    store.bind = bind  # type: ignore[method-assign]
    result = sim.run()
    assert result.summary["jobs_never_ran"] == 0
    trains = {k: v for k, v in bound.items() if "/train-" in k}
    assert len(trains) == 6  # every training job ran ...
    assert all(node.startswith("nvme-") for node, _pv in trains.values())  # ... on an nvme node
    # four local volumes for six jobs: two of them ran on a volume reclaimed from a job done
    pvs = [pv for _node, pv in trains.values()]
    assert len(set(pvs)) == 4 and len(pvs) == 6
    assert sim.reclaimer is not None and sim.reclaimer.reclaimed >= 2
    # the ephemeral claim was provisioned on its pod's node; the dataset got the static PV
    node, pv = next(v for k, v in bound.items() if "scratchy" in k)
    assert pv.startswith("pvc-")
    assert _reaches(store.get("PersistentVolume", pv) or {"spec": {}}, node) or pv not in {
        p["metadata"]["name"] for p in store.list("PersistentVolume")
    }  # (deleted since)
    assert next(p for k, p in bound.items() if "reader" in k)[1] == "shared-data"
    # the jobs' claims went with them; the user's claim stays; the shared PV is retained
    left = {c["metadata"]["name"] for c in store.list("PersistentVolumeClaim")}
    assert left == {"dataset"}
    assert all(
        pv["status"]["phase"] == "Available"
        for pv in store.list("PersistentVolume")
        if pv["metadata"]["name"].startswith("nvme-")
    )


def test_a_claim_no_file_declares_is_refused(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(
        _pod("lost", [{"name": "d", "persistentVolumeClaim": {"claimName": "nowhere"}}])
    ))  # fmt: skip
    with pytest.raises(InputError) as err:
        load_workload([str(path)])
    assert "nowhere" in err.value.message and err.value.file == str(path)
    assert err.value.obj == "Pod default/lost"


@pytest.mark.parametrize(
    ("text", "obj", "field", "words"),
    [
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, localVolumes: {storageClass: x, count: 0,"
            " size: 1Gi}}]",
            "node group node",
            "nodes[0].localVolumes.count",
            ">= 1",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, localVolumes: {storageClass: x}}]",
            "node group node",
            "nodes[0].localVolumes.size",
            "missing size",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, "
            "localVolumes: {storageClass: x, size: -1Gi}}]",
            "node group node",
            "nodes[0].localVolumes.size",
            "negative",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, localVolumes: {storageClass: x, size: 0}}]",
            "node group node",
            "nodes[0].localVolumes.size",
            "above 0",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, localVolumes: {storageClass: x, size: 1Gi,"
            " disks: 2}}]",
            "node group node",
            "nodes[0].localVolumes.disks",
            "disks",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}}]\n---\napiVersion: v1\n"
            "kind: PersistentVolume\nmetadata: {name: pv1}\nspec: {capacity: {storage: -5Gi}}",
            "PersistentVolume pv1",
            "spec.capacity.storage",
            "",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}}]\n---\napiVersion: storage.k8s.io/v1\n"
            "kind: StorageClass\nmetadata: {name: s}\nprovisioner: x\nvolumeBindingMode: Later",
            "StorageClass s",
            "volumeBindingMode",
            "Later",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}}]\n---\napiVersion: v1\n"
            "kind: PersistentVolume\nmetadata: {name: pv1}\nspec: {accessModes: [ReadMostly]}",
            "PersistentVolume pv1",
            "spec.accessModes",
            "ReadMostly",
        ),
    ],
)
def test_bad_storage_in_a_cluster_file_is_refused(tmp_path, text, obj, field, words):
    path = _cluster(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_cluster_spec(path)
    assert err.value.file == path
    assert err.value.obj == obj
    assert err.value.field == field
    assert words in err.value.message


def test_two_local_groups_of_one_class_and_a_duplicate_pv(tmp_path):
    text = CLUSTER + (
        "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: nvme-000-local-nvme-0}\n"
        "spec: {capacity: {storage: 1Gi}}\n"
    )
    with pytest.raises(InputError) as err:
        load_cluster_spec(_cluster(tmp_path, text))
    assert "duplicate PersistentVolume nvme-000-local-nvme-0" in err.value.message


EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "pumice" / "examples" / "storage"


def test_the_nvme_example_runs_its_training_jobs_on_the_nvme_nodes_only():
    spec = load_cluster_spec(str(EXAMPLES / "cluster.yaml"))
    assert sum(o["kind"] == "PersistentVolume" for o in spec.storage) == 32
    workload = load_workload([str(EXAMPLES / "workload.yaml")])
    sim = Simulation(spec.nodes, workload, Scheduler.from_file(None), storage=spec.storage)
    nodes: dict[str, str] = {}
    original = sim.store.bind

    def bind(pod_key: str, node: str, writes: Any = None) -> bool:
        ok = original(pod_key, node, writes)
        if ok:
            nodes[pod_key] = node
        return ok

    sim.store.bind = bind  # type: ignore[method-assign]
    result = sim.run()
    assert result.summary["jobs_never_ran"] == 0
    trains = [n for k, n in nodes.items() if "/train-" in k]
    assert len(trains) == 24 and all(n.startswith("gpu-nvme-") for n in trains)
    # more training jobs than nvme nodes: some waited for a volume while GPUs sat idle,
    # and the report says so, with a remedy about volumes (not binpack)
    finding = idle_while_waiting(result.metrics)
    assert finding is not None
    assert "no free volume" in finding.text and "more volumes" in finding.remedy
