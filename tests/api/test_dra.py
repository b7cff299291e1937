"""Dynamic Resource Allocation: ResourceSlices, DeviceClasses and ResourceClaims in the
shapes of the Kubernetes DRA docs and the dra-example-driver (gpu.example.com) parse to
records, bad ones name their field, and the allocator picks the devices Kubernetes
would (counts, All, firstAvailable, selectors, matchAttribute with backtracking, devices
in use, slices per node), or says what is short."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pumice.api.dra import (
    Allocation,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    SelectorEvaluator,
    Shortfall,
    allocate,
    claim_from_template,
    devices_in_use,
    devices_on_node,
    evaluate_selector,
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
    pod_claim_names,
    slice_available_on,
)
from pumice.errors import InputError

# -- objects from the Kubernetes docs and the dra-example-driver -------------------------

GPU_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  selectors:
  - cel:
      expression: "device.driver == 'gpu.example.com'"
"""


def gpu_slice(node: str = "kind-worker", gpus: int = 8, api: str = "v1", **extra: Any) -> dict:
    """The ResourceSlice the dra-example-driver publishes for a node: ``gpus`` GPUs with
    index, model, uuid and driverVersion attributes and 80Gi of memory."""
    devices = []
    for i in range(gpus):
        attributes = {
            "index": {"int": i},
            "model": {"string": "LATEST-GPU-MODEL"},
            "uuid": {"string": f"gpu-18db0e85-99e9-c746-8531-ffeb8632{i:04d}"},
            "driverVersion": {"version": "1.0.0"},
        }
        capacity = {"memory": {"value": "80Gi"}}
        if api == "v1beta1":
            devices.append(
                {"name": f"gpu-{i}", "basic": {"attributes": attributes, "capacity": capacity}}
            )
        else:
            devices.append({"name": f"gpu-{i}", "attributes": attributes, "capacity": capacity})
    spec: dict[str, Any] = {
        "driver": "gpu.example.com",
        "nodeName": node,
        "pool": {"generation": 0, "name": node, "resourceSliceCount": 1},
        "devices": devices,
    }
    spec.update(extra)
    if "nodeName" in extra or "allNodes" in extra or "nodeSelector" in extra:
        for key in ("nodeName", "allNodes", "nodeSelector"):
            if key not in extra:
                spec.pop(key, None)
    return {
        "apiVersion": f"resource.k8s.io/{api}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.example.com-k69gd"},
        "spec": spec,
    }


def claim(text: str) -> ResourceClaim:
    return parse_resource_claim(yaml.safe_load(text))


