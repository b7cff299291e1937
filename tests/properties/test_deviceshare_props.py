"""deviceshare on random clusters: after a cycle no card holds more than it has.

Random nodes with shared GPU cards, pods already running on them (their cards named
by their annotations), and random gangs of pods asking fractions of cards. After one
cycle, each card's use, counting the running pods and the pods bound this cycle (by
the annotations written for them), stays within its memory (GPU share), or within its
memory, its cores and its number of sharers (vGPU); every pod bound asking shared
GPUs carries cards of its own node.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.api.gpus import decode_vgpu_ids, gpu_indices

GM, GN = "volcano.sh/gpu-memory", "volcano.sh/gpu-number"
VN, VM, VC = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"
IDS, INDEX = "volcano.sh/vgpu-ids-new", "volcano.sh/gpu-index"


def config(arguments: dict[str, Any]) -> str:
    return conf(
        "enqueue, allocate, backfill",
        ["priority", "gang", "conformance"],
        ["drf", {"name": "deviceshare", "arguments": arguments}, "predicates", "proportion",
         "nodeorder", "binpack"],
    )  # fmt: skip


def gpu_pod(name: str, containers: list[dict[str, int]], **kw: Any) -> dict:
    notes = kw.pop("annotations", {})
    p = pod(name, cpu="100m", memory="100Mi", **kw)
    base = p["spec"]["containers"][0]
    p["spec"]["containers"] = [
        {**base, "name": f"c{i}", "resources": {**base["resources"],
                                                "limits": {k: str(v) for k, v in c.items()}}}
        for i, c in enumerate(containers)
    ]  # fmt: skip
    p["metadata"]["annotations"].update(notes)
    return p


def gangs(draw, make_containers) -> list[dict]:
    objs: list[dict] = []
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 4))
        objs.append(podgroup(f"g{j}", min_member=draw(st.integers(1, size)),
                             created=f"2026-01-01T00:00:{j:02d}Z"))  # fmt: skip
        containers = make_containers()
        for k in range(size):
            objs.append(gpu_pod(f"g{j}-{k}", containers, group=f"g{j}",
                                annotations=draw(st.sampled_from([{}, SPREAD]))))  # fmt: skip
    return objs


SPREAD = {"volcano.sh/vgpu-podgroup-policy": "spread"}

# -- GPU share ----------------------------------------------------------------------------


@st.composite
def share_clusters(draw):
    objs: list[dict] = [queue()]
    cards: dict[tuple[str, int], int] = {}
    for i in range(draw(st.integers(1, 4))):
        count = draw(st.integers(1, 4))
        per = draw(st.sampled_from([4000, 8000, 16000]))
        n = node(f"n{i}", cpu="64", memory="256Gi")
        n["status"]["allocatable"].update({GM: str(per * count), GN: str(count)})
        objs.append(n)
        for c in range(count):
            cards[(f"n{i}", c)] = per
        free = dict.fromkeys(range(count), per)
        for r in range(draw(st.integers(0, 3))):
            c = draw(st.integers(0, count - 1))
            if free[c] >= 1000:
                mem = draw(st.integers(1, free[c] // 1000)) * 1000
                free[c] -= mem
                objs.append(gpu_pod(f"run-n{i}-{r}", [{GM: mem}], node=f"n{i}",
                                    annotations={INDEX: str(c)}))  # fmt: skip
    memories = st.sampled_from([1000, 2000, 3000, 5000, 7000, 9000, 15000])
    objs += gangs(draw, lambda: [{GM: draw(memories)}])
    return objs, cards


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(share_clusters())
def test_no_shared_card_holds_more_memory_than_it_has(case) -> None:
    objs, cards = case
    out = run(objs, config({"deviceshare.GPUSharingEnable": True})).to_json()
    notes = out.get("annotations", {})
    used: Counter = Counter()
    for p in objs:
        if p["kind"] != "Pod":
            continue
        key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        where = p["spec"].get("nodeName") or out["binds"].get(key)
        if where is None:
            continue
        written = p["metadata"]["annotations"] if p["spec"].get("nodeName") else notes.get(key)
        assert written, f"{key} bound without a card"
        (card,) = gpu_indices(written)
        assert (where, card) in cards, f"{key}: card {card} is not on {where}"
        used[(where, card)] += int(p["spec"]["containers"][0]["resources"]["limits"][GM])
    for card, amount in used.items():
        assert amount <= cards[card], f"card {card}: {amount} of {cards[card]}"


# -- vGPU ---------------------------------------------------------------------------------


@st.composite
def vgpu_clusters(draw):
    objs: list[dict] = [queue()]
    cards: dict[str, tuple[str, int, int]] = {}  # uuid -> (node, sharers, memory)
    for i in range(draw(st.integers(1, 4))):
        found = []
        for c in range(draw(st.integers(1, 4))):
            uuid = f"GPU-{i}-{c}"
            found.append((uuid, draw(st.sampled_from([1, 2, 4, 10])),
                          draw(st.sampled_from([8000, 16000]))))  # fmt: skip
            cards[uuid] = (f"n{i}", found[-1][1], found[-1][2])
        n = node(f"n{i}", cpu="64", memory="256Gi")
        n["status"]["allocatable"].update({
            VN: str(sum(f[1] for f in found)), VM: str(sum(f[2] for f in found)),
            VC: str(100 * len(found)),
        })  # fmt: skip
        reg = "".join(f"{u},{k},{m},NVIDIA-A100,true,hami-core:" for u, k, m in found)
        n["metadata"]["annotations"] = {"volcano.sh/node-vgpu-register": reg}
        objs.append(n)
        # One running pod per card at most, well within it.
        for uuid, _, memory in found:
            if draw(st.booleans()):
                mem = draw(st.sampled_from([1000, memory // 2]))
                cores = draw(st.sampled_from([0, 30]))
                held = {IDS: f"{uuid},NVIDIA,{mem},{cores}:"}
                ask = [{VN: 1, VM: mem, VC: cores}]
                objs.append(gpu_pod(f"run-{uuid}", ask, node=f"n{i}", annotations=held))

    def containers() -> list[dict[str, int]]:
        out = []
        for _ in range(draw(st.integers(1, 2))):
            c = {VN: draw(st.integers(1, 2))}
            mem = draw(st.sampled_from([0, 1000, 4000, 7000]))
            if mem:
                c[VM] = mem
            cores = draw(st.sampled_from([0, 25, 50, 100]))
            if cores:
                c[VC] = cores
            out.append(c)
        return out

    objs += gangs(draw, containers)
    policy = draw(st.sampled_from(["", "binpack", "spread"]))
    arguments = {"deviceshare.VGPUEnable": True, "deviceshare.SchedulePolicy": policy,
                 "deviceshare.ScheduleWeight": draw(st.sampled_from([0, 1, 10]))}  # fmt: skip
    return objs, cards, arguments


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vgpu_clusters())
def test_no_vgpu_card_holds_more_memory_cores_or_pods_than_it_has(case) -> None:
    objs, cards, arguments = case
    out = run(objs, config(arguments)).to_json()
    notes = out.get("annotations", {})
    memory: Counter = Counter()
    cores: Counter = Counter()
    pods: Counter = Counter()
    alone: set[str] = set()
    for p in objs:
        if p["kind"] != "Pod":
            continue
        key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        where = p["spec"].get("nodeName") or out["binds"].get(key)
        if where is None:
            continue
        written = p["metadata"]["annotations"] if p["spec"].get("nodeName") else notes.get(key)
        assert written and IDS in written, f"{key} bound without cards"
        asked = [c for c in p["spec"]["containers"] if VN in c["resources"]["limits"]]
        held = decode_vgpu_ids(written[IDS])
        assert len(held) == len(asked), f"{key}: {written[IDS]}"
        for container, uses in zip(asked, held, strict=True):
            assert len(uses) == int(container["resources"]["limits"][VN])
            for u in uses:
                assert cards[u.uuid][0] == where, f"{key}: {u.uuid} is not on {where}"
                memory[u.uuid] += u.memory
                cores[u.uuid] += u.cores
                pods[u.uuid] += 1
                if u.cores == 100:
                    alone.add(u.uuid)
    for uuid, (_, sharers, size) in cards.items():
        assert memory[uuid] <= size, f"{uuid}: {memory[uuid]} MiB of {size}"
        assert cores[uuid] <= 100, f"{uuid}: {cores[uuid]}% of cores"
        assert pods[uuid] <= sharers, f"{uuid}: {pods[uuid]} pods of {sharers}"
        if uuid in alone:
            assert pods[uuid] == 1, f"{uuid}: a pod asking all cores shares it"
