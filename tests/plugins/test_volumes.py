"""Pods that mount PersistentVolumeClaims: which nodes they may use, which PV each
unbound claim gets, and why a pod waits, as kube-scheduler's volume plugins decide
inside Volcano's predicates plugin."""

from __future__ import annotations

import pytest
from tests.kit import csinode, mounts, node, pod, podgroup, pv, pvc, queue, run, storage_class

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.errors import InputError


def _node(name: str, zone: str = "a", **kw) -> dict:
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    return node(name, labels=labels, **kw)


def _gang(name: str, n: int, claims: list[str] | None = None, **kw) -> list[dict]:
    objs = [podgroup(name, min_member=n)]
    for i in range(n):
        extra = mounts(claims[i]) if claims else {}
        objs.append(pod(f"{name}-{i}", group=name, **extra, **kw))
    return objs


def test_a_wait_for_first_consumer_claim_goes_to_the_node_of_its_local_volume() -> None:
    objs = [_node("n1"), _node("n2"), queue(), storage_class("local")]
    objs += [pv("pv-n2", node="n2"), pvc("data"), pod("p", **mounts("data"))]
    d = run(objs)
    assert d.binds == {"default/p": "n2"}
    assert d.to_json()["volumes"] == {"default/data": "pv-n2"}


def test_the_smallest_volume_that_fits_is_chosen() -> None:
    objs = [_node("n1"), queue(), storage_class("local")]
    objs += [pv("big", "100Gi", node="n1"), pv("small", "8Gi", node="n1")]
    objs += [pv("tiny", "1Gi", node="n1"), pvc("data", "5Gi"), pod("p", **mounts("data"))]
    assert run(objs).to_json()["volumes"] == {"default/data": "small"}


def test_a_gang_takes_distinct_volumes_or_waits_whole() -> None:
    claims = [f"data-{i}" for i in range(4)]
    base = [_node("n1"), _node("n2"), queue(), storage_class("local")]
    base += [pvc(c) for c in claims] + _gang("train", 4, claims)
    four = [pv(f"pv-{k}", node=f"n{1 + k % 2}") for k in range(4)]
    d = run(base + four)
    assert len(d.binds) == 4
    chosen = d.to_json()["volumes"]
    assert sorted(chosen) == [f"default/{c}" for c in claims]
    assert len(set(chosen.values())) == 4
    where = {f"pv-{k}": f"n{1 + k % 2}" for k in range(4)}
    for i, c in enumerate(claims):  # each pod on the node of its own volume
        assert d.binds[f"default/train-{i}"] == where[chosen[f"default/{c}"]]
    three = four[:3]
    d = run(base + three)
    assert d.binds == {}
    assert "volumes" not in d.to_json()
    why = d.pending["default/train"]
    assert "didn't find available persistent volumes to bind" in why


def test_a_bound_zonal_volume_steers_its_pod() -> None:
    objs = [_node("n1", "a"), _node("n2", "b"), queue()]
    objs += [pv("disk", zone="b", cls="ssd", claim="default/data"),
             pvc("data", cls="ssd", volume="disk"), pod("p", **mounts("data"))]  # fmt: skip
    assert run(objs).binds == {"default/p": "n2"}
    pinned = pod("q", **mounts("data"), nodeSelector={"topology.kubernetes.io/zone": "a"})
    objs[-1] = pinned
    d = run(objs)
    assert d.binds == {}
    assert "volume node affinity conflict" in d.pending["default/podgroup-q"]


def test_an_unbound_immediate_claim_makes_the_pod_wait() -> None:
    objs = [_node("n1"), queue(), storage_class("fast", provisioner="csi.x", mode="Immediate")]
    objs += [pvc("data", cls="fast"), pod("p", **mounts("data"))]
    d = run(objs)
    assert d.binds == {}
    assert (
        "pod has unbound immediate PersistentVolumeClaims (data)" in d.pending["default/podgroup-p"]
    )


