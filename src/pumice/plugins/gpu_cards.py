"""The deviceshare plugin's cards: one cycle's shared GPUs, which of them each pod
holds, and which cards a pod would get on a node (Volcano's ``gpushare`` and ``vgpu``
devices, :mod:`pumice.api.gpus` for the formats).

A card's use is counted from the pods on its node: a running (or bound, or
terminating) pod by the annotations written at its bind, a pod placed in this session
by the cards chosen for it then. The choice is part of the session's tentative state:
when a task is allocated (or pipelined) its cards on its node are chosen again as the
filter chose them and held, and given back when it is deallocated (a statement
discarded, a gang that did not come together). At the session's close the cards of
the pods that bind become their annotations (:meth:`Cards.write`).

**GPU share.** A pod asking ``volcano.sh/gpu-memory`` takes the lowest-numbered card
with that much memory free; one asking ``volcano.sh/gpu-number`` takes that many idle
cards (no pod on them), the lowest-numbered (Volcano takes any: its map order).
Nodes are not scored (Volcano's score is 0).

**vGPU.** Each container asking vGPUs takes its count of cards, in an order set by the
schedule policy: ``binpack`` the most memory used first, ``spread`` the fewest pods
first, none the highest-numbered first. A card is skipped when it is shared by as many
pods as it allows, when the pod keeps its gang apart (``volcano.sh/vgpu-podgroup-policy:
spread``) and a pod of the gang uses it, when its memory or cores are short (a pod
asking 100% of cores wants a card of its own; one asking no cores no card whose cores
are all taken), or when its type or UUID is not wanted. With ``binpack``, a node scores
``100 × used memory / card memory`` of each card taken, counting the pod; with
``spread`` Volcano's score is that of a card no pod uses once the pod is counted, so
always 0.

Costs: a pod that asks no shared GPU costs nothing here. A node's cards are read once
per cycle; a card fit is kept per request and node until a pod comes to or leaves the
node, and the nodes refused to a request are kept per request and brought up to date
from the nodes whose pods changed since, so a pod costs the nodes that changed (and a
few vector operations over all nodes), not a fit per node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from pumice.api.gpus import (
    BIND_PHASE,
    BIND_TIME,
    GPU_INDEX,
    GPU_MEMORY,
    GPU_NUMBER,
    HAMI_CORE,
    PREDICATE_TIME,
    VGPU_CORES,
    VGPU_GROUP_POLICY,
    VGPU_IDS,
    VGPU_MEMORY,
    VGPU_NODE,
    VGPU_NUMBER,
    VGPU_REGISTER,
    VGPU_TIME,
    VGPU_TO_ALLOCATE,
    CardFilter,
    CardUse,
    DeviceAsk,
    VgpuAsk,
    VgpuCard,
    decode_vgpu_ids,
    encode_vgpu_ids,
    gpu_indices,
    group_of,
    share_cards,
    vgpu_cards,
)
from pumice.api.node import NodeTable
from pumice.api.task import TERMINATED_STATUSES, TaskInfo, TaskStatus
from pumice.framework.decisions import Decisions

Reasons = list[tuple[str, np.ndarray]]
#: Tasks whose cards are not read from their annotations: placed this session (their
#: cards are held, or none), or gone.
_NOT_BOUND = TERMINATED_STATUSES | {TaskStatus.ALLOCATED, TaskStatus.PIPELINED}

BINPACK, SPREAD = "binpack", "spread"
#: Nodes whose refusal is told card by card; the others of the same kind are counted
#: under the short form, so that a large cluster's explanation stays a few lines.
DETAILED = 3
#: Cards named in one node's refusal.
CARDS_NAMED = 8


def _ask(task: TaskInfo) -> DeviceAsk:
    """The devices ``task`` asks for. A kind's ``_signature`` and ``_fit`` are only asked
    about the tasks its ``wants`` took, which ask for devices."""
    return cast(DeviceAsk, task.devices)


@dataclass(slots=True)
class Fit:
    """A request on one node: the cards it would take (None: it does not fit), the
    node's score, and why not (card by card, and in short)."""

    cards: Any = None
    score: float = 0.0
    why: str = ""
    short: str = ""


@dataclass(slots=True)
class _Held:
    """The cards chosen for a task of this session, on the node of ``row``."""

    key: str
    row: int
    cards: Any


