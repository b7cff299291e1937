"""Benchmark cluster states, built as Kubernetes-shaped dicts.

Each scenario returns the objects (Nodes, Pods, PodGroups, Queues) of one cluster
state; the runner turns them into a snapshot with
:func:`pumice.cache.build.build_snapshot`, the path ``pumice cycle`` takes, so what is
measured is what a user runs. The shapes follow the public benchmarks the figures are
compared with (kube-scheduler's scheduler_perf, YuniKorn's and Volcano's reports).

Builders are deterministic: the same scenario always gives the same objects.

Simulator scenarios (:class:`SimScenario`, run by :mod:`pumice.bench.sim_peak`) are of
another kind: not one cluster state but a window of a ``pumice simulate`` run, timed
cycle by cycle.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pumice.bench.objects import Obj, node, pod, podgroup, queue
from pumice.conf.config import DEFAULT_CONFIG

T0 = "2026-01-01T00:00:00Z"


def _node_name(i: int) -> str:
    return f"node-{i:05d}"


def uniform(
    n_nodes: int,
    n_pending: int,
    *,
    node_cpu: str = "4",
    node_memory: str = "32Gi",
    node_pods: int = 110,
    pod_cpu: str = "100m",
    pod_memory: str = "500Mi",
    n_running: int = 0,
) -> list[Obj]:
    """``n_nodes`` equal nodes, ``n_running`` pods spread round-robin over them, and
    ``n_pending`` single-pod jobs (bare pods, as kube-scheduler's benchmark has)."""
    objs = [queue()]
    objs += [node(_node_name(i), node_cpu, node_memory, node_pods) for i in range(n_nodes)]
    for i in range(n_running):
        objs.append(pod(f"run-{i:06d}", pod_cpu, pod_memory, node_name=_node_name(i % n_nodes)))
    for i in range(n_pending):
        objs.append(pod(f"pend-{i:06d}", pod_cpu, pod_memory, created=i))
    return objs


def basic() -> list[Obj]:
    """kube-scheduler's SchedulingBasic at 5,000 nodes: 1,000 running, 10,000 pending."""
    return uniform(5000, 10_000, n_running=1000)


def large() -> list[Obj]:
    """YuniKorn's shape: 5,000 nodes (16 CPU, 16Gi), 50,000 pending pods of 10m CPU."""
    return uniform(
        5000, 50_000, node_cpu="16", node_memory="16Gi", pod_cpu="10m", pod_memory="10Mi"
    )


def memory() -> list[Obj]:
    """The memory target: 5,000 nodes and 150,000 pods in the cache (100,000 running,
    50,000 pending single pods)."""
    return uniform(5000, 50_000, node_cpu="32", node_memory="128Gi", n_running=100_000)


def gang(n_jobs: int = 20, size: int = 500, n_nodes: int = 1000) -> list[Obj]:
    """Volcano issue 5940's shape: 20 gangs of 500 pods (minMember 500), 1 CPU / 1Gi."""
    objs = [queue()]
    objs += [node(_node_name(i), "32", "256Gi", 110) for i in range(n_nodes)]
    for j in range(n_jobs):
        g = f"gang-{j:03d}"
        objs.append(podgroup(g, size, created=j))
        for k in range(size):
            objs.append(pod(f"{g}-worker-{k}", "1", "1Gi", group=g, created=j))
    return objs


#: The tiers of Volcano's network-topology user guide (its default tiers, no overcommit,
#: no enable flags), which the scenarios below build their configurations on.
GUIDE_TIERS = """
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

#: The scheduler configuration of :func:`topology`: the guide's, with the
#: network-topology-aware plugin, as it sets it up.
TOPOLOGY_CONFIG = (
    'actions: "enqueue, allocate, backfill"' + GUIDE_TIERS + "  - name: network-topology-aware\n"
)


def hypernode(name: str, tier: int, kind: str, members: list[str]) -> Obj:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def topology(
    n_nodes: int = 5000,
    per_leaf: int = 17,
    leaves_per_spine: int = 10,
    n_jobs: int = 20,
    size: int = 256,
    tier: int = 2,
) -> list[Obj]:
    """A GPU cluster under three tiers of switches: ``per_leaf`` nodes (8 GPUs) per
    leaf switch, ``leaves_per_spine`` leaves per spine, every spine under one core;
    ``n_jobs`` hard gangs of ``size`` one-GPU pods, each within one HyperNode of
    ``tier`` or lower. A quarter of the nodes run a one-GPU pod already, spread
    unevenly, so that the HyperNodes differ in how full they are."""
    objs = [queue()]
    names = [_node_name(i) for i in range(n_nodes)]
    for name in names:
        n = node(name, "64", "512Gi", 110)
        n["status"]["allocatable"]["nvidia.com/gpu"] = "8"
        objs.append(n)
    leaves: list[str] = []
    for k in range(0, n_nodes, per_leaf):
        leaf = f"leaf-{len(leaves):03d}"
        leaves.append(leaf)
        objs.append(hypernode(leaf, 1, "Node", names[k : k + per_leaf]))
    spines: list[str] = []
    for k in range(0, len(leaves), leaves_per_spine):
        spine = f"spine-{len(spines):02d}"
        spines.append(spine)
        objs.append(hypernode(spine, 2, "HyperNode", leaves[k : k + leaves_per_spine]))
    objs.append(hypernode("core", 3, "HyperNode", spines))
    gpu = {"requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}}
    for i in range(0, n_nodes, 4):
        busy = pod(f"busy-{i:05d}", "4", "32Gi", node_name=names[(i * 7) % n_nodes])
        busy["spec"]["containers"][0]["resources"] = gpu
        objs.append(busy)
    for j in range(n_jobs):
        g = f"gang-{j:03d}"
        pg = podgroup(g, size, created=j)
        pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
        objs.append(pg)
        for k in range(size):
            p = pod(f"{g}-worker-{k}", "4", "32Gi", group=g, created=j)
            p["spec"]["containers"][0]["resources"] = gpu
            objs.append(p)
    return objs


#: The configuration of :func:`gang_preemption`: the guide's tiers, with gangpreempt
#: after allocate.
GANG_PREEMPT_CONFIG = 'actions: "enqueue, allocate, gangpreempt"' + GUIDE_TIERS


def _priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def gang_preemption(
    n_nodes: int = 1000, per_node: int = 4, n_gangs: int = 20, size: int = 64
) -> list[Obj]:
    """``n_nodes`` nodes (8 CPU) full of small running jobs (``per_node`` one-pod jobs of
    2 CPU each, low priority) and ``n_gangs`` starving high-priority gangs of ``size``
    2-CPU pods (minMember ``size``): room for each only by evicting whole small jobs."""
    objs = [queue(), _priority_class("low", 1), _priority_class("high", 1000)]
    names = [_node_name(i) for i in range(n_nodes)]
    objs += [node(n, "8", "64Gi", 110) for n in names]
    k = 0
    for n in names:
        for _ in range(per_node):
            g = f"small-{k:05d}"
            pg = podgroup(g, 1, created=0)
            pg["spec"]["priorityClassName"] = "low"
            objs.append(pg)
            p = pod(f"{g}-0", "2", "8Gi", group=g, node_name=n)
            p["spec"]["priorityClassName"] = "low"
            objs.append(p)
            k += 1
    for j in range(n_gangs):
        g = f"gang-{j:03d}"
        pg = podgroup(g, size, created=j + 1)
        pg["spec"]["priorityClassName"] = "high"
        objs.append(pg)
        for i in range(size):
            p = pod(f"{g}-worker-{i}", "2", "8Gi", group=g, created=j + 1)
            p["spec"]["priorityClassName"] = "high"
            objs.append(p)
    return objs


#: Number of node groups in :func:`constraints`; groups divisible by 3 are tainted.
GROUPS = 10


def _expr(key: str, operator: str, *values: str) -> Obj:
    return {"key": key, "operator": operator, "values": list(values)}


def _node_affinity(kind: str, value: Any) -> Obj:
    return {"affinity": {"nodeAffinity": {f"{kind}DuringSchedulingIgnoredDuringExecution": value}}}


def _placement_spec(kind: int, g: int) -> Obj:
    """Pod spec fields of the five placement kinds of :func:`constraints`."""
    if kind == 0:
        spec: Obj = {"nodeSelector": {"group": f"g{g}"}}
        if g % 3 == 0:
            tol = {
                "key": "dedicated",
                "operator": "Equal",
                "value": f"g{g}",
                "effect": "NoSchedule",
            }
            spec["tolerations"] = [tol]
        return spec
    if kind == 1:
        term = {"matchExpressions": [_expr("group", "In", "g1", "g2")]}
        return _node_affinity("required", {"nodeSelectorTerms": [term]})
    if kind == 2:
        prefs = [
            {"weight": 10, "preference": {"matchExpressions": [_expr("tier", "In", "fast")]}},
            {"weight": 5, "preference": {"matchExpressions": [_expr("zone", "NotIn", "zone-0")]}},
        ]
        return _node_affinity("preferred", prefs)
    if kind == 3:
        return {
            "tolerations": [
                {"key": "dedicated", "operator": "Exists"},
                {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
            ]
        }
    return {}


def constraints(n_nodes: int = 5000, n_pending: int = 10_000) -> list[Obj]:
    """Nodes in ``GROUPS`` labelled groups (zone, group, tier), every third group tainted
    ``dedicated=<group>:NoSchedule`` and some nodes softly tainted; pods cycle through
    five placement kinds: nodeSelector, required affinity (In over two groups), preferred
    affinity, tolerations of a tainted group, and none."""
    objs = [queue()]
    for i in range(n_nodes):
        g = i % GROUPS
        labels = {"group": f"g{g}", "zone": f"zone-{g % 3}", "tier": "fast" if g < 5 else "slow"}
        taints = []
        if g % 3 == 0:
            taints.append({"key": "dedicated", "value": f"g{g}", "effect": "NoSchedule"})
        if i % 7 == 0:
            taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
        objs.append(node(_node_name(i), "8", "32Gi", 110, labels, taints))
    for i in range(n_pending):
        g = (i // 5) % GROUPS
        spec = _placement_spec(i % 5, g)
        objs.append(pod(f"pend-{i:06d}", "200m", "512Mi", created=i, extra_spec=spec))
    return objs


#: Volcano's default configuration with deviceshare sharing GPUs by memory
#: (:func:`deviceshare`), and with numa-aware (:func:`numa`).
DEVICESHARE_CONFIG = DEFAULT_CONFIG + (
    "  - name: deviceshare\n    arguments:\n      deviceshare.GPUSharingEnable: true\n"
)

GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
#: MiB per card of :func:`deviceshare`'s nodes (an 80 GB card).
CARD_MIB = 81_920


def deviceshare(
    n_nodes: int = 1000, n_pending: int = 20_000, cards: int = 8, n_running: int = 1000
) -> list[Obj]:
    """``n_nodes`` nodes of ``cards`` GPUs shared by memory (``volcano.sh/gpu-memory``
    and ``volcano.sh/gpu-number`` in their capacity), ``n_running`` pods already holding
    half a card each (their ``volcano.sh/gpu-index`` annotation names it), and
    ``n_pending`` single pods asking an eighth, a quarter, three eighths or half a card
    in turn (``volcano.sh/gpu-memory`` in limits)."""
    objs = [queue()]
    for i in range(n_nodes):
        n = node(_node_name(i), "64", "512Gi", 110)
        n["status"]["allocatable"][GPU_MEMORY] = str(CARD_MIB * cards)
        n["status"]["allocatable"][GPU_NUMBER] = str(cards)
        n["status"]["capacity"] = dict(n["status"]["allocatable"])
        objs.append(n)

    def gpu_pod(p: Obj, mib: int) -> Obj:
        p["spec"]["containers"][0]["resources"]["limits"] = {GPU_MEMORY: str(mib)}
        return p

    half = CARD_MIB // 2
    for i in range(n_running):
        p = gpu_pod(pod(f"run-{i:06d}", "1", "4Gi", node_name=_node_name(i % n_nodes)), half)
        p["metadata"]["annotations"] = {"volcano.sh/gpu-index": str((i // n_nodes) % cards)}
        objs.append(p)
    eighth = CARD_MIB // 8
    for i in range(n_pending):
        objs.append(gpu_pod(pod(f"pend-{i:06d}", "1", "4Gi", created=i), eighth * (1 + i % 4)))
    return objs


#: Volcano's default configuration with numa-aware (:func:`numa`).
NUMA_CONFIG = DEFAULT_CONFIG + "  - name: numa-aware\n"


def numatopology(name: str, cpus: int, numa_nodes: int, free: list[int]) -> Obj:
    """A Numatopology as Volcano's exporter writes it for a node of ``cpus`` CPUs
    (two threads a core) split evenly over ``numa_nodes`` NUMA nodes, the static CPU
    manager and the single-numa-node topology manager policy; ``free``: the CPUs no pod
    holds."""
    per = cpus // numa_nodes
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {
                "CPUManagerPolicy": "static",
                "TopologyManagerPolicy": "single-numa-node",
            },
            "numares": {
                "cpu": {"allocatable": ",".join(map(str, free)), "capacity": cpus},
            },
            "cpuDetail": {
                str(c): {"numa": c // per, "socket": c // per, "core": c // 2} for c in range(cpus)
            },
        },
    }


def _guaranteed(p: Obj) -> Obj:
    res = p["spec"]["containers"][0]["resources"]
    res["limits"] = dict(res["requests"])
    return p


def numa(n_nodes: int = 1000, n_pending: int = 10_000, n_running: int = 1000) -> list[Obj]:
    """``n_nodes`` nodes of 32 CPUs on two NUMA nodes, each with its Numatopology
    (static CPU manager, single-numa-node policy); ``n_running`` Guaranteed pods of 6
    CPUs already pinned (CPUs 0-5 of their node's first NUMA node, one pod a node), and
    ``n_pending`` Guaranteed pods of 1, 2, 4 and 8 whole CPUs in turn, each of which the
    kubelet must give CPUs of a single NUMA node. At the default size (1,000 nodes, a
    fifth of ``basic``'s: a pod pinned to NUMA nodes is scored against every node, off
    allocate's per-shape shortcuts) about a third of the pods find no NUMA node with
    room and wait."""
    objs = [queue()]
    cpus, per_numa = 32, 16
    running = {i % n_nodes for i in range(n_running)}
    for i in range(n_nodes):
        name = _node_name(i)
        objs.append(node(name, str(cpus), "128Gi", 110))
        taken = 6 if i in running else 0
        objs.append(numatopology(name, cpus, cpus // per_numa, list(range(taken, cpus))))
    for i in range(n_running):
        name = _node_name(i % n_nodes)
        objs.append(_guaranteed(pod(f"run-{i:06d}", "6", "12Gi", node_name=name)))
    for i in range(n_pending):
        k = (1, 2, 4, 8)[i % 4]
        objs.append(_guaranteed(pod(f"pend-{i:06d}", str(k), f"{2 * k}Gi", created=i)))
    return objs


#: The DRA example driver's name, and the DeviceClass of its GPUs.
DRA_DRIVER = "gpu.example.com"


def dra(n_nodes: int = 1000, n_pending: int = 2500, gpus: int = 8) -> list[Obj]:
    """``n_nodes`` nodes each publishing a ResourceSlice of ``gpus`` GPUs (the example
    driver ``gpu.example.com``), its DeviceClass, a ResourceClaimTemplate asking one
    device of the class, and ``n_pending`` single pods each with a claim made from the
    template (the snapshot makes the claims as the resource-claim controller would)."""
    objs = [queue()]
    objs.append({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRA_DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]},
    })  # fmt: skip
    objs.append({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "bench"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": DRA_DRIVER, "count": 1}}
        ]}}},
    })  # fmt: skip
    for i in range(n_nodes):
        name = _node_name(i)
        objs.append(node(name, "64", "512Gi", 110))
        devices = [
            {
                "name": f"gpu-{k}",
                "attributes": {"model": {"string": "A100"}, "index": {"int": k}},
                "capacity": {"memory": {"value": "80Gi"}},
            }
            for k in range(gpus)
        ]
        objs.append({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-{DRA_DRIVER}"},
            "spec": {
                "driver": DRA_DRIVER,
                "nodeName": name,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        })  # fmt: skip
    claim = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    for i in range(n_pending):
        objs.append(
            pod(f"pend-{i:06d}", "1", "4Gi", created=i, extra_spec={"resourceClaims": claim})
        )
    return objs


SCALE_NODES = (500, 1000, 5000, 10_000)
SCALE_PODS = (1000, 10_000)


LOCAL_CLASS = "local-disk"


def volumes(n_nodes: int = 1000, n_pending: int = 5000, per_node: int = 8) -> list[Obj]:
    """``n_nodes`` nodes (4 CPU, 32Gi) with ``per_node`` local PVs of 100Gi each (a
    ``WaitForFirstConsumer`` class without provisioner), and ``n_pending`` single pods
    of 100m / 500Mi, each mounting its own unbound 50Gi claim of that class: every pod
    needs a node with a free PV, and each PV goes to one claim."""
    objs = [queue()]
    objs.append({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": LOCAL_CLASS}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    })  # fmt: skip
    for i in range(n_nodes):
        name = _node_name(i)
        objs.append(node(name, "4", "32Gi", labels={"kubernetes.io/hostname": name}))
        for k in range(per_node):
            objs.append({
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": f"{name}-disk-{k}"},
                "spec": {
                    "capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": LOCAL_CLASS, "local": {"path": f"/mnt/disk{k}"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        _expr("kubernetes.io/hostname", "In", name)]}]}},
                },
                "status": {"phase": "Available"},
            })  # fmt: skip
    for i in range(n_pending):
        name = f"pend-{i:06d}"
        claim = f"{name}-data"
        objs.append({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": "bench", "uid": f"bench-{claim}"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": LOCAL_CLASS,
                     "resources": {"requests": {"storage": "50Gi"}}},
            "status": {"phase": "Pending"},
        })  # fmt: skip
        volume = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}
        objs.append(pod(name, "100m", "500Mi", created=i, extra_spec=volume))
    return objs


def attach(n_nodes: int = 1000, n_pending: int = 5000) -> list[Obj]:
    """What pods attach, both kinds at once: the nodes of :func:`volumes` (8 local PVs
    each) also publish the GPUs of :func:`dra`; half the ``n_pending`` pods mount their
    own ``WaitForFirstConsumer`` claim, the other half ask one GPU through a
    ResourceClaim from a template."""
    half = n_pending // 2
    disks = volumes(n_nodes, half)
    gpus = dra(n_nodes, n_pending - half)
    objs = list(disks)
    seen = {("Node", o["metadata"]["name"]) for o in disks if o.get("kind") == "Node"}
    for o in gpus:
        kind = o.get("kind")
        if kind == "Queue" or (kind, o["metadata"].get("name")) in seen:
            continue
        if kind == "Pod":  # (named apart from the claims' pods)
            meta = o["metadata"]
            meta["name"] = meta["name"].replace("pend-", "gpu-")
            meta["uid"] = meta["uid"].replace("pend-", "gpu-")
        objs.append(o)
    return objs


@dataclass(frozen=True, slots=True)
class Scenario:
    """One benchmark case: a name, what it models, and how to build its objects."""

    name: str
    description: str
    build: Callable[[], list[Obj]]
    nodes: int
    pending: int
    #: For scenarios whose pods come in gangs: (number of gangs, gang size).
    gangs: tuple[int, int] | None = None
    #: The scheduler configuration (YAML) the scenario is meant for, used unless
    #: ``--config`` names another (None: the built-in default).
    config: str | None = None


def _scale_cases() -> list[Scenario]:
    out = []
    for n in SCALE_NODES:
        for p in SCALE_PODS:
            out.append(
                Scenario(
                    f"scale-{n}x{p}",
                    f"{n} nodes (4 CPU, 32Gi), {p} pending single pods of 100m / 500Mi",
                    functools.partial(uniform, n, p),
                    n,
                    p,
                )
            )
    return out


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "basic",
            "5,000 nodes (4 CPU, 32Gi, 110 pods), 1,000 running, 10,000 pending single pods "
            "of 100m / 500Mi",
            basic,
            5000,
            10_000,
        ),
        Scenario(
            "large", "5,000 nodes (16 CPU, 16Gi), 50,000 pending pods of 10m", large, 5000, 50_000
        ),
        Scenario(
            "gang",
            "1,000 nodes (32 CPU, 256Gi), 20 gangs x 500 pods (minMember 500) of 1 CPU / 1Gi",
            gang,
            1000,
            10_000,
            gangs=(20, 500),
        ),
        Scenario(
            "constraints",
            "5,000 nodes in 10 labelled groups (some tainted), 10,000 pods with nodeSelector, "
            "affinity, tolerations",
            constraints,
            5000,
            10_000,
        ),
        Scenario(
            "topology",
            "5,000 GPU nodes under 295 leaf switches, 30 spines and a core; 20 hard gangs x "
            "256 one-GPU pods, each within one HyperNode of tier 2",
            topology,
            5000,
            20 * 256,
            gangs=(20, 256),
            config=TOPOLOGY_CONFIG,
        ),
        Scenario(
            "gangpreempt",
            "1,000 nodes (8 CPU) full of 4,000 small low-priority jobs; 20 starving "
            "high-priority gangs x 64 pods, room made by evicting whole small jobs",
            gang_preemption,
            1000,
            20 * 64,
            gangs=(20, 64),
            config=GANG_PREEMPT_CONFIG,
        ),
        Scenario(
            "volumes",
            "1,000 nodes (4 CPU, 32Gi) with 8 local PVs of 100Gi each, 5,000 pending single "
            "pods each mounting its own unbound WaitForFirstConsumer claim of 50Gi",
            volumes,
            1000,
            5000,
        ),
        Scenario(
            "memory",
            "5,000 nodes (32 CPU, 128Gi), 100,000 running and 50,000 pending single pods of "
            "100m / 500Mi",
            memory,
            5000,
            50_000,
        ),
        Scenario(
            "deviceshare",
            "1,000 nodes of 8 GPUs shared by memory (deviceshare), 1,000 running pods on half "
            "a card, 20,000 pending pods asking 1/8 to 1/2 of a card",
            deviceshare,
            1000,
            20_000,
            config=DEVICESHARE_CONFIG,
        ),
        Scenario(
            "numa",
            "1,000 nodes of 32 CPUs on 2 NUMA nodes (static CPU manager, single-numa-node), "
            "1,000 running pinned pods, 10,000 pending Guaranteed pods of 1 to 8 CPUs",
            numa,
            1000,
            10_000,
            config=NUMA_CONFIG,
        ),
        Scenario(
            "dra",
            "1,000 nodes each publishing a ResourceSlice of 8 GPUs (gpu.example.com), 2,500 "
            "pending pods each with a ResourceClaim of one GPU from a template",
            dra,
            1000,
            2500,
        ),
        Scenario(
            "attach",
            "1,000 nodes with 8 local PVs and 8 DRA GPUs each; 5,000 pending single pods, "
            "half mounting an unbound WaitForFirstConsumer claim, half asking a GPU through a "
            "ResourceClaim",
            attach,
            1000,
            5000,
        ),
        *_scale_cases(),
    )
}

HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class SimScenario:
    """A window of a simulation: the cost of scheduling cycles as the simulator meets them.

    The workload is the one ``pumice simulate --jobs JOBS --nodes NODES --load LOAD
    --seed SEED`` generates (8-GPU nodes, the default scheduler configuration unless
    ``--config`` says otherwise), so the figures are those of a run a user can repeat.
    The simulation runs to ``start`` (simulated seconds; the *build*, timed apart), then
    every cycle up to ``end`` is timed. The window's bounds are cycles: it opens with the
    first cycle at or after ``start`` and closes before the first one at or after
    ``end``. The simulator is deterministic for a seed, so the cycles, jobs finished and
    placements of the window are the same on every run; only the timings vary.
    """

    name: str
    description: str
    nodes: int
    jobs: int
    start: float  # simulated seconds
    end: float
    load: float = 0.9
    seed: int = 1


#: The daily peak of the generated workload (arrivals peak at 15:00, the backlog later).
PEAK_START, PEAK_END = 18.0 * HOUR, 18.5 * HOUR
#: Two days in, the 100,000-job run carries its largest backlogs (300 to 650 jobs
#: waiting, most of them Pending vcjobs whose pods come on admission).
BACKLOG_START, BACKLOG_END = 40.0 * HOUR, 40.5 * HOUR

SIM_SCENARIOS: dict[str, SimScenario] = {
    s.name: s
    for s in (
        SimScenario(
            "sim-peak-small",
            "pumice simulate --jobs 20000 --nodes 200 (seed 1, load 0.9): run to 18 h, "
            "time the cycles from 18 h to 18.5 h (about 20 s)",
            nodes=200,
            jobs=20_000,
            start=PEAK_START,
            end=PEAK_END,
        ),
        SimScenario(
            "sim-peak",
            "pumice simulate --jobs 100000 --nodes 1000 (seed 1, load 0.9): run to 18 h, "
            "time the cycles from 18 h to 18.5 h (about 2 min)",
            nodes=1000,
            jobs=100_000,
            start=PEAK_START,
            end=PEAK_END,
        ),
        SimScenario(
            "sim-backlog",
            "pumice simulate --jobs 100000 --nodes 1000 (seed 1, load 0.9): run to 40 h, "
            "time the cycles from 40 h to 40.5 h, with some 350 jobs waiting (about 8 min)",
            nodes=1000,
            jobs=100_000,
            start=BACKLOG_START,
            end=BACKLOG_END,
        ),
    )
}

AnyScenario = Scenario | SimScenario

#: Names that stand for several scenarios on the command line.
GROUPS_OF = {"scale": [s for s in SCENARIOS if s.startswith("scale-")]}
#: What ``pumice bench`` runs without names: the snapshot scenarios (the simulator ones
#: take minutes and are run by name).
DEFAULT = ("basic", "large", "gang", "constraints", "memory", "scale")


def known() -> list[tuple[str, str]]:
    """Every name ``resolve`` accepts, with what it stands for."""
    out = [(s.name, s.description) for s in SCENARIOS.values()]
    out += [(g, f"all of {', '.join(ns)}") for g, ns in GROUPS_OF.items()]
    out += [(s.name, s.description) for s in SIM_SCENARIOS.values()]
    from pumice.bench.quiet import QUIET_SCENARIOS

    out += [(s.name, s.description) for s in QUIET_SCENARIOS.values()]
    from pumice.bench.visibility import VISIBILITY_SCENARIOS

    out += [(s.name, s.description) for s in VISIBILITY_SCENARIOS.values()]
    return out


def resolve(names: list[str] | tuple[str, ...]) -> list[AnyScenario]:
    """Scenario names (or ``scale``) -> scenarios, in the order given; KeyError names an
    unknown one."""
    from pumice.bench.quiet import QUIET_SCENARIOS
    from pumice.bench.visibility import VISIBILITY_SCENARIOS

    out: list[AnyScenario] = []
    for name in names:
        for n in GROUPS_OF.get(name, [name]):
            if n in SIM_SCENARIOS:
                out.append(SIM_SCENARIOS[n])
            elif n in QUIET_SCENARIOS:
                out.append(QUIET_SCENARIOS[n])  # type: ignore[arg-type]
            elif n in VISIBILITY_SCENARIOS:
                out.append(VISIBILITY_SCENARIOS[n])  # type: ignore[arg-type]
            elif n in SCENARIOS:
                out.append(SCENARIOS[n])
            else:
                raise KeyError(name)
    return out
