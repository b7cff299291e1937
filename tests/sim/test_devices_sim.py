"""Devices (dynamic resource allocation) in ``pumice simulate``: a cluster file's
ResourceSlices, DeviceClasses and node groups' devices, the workload's claims and
templates, the resource-claim controller's claims, and devices given back when pods are
done. At every bind no device belongs to two claims and every claim of the bound pod is
allocated on its node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pumice.api.dra import pod_claim_names
from pumice.errors import InputError
from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import load_cluster_spec
from pumice.sim.engine import Simulation
from pumice.sim.findings import idle_while_waiting
from pumice.sim.loader import load_workload

CLUSTER = """
nodes:
  - count: 2
    namePrefix: a100
    allocatable: {cpu: 64, memory: 512Gi}
    devices: {driver: gpu.example.com, count: 4, attributes: {model: A100},
              capacity: {memory: 80Gi}}
  - count: 1
    namePrefix: h100
    allocatable: {cpu: 64, memory: 512Gi}
    devices: {driver: gpu.example.com, count: 2, attributes: {model: H100}}
  - count: 2
    namePrefix: cpu
    allocatable: {cpu: 64, memory: 512Gi}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: big-gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'}
"""  # noqa: E501

QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": "default"}, "spec": {"weight": 1}}  # fmt: skip


def _template(name: str, count: int, *, device_class: str = "gpu.example.com",
              selector: str = "") -> dict[str, Any]:  # fmt: skip
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def _vcjob(name: str, arrival: int, replicas: int, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": {"pumice.sim/arrival": str(arrival),
                                                   "pumice.sim/duration": "600"}},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "tasks": [{
                "name": "worker",
                "replicas": replicas,
                "template": {"spec": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                    "containers": [{"name": "main", "image": "x",
                                    "resources": {"requests": {"cpu": "4"},
                                                  "claims": [{"name": "gpu"}]}}],
                }},
            }],
        },
    }  # fmt: skip


def _pod(name: str, arrival: int, entry: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"pumice.sim/arrival": str(arrival),
                                                   "pumice.sim/duration": "300"}},
        "spec": {
            "schedulerName": "volcano",
            "resourceClaims": [{"name": "gpu", **entry}],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}],
        },
    }  # fmt: skip


def _write(tmp_path: Path, name: str, docs: list[dict[str, Any]] | str) -> str:
    path = tmp_path / name
    path.write_text(docs if isinstance(docs, str) else yaml.safe_dump_all(docs))
    return str(path)


def _workload_docs() -> list[dict[str, Any]]:
    return [
        QUEUE,
        _template("two-gpus", 2),
        _template("one-h100", 1, selector='device.attributes["gpu.example.com"].model == "H100"'),
        _template("one-big", 1, device_class="big-gpu"),
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "shared"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
             "deviceClassName": "gpu.example.com"}}]}}},
        *(_vcjob(f"train-{i}", 10 * i, 2, "two-gpus") for i in range(6)),
        *(_pod(f"probe-{i}", 5 + i, {"resourceClaimTemplateName": "one-h100"}) for i in range(4)),
        *(_pod(f"big-{i}", 7 + i, {"resourceClaimTemplateName": "one-big"}) for i in range(2)),
        _pod("user-a", 1, {"resourceClaimName": "shared"}),
        _pod("user-b", 2, {"resourceClaimName": "shared"}),
    ]  # fmt: skip


def _node_of(allocation: dict[str, Any]) -> set[str]:
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    return {v for t in terms for f in t.get("matchFields") or () for v in f["values"]}


def test_every_pod_gets_devices_of_its_node_no_device_is_shared_and_devices_come_back(
    tmp_path: Path,
) -> None:
    spec = load_cluster_spec(_write(tmp_path, "cluster.yaml", CLUSTER))
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in spec.devices)
    assert kinds == [
        ("DeviceClass", "big-gpu"),
        ("DeviceClass", "gpu.example.com"),  # (made for the driver the groups name)
        ("ResourceSlice", "a100-000-gpu.example.com"),
        ("ResourceSlice", "a100-001-gpu.example.com"),
        ("ResourceSlice", "h100-000-gpu.example.com"),
    ]
    workload = load_workload([_write(tmp_path, "workload.yaml", _workload_docs())])
    sim = Simulation(spec.nodes, workload, Scheduler.from_file(None), devices=spec.devices)
    store = sim.store
    placed: dict[str, tuple[str, list[tuple[str, str]]]] = {}  # pod -> node, its devices
    claims_seen: set[str] = set()
    original = store.bind

    def bind(pod_key: str, node: str, writes: Any = None) -> bool:
        ok = original(pod_key, node, writes)
        if not ok:
            return ok
        pod = store.get("Pod", pod_key)
        devices = []
        for ref in pod_claim_names(pod):
            assert not ref.waiting, (pod_key, ref)
            claim = store.get("ResourceClaim", ref.key)
            assert claim is not None, (pod_key, ref.key)
            status = claim["status"]
            allocation = status["allocation"]
            assert _node_of(allocation) == {node}, (pod_key, node, allocation)
            results = allocation["devices"]["results"]
            assert results and all(r["pool"] == node for r in results), (pod_key, node)
            assert pod["metadata"]["uid"] in {u["uid"] for u in status["reservedFor"]}
            devices += [(r["pool"], r["device"]) for r in results]
            claims_seen.add(ref.key)
        placed[pod_key] = (node, devices)
        # no device is allocated to two claims that exist at once
        held = [
            (r["driver"], r["pool"], r["device"])
            for c in store.list("ResourceClaim")
            if (c.get("status") or {}).get("allocation")
            for r in c["status"]["allocation"]["devices"]["results"]
        ]
        assert len(held) == len(set(held)), held
        return ok

    store.bind = bind  # type: ignore[method-assign]
    result = sim.run()
    assert result.summary["jobs_never_ran"] == 0
    assert len(placed) == 6 * 2 + 4 + 2 + 2  # every pod ran
    # (a pod of a workload is named for its job: <job>-<task>-<index>)
    # the H100 probes on the H100 node, the big-memory ones on an A100 node (80Gi)
    assert {placed[f"default/probe-{i}-task-0"][0] for i in range(4)} == {"h100-000"}
    assert {placed[f"default/big-{i}-task-0"][0] for i in range(2)} <= {"a100-000", "a100-001"}
    # the two users of the shared claim were placed with its one device
    assert placed["default/user-a-task-0"][1] == placed["default/user-b-task-0"][1]
    assert placed["default/user-a-task-0"][0] == placed["default/user-b-task-0"][0]
    # 10 devices, and more claims than that: devices came back and were used again
    train = [d for k, (_n, ds) in placed.items() if "/train-" in k for d in ds]
    assert len(train) == 24 and len(set(train)) < len(train)
    assert len(claims_seen) > 10
    # claims made for pods went with them; the workload's own claim stays, free again
    left = store.list("ResourceClaim")
    assert [c["metadata"]["name"] for c in left] == ["shared"]
    assert not (left[0].get("status") or {}).get("allocation")
    assert sim.claim_controller is not None and sim.claim_controller.made == 6 * 2 + 4 + 2


def test_a_workload_without_claims_runs_no_claim_controller(tmp_path: Path) -> None:
    spec = load_cluster_spec(_write(tmp_path, "cluster.yaml", CLUSTER))
    docs = [QUEUE, _pod("plain", 0, {"resourceClaimName": "x"})]
    del docs[1]["spec"]["resourceClaims"]
    workload = load_workload([_write(tmp_path, "w.yaml", docs)])
    sim = Simulation(spec.nodes, workload, Scheduler.from_file(None), devices=spec.devices)
    assert sim.claim_controller is None
    assert sim.run().summary["jobs_never_ran"] == 0


@pytest.mark.parametrize(
    ("text", "obj", "field", "words"),
    [
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, devices: {driver: gpu.example.com,"
            " count: 0}}]",
            "node group node",
            "nodes[0].devices.count",
            ">= 1",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, devices: {driver: GPU_x, count: 1}}]",
            "node group node",
            "nodes[0].devices.driver",
            "invalid driver name",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, devices: {driver: gpu.example.com,"
            " attributes: {memoryGi: 1.5}}}]",
            "node group node",
            "nodes[0].devices.attributes.memoryGi",
            "1.5",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, devices: {driver: gpu.example.com,"
            " attributes: {driverVersion: {version: v1}}}}]",
            "node group node",
            "nodes[0].devices.attributes.driverVersion.version",
            "semantic version",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, devices: {driver: gpu.example.com,"
            " capacity: {memory: lots}}}]",
            "node group node",
            "nodes[0].devices.capacity.memory",
            "lots",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, devices: {driver: gpu.example.com,"
            " gpus: 2}}]",
            "node group node",
            "nodes[0].devices.gpus",
            "gpus",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}, devices: [{driver: a.example.com},"
            " {driver: a.example.com}]}]",
            "node group node",
            "nodes[0].devices[1].driver",
            "given twice",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}}]\n---\napiVersion: resource.k8s.io/v1\n"
            "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d.example.com, "
            "pool: {name: p}, allNodes: true, devices: [{name: g0, attributes: "
            "{model: {strings: [a]}}}]}",
            "ResourceSlice s",
            "spec.devices[0].attributes.model",
            "list attributes",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}}]\n---\napiVersion: resource.k8s.io/v1\n"
            "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d.example.com, "
            "pool: {name: p}, nodeName: elsewhere, devices: [{name: g0}]}",
            "ResourceSlice s",
            "spec.nodeName",
            "node elsewhere",
        ),
        (
            "nodes: [{count: 1, allocatable: {cpu: 1}}]\n---\napiVersion: resource.k8s.io/v1\n"
            "kind: DeviceClass\nmetadata: {name: c}\nspec: {selectors: [{cel: {expression: ''}}]}",
            "DeviceClass c",
            "spec.selectors[0].cel.expression",
            "empty",
        ),
    ],
)
def test_bad_devices_in_a_cluster_file_are_refused(tmp_path, text, obj, field, words):
    path = _write(tmp_path, "cluster.yaml", text)
    with pytest.raises(InputError) as err:
        load_cluster_spec(path)
    assert err.value.file == path
    assert err.value.obj == obj
    assert err.value.field == field
    assert words in err.value.message


def test_a_duplicate_slice_is_refused(tmp_path):
    text = CLUSTER + (
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\n"
        "metadata: {name: a100-000-gpu.example.com}\n"
        "spec: {driver: gpu.example.com, pool: {name: x}, nodeName: a100-000, devices: []}\n"
    )
    with pytest.raises(InputError) as err:
        load_cluster_spec(_write(tmp_path, "cluster.yaml", text))
    assert "duplicate ResourceSlice a100-000-gpu.example.com" in err.value.message


def test_a_template_no_file_declares_is_refused(tmp_path):
    path = _write(tmp_path, "w.yaml", [QUEUE, _vcjob("lost", 0, 1, "nowhere")])
    with pytest.raises(InputError) as err:
        load_workload([path])
    assert "ResourceClaimTemplate nowhere" in err.value.message
    assert err.value.file == path and err.value.obj == "Job default/lost"


def test_a_malformed_template_is_refused_naming_its_field(tmp_path):
    bad = _template("t", 1)
    bad["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "Most"
    path = _write(tmp_path, "w.yaml", [QUEUE, bad])
    with pytest.raises(InputError) as err:
        load_workload([path])
    assert err.value.obj == "ResourceClaimTemplate default/t"
    assert err.value.field == "spec.spec.devices.requests[0].exactly.allocationMode"


def test_claims_no_node_could_ever_serve_are_refused_before_the_run(tmp_path):
    spec = load_cluster_spec(_write(tmp_path, "cluster.yaml", CLUSTER))
    docs = [QUEUE, _template("eight", 8), _vcjob("greedy", 0, 1, "eight")]
    path = _write(tmp_path, "w.yaml", docs)
    workload = load_workload([path])
    with pytest.raises(InputError) as err:
        Simulation(spec.nodes, workload, Scheduler.from_file(None), devices=spec.devices)
    assert err.value.file == path and err.value.obj == "Job default/greedy"
    assert err.value.field == "spec.tasks[0].template.spec.resourceClaims"
    assert "needs 8 devices of class gpu.example.com" in err.value.message
    # and with no devices at all
    with pytest.raises(InputError) as err:
        Simulation(spec.nodes, workload, Scheduler.from_file(None))
    assert "no node of the cluster has devices" in err.value.message


EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "pumice" / "examples" / "devices"


def test_the_dra_example_runs_its_gpu_jobs_on_the_gpu_nodes_only():
    spec = load_cluster_spec(str(EXAMPLES / "cluster.yaml"))
    workload = load_workload([str(EXAMPLES / "workload.yaml")])
    sim = Simulation(spec.nodes, workload, Scheduler.from_file(None), devices=spec.devices)
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
    gpu = [n for k, n in nodes.items() if "/train-" in k]
    assert gpu and all(n.startswith("gpu-") for n in gpu)
    assert any(not n.startswith("gpu-") for k, n in nodes.items() if "/prep-" in k)
    # the big gangs waited for whole nodes of free GPUs while CPUs sat idle: the report
    # says devices were short, with a remedy about devices (not binpack)
    finding = idle_while_waiting(result.metrics)
    assert finding is not None
    assert "no free devices" in finding.text and "more devices" in finding.remedy
