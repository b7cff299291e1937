"""Shared GPUs as Volcano's ``deviceshare`` plugin sees them: what a pod asks, which
cards a node has, and the annotations that say which card a pod holds.

Two protocols, with Volcano's resource names and annotation keys:

- **GPU share** (Volcano's device plugin): a node offers ``volcano.sh/gpu-memory`` and
  ``volcano.sh/gpu-number`` in its capacity; the memory is split evenly over the cards,
  numbered from 0, less the ones its ``volcano.sh/gpu-unhealthy-ids`` annotation lists.
  A pod asks ``volcano.sh/gpu-memory`` (a share of one card) or ``volcano.sh/gpu-number``
  (whole cards) in its containers' limits. The scheduler writes the card numbers it
  chose into the pod's ``volcano.sh/gpu-index`` (``"0"``, ``"0,1"``) with
  ``volcano.sh/predicate-time`` (nanoseconds); the device plugin reads them.
- **vGPU** (HAMi's protocol, the volcano-vgpu-device-plugin): the node's
  ``volcano.sh/node-vgpu-register`` annotation lists its cards,
  ``uuid,count,memory,type,health,mode:`` each (count: how many pods may share it;
  memory in MiB), and the node offers ``volcano.sh/vgpu-number``, ``-memory`` and
  ``-cores``. Each container asks ``volcano.sh/vgpu-number`` cards (1 when only memory
  is given) with ``volcano.sh/vgpu-memory`` MiB or ``volcano.sh/vgpu-memory-percentage``
  of each, and ``volcano.sh/vgpu-cores`` percent of each card's cores. The scheduler
  writes the cards chosen per container into ``volcano.sh/vgpu-ids-new``
  (``uuid,NVIDIA,memory,cores:`` per card, containers separated by ``;``).

This module only reads and writes those formats; the choice of cards is
:mod:`pumice.plugins.gpu_cards`'.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# -- GPU share ------------------------------------------------------------------------

GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_INDEX = "volcano.sh/gpu-index"
PREDICATE_TIME = "volcano.sh/predicate-time"
GPU_UNHEALTHY = "volcano.sh/gpu-unhealthy-ids"

# -- vGPU -------------------------------------------------------------------------------

VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_MEMORY_PERCENTAGE = "volcano.sh/vgpu-memory-percentage"
VGPU_CORES = "volcano.sh/vgpu-cores"
VGPU_REGISTER = "volcano.sh/node-vgpu-register"
#: Written on a pod at bind (Volcano's vgpu ``Allocate``).
VGPU_IDS = "volcano.sh/vgpu-ids-new"
VGPU_TO_ALLOCATE = "volcano.sh/devices-to-allocate"
VGPU_NODE = "volcano.sh/vgpu-node"
VGPU_TIME = "volcano.sh/vgpu-time"
BIND_TIME = "volcano.sh/bind-time"
BIND_PHASE = "volcano.sh/bind-phase"
#: Read on a pod: the sharing mode it wants, keeping a gang's pods on distinct cards,
#: card types and card UUIDs it wants or refuses.
VGPU_MODE = "volcano.sh/vgpu-mode"
VGPU_GROUP_POLICY = "volcano.sh/vgpu-podgroup-policy"
USE_TYPE = "nvidia.com/use-gputype"
NOUSE_TYPE = "nvidia.com/nouse-gputype"
USE_UUID = "volcano.sh/vgpu-use-gpuuuid"
NOUSE_UUID = "volcano.sh/vgpu-nouse-gpuuuid"
#: The podgroup annotations a vGPU pod's group is read from, in Volcano's order.
GROUP_KEYS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
#: The card type every vGPU request asks for, and the only sharing mode pumice knows
#: (Volcano's MIG mode needs geometries from a ConfigMap; without one it falls back to
#: this mode too).
NVIDIA = "NVIDIA"
HAMI_CORE = "hami-core"
#: A memory percentage of 101 means "none given" (Volcano's ``DefaultMemPercentage``).
NO_PERCENTAGE = 101

#: The node annotations and capacity entries read here. A node's other annotations are
#: not kept: device plugins rewrite some every few seconds (HAMi's handshake), and a
#: change nobody reads must not count as a change of the cluster.
NODE_ANNOTATIONS = (VGPU_REGISTER, GPU_UNHEALTHY)
NODE_CAPACITY = (GPU_MEMORY, GPU_NUMBER)
#: Every resource name a pod may ask of deviceshare.
DEVICE_RESOURCES = frozenset(
    {GPU_MEMORY, GPU_NUMBER, VGPU_NUMBER, VGPU_MEMORY, VGPU_MEMORY_PERCENTAGE, VGPU_CORES}
)


@dataclass(frozen=True, slots=True)
class VgpuAsk:
    """One container's vGPU request: ``count`` cards, each with ``memory`` MiB (or
    ``percent`` of its memory, when not :data:`NO_PERCENTAGE`) and ``cores`` percent of
    its cores."""

    count: int
    memory: int
    percent: int
    cores: int

    def memory_on(self, card_memory: int) -> int:
        """The memory this request takes of a card of ``card_memory`` MiB."""
        if self.percent != NO_PERCENTAGE:
            return int(card_memory * self.percent / 100)
        return self.memory

    def __str__(self) -> str:
        mem = f"{self.memory} MiB" if self.percent == NO_PERCENTAGE else f"{self.percent}%"
        what = f"{mem} of memory" + (f" and {self.cores}% of cores" if self.cores else "")
        return what


@dataclass(frozen=True, slots=True)
class DeviceAsk:
    """What a pod asks of shared GPUs. ``gpu_memory`` and ``gpu_number`` are the pod's
    (the larger of its containers' sum and its largest init container, from limits);
    ``vgpu`` has one entry per container asking vGPUs, in container order."""

    gpu_memory: int = 0
    gpu_number: int = 0
    vgpu: tuple[VgpuAsk, ...] = ()


def _whole(amount: float) -> int:
    """A resource amount as Kubernetes' ``Value()`` gives it (rounded up)."""
    return math.ceil(amount)


def _pod_amount(
    containers: Iterable[Mapping[str, float]], inits: Iterable[Mapping[str, float]], name: str
) -> int:
    total = sum(_whole(c.get(name, 0.0)) for c in containers)
    peak = max((_whole(c.get(name, 0.0)) for c in inits), default=0)
    return max(total, peak)


def _vgpu_ask(limits: Mapping[str, float], requests: Mapping[str, float]) -> VgpuAsk | None:
    """Volcano's ``ExtractResourceRequest`` for one container: a container asks vGPUs
    when its limits name the card count or the memory (then one card)."""
    if VGPU_NUMBER in limits:
        count = _whole(limits[VGPU_NUMBER])
    elif VGPU_MEMORY in limits:
        count = 1
    else:
        return None

    def amount(name: str, default: int) -> int:
        got = limits.get(name, requests.get(name))
        return default if got is None else _whole(got)

    memory = amount(VGPU_MEMORY, 0)
    percent = amount(VGPU_MEMORY_PERCENTAGE, NO_PERCENTAGE)
    if percent == NO_PERCENTAGE and memory == 0:
        percent = 100  # (neither given: the whole card's memory)
    return VgpuAsk(count, memory, percent, amount(VGPU_CORES, 0))


def device_ask(
    containers: Sequence[tuple[Mapping[str, float], Mapping[str, float]]],
    inits: Sequence[Mapping[str, float]],
) -> DeviceAsk | None:
    """The pod's shared-GPU request from its containers' (limits, requests) and its
    init containers' limits; None when it asks none."""
    limits = [lim for lim, _ in containers]
    ask = DeviceAsk(
        gpu_memory=_pod_amount(limits, inits, GPU_MEMORY),
        gpu_number=_pod_amount(limits, inits, GPU_NUMBER),
        vgpu=tuple(a for lim, req in containers if (a := _vgpu_ask(lim, req)) is not None),
    )
    if ask.gpu_memory or ask.gpu_number or ask.vgpu:
        return ask
    return None


# -- cards ------------------------------------------------------------------------------


def share_cards(
    capacity: Mapping[str, float], annotations: Mapping[str, str]
) -> dict[int, int] | None:
    """A GPU-share node's cards: card number -> memory, the capacity's memory split
    evenly over its card count, less the unhealthy cards; None when it has none."""
    memory, number = capacity.get(GPU_MEMORY), capacity.get(GPU_NUMBER)
    if memory is None or number is None or _whole(number) <= 0:
        return None
    count = _whole(number)
    per_card = _whole(memory) // count
    cards = dict.fromkeys(range(count), per_card)
    for item in annotations.get(GPU_UNHEALTHY, "").split(","):
        item = item.strip()
        if item.lstrip("-").isdigit():
            cards.pop(int(item), None)
    return cards


@dataclass(frozen=True, slots=True)
class VgpuCard:
    """One card of a node's vGPU registration."""

    index: int
    uuid: str
    number: int  # how many pods may share it
    memory: int  # MiB
    type: str


def vgpu_cards(annotations: Mapping[str, str]) -> tuple[VgpuCard, ...] | None:
    """The cards of a node's ``volcano.sh/node-vgpu-register`` annotation, numbered by
    their place in it; None when it has none, or an entry has too few fields (Volcano
    then ignores the whole registration)."""
    text = annotations.get(VGPU_REGISTER)
    if text is None or ":" not in text:
        return None
    cards = []
    for index, entry in enumerate(text.split(":")):
        if "," not in entry:
            continue
        items = entry.split(",")
        if len(items) < 6:
            return None
        cards.append(VgpuCard(index, items[0], _atoi(items[1]), _atoi(items[2]), items[3]))
    return tuple(cards) or None


def _atoi(text: str) -> int:
    """Go's ``strconv.Atoi`` as Volcano uses it: 0 when the text is not a number."""
    try:
        return int(text) if text.strip().lstrip("+-").isdigit() else 0
    except ValueError:  # ("+-1")
        return 0


# -- what a pod holds -------------------------------------------------------------------


def gpu_indices(annotations: Mapping[str, str]) -> tuple[int, ...]:
    """The cards a GPU-share pod holds (``volcano.sh/gpu-index``); none when the
    annotation is missing or malformed (Volcano then counts the pod on no card)."""
    text = annotations.get(GPU_INDEX)
    if not text:
        return ()
    out = []
    for item in text.split(","):
        if not item.strip().lstrip("-").isdigit():
            return ()
        out.append(int(item))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CardUse:
    """One card given to one container: its UUID, MiB and percent of cores."""

    uuid: str
    memory: int
    cores: int


def decode_vgpu_ids(text: str) -> list[list[CardUse]]:
    """``volcano.sh/vgpu-ids-new``: per container, the cards it holds. An entry that is
    not ``uuid,type,memory,cores`` with non-negative numbers is skipped, as Volcano
    skips it."""
    out: list[list[CardUse]] = []
    if not text:
        return out
    for part in text.split(";"):
        used = []
        for entry in part.split(":"):
            items = entry.split(",")
            if len(items) < 4 or not items[2].isdigit() or not items[3].isdigit():
                continue
            used.append(CardUse(items[0], int(items[2]), int(items[3])))
        out.append(used)
    return out


def encode_vgpu_ids(containers: Iterable[Iterable[CardUse]]) -> str:
    """The inverse of :func:`decode_vgpu_ids`, in Volcano's spelling (every card entry
    ends with ``:``)."""
    return ";".join(
        "".join(f"{u.uuid},{NVIDIA},{u.memory},{u.cores}:" for u in cards) for cards in containers
    )


def group_of(namespace: str, annotations: Mapping[str, str]) -> str:
    """The pod's podgroup as ``namespace/name``, "" when it names none."""
    for key in GROUP_KEYS:
        name = annotations.get(key)
        if name:
            return f"{namespace}/{name}"
    return ""


def _names(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass(frozen=True, slots=True)
class CardFilter:
    """What a vGPU pod's annotations say about the cards it may take: the sharing mode,
    wanted and unwanted card types (substrings, any case), wanted and unwanted UUIDs."""

    mode: str | None = None
    use_types: tuple[str, ...] | None = None
    nouse_types: tuple[str, ...] | None = None
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()

    @classmethod
    def of(cls, annotations: Mapping[str, str]) -> CardFilter:
        use, nouse = annotations.get(USE_TYPE), annotations.get(NOUSE_TYPE)
        return cls(
            mode=annotations.get(VGPU_MODE),
            use_types=None if use is None else tuple(v.upper() for v in use.split(",")),
            nouse_types=None if nouse is None else tuple(v.upper() for v in nouse.split(",")),
            use_uuids=tuple(_names(annotations.get(USE_UUID, ""))),
            nouse_uuids=tuple(_names(annotations.get(NOUSE_UUID, ""))),
        )

    def uuid_ok(self, uuid: str) -> bool:
        """Volcano's UUID filter: an allow list the card must be on, a deny list it must
        not be on (exact names); with either, a card without a UUID is refused."""
        if not self.use_uuids and not self.nouse_uuids:
            return True
        if not uuid or (self.use_uuids and uuid not in self.use_uuids):
            return False
        return uuid not in self.nouse_uuids

    def type_ok(self, card_type: str) -> bool:
        """The card is an NVIDIA card of a type the pod wants (``use-gputype``: one of
        the names occurs in it) or does not refuse (``nouse-gputype``)."""
        if NVIDIA not in card_type:
            return False
        upper = card_type.upper()
        if self.use_types is not None:
            return any(t in upper for t in self.use_types)
        if self.nouse_types is not None:
            return not any(t in upper for t in self.nouse_types)
        return True


__all__ = [
    "BIND_PHASE",
    "BIND_TIME",
    "DEVICE_RESOURCES",
    "GPU_INDEX",
    "GPU_MEMORY",
    "GPU_NUMBER",
    "GPU_UNHEALTHY",
    "HAMI_CORE",
    "NODE_ANNOTATIONS",
    "NODE_CAPACITY",
    "NO_PERCENTAGE",
    "NVIDIA",
    "PREDICATE_TIME",
    "VGPU_CORES",
    "VGPU_GROUP_POLICY",
    "VGPU_IDS",
    "VGPU_MEMORY",
    "VGPU_MEMORY_PERCENTAGE",
    "VGPU_MODE",
    "VGPU_NODE",
    "VGPU_NUMBER",
    "VGPU_REGISTER",
    "VGPU_TIME",
    "VGPU_TO_ALLOCATE",
    "CardFilter",
    "CardUse",
    "DeviceAsk",
    "VgpuAsk",
    "VgpuCard",
    "decode_vgpu_ids",
    "device_ask",
    "encode_vgpu_ids",
    "gpu_indices",
    "group_of",
    "share_cards",
    "vgpu_cards",
]
