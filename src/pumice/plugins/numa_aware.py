"""numa-aware: keep a Guaranteed pod off nodes where the kubelet could not give its
containers' whole CPUs from the NUMA nodes its topology manager policy demands, and
prefer nodes where they span fewer NUMA nodes.

A node's NUMA topology comes from its Numatopology object (:mod:`pumice.api.numa`,
published by Volcano's resource exporter): the kubelet's CPU manager and topology
manager policies, the CPUs still free, and where each CPU sits. The CPU arithmetic is
the kubelet's (:mod:`pumice.plugins.numa_cpus`). As in Volcano:

- Only pods of the Guaranteed QoS class are looked at; each container asks for its cpu
  request when that is a whole number of CPUs (else for none).
- A pod with a ``volcano.sh/numa-topology-policy`` annotation (other than ``none``) is
  refused every node without a Numatopology, without the ``static`` CPU manager
  policy, with another topology manager policy, or with no free CPU; a pod without it
  is checked only on nodes with the ``static`` CPU manager policy and a topology manager
  policy other than ``none``, and goes anywhere else unchecked.
- On a checked node, container after container gets the topology manager's answer for
  the CPUs still free (``single-numa-node``: one NUMA node must have them all;
  ``restricted``: the fewest NUMA nodes that could hold them must; ``best-effort``:
  never refused) and takes its CPUs there, for the next container.
- Score (``node_order``, only for pods with the annotation): ``weight`` x (100 - 100 x
  NUMA nodes spanned / the most any candidate spans): fewer NUMA nodes win.
- The session's tentative state: a task allocated or pipelined takes its CPUs on its
  node for later tasks of the cycle; deallocated, it gives them back.
- What a cycle binds stays taken in later cycles (kept in ``Snapshot.carried``) until
  the node's Numatopology lists the pod among its ``podAllocations`` (the kubelet has
  given it CPUs, and the exporter reported them as no longer free): Volcano keeps these
  in its scheduler cache (``UnassignedNumaPods``) and writes nothing to the pod or the
  Numatopology. As in Volcano, a node's forecasts are all dropped only once every pod
  among them is listed. pumice also drops the forecast of a pod that is no longer on
  that node (deleted, or its bind failed), and keeps none for a pipelined pod.

Refusals are counted per node like every predicate's, with the first refused node as
the example: "2 could not align the pod's CPUs with NUMA nodes (node n1:
single-numa-node policy, no NUMA node has 6 free CPUs (numa0: 4, numa1: 2))". Evicting
pods never clears them (a pod's CPUs come back only when the exporter says so).

Per-shape shortcuts. Whether a node suits such a pod depends on the CPUs left on each
NUMA node, not only on its shape (placement and requests), so it must not share
allocate's per-shape fit and score caches, or any other answer kept per shape. The
pod's model carries what this plugin reads (``TaskInfo.numa``, set when the pod is
read: Guaranteed, with whole CPUs or the annotation), and :meth:`Session.attaching`
counts such a task as attaching, like one with volumes: always when it has the
annotation, and otherwise only when some node has a Numatopology
(``Session.numa_known``). A cluster without Numatopology objects thus keeps every
shortcut for every pod, and a plugin need not change the model. The predicate is
registered ``by_placement``: for every other task its answer (none) depends on nothing.
The nodes refused to an ask are kept per ask and brought up to date from the nodes
whose CPUs changed since it was last asked, so a pod costs the nodes that changed and
a few vector operations, not a verdict per node.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from pumice.api.numa import NUMATOPOLOGY, NumatopologyRecord
from pumice.api.task import NumaAsk, TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.errors import InputError
from pumice.framework.scoring import SeparableScore
from pumice.framework.session import EventHandler, Session
from pumice.framework.verdicts import timeless
from pumice.plugins.numa_cpus import NONE, CpuTopology, mask_of

#: The key of this plugin's forecasts in ``Snapshot.carried``: node name ->
#: (pod uid, namespace, name) -> the CPUs (mask) the pod is expected to hold.
CARRY_KEY = "numa-aware.unassigned"
#: Volcano's score ceiling (``DefaultMaxNodeScore``).
MAX_SCORE = 100
STATIC = "static"

Reasons = list[tuple[str, np.ndarray]]
_PodRef = tuple[str, str, str]


@dataclass(slots=True)
class _Node:
    """One node's NUMA state in this cycle."""

    name: str
    rec: NumatopologyRecord
    topo: CpuTopology
    #: The free CPUs (mask), None when the Numatopology lists no cpu resource.
    free: int | None
    #: Bumped at every change of ``free`` (keys the verdicts kept per task ask).
    version: int = 0