def gpu_claim(
    count: int | None = None, *selectors: str, mode: str = "", name: str = "gpu-claim"
) -> ResourceClaim:
    """The docs' single-gpu claim (resource.k8s.io/v1), with ``count`` GPUs, ``mode``
    and CEL ``selectors`` when given."""
    obj = yaml.safe_load(
        f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: {name}
  namespace: default
  uid: 1f4e-{name}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
"""
    )
    exactly = obj["spec"]["devices"]["requests"][0]["exactly"]
    if mode:
        exactly["allocationMode"] = mode
    if count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return parse_resource_claim(obj)


CLASSES = {"gpu.example.com": parse_device_class(yaml.safe_load(GPU_CLASS))}
WORKER = "kind-worker"


def run(
    claims: list[ResourceClaim],
    slices: list[dict],
    in_use: set | frozenset = frozenset(),
    node: str = WORKER,
    labels: dict | None = None,
    classes: dict | None = None,
    **kw: Any,
) -> Allocation | Shortfall:
    return allocate(
        claims,
        node,
        labels or {},
        [parse_resource_slice(s) for s in slices],
        CLASSES if classes is None else classes,
        in_use,
        **kw,
    )


def devices_of(answer: Allocation | Shortfall, claim_key: str = "default/gpu-claim") -> list[str]:
    assert isinstance(answer, Allocation), str(answer)
    return [r.device for r in answer.result_for(claim_key).results]


# -- allocation ---------------------------------------------------------------------------


def test_a_single_gpu_claim_gets_the_first_gpu_and_the_status_kubernetes_writes() -> None:
    answer = run([gpu_claim()], [gpu_slice()])
    assert isinstance(answer, Allocation)
    assert answer.status_allocation(gpu_claim()) == {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": WORKER, "device": "gpu-0"}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [WORKER]}]}
            ]
        },
    }
    assert answer.devices == {("gpu.example.com", WORKER, "gpu-0")}


def test_count_two_gets_two_distinct_gpus() -> None:
    assert devices_of(run([gpu_claim(count=2)], [gpu_slice()])) == ["gpu-0", "gpu-1"]


def test_all_mode_takes_every_matching_gpu_and_fails_when_one_is_in_use() -> None:
    assert devices_of(run([gpu_claim(mode="All")], [gpu_slice(gpus=3)])) == [
        "gpu-0",
        "gpu-1",
        "gpu-2",
    ]
    short = run(
        [gpu_claim(mode="All")], [gpu_slice(gpus=3)], {("gpu.example.com", WORKER, "gpu-1")}
    )
    assert isinstance(short, Shortfall)
    assert short.reason == (
        "claim default/gpu-claim, request gpu: needs all 3 matching devices of class "
        "gpu.example.com, 1 of them in use by other claims"
    )
    none = run([gpu_claim(mode="All")], [gpu_slice(node="other")])
    assert isinstance(none, Shortfall) and "has none matching" in none.reason


def test_a_missing_device_class_is_named() -> None:
    short = run([gpu_claim()], [gpu_slice()], classes={})
    assert isinstance(short, Shortfall)
    assert short.claim == "default/gpu-claim" and short.request == "gpu"
    assert short.reason == "claim default/gpu-claim, request gpu: no device class gpu.example.com"


def test_selectors_on_attributes_and_capacity() -> None:
    by_index = 'device.attributes["gpu.example.com"].index >= 5'
    assert devices_of(run([gpu_claim(2, by_index)], [gpu_slice()])) == [
        "gpu-5",
        "gpu-6",
    ]
    memory = "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"
    assert devices_of(run([gpu_claim(None, memory)], [gpu_slice()])) == ["gpu-0"]
    too_big = "device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('100Gi'))"
    short = run([gpu_claim(None, too_big)], [gpu_slice()])
    assert isinstance(short, Shortfall)
    assert short.reason.endswith(
        "needs 1 device of class gpu.example.com, node kind-worker has 0 matching"
    )
    same_version = 'device.attributes["gpu.example.com"].driverVersion == semver("1.0.0")'
    model = 'device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"'
    assert devices_of(run([gpu_claim(None, same_version, model)], [gpu_slice()])) == ["gpu-0"]
    newer = 'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))'
    after_rc = (
        'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0-rc.1"))'
    )
    assert devices_of(run([gpu_claim(None, after_rc)], [gpu_slice()])) == ["gpu-0"]
    assert isinstance(run([gpu_claim(None, newer)], [gpu_slice()]), Shortfall)


NUMA_SLICE = """
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: worker-devices
spec:
  driver: dra.example.com
  nodeName: kind-worker
  pool: {name: kind-worker, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      type: {string: gpu}
      numa: {int: 0}
  - name: gpu-1
    attributes:
      type: {string: gpu}
      numa: {int: 1}
  - name: nic-0
    attributes:
      type: {string: nic}
      numa: {int: 1}
"""

NUMA_CLAIM = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-and-nic, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: dra.example.com
        selectors:
        - cel: {expression: 'device.attributes["dra.example.com"].type == "gpu"'}
    - name: nic
      exactly:
        deviceClassName: dra.example.com
        selectors:
        - cel: {expression: 'device.attributes["dra.example.com"].type == "nic"'}
    constraints:
    - matchAttribute: dra.example.com/numa
      requests: [gpu, nic]
"""

DRA_CLASS = {
    "dra.example.com": DeviceClass("dra.example.com", ("device.driver == 'dra.example.com'",))
}


def test_match_attribute_backtracks_from_a_greedy_first_choice() -> None:
    # The first GPU (numa 0) has no NIC beside it: the search must go back and take gpu-1.
    answer = run([claim(NUMA_CLAIM)], [yaml.safe_load(NUMA_SLICE)], classes=DRA_CLASS)
    assert isinstance(answer, Allocation)
    got = [(r.request, r.device) for r in answer.result_for("default/gpu-and-nic").results]
    assert got == [("gpu", "gpu-1"), ("nic", "nic-0")]
    # With gpu-1 in use, no GPU shares a NUMA node with the NIC: the constraint is named.
    short = run(
        [claim(NUMA_CLAIM)],
        [yaml.safe_load(NUMA_SLICE)],
        {("dra.example.com", WORKER, "gpu-1")},
        classes=DRA_CLASS,
    )
    assert isinstance(short, Shortfall)
    assert short.reason == (
        "claim default/gpu-and-nic: no choice of devices on node kind-worker satisfies its "
        "constraints (matchAttribute dra.example.com/numa for requests gpu, nic)"
    )


def test_devices_in_use_are_skipped_and_the_view_is_left_alone() -> None:
    in_use = frozenset({("gpu.example.com", WORKER, f"gpu-{i}") for i in (0, 1, 2)})
    view = set(in_use)
    assert devices_of(run([gpu_claim(count=2)], [gpu_slice(gpus=5)], view)) == ["gpu-3", "gpu-4"]
    assert view == in_use
    short = run([gpu_claim(count=3)], [gpu_slice(gpus=5)], view)
    assert isinstance(short, Shortfall)
    assert short.reason == (
        "claim default/gpu-claim, request gpu: needs 3 devices of class gpu.example.com, "
        "node kind-worker has 2 free of 5 matching (3 in use by other claims)"
    )


def test_admin_access_ignores_devices_in_use_and_takes_none_exclusively() -> None:
    admin = claim(
        """
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: monitor, namespace: gpu-admin}
spec:
  devices:
    requests:
    - name: gpus
      deviceClassName: gpu.example.com
      allocationMode: All
      adminAccess: true
"""
    )
    answer = run([admin], [gpu_slice(gpus=2)], {("gpu.example.com", WORKER, "gpu-0")})
    assert isinstance(answer, Allocation)
    results = answer.status_allocation("gpu-admin/monitor")["devices"]["results"]
    assert [(r["device"], r.get("adminAccess")) for r in results] == [
        ("gpu-0", True),
        ("gpu-1", True),
    ]
    assert answer.devices == frozenset()


def test_node_local_all_nodes_and_node_selector_slices() -> None:
    local = parse_resource_slice(gpu_slice(node="n1"))
    everywhere = parse_resource_slice(gpu_slice(node="pool-a", allNodes=True))
    rack = parse_resource_slice(
        gpu_slice(
            node="rack-1",
            nodeSelector={
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                ]
            },
        )
    )
    assert slice_available_on(local, "n1", {}) and not slice_available_on(local, "n2", {})
    assert slice_available_on(everywhere, "n2", {})
    assert slice_available_on(rack, "n2", {"rack": "r1"}) and not slice_available_on(
        rack, "n2", {"rack": "r2"}
    )
    # On n2 the node-local GPUs of n1 are out of reach.
    assert isinstance(run([gpu_claim()], [gpu_slice(node="n1")], node="n2"), Shortfall)
    # A device reachable from all nodes needs no node selector; one behind a selector
    # carries the slice's selector into the allocation.
    status = run(
        [gpu_claim()], [gpu_slice(node="pool-a", allNodes=True)], node="n2"
    ).status_allocation("default/gpu-claim")
    assert "nodeSelector" not in status and status["devices"]["results"][0]["pool"] == "pool-a"
    status = run(
        [gpu_claim()],
        [gpu_slice(node="rack-1", nodeSelector=rack_selector())],
        node="n2",
        labels={"rack": "r1"},
    ).status_allocation("default/gpu-claim")
    assert status["nodeSelector"] == rack_selector()


def rack_selector() -> dict:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
        ]
    }