class Cards:
    """One cycle's cards over the session's nodes (see the module docstring); the
    GPU-share and vGPU kinds differ in how they read cards and uses and choose cards."""

    def __init__(self, nodes: NodeTable, policy: str = "") -> None:
        self.nodes = nodes
        self.policy = policy
        #: Card sets per row, read on first ask (None: the node has none).
        self._cards: dict[int, Any] = {}
        self._rows: list[int] | None = None
        #: Each row's use of its cards, made on first ask and dropped when its pods
        #: change; the fits per row and request go with it.
        self._use: dict[int, Any] = {}
        self._fits: dict[int, dict[Any, Fit]] = {}
        #: Tasks placed this session, by uid.
        self.held: dict[str, _Held] = {}
        #: The rows whose use changed, in order; per request, how far into it its
        #: refusal codes are up to date (see :meth:`_refusals`), and the texts coded.
        self._log: list[int] = []
        self._views: dict[Any, tuple[int, np.ndarray]] = {}
        self._codes: dict[str, int] = {}
        self._texts: list[str] = []
        self._empty: np.ndarray | None = None

    # -- to be told by each kind ----------------------------------------------------------

    def wants(self, task: TaskInfo) -> bool:
        raise NotImplementedError

    def _read_cards(self, row: int) -> Any:
        raise NotImplementedError

    def _offers(self) -> str:
        """The node resource that says a node should have cards of this kind."""
        raise NotImplementedError

    def _no_cards(self) -> str:
        raise NotImplementedError

    def _count_use(self, row: int) -> Any:
        raise NotImplementedError

    def _signature(self, task: TaskInfo) -> Any:
        raise NotImplementedError

    def _fit(self, task: TaskInfo, row: int) -> Fit:
        raise NotImplementedError

    def annotations(self, node: str, cards: Any, now: float, order: int) -> dict[str, str]:
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------

    def cards_of(self, row: int) -> Any:
        if row not in self._cards:
            self._cards[row] = self._read_cards(row)
        return self._cards[row]

    def card_rows(self) -> list[int]:
        """The rows whose nodes have cards of this kind."""
        if self._rows is None:
            self._rows = [i for i in range(len(self.nodes)) if self.cards_of(i) is not None]
        return self._rows

    def use_of(self, row: int) -> Any:
        got = self._use.get(row)
        if got is None:
            got = self._use[row] = self._count_use(row)
        return got

    def fit(self, task: TaskInfo, row: int) -> Fit:
        """``task``'s cards on the node of ``row`` (kept until its pods change)."""
        fits = self._fits.setdefault(row, {})
        sig = self._signature(task)
        got = fits.get(sig)
        if got is None:
            got = fits[sig] = self._fit(task, row)
        return got

    def _changed(self, row: int) -> None:
        self._log.append(row)
        self._use.pop(row, None)
        self._fits.pop(row, None)

    def _on_node(self, row: int) -> list[tuple[TaskInfo, Any]]:
        """The pods on the node of ``row`` that hold cards, each with what holds them:
        the cards chosen this session, or else the annotations written at its bind (a
        task placed this session without cards of this kind holds none)."""
        out = []
        for t in self.nodes.tasks[row].values():
            held = self.held.get(t.uid)
            if held is not None:
                out.append((t, held.cards))
            elif t.status not in _NOT_BOUND:
                out.append((t, None))
        return out

    def reasons(self, task: TaskInfo) -> Reasons:
        """The nodes refused to ``task`` for their cards: those without a card that
        fits, grouped by what they say (the first few card by card, see
        :data:`DETAILED`), and those that offer the resource but register no cards.
        A node that offers none is left to the resource check."""
        out: Reasons = []
        empty = self._empty_rows()
        if empty is not None:
            out.append((self._no_cards(), empty))
        codes = self._refusals(task)
        refused = np.flatnonzero(codes[:, 0] >= 0)
        if refused.size == 0:
            return out
        # A node's refusal is told card by card when its words are among the first
        # DETAILED told (in node order), else in short.
        why = codes[refused, 0]
        kinds, first = np.unique(why, return_index=True)
        detailed = kinds[np.argsort(first, kind="stable")][:DETAILED]
        for code in detailed.tolist():
            out.append((self._texts[code], codes[:, 0] == code))
        rest = refused[~np.isin(why, detailed)]
        if rest.size:
            short = codes[rest, 1]
            kinds, first = np.unique(short, return_index=True)
            for code in kinds[np.argsort(first, kind="stable")].tolist():
                mask = np.zeros(len(self.nodes), dtype=bool)
                mask[rest[short == code]] = True
                out.append((self._texts[code], mask))
        return out

    def _empty_rows(self) -> np.ndarray | None:
        """The nodes that offer this kind's resource but register no cards (None when
        there are none); the same all session long."""
        if self._empty is None:
            resource = self.nodes.space.index.get(self._offers())
            empty = np.zeros(len(self.nodes), dtype=bool)
            if resource is not None:
                empty = self.nodes.allocatable[:, resource] > 0
                empty[self.card_rows()] = False
            self._empty = empty
        return self._empty if self._empty.any() else None

    def _refusals(self, task: TaskInfo) -> np.ndarray:
        """Per row, the codes (in ``_texts``) of why ``task``'s request does not fit its
        node, card by card and in short (-1: it fits, or the node has no cards). Kept
        per request and brought up to date from the rows changed since last asked, so
        that a pod costs the nodes that changed, not all nodes."""
        sig = self._signature(task)
        got = self._views.get(sig)
        if got is None:
            codes = np.full((len(self.nodes), 2), -1, dtype=np.int64)
            rows: Iterable[int] = self.card_rows()
        else:
            seen, codes = got
            rows = set(self._log[seen:])
        for i in rows:
            fit = self.fit(task, i)
            codes[i] = (
                (-1, -1) if fit.cards is not None else (self._code(fit.why), self._code(fit.short))
            )
        self._views[sig] = (len(self._log), codes)
        return codes

    def _code(self, text: str) -> int:
        got = self._codes.get(text)
        if got is None:
            got = self._codes[text] = len(self._texts)
            self._texts.append(text)
        return got

    def scores(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """The node score of ``task``'s cards on each of ``rows`` (0 where it has none)."""
        out = np.zeros(rows.size)
        for k, i in enumerate(rows.tolist()):
            if self.cards_of(i) is not None:
                out[k] = self.fit(task, i).score
        return out

    def assume(self, task: TaskInfo) -> None:
        """``task`` was allocated or pipelined: hold the cards the filter chose for it."""
        row = self.nodes.index.get(task.node) if task.node is not None else None
        if row is None or self.cards_of(row) is None:
            return
        self.forget(task)
        self._changed(row)  # (its pods changed: the task came)
        got = self._fit(task, row)
        if got.cards is not None:
            self.held[task.uid] = _Held(task.key, row, got.cards)
            self._changed(row)

    def forget(self, task: TaskInfo) -> None:
        """``task`` was deallocated: give back what :meth:`assume` took for it."""
        got = self.held.pop(task.uid, None)
        if got is not None:
            self._changed(got.row)

    def write(self, decisions: Decisions, now: float) -> None:
        """The cards of the tasks that bind this cycle, as their pre-bind annotations
        (in bind order: GPU share's predicate times tell them apart)."""
        by_key = {h.key: h for h in self.held.values()}
        order = 0
        for key, node in decisions.binds.items():
            got = by_key.get(key)
            if got is None:
                continue
            notes = self.annotations(node, got.cards, now, order)
            decisions.prebind_of(key).annotations.update(notes)
            order += 1


# -- GPU share --------------------------------------------------------------------------


@dataclass(slots=True)
class ShareUse:
    """A GPU-share node's use: per card, the memory its pods ask and how many use it."""

    memory: dict[int, int]
    pods: dict[int, int]


class ShareCards(Cards):
    """Volcano's ``gpushare`` device: by memory (``GPUSharingEnable``) or by whole
    cards (``GPUNumberEnable``)."""

    def __init__(self, nodes: NodeTable, *, by_number: bool) -> None:
        super().__init__(nodes)
        self.by_number = by_number

    def wants(self, task: TaskInfo) -> bool:
        ask = task.devices
        if ask is None:
            return False
        return ask.gpu_number > 0 if self.by_number else ask.gpu_memory > 0

    def _offers(self) -> str:
        return GPU_NUMBER if self.by_number else GPU_MEMORY

    def _no_cards(self) -> str:
        return f"had no GPU cards (no {GPU_MEMORY} and {GPU_NUMBER} in their capacity)"

    def _read_cards(self, row: int) -> dict[int, int] | None:
        spec = self.nodes.specs[row]
        return share_cards(spec.capacity, spec.annotations)

    def _count_use(self, row: int) -> ShareUse:
        cards = self.cards_of(row)
        use = ShareUse(dict.fromkeys(cards, 0), dict.fromkeys(cards, 0))
        for t, held in self._on_node(row):
            ask = t.devices
            if ask is None or not (ask.gpu_memory or ask.gpu_number):
                continue
            for c in held if held is not None else gpu_indices(t.annotations):
                if c in cards:
                    use.memory[c] += ask.gpu_memory
                    use.pods[c] += 1
        return use

    def _signature(self, task: TaskInfo) -> Any:
        ask = _ask(task)
        return ask.gpu_number if self.by_number else ask.gpu_memory

    def _fit(self, task: TaskInfo, row: int) -> Fit:
        cards, use = self.cards_of(row), self.use_of(row)
        ask = _ask(task)
        if self.by_number:
            want = ask.gpu_number
            idle = sorted(c for c in cards if use.pods[c] == 0)
            if len(idle) >= want:
                return Fit(tuple(idle[:want]))
            busy = sorted(c for c in cards if use.pods[c])
            named = _listed([f"card {c}: {_pods(use.pods[c])}" for c in busy])
            short = "had no idle GPU card" if want == 1 else f"had fewer than {want} idle GPU cards"
            return Fit(None, why=f"{short} ({named})", short=short)
        want = ask.gpu_memory
        for c in sorted(cards):
            if cards[c] - use.memory[c] >= want:
                return Fit((c,))
        named = _listed([
            f"card {c}: {max(cards[c] - use.memory[c], 0)} of {cards[c]} MiB free"
            for c in sorted(cards)
        ])  # fmt: skip
        short = f"had no GPU card with {want} MiB free"
        return Fit(None, why=f"{short} ({named})", short=short)

    def annotations(self, node: str, cards: Any, now: float, order: int) -> dict[str, str]:
        return {
            PREDICATE_TIME: str(int(now * 1e9) + order),
            GPU_INDEX: ",".join(str(c) for c in cards),
        }


# -- vGPU -------------------------------------------------------------------------------


@dataclass(slots=True)
class _CardUse:
    """One vGPU card's use: pods, memory, cores, and the (gang, memory, cores) of each
    use, for pods that keep their gang apart."""

    pods: int = 0
    memory: int = 0
    cores: int = 0
    gangs: list[tuple[str, int, int]] = field(default_factory=list)

    def copy(self) -> _CardUse:
        return _CardUse(self.pods, self.memory, self.cores, list(self.gangs))


class VgpuCards(Cards):
    """HAMi's vGPU devices, as Volcano's ``vgpu`` device shares them (``hami-core``)."""

    def wants(self, task: TaskInfo) -> bool:
        return task.devices is not None and bool(task.devices.vgpu)

    def _offers(self) -> str:
        return VGPU_NUMBER

    def _no_cards(self) -> str:
        return f"had no vGPU cards registered (node annotation {VGPU_REGISTER})"

    def _read_cards(self, row: int) -> tuple[VgpuCard, ...] | None:
        """The registered cards, when the node also offers vGPU number, memory and
        cores (Volcano reads a registration only then)."""
        spec = self.nodes.specs[row]
        alloc = spec.allocatable
        if not all(alloc.get(r, 0) > 0 for r in (VGPU_NUMBER, VGPU_MEMORY, VGPU_CORES)):
            return None
        return vgpu_cards(spec.annotations)

    def _card_for(self, cards: tuple[VgpuCard, ...], uuid: str) -> int | None:
        """The card (its place in ``cards``) a use names: its UUID, or else the first
        card whose UUID the name contains (Volcano's match)."""
        for k, c in enumerate(cards):
            if c.uuid == uuid:
                return k
        for k, c in enumerate(cards):
            if c.uuid in uuid:
                return k
        return None

    def _count_use(self, row: int) -> list[_CardUse]:
        """Each card's use. Every card a pod's containers hold counts, a card two of
        its containers share twice (Volcano counts a pod once per card)."""
        cards = self.cards_of(row)
        use = [_CardUse() for _ in cards]
        for t, held in self._on_node(row):
            if held is not None:
                containers = held
            elif VGPU_IDS in t.annotations:
                containers = [
                    [(k, u.memory, u.cores) for u in c if (k := self._card_for(cards, u.uuid))
                     is not None]
                    for c in decode_vgpu_ids(t.annotations[VGPU_IDS])
                ]  # fmt: skip
            else:
                continue
            gang = group_of(t.namespace, t.annotations)
            for container in containers:
                for k, mem, cores in container:
                    u = use[k]
                    u.pods += 1
                    u.memory += mem
                    u.cores += cores
                    u.gangs.append((gang, mem, cores))
        return use

    def _signature(self, task: TaskInfo) -> Any:
        notes = task.annotations
        apart = notes.get(VGPU_GROUP_POLICY) == SPREAD
        gang = group_of(task.namespace, notes) if apart else ""
        return _ask(task).vgpu, CardFilter.of(notes), gang

    def _order(self, use: list[_CardUse]) -> list[int]:
        n = len(use)
        if self.policy == BINPACK:
            return sorted(range(n), key=lambda k: (-use[k].memory, k))
        if self.policy == SPREAD:
            return sorted(range(n), key=lambda k: (use[k].pods, k))
        return list(range(n - 1, -1, -1))

    def _card_score(self, card: VgpuCard, u: _CardUse) -> float:
        if self.policy == BINPACK:
            return 100.0 * u.memory / card.memory if card.memory else 0.0
        if self.policy == SPREAD:
            return 100.0 if u.pods == 0 else 0.0
        return 0.0

    def _fit(self, task: TaskInfo, row: int) -> Fit:
        cards = self.cards_of(row)
        asks, filt, gang = self._signature(task)
        if filt.mode is not None and filt.mode != HAMI_CORE:
            short = f"share their GPUs in mode {HAMI_CORE}, the pod asks {filt.mode}"
            return Fit(None, why=short, short=short)
        use = [u.copy() for u in self.use_of(row)]
        chosen: list[list[tuple[int, int, int]]] = []
        score = 0.0
        for ask in asks:
            if ask.count > len(cards):
                short = f"had {len(cards)} GPU cards, a container asks {ask.count}"
                return Fit(None, why=short, short=short)
            taken: list[tuple[int, int, int]] = []
            refused: dict[int, str] = {}
            for k in self._order(use):
                card, u = cards[k], use[k]
                mem = ask.memory_on(card.memory)
                why = _refusal(card, u, ask, mem, filt, gang)
                if why:
                    refused[k] = why
                    continue
                u.pods += 1
                u.memory += mem
                u.cores += ask.cores
                u.gangs.append((gang, mem, ask.cores))
                taken.append((k, mem, ask.cores))
                score += self._card_score(card, u)
                if len(taken) == ask.count:
                    break
            if len(taken) < ask.count:
                return _short_of(ask, len(taken), refused)
            chosen.append(taken)
        node_score = float(math.floor(score + 0.5))
        return Fit(tuple(tuple(c) for c in chosen), score=node_score)

    def annotations(self, node: str, cards: Any, now: float, order: int) -> dict[str, str]:
        row = self.nodes.index[node]
        registered = self.cards_of(row)
        ids = encode_vgpu_ids(
            [CardUse(registered[k].uuid, mem, cores) for k, mem, cores in c] for c in cards
        )
        stamp = str(int(now))
        return {
            VGPU_NODE: node,
            VGPU_TIME: stamp,
            VGPU_IDS: ids,
            VGPU_TO_ALLOCATE: ids,
            BIND_PHASE: "allocating",
            BIND_TIME: stamp,
        }


def _refusal(
    card: VgpuCard, u: _CardUse, ask: VgpuAsk, mem: int, filt: CardFilter, gang: str
) -> str:
    """Why ``card`` cannot take one card of ``ask`` ("" when it can), checked in
    Volcano's order."""
    if not filt.uuid_ok(card.uuid):
        return "UUID not wanted by the pod"
    if card.number <= u.pods:
        return f"shared by {u.pods} pods, its most"
    if gang and any(g == gang and (m > 0 or c > 0) for g, m, c in u.gangs):
        return "holds a pod of the same gang"
    if card.memory - u.memory < mem:
        return f"{max(card.memory - u.memory, 0)} of {card.memory} MiB free"
    if u.cores + ask.cores > 100:
        return f"{u.cores}% of cores in use"
    if ask.cores == 100 and u.pods > 0:
        return "in use (the pod asks all its cores)"
    if u.cores == 100 and ask.cores == 0:
        return "all cores in use"
    if not filt.type_ok(card.type):
        return f"type {card.type} not wanted"
    return ""


def _short_of(ask: VgpuAsk, got: int, refused: dict[int, str]) -> Fit:
    short = f"had no GPU card with {ask} free"
    if ask.count > 1:
        short = f"had {got or 'none'} of the {ask.count} GPU cards with {ask} free that a "
        short += "container asks"
    named = _listed([f"card {k}: {why}" for k, why in sorted(refused.items())])
    return Fit(None, why=f"{short} ({named})", short=short)


def _pods(k: int) -> str:
    return "used by 1 pod" if k == 1 else f"used by {k} pods"


def _listed(items: list[str]) -> str:
    if len(items) > CARDS_NAMED:
        return ", ".join(items[:CARDS_NAMED]) + f", and {len(items) - CARDS_NAMED} more"
    return ", ".join(items)


__all__ = ["BINPACK", "SPREAD", "Cards", "Fit", "ShareCards", "VgpuCards"]
