"""deviceshare: pods sharing GPU cards fit card by card, say which cards were short,
and carry the cards chosen for them in the annotations written before their bind."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.scheduler import Scheduler

GM, GN = "volcano.sh/gpu-memory", "volcano.sh/gpu-number"
VN, VM, VC = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"
IDS, INDEX = "volcano.sh/vgpu-ids-new", "volcano.sh/gpu-index"
REGISTER = "volcano.sh/node-vgpu-register"


def config(actions: str = "enqueue, allocate", **arguments: Any) -> str:
    args = {f"deviceshare.{k}": v for k, v in arguments.items()}
    return conf(actions, ["priority", "gang"], [{"name": "deviceshare", "arguments": args},
                                                  "predicates"])  # fmt: skip


def share_node(name: str, memory: int, cards: int, **notes: str) -> dict:
    n = node(name, cpu="16", memory="64Gi")
    n["status"]["allocatable"][GM] = str(memory)
    n["status"]["allocatable"][GN] = str(cards)
    n["status"]["capacity"] = dict(n["status"]["allocatable"])
    n["metadata"]["annotations"] = dict(notes)
    return n


def vgpu_node(name: str, *cards: tuple[str, int, int], **notes: str) -> dict:
    """A node registering vGPU cards ``(uuid, sharers, MiB)``."""
    reg = "".join(f"{u},{k},{m},NVIDIA-A100,true,hami-core:" for u, k, m in cards)
    n = node(name, cpu="16", memory="64Gi")
    n["status"]["allocatable"].update({
        VN: str(sum(c[1] for c in cards)), VM: str(sum(c[2] for c in cards)),
        VC: str(100 * len(cards)),
    })  # fmt: skip
    n["metadata"]["annotations"] = {REGISTER: reg, **notes}
    return n


def gpu_pod(name: str, limits: dict[str, Any], **kw: Any) -> dict:
    notes = kw.pop("annotations", {})
    p = pod(name, **kw)
    p["spec"]["containers"][0]["resources"]["limits"] = {k: str(v) for k, v in limits.items()}
    p["metadata"]["annotations"].update(notes)
    return p


def cycle(objects: list[dict], text: str):
    return run([queue(), *objects], text).to_json()


# -- arguments ----------------------------------------------------------------------------


def test_volcano_arguments_load_without_warnings() -> None:
    sched = Scheduler.create(parse_config(yaml.safe_load(config(
        VGPUEnable=True, SchedulePolicy="binpack", ScheduleWeight=10))))  # fmt: skip
    assert sched.config.warnings == ()
    assert "deviceshare" in sched.config.plugin_names()


@pytest.mark.parametrize(
    ("arguments", "field", "words"),
    [
        ({"GPUSharingEnable": True, "GPUNumberEnable": True}, "GPUSharingEnable", "by memory"),
        ({"GPUNumberEnable": True, "VGPUEnable": True}, "VGPUEnable", "exclude each other"),
        ({"VGPUEnable": True, "SchedulePolicy": "pack"}, "SchedulePolicy", "binpack or spread"),
        ({"VGPUEnable": True, "ScheduleWeight": -1}, "ScheduleWeight", "must not be negative"),
        ({"VGPUEnable": "yes"}, "VGPUEnable", "true or false"),
    ],
)
def test_bad_arguments_are_refused_naming_the_key(arguments, field, words) -> None:
    with pytest.raises(InputError) as err:
        Scheduler.create(parse_config(yaml.safe_load(config(**arguments))))
    assert f"deviceshare.{field}" in str(err.value) and words in str(err.value)


def test_without_an_enable_flag_cards_are_not_counted() -> None:
    """The plugin configured with no flag leaves shared GPUs to the resource check."""
    objs = [share_node("n1", 16000, 2), gpu_pod("p", {GM: 12000}), gpu_pod("q", {GM: 4000})]
    out = cycle(objs, config())
    assert len(out["binds"]) == 2 and "annotations" not in out


# -- GPU share ----------------------------------------------------------------------------


def test_memory_pods_fill_the_lowest_card_with_room_and_say_which_cards_were_short() -> None:
    objs = [share_node("n1", 16000, 2),
            gpu_pod("a", {GM: 5000}, created="2024-01-01T00:00:01Z"),
            gpu_pod("b", {GM: 4000}, created="2024-01-01T00:00:02Z"),
            gpu_pod("c", {GM: 7000}, created="2024-01-01T00:00:03Z")]  # fmt: skip
    out = cycle(objs, config(GPUSharingEnable=True))
    notes = out["annotations"]
    assert notes["default/a"][INDEX] == "0" and notes["default/b"][INDEX] == "1"
    assert "default/c" not in out["binds"]
    (why,) = [w for w in out["pending"].values() if "task c:" in w]
    assert why.endswith(
        "0/1 nodes are available: 1 had no GPU card with 7000 MiB free (card 0: 3000 of "
        "8000 MiB free, card 1: 4000 of 8000 MiB free)"
    )


def test_predicate_times_follow_the_bind_order() -> None:
    objs = [share_node("n1", 40000, 4)]
    objs += [gpu_pod(f"p{i}", {GM: 1000}, created=f"2024-01-01T00:00:0{i}Z") for i in range(3)]
    out = cycle(objs, config(GPUSharingEnable=True))
    times = [int(out["annotations"][f"default/p{i}"]["volcano.sh/predicate-time"])
             for i in range(3)]  # fmt: skip
    assert times == sorted(times) and len(set(times)) == 3


def test_unhealthy_cards_are_not_used() -> None:
    objs = [share_node("n1", 30000, 3, **{"volcano.sh/gpu-unhealthy-ids": "0,2"}),
            gpu_pod("p", {GM: 6000})]  # fmt: skip
    out = cycle(objs, config(GPUSharingEnable=True))
    assert out["annotations"]["default/p"][INDEX] == "1"


def test_a_running_pod_holds_its_card_by_its_annotation() -> None:
    running = gpu_pod("old", {GM: 8000}, node="n1", annotations={INDEX: "0"})
    objs = [share_node("n1", 20000, 2), running, gpu_pod("new", {GM: 8000})]
    out = cycle(objs, config(GPUSharingEnable=True))
    assert out["annotations"]["default/new"][INDEX] == "1"


def test_whole_cards_go_to_idle_cards_only() -> None:
    running = gpu_pod("old", {GN: 1}, node="n1", annotations={INDEX: "1"})
    objs = [share_node("n1", 40000, 3), running, gpu_pod("new", {GN: 2}),
            gpu_pod("more", {GN: 1}, created="2024-01-01T00:00:09Z")]  # fmt: skip
    out = cycle(objs, config(GPUNumberEnable=True))
    assert out["annotations"]["default/new"][INDEX] == "0,2"
    assert "had no idle GPU card (card 0: used by 1 pod" in str(out["pending"])


def test_a_gang_that_does_not_come_together_gives_its_cards_back() -> None:
    """A gang of three 6000 pods on a node of two 10000 cards: two find a card, the
    third none, so the gang gives its two cards back and a later 9000 pod gets one."""
    objs = [share_node("n1", 20000, 2), podgroup("big", min_member=3),
            podgroup("small", created="2024-01-01T00:00:05Z")]  # fmt: skip
    objs += [gpu_pod(f"big-{i}", {GM: 6000}, group="big") for i in range(3)]
    objs.append(gpu_pod("small-0", {GM: 9000}, group="small"))
    out = cycle(objs, config(GPUSharingEnable=True))
    assert out["binds"] == {"default/small-0": "n1"}
    assert set(out["annotations"]) == {"default/small-0"}


# -- vGPU ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "card"), [("binpack", "GPU-A"), ("spread", "GPU-B")])
def test_binpack_takes_the_used_card_and_spread_the_idle_one(policy: str, card: str) -> None:
    used = gpu_pod("used", {VN: 1, VM: 2000}, node="n1", annotations={IDS: "GPU-A,NVIDIA,2000,0:"})
    objs = [vgpu_node("n1", ("GPU-A", 10, 16000), ("GPU-B", 10, 16000)), used,
            gpu_pod("p", {VN: 1, VM: 1000})]  # fmt: skip
    out = cycle(objs, config(VGPUEnable=True, SchedulePolicy=policy))
    assert out["annotations"]["default/p"][IDS] == f"{card},NVIDIA,1000,0:"


def test_binpack_weight_sends_the_pod_to_the_fuller_node() -> None:
    used = gpu_pod("used", {VN: 1, VM: 8000}, node="n2", annotations={IDS: "GPU-2,NVIDIA,8000,0:"})
    nodes = [vgpu_node("n1", ("GPU-1", 10, 16000)), vgpu_node("n2", ("GPU-2", 10, 16000)), used]
    objs = [*nodes, gpu_pod("p", {VN: 1, VM: 1000})]
    weighted = cycle(objs, config(VGPUEnable=True, SchedulePolicy="binpack", ScheduleWeight=5))
    assert weighted["binds"] == {"default/p": "n2"}
    unweighted = cycle(objs, config(VGPUEnable=True, SchedulePolicy="binpack"))
    assert unweighted["binds"] == {"default/p": "n1"}  # (no score: the first name)


def test_what_a_vgpu_bind_writes() -> None:
    objs = [vgpu_node("n1", ("GPU-A", 10, 16000), ("GPU-B", 10, 16000)),
            gpu_pod("p", {VN: 2, VM: 3000, VC: 30})]  # fmt: skip
    out = cycle(objs, config(VGPUEnable=True, SchedulePolicy="binpack"))
    notes = out["annotations"]["default/p"]
    ids = "GPU-A,NVIDIA,3000,30:GPU-B,NVIDIA,3000,30:"
    assert notes[IDS] == notes["volcano.sh/devices-to-allocate"] == ids
    assert notes["volcano.sh/vgpu-node"] == "n1" and notes["volcano.sh/bind-phase"] == "allocating"
    assert notes["volcano.sh/vgpu-time"] == notes["volcano.sh/bind-time"]


def test_memory_percentage_takes_a_share_of_each_card() -> None:
    """(The node must offer the percentage resource too, or the pod fits no node.)"""
    pct = "volcano.sh/vgpu-memory-percentage"
    n = vgpu_node("n1", ("GPU-A", 10, 20000))
    n["status"]["allocatable"][pct] = "100"
    objs = [n, gpu_pod("p", {VN: 1, pct: 25})]
    out = cycle(objs, config(VGPUEnable=True))
    assert out["annotations"]["default/p"][IDS] == "GPU-A,NVIDIA,5000,0:"


def test_cores_shortage_is_named_card_by_card() -> None:
    used = gpu_pod("used", {VN: 1, VM: 1000, VC: 80}, node="n1",
                   annotations={IDS: "GPU-A,NVIDIA,1000,80:"})  # fmt: skip
    objs = [vgpu_node("n1", ("GPU-A", 10, 16000), ("GPU-B", 2, 16000)), used,
            gpu_pod("p", {VN: 2, VM: 1000, VC: 30})]  # fmt: skip
    out = cycle(objs, config(VGPUEnable=True))
    why = str(out["pending"])
    assert "had 1 of the 2 GPU cards with 1000 MiB of memory and 30% of cores free" in why
    assert "card 0: 80% of cores in use" in why


def test_a_pod_asking_all_cores_wants_a_card_of_its_own() -> None:
    used = gpu_pod("used", {VN: 1, VM: 1000}, node="n1", annotations={IDS: "GPU-A,NVIDIA,1000,0:"})
    objs = [vgpu_node("n1", ("GPU-A", 10, 16000)), used, gpu_pod("p", {VN: 1, VC: 100, VM: 10})]
    out = cycle(objs, config(VGPUEnable=True))
    assert out["binds"] == {} and "card 0: in use (the pod asks all its cores)" in str(
        out["pending"]
    )


def test_the_sharing_mode_asked_must_be_the_nodes() -> None:
    objs = [vgpu_node("n1", ("GPU-A", 10, 16000)),
            gpu_pod("p", {VN: 1, VM: 10}, annotations={"volcano.sh/vgpu-mode": "mig"})]  # fmt: skip
    out = cycle(objs, config(VGPUEnable=True))
    assert "share their GPUs in mode hami-core, the pod asks mig" in str(out["pending"])


def test_a_node_offering_vgpus_without_a_registration_says_so() -> None:
    bare = vgpu_node("n1", ("GPU-A", 10, 16000))
    del bare["metadata"]["annotations"][REGISTER]
    out = cycle([bare, gpu_pod("p", {VN: 1, VM: 10})], config(VGPUEnable=True))
    assert "had no vGPU cards registered (node annotation volcano.sh/node-vgpu-register)" in str(
        out["pending"]
    )


def test_many_nodes_are_explained_in_a_few_lines() -> None:
    """Nodes whose cards differ each have their own words, the first few card by card
    and the rest in short: the explanation stays a few lines long."""
    objs = []
    for i in range(8):
        objs.append(vgpu_node(f"n{i}", (f"GPU-{i}", 10, 16000)))
        objs.append(gpu_pod(f"used-{i}", {VN: 1, VM: 9000 + i}, node=f"n{i}",
                            annotations={IDS: f"GPU-{i},NVIDIA,{9000 + i},0:"}))  # fmt: skip
    objs.append(gpu_pod("p", {VN: 1, VM: 8000}))
    (why,) = cycle(objs, config(VGPUEnable=True))["pending"].values()
    assert why.count("card 0:") == 3
    assert "5 had no GPU card with 8000 MiB of memory free" in why


# -- the scheduler cache -------------------------------------------------------------------


def test_a_new_registration_is_a_change_and_a_handshake_is_not() -> None:
    store = MemoryCluster()
    n = vgpu_node("n1", ("GPU-A", 10, 1000))
    n["status"]["allocatable"][VM] = "16000"  # (the card registered smaller than it is)
    n["metadata"]["annotations"]["volcano.sh/node-vgpu-handshake"] = "Requesting_1"
    store.create_all([queue(), n, gpu_pod("p", {VN: 1, VM: 4000})])
    cache = SchedulerCache(store)
    sched = Scheduler.create(parse_config(yaml.safe_load(config(VGPUEnable=True))))
    assert sched.cycle(cache.snapshot()).binds == {}
    before = cache.changes

    def handshake(obj: dict) -> None:
        obj["metadata"]["annotations"]["volcano.sh/node-vgpu-handshake"] = "Requesting_2"

    store.modify("Node", "n1", handshake)
    cache.sync()
    assert cache.changes == before  # (nothing a decision reads moved)

    def bigger(obj: dict) -> None:
        obj["metadata"]["annotations"][REGISTER] = "GPU-A,10,16000,NVIDIA-A100,true,hami-core:"

    store.modify("Node", "n1", bigger)
    assert sched.cycle(cache.snapshot()).binds == {"default/p": "n1"}


def test_the_card_written_at_bind_is_counted_in_the_next_cycle() -> None:
    """Through the scheduler cache, as `pumice simulate` and `pumice run` go: the first
    pod's card, written on it when it was bound, is taken when the next pod comes."""
    store = MemoryCluster()
    store.create_all([queue(), share_node("n1", 16000, 2), gpu_pod("a", {GM: 6000})])
    cache = SchedulerCache(store)
    scheduler = Scheduler.create(parse_config(yaml.safe_load(config(GPUSharingEnable=True))))
    cache.apply(scheduler.cycle(cache.snapshot()))
    first = store.get("Pod", "default/a")["metadata"]["annotations"][INDEX]
    store.create(gpu_pod("b", {GM: 6000}))
    cache.apply(scheduler.cycle(cache.snapshot()))
    second = store.get("Pod", "default/b")["metadata"]["annotations"][INDEX]
    assert {first, second} == {"0", "1"}
    store.create(gpu_pod("c", {GM: 3000}))
    d = scheduler.cycle(cache.snapshot())
    assert d.binds == {}
    assert "no GPU card with 3000 MiB free" in d.pending["default/podgroup-c"]