PRIORITIZED = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: prioritized-list-claim-template
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: req-0
        firstAvailable:
        - name: large-black
          deviceClassName: resource.example.com
          selectors:
          - cel:
              expression: |-
                device.attributes["resource-driver.example.com"].color == "black" &&
                device.attributes["resource-driver.example.com"].size == "large"
        - name: small-white
          deviceClassName: resource.example.com
          selectors:
          - cel:
              expression: |-
                device.attributes["resource-driver.example.com"].color == "white" &&
                device.attributes["resource-driver.example.com"].size == "small"
          count: 2
"""


def colored_slice(*devices: tuple[str, str, str]) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "worker-colors"},
        "spec": {
            "driver": "resource-driver.example.com",
            "nodeName": WORKER,
            "pool": {"name": WORKER, "generation": 0, "resourceSliceCount": 1},
            "devices": [
                {"name": n, "attributes": {"color": {"string": c}, "size": {"string": s}}}
                for n, c, s in devices
            ],
        },
    }


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    template = parse_resource_claim_template(yaml.safe_load(PRIORITIZED))
    c = ResourceClaim("default", "prio", "u1", template.spec)
    classes = {"resource.example.com": DeviceClass("resource.example.com")}
    whites = [("white-0", "white", "small"), ("white-1", "white", "small")]
    answer = run([c], [colored_slice(*whites)], classes=classes)
    assert isinstance(answer, Allocation)
    assert [(r.request, r.device) for r in answer.result_for(c).results] == [
        ("req-0/small-white", "white-0"),
        ("req-0/small-white", "white-1"),
    ]
    answer = run([c], [colored_slice(*whites, ("black-0", "black", "large"))], classes=classes)
    assert [(r.request, r.device) for r in answer.result_for(c).results] == [
        ("req-0/large-black", "black-0")
    ]
    short = run([c], [colored_slice(whites[0])], classes=classes)
    assert isinstance(short, Shortfall)
    assert short.reason == (
        "claim default/prio, request req-0: none of its alternatives fits: req-0/large-black "
        "needs 1 device of class resource.example.com, node kind-worker has 0 matching; "
        "req-0/small-white needs 2 devices of class resource.example.com, node kind-worker "
        "has 1 matching"
    )


def test_claims_of_one_pod_never_share_a_device() -> None:
    a, b = gpu_claim(name="a"), gpu_claim(name="b")
    answer = run([a, b], [gpu_slice(gpus=2)])
    assert devices_of(answer, "default/a") == ["gpu-0"] and devices_of(answer, "default/b") == [
        "gpu-1"
    ]
    short = run([a, b], [gpu_slice(gpus=1)])
    assert isinstance(short, Shortfall)
    assert "claims default/a, default/b together need more matching devices" in short.reason


def test_an_allocated_claim_is_only_checked_against_the_node() -> None:
    allocated = claim(
        """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.example.com}}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.example.com, pool: n1, device: gpu-0}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields:
        - {key: metadata.name, operator: In, values: [n1]}
  reservedFor:
  - {resource: pods, name: pod-0, uid: 1234}