@dataclass(slots=True, frozen=True)
class _Verdict:
    """A task ask on a node: refused (``kind`` names the refusal, ``text`` the detail)
    or admitted with the CPUs it would take (``cpus``, a mask)."""

    kind: str = ""
    text: str = ""
    cpus: int = 0


_PASS = _Verdict()
#: The refusals of a pod asking for a topology policy by annotation, worded for a count
#: of nodes ("2 had no Numatopology ...").
_NO_TOPOLOGY = "had no Numatopology for the pod's {policy} topology policy"
_NOT_STATIC = "had a CPU manager policy other than static (the pod asks for {policy})"
_OTHER_POLICY = "had another topology manager policy than the pod's {policy} (node {example})"
_NO_CPUS = "had no free CPUs in their Numatopology"
_ALIGN = "could not align the pod's CPUs with NUMA nodes (node {example})"
#: A verdict's kinds, in the order their refusals are told ("": admitted).
_KINDS = ("", "static", "policy", "cpus", "align")


class NumaAwarePlugin:
    name = "numa-aware"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ("weight",)

    def __init__(self, arguments: Arguments) -> None:
        self.weight = arguments.get_int("weight", 1)
        if self.weight < 0:
            raise InputError("must not be negative", field="weight")
        self._ssn: Session | None = None
        #: The nodes with a Numatopology, by row.
        self._nodes: dict[int, _Node] = {}
        #: Tasks placed this cycle with CPUs taken: uid -> (task, row, CPUs).
        self._assigned: dict[str, tuple[TaskInfo, int, int]] = {}
        #: Verdicts by (row, ask): (node version, verdict).
        self._verdicts: dict[tuple[int, Hashable], tuple[int, _Verdict]] = {}
        #: The rows whose free CPUs changed this cycle, in order; per ask, how far into
        #: it its refusals are up to date, and the refusals (see :meth:`_refusals`).
        self._log: list[int] = []
        self._views: dict[NumaAsk, tuple[int, np.ndarray, dict[int, str]]] = {}
        self._has: np.ndarray | None = None
        #: Topologies kept while their Numatopology stays the same, by node name.
        self._topologies: dict[str, tuple[NumatopologyRecord, CpuTopology]] = {}

    # -- the session ---------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn

        def allocated(task: TaskInfo) -> None:
            if task.numa is None or task.node is None:
                return
            if task.status not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
                return  # (an eviction undone: the pod kept its CPUs all along)
            row = ssn.nodes.index.get(task.node)
            if row is None:
                return
            node = self._nodes.get(row)
            if node is None or node.free is None:
                return
            verdict = self._verdict(row, node, task)
            if verdict.kind or not verdict.cpus:
                return
            node.free &= ~verdict.cpus
            node.version += 1
            self._log.append(row)
            self._assigned[task.uid] = (task, row, verdict.cpus)

        def deallocated(task: TaskInfo) -> None:
            got = self._assigned.pop(task.uid, None)
            if got is None:
                return
            node = self._nodes[got[1]]
            assert node.free is not None
            node.free |= got[2]
            node.version += 1
            self._log.append(got[1])

        ssn.add_event_handler(EventHandler(allocate=allocated, deallocate=deallocated))
        ssn.on("predicate", self.name, self._predicate, by_placement=True)
        ssn.on("node_order", self.name, NumaScore(self))

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's nodes with a Numatopology, their free CPUs less what earlier
        cycles' binds are expected to hold."""
        self._ssn = ssn
        self._assigned = {}
        self._verdicts = {}
        self._log = []
        self._views = {}
        self._has = None
        index = ssn.nodes.index
        nodes: dict[int, _Node] = {}
        kept: dict[str, tuple[NumatopologyRecord, CpuTopology]] = {}
        for name, rec in ssn.snapshot.records(NUMATOPOLOGY).items():
            row = index.get(name)
            if row is None:
                continue
            got = self._topologies.get(name)
            topo = got[1] if got is not None and got[0] == rec else CpuTopology(rec)
            kept[name] = (rec, topo)
            cpu = rec.resource("cpu")
            free = mask_of(cpu.allocatable) if cpu is not None else None
            nodes[row] = _Node(name, rec, topo, free)
        self._topologies = kept
        self._nodes = nodes
        self._forecasts(ssn)

    def _forecasts(self, ssn: Session) -> None:
        """Take the CPUs earlier binds are expected to hold off the free ones (see the
        module docstring), forgetting those no longer expected."""
        carried: dict[str, dict[_PodRef, int]] | None = ssn.snapshot.carried.get(CARRY_KEY)
        if not carried:
            return
        index, tasks = ssn.nodes.index, ssn.nodes.tasks
        for name in list(carried):
            row = index.get(name)
            pods = carried[name]
            if row is not None:
                here = tasks[row]
                for ref in [r for r in pods if r[0] not in here]:
                    del pods[ref]
            else:
                pods.clear()
            node = self._nodes.get(row) if row is not None else None
            if node is not None and pods:
                if all(node.rec.assigned(*ref) for ref in pods):
                    pods.clear()
                elif node.free is not None:
                    for cpus in pods.values():
                        node.free &= ~cpus
            if not pods:
                del carried[name]

    def on_session_close(self, ssn: Session) -> None:
        """The CPUs of the pods bound this cycle stay taken in later cycles until their
        node's Numatopology lists them."""
        binds = ssn.decisions.binds
        carried = None
        for task, row, cpus in self._assigned.values():
            node = self._nodes[row]
            if binds.get(task.key) != node.name:
                continue
            if carried is None:
                carried = ssn.snapshot.carried.setdefault(CARRY_KEY, {})
            carried.setdefault(node.name, {})[(task.uid, task.namespace, task.name)] = cpus

    # -- the predicate -------------------------------------------------------------------

    def _predicate(self, task: TaskInfo) -> tuple[np.ndarray | None, Reasons]:
        numa = task.numa
        if numa is None or (not self._nodes and not numa.policy):
            return None, []
        ssn = self._ssn
        assert ssn is not None
        n = len(ssn.nodes)
        groups: list[tuple[str, np.ndarray]] = []
        if numa.policy:
            has = self._with_topology(n)
            if not has.all():
                groups.append((_NO_TOPOLOGY.format(policy=numa.policy), ~has))
        kinds, texts = self._refusals(numa)
        names = ssn.nodes.names
        for code, kind in enumerate(_KINDS[1:], start=1):
            mask = kinds == code
            if not mask.any():
                continue
            row = int(np.argmax(mask))  # (the first refused node is the example)
            text = texts[row]
            if kind == "align":
                text = _ALIGN.format(example=f"{names[row]}: {text}")
            elif kind == "policy":
                text = _OTHER_POLICY.format(policy=numa.policy, example=text)
            groups.append((text, mask))
        if not groups:
            return None, []
        blocked = groups[0][1].copy()
        for _, m in groups[1:]:
            blocked |= m
        return blocked, groups

    def _with_topology(self, n: int) -> np.ndarray:
        """The rows with a Numatopology (the same all cycle)."""
        if self._has is None or self._has.size != n:
            has = np.zeros(n, dtype=bool)
            has[list(self._nodes)] = True
            self._has = has
        return self._has

    def _refusals(self, ask: NumaAsk) -> tuple[np.ndarray, dict[int, str]]:
        """Per row, the code of the refusal of ``ask`` (its place in ``_KINDS``: 0 where
        the node admits it or has no Numatopology) and the refusal's words by row. Kept
        per ask and brought up to date from the nodes whose CPUs changed since last
        asked, so that a pod costs the nodes that changed, not all nodes."""
        got = self._views.get(ask)
        if got is None:
            assert self._ssn is not None
            kinds = np.zeros(len(self._ssn.nodes), dtype=np.int8)
            texts: dict[int, str] = {}
            rows: Iterable[int] = self._nodes
        else:
            seen, kinds, texts = got
            rows = set(self._log[seen:])
        for row in rows:
            verdict = self._judged(row, ask)
            kinds[row] = _KINDS.index(verdict.kind)
            if verdict.kind:
                texts[row] = verdict.text
            else:
                texts.pop(row, None)
        self._views[ask] = (len(self._log), kinds, texts)
        return kinds, texts

    def _verdict(self, row: int, node: _Node, task: TaskInfo) -> _Verdict:
        """``task``'s ask on ``node`` as things stand, kept until the node's CPUs
        change."""
        assert task.numa is not None
        return self._judged(row, task.numa, node)

    def _judged(self, row: int, numa: NumaAsk, node: _Node | None = None) -> _Verdict:
        node = self._nodes[row] if node is None else node
        key = (row, numa)
        got = self._verdicts.get(key)
        if got is not None and got[0] == node.version:
            return got[1]
        verdict = _judge(node, numa.cpus, numa.policy)
        self._verdicts[key] = (node.version, verdict)
        return verdict

    # -- the score -----------------------------------------------------------------------

    def spans(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """How many NUMA nodes ``task``'s CPUs would span on each of ``rows``."""
        out = np.zeros(rows.size)
        for k, i in enumerate(rows.tolist()):
            node = self._nodes.get(i)
            if node is not None:
                out[k] = node.topo.numa_count(self._verdict(i, node, task).cpus)
        return out


def _judge(node: _Node, cpus: tuple[tuple[str, int], ...], policy: str) -> _Verdict:
    """A pod's containers (``cpus``: name, whole CPUs) on ``node``; ``policy``: the
    pod's annotation ("" when none)."""
    rec, topo = node.rec, node.topo
    if policy:
        if rec.cpu_policy != STATIC:
            return _Verdict("static", _NOT_STATIC.format(policy=policy))
        if rec.topology_policy != policy:
            return _Verdict("policy", f"{node.name}: {rec.topology_policy or NONE}")
        if not node.free:
            return _Verdict("cpus", _NO_CPUS)
    elif rec.cpu_policy != STATIC or rec.topology_policy in ("", NONE):
        return _PASS
    free = node.free
    if free is None:
        return _PASS  # (no cpu in the Numatopology: no hint, nothing to align)
    taken = 0
    several = sum(1 for _, k in cpus if k) > 1
    for name, k in cpus:
        fit = topo.fit(rec.topology_policy, free, k)
        if not fit.admit:
            where = f"container {name}: " if several else ""
            return _Verdict("align", where + fit.why)
        free &= ~fit.cpus
        taken |= fit.cpus
    return _Verdict(cpus=taken)


class NumaScore(SeparableScore):
    """The plugin's ``node_order`` function, in the separable form allocate's fast path
    reads (``context``, ``rows``, ``one``): the only thing taken from the candidates is
    the most NUMA nodes any of them would have the pod span. Pods without the topology
    policy annotation score 0 everywhere (Volcano scores only those)."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: NumaAwarePlugin) -> None:
        self.plugin = plugin

    def context(self, task: TaskInfo, cand: np.ndarray) -> float | None:
        if task.numa is None or not task.numa.policy or not self.plugin.weight:
            return None
        rows = cand if cand.dtype != bool else np.flatnonzero(cand)
        spans = self.plugin.spans(task, rows)
        return float(spans.max()) if spans.size else 0.0

    def rows(self, task: TaskInfo, rows: np.ndarray, ctx: float | None) -> np.ndarray:
        if ctx is None:
            return np.zeros(rows.size)
        weight = self.plugin.weight
        if ctx == 0:
            return np.full(rows.size, float(MAX_SCORE * weight))
        spans = self.plugin.spans(task, rows)
        return (MAX_SCORE - (MAX_SCORE * spans) // ctx) * weight

    def one(self, task: TaskInfo, i: int, ctx: float | None) -> float:
        return float(self.rows(task, np.array([i]), ctx)[0])


__all__ = ["CARRY_KEY", "NumaAwarePlugin", "NumaScore"]