def test_a_missing_claim_is_named() -> None:
    d = run([_node("n1"), queue(), pod("p", **mounts("nope"))])
    assert 'persistentvolumeclaim "nope" not found' in d.pending["default/podgroup-p"]


def test_a_class_that_provisions_asks_for_a_volume_on_an_allowed_node() -> None:
    cls = storage_class("zonal", provisioner="pd.csi.storage.gke.io", zones=["b"])
    objs = [_node("n1", "a"), _node("n2", "b"), queue(), cls]
    objs += [pvc("data", cls="zonal"), pod("p", **mounts("data"))]
    d = run(objs)
    assert d.binds == {"default/p": "n2"}
    assert d.to_json()["provision"] == {"default/data": "n2"}


def test_a_read_write_once_pod_claim_is_not_given_to_a_second_pod() -> None:
    objs = [_node("n1"), queue()]
    objs += [pv("vol", claim="default/data", modes=["ReadWriteOncePod"])]
    objs += [pvc("data", volume="vol", modes=["ReadWriteOncePod"])]
    objs += [pod("user", node="n1", **mounts("data")), pod("p", **mounts("data"))]
    d = run(objs)
    assert d.binds == {}
    assert "ReadWriteOncePod" in d.pending["default/podgroup-p"]


def test_a_node_takes_no_more_volumes_of_a_driver_than_its_attach_limit() -> None:
    cls = storage_class("ebs", provisioner="ebs.csi.aws.com")
    objs = [_node("n1"), _node("n2"), queue(), cls, csinode("n1", "ebs.csi.aws.com", 1)]
    objs += [pv("used", cls="ebs", claim="default/old", driver="ebs.csi.aws.com")]
    objs += [pvc("old", cls="ebs", volume="used"), pod("old", node="n1", **mounts("old"))]
    objs += [pvc("data", cls="ebs"), pod("p", **mounts("data"))]
    d = run(objs)
    assert d.binds == {"default/p": "n2"}  # n1 already attaches its one volume
    objs[1] = _node("n2", unschedulable=True)
    d = run(objs)
    assert "exceed max volume count" in d.pending["default/podgroup-p"]


def test_volume_checks_follow_the_enable_flags() -> None:
    config = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
    arguments: {predicate.VolumeBindingEnable: false}
"""
    objs = [_node("n1"), queue(), storage_class("fast", provisioner="csi.x", mode="Immediate")]
    objs += [pvc("data", cls="fast"), pod("p", **mounts("data"))]
    assert run(objs, config).binds == {"default/p": "n1"}


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (pvc("c", size="-1Gi"), "spec.resources.requests.storage"),
        (
            {**pv("v"), "spec": {**pv("v")["spec"], "accessModes": ["ReadWriteSometimes"]}},
            "spec.accessModes",
        ),
        ({**storage_class("s"), "volumeBindingMode": "Later"}, "volumeBindingMode"),
        (
            {
                **csinode("n", "d", 1),
                "spec": {"drivers": [{"name": "d", "allocatable": {"count": -3}}]},
            },
            "spec.drivers[0].allocatable.count",
        ),
    ],
)
def test_bad_storage_objects_are_refused_naming_the_field(obj: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        build_snapshot([SourcedObject(obj, "dump.yaml")])
    assert field in str(err.value)
    assert "dump.yaml" in str(err.value)


def test_a_binding_begun_but_not_finished_is_waited_for() -> None:
    """A PV whose claimRef names the claim (an earlier bind wrote it, the PV controller
    has not finished): the pod goes where the PV is, and its bind waits for the claim."""
    begun = pv("pv-n2", node="n2", claim="default/data")
    begun["status"] = {"phase": "Available"}
    objs = [_node("n1"), _node("n2"), queue(), storage_class("local"), begun]
    objs += [pv("pv-n1", node="n1"), pvc("data"), pod("p", **mounts("data"))]
    d = run(objs)
    assert d.binds == {"default/p": "n2"}
    assert d.to_json()["volumes"] == {"default/data": "pv-n2"}