"""
    )
    assert allocated.reserved_for[0].name == "pod-0"
    assert devices_in_use([allocated, gpu_claim()]) == {("gpu.example.com", "n1", "gpu-0")}
    assert run([allocated], [], node="n1") == Allocation("n1")
    short = run([allocated], [], node="n2")
    assert isinstance(short, Shortfall)
    assert (
        short.reason == "claim default/gpu-claim is allocated to devices that node n2 cannot reach"
    )


def test_only_the_latest_pool_generation_counts_and_all_waits_for_a_complete_pool() -> None:
    old = gpu_slice(gpus=4)
    new = gpu_slice(gpus=1)
    new["metadata"]["name"] = "kind-worker-gpu.example.com-new"
    new["spec"]["pool"]["generation"] = 1
    node = devices_on_node(WORKER, {}, [parse_resource_slice(s) for s in (old, new)])
    assert [o.device.name for o in node.devices] == ["gpu-0"]
    assert devices_of(run([gpu_claim()], [old, new])) == ["gpu-0"]
    assert isinstance(run([gpu_claim(count=2)], [old, new]), Shortfall)
    half = gpu_slice(gpus=2)
    half["spec"]["pool"]["resourceSliceCount"] = 2
    short = run([gpu_claim(mode="All")], [half])
    assert isinstance(short, Shortfall)
    assert (
        "pool kind-worker of driver gpu.example.com is being updated (1 of 2 slices published)"
        in short.reason
    )
    assert devices_of(run([gpu_claim()], [half])) == ["gpu-0"]


def test_a_search_that_runs_too_long_says_so() -> None:
    # 12 GPUs, 4 wanted, none of them allowed together: many combinations to reject.
    c = claim(
        """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.example.com, count: 4}}
    constraints:
    - {matchAttribute: gpu.example.com/index}
