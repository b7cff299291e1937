"""deviceshare: pods sharing GPU cards, card by card, as Volcano's plugin does.

A pod asking shared GPUs fits a node only when enough of the node's cards have what
it asks; the cards chosen are held for the rest of the session and written onto the
pod when it binds, for the node's device plugin (see :mod:`pumice.plugins.gpu_cards`
for the choice, :mod:`pumice.api.gpus` for the resources and annotations).

Volcano's arguments, all off by default:

- ``deviceshare.GPUSharingEnable``: GPU share by memory (``volcano.sh/gpu-memory``);
- ``deviceshare.GPUNumberEnable``: GPU share by whole cards (``volcano.sh/gpu-number``);
- ``deviceshare.VGPUEnable``: HAMi vGPUs (``volcano.sh/vgpu-*``);
- ``deviceshare.SchedulePolicy``: ``binpack`` or ``spread``, the vGPU cards' order and
  score (none: the highest-numbered card first, no score);
- ``deviceshare.ScheduleWeight``: the node score's weight (0: nodes are not scored).

The first two exclude each other, and either excludes vGPUs (Volcano stops on such a
configuration; pumice refuses it).
"""

from __future__ import annotations

import numpy as np

from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.errors import InputError, shown
from pumice.framework.scoring import SeparableScore
from pumice.framework.session import EventHandler, Session
from pumice.framework.verdicts import timeless
from pumice.plugins.gpu_cards import BINPACK, SPREAD, Cards, ShareCards, VgpuCards

GPU_SHARING = "deviceshare.GPUSharingEnable"
GPU_NUMBER = "deviceshare.GPUNumberEnable"
VGPU = "deviceshare.VGPUEnable"
SCHEDULE_POLICY = "deviceshare.SchedulePolicy"
SCHEDULE_WEIGHT = "deviceshare.ScheduleWeight"

Reasons = list[tuple[str, np.ndarray]]
#: The statuses of a task placed in this session.
PLACED = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED})


class DeviceSharePlugin:
    name = "deviceshare"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = (GPU_SHARING, GPU_NUMBER, VGPU, SCHEDULE_POLICY, SCHEDULE_WEIGHT)

    def __init__(self, arguments: Arguments) -> None:
        self.sharing = arguments.get_bool(GPU_SHARING, False)
        self.number = arguments.get_bool(GPU_NUMBER, False)
        self.vgpu = arguments.get_bool(VGPU, False)
        self.policy = arguments.get_str(SCHEDULE_POLICY, "")
        self.weight = arguments.get_int(SCHEDULE_WEIGHT, 0)
        owner = f"plugin {self.name}"
        if self.sharing and self.number:
            raise InputError(
                f"cannot be true together with {GPU_NUMBER}: a node's cards are shared "
                "either by memory or by whole cards",
                obj=owner,
                field=f"arguments.{GPU_SHARING}",
            )
        if self.vgpu and (self.sharing or self.number):
            other = GPU_SHARING if self.sharing else GPU_NUMBER
            raise InputError(
                f"cannot be true together with {other}: GPU share and vGPU exclude each other",
                obj=owner,
                field=f"arguments.{VGPU}",
            )
        if self.policy not in ("", BINPACK, SPREAD):
            raise InputError(
                f"expected binpack or spread, got {shown(self.policy)}",
                obj=owner,
                field=f"arguments.{SCHEDULE_POLICY}",
            )
        if self.weight < 0:
            raise InputError(
                f"must not be negative, got {self.weight}",
                obj=owner,
                field=f"arguments.{SCHEDULE_WEIGHT}",
            )
        #: This cycle's cards (None: no kind enabled).
        self.cards: Cards | None = None

    @property
    def enabled(self) -> bool:
        return self.sharing or self.number or self.vgpu

    def on_session_open(self, ssn: Session) -> None:
        """The predicate, the node score (vGPU with a weight) and the event handlers
        that hold and give back each task's cards."""
        if not self.enabled:
            return

        def allocated(task: TaskInfo) -> None:
            # (an eviction given back re-allocates a running pod: it keeps its cards)
            cards = self.cards
            if cards is not None and task.status in PLACED and cards.wants(task):
                cards.assume(task)

        def deallocated(task: TaskInfo) -> None:
            if self.cards is not None and task.devices is not None:
                self.cards.forget(task)

        ssn.add_event_handler(EventHandler(allocate=allocated, deallocate=deallocated))

        def predicate(task: TaskInfo) -> tuple[np.ndarray | None, Reasons]:
            cards = self.cards
            if cards is None or not cards.wants(task):
                return None, []
            reasons = cards.reasons(task)
            if not reasons:
                return None, []
            blocked = reasons[0][1].copy()
            for _, mask in reasons[1:]:
                blocked |= mask
            return blocked, reasons

        # A task asking no shared GPU is never refused, and one asking some never
        # takes allocate's per-shape answers (it attaches devices): the answer may be
        # shared by placement.
        ssn.on("predicate", self.name, predicate, by_placement=True)
        if self.vgpu and self.weight > 0:
            ssn.on("node_order", self.name, DeviceScore(self))

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's cards, read from its nodes when first asked."""
        if self.vgpu:
            self.cards = VgpuCards(ssn.nodes, self.policy)
        elif self.enabled:
            self.cards = ShareCards(ssn.nodes, by_number=self.number)

    def on_session_close(self, ssn: Session) -> None:
        """The cards of the pods that bind, as the annotations written before it."""
        if self.cards is not None:
            self.cards.write(ssn.decisions, ssn.now)


class DeviceScore(SeparableScore):
    """The ``node_order`` function: the score of the vGPU cards a task would take on
    each node, times the weight; 0 for a task asking none. Separable (``context`` /
    ``rows`` / ``one``) so that allocate's fast path stays on for the other tasks; a
    task asking vGPUs never takes it."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: DeviceSharePlugin) -> None:
        self.plugin = plugin

    def rows(self, task: TaskInfo, cand: np.ndarray, _ctx: None) -> np.ndarray:
        cards = self.plugin.cards
        if cards is None or not cards.wants(task):
            return np.zeros(cand.size)
        return cards.scores(task, cand) * self.plugin.weight

    def one(self, task: TaskInfo, i: int, _ctx: None) -> float:
        return float(self.rows(task, np.array([i]), None)[0])


__all__ = [
    "GPU_NUMBER",
    "GPU_SHARING",
    "SCHEDULE_POLICY",
    "SCHEDULE_WEIGHT",
    "VGPU",
    "DeviceScore",
    "DeviceSharePlugin",
]
