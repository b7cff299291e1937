"""Pods that ask for devices through ResourceClaims (dynamic resource allocation with
structured parameters): where they go, which devices each claim gets, and why a pod
waits, in one cycle as `pumice cycle` runs it."""

from __future__ import annotations

from typing import Any

from tests.kit import node, pod, podgroup, queue, run

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}


def gpu_slice(node_name: str, count: int, model: str = "A100", memory: str = "80Gi") -> dict:
    """The example driver's ResourceSlice: ``count`` GPUs on ``node_name``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpu.example.com"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"model": {"string": model}, "index": {"int": i}},
                    "capacity": {"memory": {"value": memory}},
                }
                for i in range(count)
            ],
        },
    }


def template(name: str, count: int = 1, selector: str = "") -> dict:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def claim(name: str, count: int = 1) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                                                "count": count}}
                ]
            }
        },
    }  # fmt: skip


def using(name: str, *, claim_name: str = "", template_name: str = "", **kw) -> dict:
    ref = {"name": "gpu"}
    if claim_name:
        ref["resourceClaimName"] = claim_name
    else:
        ref["resourceClaimTemplateName"] = template_name
    p = pod(name, resourceClaims=[ref], **kw)
    p["metadata"]["uid"] = f"uid-{name}"
    return p


def _nodes(n: int = 2) -> list[dict]:
    return [node(f"n{i}", cpu="16", labels={"kubernetes.io/hostname": f"n{i}"}) for i in range(n)]


def test_a_claim_gets_a_device_of_the_node_that_has_one() -> None:
    objs = [
        *_nodes(),
        queue(),
        GPU_CLASS,
        gpu_slice("n1", 2),
        claim("c"),
        using("p", claim_name="c"),
    ]
    d = run(objs)
    assert d.binds == {"default/p": "n1"}
    allocation = d.to_json()["claims"]["default/c"]
    [result] = allocation["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (
        "gpu.example.com",
        "n1",
        "gpu-0",
    )
    terms = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    ]


def test_a_gang_gets_distinct_devices_or_waits_whole() -> None:
    base = [*_nodes(), queue(), GPU_CLASS, gpu_slice("n0", 2), gpu_slice("n1", 1),
            template("one-gpu")]  # fmt: skip
    three = [podgroup("train", min_member=3)] + [
        using(f"train-{i}", template_name="one-gpu", group="train") for i in range(3)
    ]
    d = run(base + three)
    assert len(d.binds) == 3
    devices = [
        (r["pool"], r["device"])
        for a in d.to_json()["claims"].values()
        for r in a["devices"]["results"]
    ]
    assert len(set(devices)) == 3, devices
    four = [podgroup("train", min_member=4)] + [
        using(f"train-{i}", template_name="one-gpu", group="train") for i in range(4)
    ]
    d = run(base + four)
    assert d.binds == {}
    assert "claims" not in d.to_json()
    assert "cannot allocate all claims" in d.pending["default/train"]
    assert "in use by other claims" in d.pending["default/train"]


def test_a_selector_on_the_device_model_steers_the_pod() -> None:
    objs = [*_nodes(), queue(), GPU_CLASS, gpu_slice("n0", 4, model="T4"),
            gpu_slice("n1", 4, model="H100"),
            template("h100", selector='device.attributes["gpu.example.com"].model == "H100"'),
            using("p", template_name="h100")]  # fmt: skip
    assert run(objs).binds == {"default/p": "n1"}


def test_why_a_pod_waits_for_its_claim() -> None:
    objs = [*_nodes(), queue(), GPU_CLASS, gpu_slice("n1", 2)]
    d = run([*objs, using("p", claim_name="missing")])
    assert 'resourceclaim "missing" not found' in d.pending["default/podgroup-uid-p"]
    d = run([*objs, using("p", template_name="not-there")])
    assert (
        "waiting for ResourceClaim gpu of template not-there to be created"
        in d.pending["default/podgroup-uid-p"]
    )
    d = run([*objs, claim("big", count=3), using("p", claim_name="big")])
    why = d.pending["default/podgroup-uid-p"]
    assert "claim default/big, request gpu: needs 3 devices of class gpu.example.com" in why


def test_an_allocated_claim_keeps_its_node_and_is_shared() -> None:
    allocated = claim("shared")
    allocated["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                     "pool": "n0", "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": "first", "uid": "uid-first"}],
    }  # fmt: skip
    objs = [*_nodes(), queue(), GPU_CLASS, gpu_slice("n0", 1), gpu_slice("n1", 1), allocated]
    objs.append(using("second", claim_name="shared"))
    d = run(objs)
    assert d.binds == {"default/second": "n0"}
    assert d.prebind["default/second"].claims == {"default/shared": {}}  # (only reserved)


def test_dra_follows_its_enable_flag() -> None:
    config = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
    arguments: {predicate.DynamicResourceAllocationEnable: false}
"""
    objs = [*_nodes(), queue(), GPU_CLASS, claim("c", count=5), using("p", claim_name="c")]
    assert len(run(objs, config).binds) == 1


def test_pods_of_one_template_are_each_told_about_their_own_claim() -> None:
    """The refusals of pods whose claims come from one template are worked out once
    for the template's spec; each pod's explanation still names its own claim."""
    objs = [*_nodes(), queue(), GPU_CLASS, gpu_slice("n1", 1), template("one-gpu")]
    objs += [
        using(name, template_name="one-gpu", created=f"2026-01-01T00:00:0{i}Z")
        for i, name in enumerate(("first", "second", "third"))
    ]
    d = run(objs)
    assert list(d.binds) == ["default/first"]
    for name in ("second", "third"):
        why = d.pending[f"default/podgroup-uid-{name}"]
        assert f"claim default/{name}-gpu-" in why and "1 in use by other claims" in why, why


def test_a_claim_with_configuration_entries_is_allocated_and_carries_them() -> None:
    c = claim("c")
    opaque = {"driver": "gpu.example.com", "parameters": {"mode": "shared"}}
    c["spec"]["devices"]["config"] = [{"requests": ["gpu"], "opaque": opaque}]
    d = run([*_nodes(), queue(), GPU_CLASS, gpu_slice("n1", 2), c, using("p", claim_name="c")])
    assert d.binds == {"default/p": "n1"}
    [config] = d.to_json()["claims"]["default/c"]["devices"]["config"]
    assert config == {"source": "FromClaim", "requests": ["gpu"], "opaque": opaque}