"""
    )
    short = run([c], [gpu_slice(gpus=12)], max_steps=50)
    assert isinstance(short, Shortfall) and short.too_complex
    assert "too complex" in short.reason
    assert isinstance(run([c], [gpu_slice(gpus=12)]), Shortfall)


def test_a_cel_error_means_no_match_and_is_shown() -> None:
    typo = 'device.attributes["gpu.example.com"].modle == "LATEST-GPU-MODEL"'
    short = run([gpu_claim(None, typo)], [gpu_slice(gpus=2)])
    assert isinstance(short, Shortfall)
    assert "no such member in mapping: 'modle'" in short.reason
    assert "on device gpu.example.com/kind-worker/gpu-0" in short.errors[0]
    device = parse_resource_slice(gpu_slice(gpus=1)).devices[0]
    assert evaluate_selector(
        'device.attributes["gpu.example.com"].index', "gpu.example.com", device
    ) == (
        False,
        "gives int, not a boolean",
    )
    # An unknown domain is an empty map: has() is false rather than an error.
    assert evaluate_selector(
        'has(device.attributes["other.com"].index)', "gpu.example.com", device
    ) == (False, "")
    ok, error = evaluate_selector("device.driver ==", "gpu.example.com", device)
    assert not ok and error.startswith("does not compile")


def test_each_expression_is_compiled_once() -> None:
    evaluator = SelectorEvaluator()
    devices = parse_resource_slice(gpu_slice(gpus=4)).devices
    expr = 'device.attributes["gpu.example.com"].index % 2 == 0'
    assert [evaluator.matches(expr, "gpu.example.com", d)[0] for d in devices] == [
        True,
        False,
        True,
        False,
    ]
    assert evaluator.program(expr) is evaluator.program(expr)


def test_class_config_and_claim_config_are_copied_into_the_allocation() -> None:
    cls = parse_device_class(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {
                "config": [
                    {
                        "opaque": {
                            "driver": "gpu.example.com",
                            "parameters": {"sharing": "TimeSlicing"},
                        }
                    }
                ]
            },
        }
    )
    c = claim(
        """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.example.com}}
    config:
    - requests: [gpu]
      opaque:
        driver: gpu.example.com
        parameters: {apiVersion: gpu.resource.example.com/v1alpha1, kind: GpuConfig}
"""
    )
    status = run([c], [gpu_slice()], classes={"gpu.example.com": cls}).status_allocation(c)
    assert status["devices"]["config"] == [
        {
            "source": "FromClass",
            "requests": ["gpu"],
            "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "TimeSlicing"}},
        },
        {
            "source": "FromClaim",
            "requests": ["gpu"],
            "opaque": {
                "driver": "gpu.example.com",
                "parameters": {
                    "apiVersion": "gpu.resource.example.com/v1alpha1",
                    "kind": "GpuConfig",
                },
            },
        },
    ]


# -- parsing ------------------------------------------------------------------------------


def test_v1beta1_and_v1_shapes_parse_to_the_same_records() -> None:
    assert parse_resource_slice(gpu_slice(api="v1beta1")) == parse_resource_slice(
        gpu_slice(api="v1")
    )
    beta = claim(
        """
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default, uid: 1f4e-gpu-claim}
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.example.com
      count: 2
      selectors:
      - cel: {expression: 'device.attributes["gpu.example.com"].index >= 5'}
