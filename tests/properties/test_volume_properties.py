"""Invariants of volume binding on random clusters of local and zonal volumes: no PV
given to two claims, every chosen PV reaches its pod's node, every bound claim's PV
too, no node over its attach limit, and no gang placed in part."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import csinode, mounts, node, pod, podgroup, pv, pvc, queue, run, storage_class

DRIVER = "local.csi.example.com"
SIZES = st.sampled_from(["5Gi", "10Gi", "20Gi"])


@st.composite
def clusters(draw):
    n_nodes = draw(st.integers(1, 4))
    provisions = draw(st.booleans())
    provisioner = DRIVER if provisions else "kubernetes.io/no-provisioner"
    objs = [queue(), storage_class("local", provisioner=provisioner)]
    zones = {}
    limits = {}
    for i in range(n_nodes):
        zones[f"n{i}"] = draw(st.sampled_from(["a", "b"]))
        labels = {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": zones[f"n{i}"]}
        objs.append(node(f"n{i}", cpu="8", labels=labels))
        if draw(st.booleans()):
            limits[f"n{i}"] = draw(st.integers(1, 3))
            objs.append(csinode(f"n{i}", DRIVER, limits[f"n{i}"]))
    pv_nodes = {}
    for k in range(draw(st.integers(0, 8))):
        where = f"n{draw(st.integers(0, n_nodes - 1))}"
        pv_nodes[f"pv{k}"] = where
        objs.append(pv(f"pv{k}", draw(SIZES), node=where, driver=DRIVER))
    gangs = {}
    for j in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 4))
        minimum = draw(st.integers(1, size))
        objs.append(podgroup(f"g{j}", min_member=minimum, created=f"2026-01-01T00:00:{j:02d}Z"))
        gangs[f"default/g{j}"] = minimum
        for t in range(size):
            claims = []
            for c in range(draw(st.integers(0, 2))):
                name = f"g{j}-{t}-{c}"
                objs.append(pvc(name, draw(SIZES)))
                claims.append(name)
            objs.append(pod(f"g{j}-{t}", group=f"g{j}", cpu="1", **mounts(*claims)))
    # A claim not yet bound counts against its class's provisioner, as kube-scheduler
    # counts it: a class without one names no driver, so no limit holds for it.
    return objs, gangs, pv_nodes, limits if provisions else {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_volumes_are_given_once_reach_their_pods_and_gangs_stay_whole(case) -> None:
    objs, gangs, pv_nodes, limits = case
    d = run(objs)
    out = d.to_json()
    chosen: dict[str, str] = out.get("volumes", {})
    provision: dict[str, str] = out.get("provision", {})
    assert len(set(chosen.values())) == len(chosen), "a PV was given to two claims"
    claims_of = {}
    for o in objs:
        if o["kind"] == "Pod":
            names = [v["persistentVolumeClaim"]["claimName"] for v in o["spec"].get("volumes", [])]
            claims_of[f"default/{o['metadata']['name']}"] = names
    per_node: Counter[str] = Counter()
    for pod_key, node_name in d.binds.items():
        for claim in claims_of[pod_key]:
            key = f"default/{claim}"
            assert key in chosen or key in provision, f"{pod_key} bound without {claim}"
            if key in chosen:
                assert pv_nodes[chosen[key]] == node_name, "a PV that does not reach the node"
            else:
                assert provision[key] == node_name
            per_node[node_name] += 1
    for node_name, limit in limits.items():
        assert per_node[node_name] <= limit, f"{node_name} attaches more than {limit}"
    bound_per_gang = Counter(key.rsplit("-", 1)[0] for key in d.binds)
    for gang, minimum in gangs.items():
        got = bound_per_gang.get(gang, 0)
        assert got == 0 or got >= minimum, f"{gang}: {got} of {minimum} bound"