"""
    )
    assert beta == gpu_claim(2, 'device.attributes["gpu.example.com"].index >= 5')
    v1beta2 = gpu_slice(api="v1beta2")
    assert parse_resource_slice(v1beta2) == parse_resource_slice(gpu_slice())
    device = parse_resource_slice(gpu_slice()).devices[0]
    assert device.attribute("gpu.example.com/index") == 0  # unqualified: the driver's domain
    assert dict(device.capacity)["gpu.example.com/memory"] == 80 * 2**30


@pytest.mark.parametrize(
    ("kind", "change", "obj", "field", "message"),
    [
        (
            "claim",
            lambda o: o["spec"]["devices"]["requests"][0]["exactly"].update(count=0),
            "ResourceClaim default/gpu-claim",
            "spec.devices.requests[0].exactly.count",
            "must be at least 1",
        ),
        (
            "claim",
            lambda o: o["spec"]["devices"]["requests"][0]["exactly"].update(allocationMode="Some"),
            "ResourceClaim default/gpu-claim",
            "spec.devices.requests[0].exactly.allocationMode",
            "unknown allocation mode",
        ),
        (
            "claim",
            lambda o: o["spec"]["devices"]["requests"][0].update(deviceClassName="x"),
            "ResourceClaim default/gpu-claim",
            "spec.devices.requests[0].deviceClassName",
            "belongs under exactly",
        ),
        (
            "claim",
            lambda o: o["spec"]["devices"]["requests"][0]["exactly"].pop("deviceClassName"),
            "ResourceClaim default/gpu-claim",
            "spec.devices.requests[0].exactly.deviceClassName",
            "is required",
        ),
        (
            "claim",
            lambda o: o["spec"]["devices"].update(
                constraints=[{"matchAttribute": "dra.example.com/numa", "requests": ["nic"]}]
            ),
            "ResourceClaim default/gpu-claim",
            "spec.devices.constraints[0].requests",
            "no request nic",
        ),
        (
            "claim",
            lambda o: o["spec"]["devices"].update(constraints=[{"matchAttribute": "numa"}]),
            "ResourceClaim default/gpu-claim",
            "spec.devices.constraints[0].matchAttribute",
            "fully qualified",
        ),
        (
            "slice",
            lambda o: o["spec"].pop("driver"),
            "ResourceSlice kind-worker-gpu.example.com-k69gd",
            "spec.driver",
            "is required",
        ),
        (
            "slice",
            lambda o: o["spec"]["devices"][1]["attributes"].update(index={"int": 1, "string": "1"}),
            "ResourceSlice kind-worker-gpu.example.com-k69gd",
            "spec.devices[1].attributes.index",
            "exactly one of",
        ),
        (
            "slice",
            lambda o: o["spec"]["devices"][0]["capacity"].update(memory={"value": "80Gb"}),
            "ResourceSlice kind-worker-gpu.example.com-k69gd",
            "spec.devices[0].capacity.memory.value",
            "invalid quantity",
        ),
        (
            "slice",
            lambda o: o["spec"].update(allNodes=True),
            "ResourceSlice kind-worker-gpu.example.com-k69gd",
            "spec",
            "exactly one of nodeName",
        ),
        (
            "slice",
            lambda o: o["spec"]["devices"][0]["attributes"].update(driverVersion={"version": "v1"}),
            "ResourceSlice kind-worker-gpu.example.com-k69gd",
            "spec.devices[0].attributes.driverVersion.version",
            "invalid semantic version",
        ),
        (
            "slice",
            lambda o: o["spec"]["pool"].update(resourceSliceCount=0),
            "ResourceSlice kind-worker-gpu.example.com-k69gd",
            "spec.pool.resourceSliceCount",
            "must be at least 1",
        ),
    ],
)
def test_bad_input_names_object_and_field(
    kind: str, change: Any, obj: str, field: str, message: str
) -> None:
    if kind == "claim":
        o = yaml.safe_load(
            """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.example.com}}
"""
        )
        parse = parse_resource_claim
    else:
        o, parse = gpu_slice(gpus=2), parse_resource_slice
    change(o)
    with pytest.raises(InputError) as err:
        parse(o)
    assert err.value.obj == obj
    assert err.value.field == field
    assert message in err.value.message


# -- a pod's claims -----------------------------------------------------------------------

POD = """
apiVersion: v1
kind: Pod
metadata: {name: pod0, namespace: default, uid: 0b1c-pod0}
spec:
  containers:
  - name: ctr0
    image: ubuntu:22.04
    resources:
      claims: [{name: gpu}, {name: shared}]
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: single-gpu
  - name: shared
    resourceClaimName: shared-gpu
"""

SINGLE_GPU = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: single-gpu, namespace: default}
spec:
  metadata:
    labels: {app: demo}
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
"""


def test_pod_claim_names_follow_the_controller_status() -> None:
    pod = yaml.safe_load(POD)
    refs = pod_claim_names(pod)
    assert [(r.name, r.claim_name, r.waiting) for r in refs] == [
        ("gpu", "", True),
        ("shared", "shared-gpu", False),
    ]
    assert refs[1].key == "default/shared-gpu"
    pod["status"] = {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "pod0-gpu-x7kq2"}]
    }
    refs = pod_claim_names(pod)
    assert [(r.claim_name, r.waiting) for r in refs] == [
        ("pod0-gpu-x7kq2", False),
        ("shared-gpu", False),
    ]
    bad = yaml.safe_load(POD)
    bad["spec"]["resourceClaims"][1]["resourceClaimTemplateName"] = "single-gpu"
    with pytest.raises(InputError) as err:
        pod_claim_names(bad)
    assert err.value.obj == "Pod default/pod0" and err.value.field == "spec.resourceClaims[1]"


def test_claim_from_template_is_what_the_controller_creates() -> None:
    pod = yaml.safe_load(POD)
    ref = pod_claim_names(pod)[0]
    made = claim_from_template(pod, ref, yaml.safe_load(SINGLE_GPU))
    meta = made["metadata"]
    assert meta["generateName"] == "pod0-gpu-"
    assert meta["name"].startswith("pod0-gpu-") and len(meta["name"]) == len("pod0-gpu-") + 5
    assert made == claim_from_template(pod, ref, yaml.safe_load(SINGLE_GPU))  # deterministic
    other = yaml.safe_load(POD)
    other["metadata"]["uid"] = "another-pod"
    assert (
        claim_from_template(other, ref, yaml.safe_load(SINGLE_GPU))["metadata"]["name"]
        != meta["name"]
    )
    assert meta["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert meta["labels"] == {"app": "demo"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "pod0",
            "uid": "0b1c-pod0",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    parsed = parse_resource_claim(made)
    assert parsed.spec == parse_resource_claim_template(yaml.safe_load(SINGLE_GPU)).spec
    assert devices_of(run([parsed], [gpu_slice()]), parsed.key) == ["gpu-0"]
    long_pod = dict(pod, metadata=dict(pod["metadata"], name="p" * 60))
    assert (
        len(claim_from_template(long_pod, ref, yaml.safe_load(SINGLE_GPU))["metadata"]["name"])
        <= 63
    )


# -- property: what any allocation must respect -------------------------------------------

DRIVER = "dra.example.com"


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[ResourceSlice], list[ResourceClaim], frozenset]:
    slices = []
    for si in range(draw(st.integers(1, 3))):
        access = draw(st.sampled_from(["n1", "n1", "n2", "all", "rack"]))
        spec: dict[str, Any] = {
            "driver": DRIVER,
            "pool": {"name": f"pool-{si}", "generation": 0, "resourceSliceCount": 1},
        }
        if access == "all":
            spec["allNodes"] = True
        elif access == "rack":
            spec["nodeSelector"] = rack_selector()
        else:
            spec["nodeName"] = access
        spec["devices"] = [
            {
                "name": f"d{di}",
                "attributes": {
                    "model": {"string": draw(st.sampled_from(["a", "b"]))},
                    **(
                        {"numa": {"int": draw(st.integers(0, 1))}}
                        if draw(st.integers(0, 4))
                        else {}
                    ),
                },
            }
            for di in range(draw(st.integers(0, 4)))
        ]
        slices.append(parse_resource_slice({"metadata": {"name": f"s{si}"}, "spec": spec}))
    claims = []
    for ci in range(draw(st.integers(1, 2))):
        requests = []
        names = []
        for ri in range(draw(st.integers(1, 2))):
            exact: dict[str, Any] = {"deviceClassName": DRIVER}
            model = draw(st.sampled_from(["", "a", "b"]))
            if model:
                exact["selectors"] = [
                    {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}
                ]
            if draw(st.integers(0, 5)) == 0:
                exact["allocationMode"] = "All"
            else:
                exact["count"] = draw(st.integers(1, 2))
            names.append(f"r{ri}")
            if draw(st.integers(0, 3)) == 0:  # (subrequests have no adminAccess)
                requests.append(
                    {
                        "name": f"r{ri}",
                        "firstAvailable": [
                            dict(exact, name="x", count=3)
                            if "count" in exact
                            else dict(exact, name="x"),
                            dict(exact, name="y"),
                        ],
                    }
                )
            else:
                if draw(st.integers(0, 5)) == 0:
                    exact["adminAccess"] = True
                requests.append({"name": f"r{ri}", "exactly": exact})
        devices: dict[str, Any] = {"requests": requests}
        if draw(st.booleans()):
            devices["constraints"] = [{"matchAttribute": f"{DRIVER}/numa"}]
        claims.append(
            parse_resource_claim(
                {"metadata": {"name": f"c{ci}", "namespace": "ns"}, "spec": {"devices": devices}}
            )
        )
    all_keys = sorted({(DRIVER, s.pool, d.name) for s in slices for d in s.devices})
    in_use = frozenset(draw(st.sets(st.sampled_from(all_keys), max_size=2)) if all_keys else ())
    return slices, claims, in_use


def brute_force_possible(
    claims: list[ResourceClaim], offered: list, in_use: frozenset
) -> bool | None:
    """Whether any assignment satisfies everything, by trying them all (None: too many
    to try)."""
    cls = DeviceClass(DRIVER, (f"device.driver == '{DRIVER}'",))
    per_unit = []
    for ci, c in enumerate(claims):
        for r in c.spec.requests:
            options = []
            for result_name, spec in r.alternatives():
                match = [
                    o
                    for o in offered
                    if all(
                        evaluate_selector(e, o.driver, o.device)[0]
                        for e in cls.selectors + spec.selectors
                    )
                ]
                if spec.mode == "All":
                    combos = [tuple(match)] if match else []
                else:
                    combos = list(itertools.combinations(match, spec.count))
                options.extend((ci, result_name, spec.admin_access, combo) for combo in combos)
            per_unit.append(options)
    if math.prod(len(options) for options in per_unit) > 20_000:
        return None
    for choice in itertools.product(*per_unit):
        exclusive: list = []
        ok = True
        for ci, c in enumerate(claims):
            mine = [
                (name, admin, o) for cj, name, admin, combo in choice if cj == ci for o in combo
            ]
            keys = [o.key for _, _, o in mine]
            if len(keys) != len(set(keys)):
                ok = False
            for con in c.spec.constraints:
                values = {
                    (type(v), v)
                    for name, _, o in mine
                    if con.covers(name)
                    for v in [o.device.attribute(con.attribute)]
                }
                if any(v[1] is None for v in values) or len(values) > 1:
                    ok = False
            exclusive += [o.key for _, admin, o in mine if not admin]
            if any(o.key in in_use for _, admin, o in mine if not admin):
                ok = False
        if ok and len(exclusive) == len(set(exclusive)):
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_any_allocation_respects_node_use_counts_and_constraints(scenario: tuple) -> None:
    slices, claims, in_use = scenario
    classes = {DRIVER: DeviceClass(DRIVER, (f"device.driver == '{DRIVER}'",))}
    labels = {"rack": "r1"}
    answer = allocate(claims, "n1", labels, slices, classes, in_use)
    offered = list(devices_on_node("n1", labels, slices).devices)
    reachable = {o.key: o for o in offered}
    if isinstance(answer, Shortfall):
        assert answer.reason
        if not answer.too_complex:
            assert brute_force_possible(claims, offered, in_use) is not True, answer.reason
        return
    exclusive: list = []
    for c in claims:
        results = answer.result_for(c).results
        keys = [r.key for r in results]
        assert all(k in reachable for k in keys)
        assert len(keys) == len(set(keys))
        for r in results:
            if not r.admin_access:
                assert r.key not in in_use
                exclusive.append(r.key)
        for request in c.spec.requests:
            got = [r for r in results if r.request.split("/")[0] == request.name]
            chosen = {r.request for r in got}
            assert len(chosen) == 1
            spec = dict(request.alternatives())[chosen.pop()]
            if spec.mode == "ExactCount":
                assert len(got) == spec.count
            else:
                assert len(got) >= 1
        for con in c.spec.constraints:
            values = {
                (type(v), v)
                for r in results
                for v in [reachable[r.key].device.attribute(con.attribute)]
            }
            assert len(values) == 1 and None not in {v for _, v in values}
    assert len(exclusive) == len(set(exclusive))
    assert answer.devices == frozenset(exclusive)
