"""The kubelet's CPU arithmetic, as the numa-aware plugin predicts it: which NUMA nodes
a container's whole CPUs may come from under a topology manager policy, and which CPUs
the static CPU manager would then take.

Sets of CPUs and of NUMA nodes are Python ints used as bit masks (bit ``i`` is CPU or
NUMA node ``i``): unions, differences and counts are single operations.

- **Hints** (the CPU manager's ``GetTopologyHints``): every set of NUMA nodes whose free
  CPUs (less the kubelet's reserved ones) number at least the request is a hint; the
  hints of the fewest NUMA nodes that could hold the request *on their capacity* are
  preferred. A container asking no whole CPUs has no preference.
- **Policies** (the topology manager's merge): the best hint is a preferred one over a
  non-preferred one, then the one of fewer NUMA nodes, then the one of lower NUMA ids.
  ``single-numa-node`` keeps only preferred hints of one NUMA node and admits a
  preferred best hint; ``restricted`` admits a preferred best hint; ``best-effort``
  admits any; ``none`` (and an unknown name) admits without a hint.
- **Assignment** (``takeByTopology``): from the best hint's NUMA nodes first, then
  anywhere: whole free sockets while the request is a socket's worth, then whole free
  cores, then single CPUs, preferring the socket already used, then the fullest socket
  and core. This is the kubelet's intent; the copy inside Volcano sorts with
  comparators that are not orders, so its exact choice among equal CPUs is not
  reproducible. The kubelet makes the real assignment; the scheduler's is a forecast
  that keeps the CPUs it expects taken off later pods.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pumice.api.numa import NumatopologyRecord

SINGLE_NUMA_NODE = "single-numa-node"
RESTRICTED = "restricted"
BEST_EFFORT = "best-effort"
NONE = "none"
#: The topology manager policies that align CPUs with NUMA nodes.
ALIGNING = (SINGLE_NUMA_NODE, RESTRICTED, BEST_EFFORT)

#: A hint: (NUMA node mask, or None for "any NUMA node"; preferred).
Hint = tuple[int | None, bool]


def bits(mask: int) -> list[int]:
    """The ids set in ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def mask_of(ids: Iterable[int]) -> int:
    m = 0
    for i in ids:
        m |= 1 << i
    return m


def merge_hints(
    policy: str, numa_ids: Sequence[int], providers: Sequence[list[Hint] | None]
) -> tuple[int | None, bool, bool]:
    """The topology manager's merge of one container's hints, one list per resource
    (None: the resource has no preference; []: no NUMA node can give it): (best NUMA
    mask, preferred, admitted).

    Every combination of one hint per resource is merged (the NUMA nodes they have in
    common; preferred when all are), and the best merged hint kept: preferred over not,
    then fewer NUMA nodes, then lower NUMA ids. ``single-numa-node`` first keeps only
    preferred hints of one NUMA node (or of no preference); it and ``restricted`` admit
    a preferred best hint only, ``best-effort`` any; ``none`` (or an unknown name)
    admits with no hint (None)."""
    if policy not in ALIGNING:
        return None, False, True
    default = mask_of(numa_ids)
    lists: list[list[Hint]] = [
        [(None, True)] if h is None else (h or [(None, False)]) for h in providers
    ]
    if policy == SINGLE_NUMA_NODE:
        lists = [[(m, p) for m, p in hs if p and (m is None or m.bit_count() == 1)] for hs in lists]
    best, preferred = default, False
    for combo in itertools.product(*lists):
        merged, pref = default, True
        for m, p in combo:
            merged &= default if m is None else m
            pref = pref and p
        if not merged:
            continue
        if pref and not preferred:
            best, preferred = merged, pref
        elif pref == preferred and (merged.bit_count(), merged) < (best.bit_count(), best):
            best = merged
    admit = preferred if policy in (SINGLE_NUMA_NODE, RESTRICTED) else True
    return best, preferred, admit


@dataclass(slots=True)
class Fit:
    """One container's outcome on one node: admitted or not, the NUMA nodes of the best
    hint (0 when none), the CPUs taken (0 when none), and, when refused, why."""

    admit: bool
    numa: int
    cpus: int
    why: str = ""


class CpuTopology:
    """One node's CPUs, as its Numatopology's ``cpuDetail`` and ``resReserved`` say."""

    __slots__ = (
        "all", "core_mask", "cpu_core", "cpu_socket", "cpus_per_core", "cpus_per_socket",
        "numa_ids", "numa_mask", "reserved", "socket_mask",
    )  # fmt: skip

    def __init__(self, rec: NumatopologyRecord) -> None:
        self.numa_mask: dict[int, int] = {}
        self.socket_mask: dict[int, int] = {}
        #: (socket, core) -> its CPUs (the exporter's core ids repeat across sockets).
        self.core_mask: dict[tuple[int, int], int] = {}
        self.cpu_socket: dict[int, int] = {}
        self.cpu_core: dict[int, tuple[int, int]] = {}
        for cpu, info in rec.cpus:
            bit = 1 << cpu
            self.numa_mask[info.numa] = self.numa_mask.get(info.numa, 0) | bit
            self.socket_mask[info.socket] = self.socket_mask.get(info.socket, 0) | bit
            core = (info.socket, info.core)
            self.core_mask[core] = self.core_mask.get(core, 0) | bit
            self.cpu_socket[cpu] = info.socket
            self.cpu_core[cpu] = core
        self.numa_ids = sorted(self.numa_mask)
        self.all = mask_of(cpu for cpu, _ in rec.cpus)
        n = len(rec.cpus)
        self.cpus_per_socket = n // len(self.socket_mask) if self.socket_mask else 0
        self.cpus_per_core = n // len(self.core_mask) if self.core_mask else 0
        # The kubelet's reserved CPUs are taken from the whole topology first.
        self.reserved = self.take(self.all, rec.reserved_cpus) or 0

    # -- hints ---------------------------------------------------------------------------

    def cpus_in(self, numa: int) -> int:
        """The CPUs of the NUMA nodes in mask ``numa``."""
        m = 0
        for i in bits(numa):
            m |= self.numa_mask.get(i, 0)
        return m

    def hints(self, free: int, request: int) -> tuple[list[Hint], int]:
        """The hints for ``request`` whole CPUs out of ``free`` (less the reserved
        CPUs), and the fewest NUMA nodes whose capacity could hold the request."""
        avail = free & ~self.reserved
        ids = self.numa_ids
        smallest = len(ids)
        found: list[tuple[int, int]] = []
        for size in range(1, len(ids) + 1):
            for combo in itertools.combinations(ids, size):
                cpus = 0
                for i in combo:
                    cpus |= self.numa_mask[i]
                if size < smallest and cpus.bit_count() >= request:
                    smallest = size
                if (avail & cpus).bit_count() >= request:
                    found.append((mask_of(combo), size))
        return [(m, size == smallest) for m, size in found], smallest

    def best(self, policy: str, hints: list[Hint] | None) -> tuple[int | None, bool, bool]:
        """The topology manager's answer for one container with the CPU manager's
        ``hints`` (None: no preference): see :func:`merge_hints`."""
        return merge_hints(policy, self.numa_ids, [hints])

    # -- assignment ----------------------------------------------------------------------

    def assign(self, free: int, request: int, numa: int | None) -> int:
        """The CPUs the static CPU manager would give ``request`` whole CPUs out of
        ``free`` (less the reserved ones) with best hint ``numa``: aligned ones first,
        then any; 0 when there are too few."""
        if request <= 0:
            return 0
        avail = free & ~self.reserved
        result = 0
        if numa is not None:
            aligned = avail & self.cpus_in(numa)
            got = self.take(aligned, min(request, aligned.bit_count()))
            if got is None:
                return 0
            result = got
        rest = self.take(avail & ~result, request - result.bit_count())
        return 0 if rest is None else result | rest

    def take(self, avail: int, n: int) -> int | None:
        """``n`` CPUs of ``avail``, topology-aware best fit (see the module docstring);
        None when ``avail`` holds fewer."""
        if n <= 0:
            return 0
        if avail.bit_count() < n:
            return None
        result = 0
        per_socket, per_core = self.cpus_per_socket, self.cpus_per_core
        if per_socket and n >= per_socket:
            for s in sorted(self.socket_mask):
                m = self.socket_mask[s]
                if m & avail == m:
                    result |= m
                    avail &= ~m
                    n -= m.bit_count()
                    if n == 0:
                        return result
                    if n < per_socket:
                        break
        if per_core and n >= per_core:
            for core in self._free_cores(avail):
                m = self.core_mask[core]
                result |= m
                avail &= ~m
                n -= m.bit_count()
                if n == 0:
                    return result
                if n < per_core:
                    break
        for cpu in self._free_cpus(avail, result)[:n]:
            result |= 1 << cpu
        return result

    def _free_cores(self, avail: int) -> list[tuple[int, int]]:
        """Whole free cores: sockets with the fewest whole free cores first, then by
        socket id and core id."""
        by_socket: dict[int, list[tuple[int, int]]] = {}
        for core, m in self.core_mask.items():
            if m & avail == m:
                by_socket.setdefault(core[0], []).append(core)
        order = sorted(by_socket, key=lambda s: (len(by_socket[s]), s))
        return [c for s in order for c in sorted(by_socket[s])]

    def _free_cpus(self, avail: int, result: int) -> list[int]:
        """Free CPUs, those on the sockets already used first, then on the fullest
        sockets and cores, then by socket, core and id."""

        def key(cpu: int) -> tuple[int, int, int, int, tuple[int, int], int]:
            s, core = self.cpu_socket[cpu], self.cpu_core[cpu]
            sock = self.socket_mask[s]
            return (
                -(sock & result).bit_count(),
                (sock & avail).bit_count(),
                (self.core_mask[core] & avail).bit_count(),
                s,
                core,
                cpu,
            )

        return sorted(bits(avail), key=key)

    # -- one container -------------------------------------------------------------------

    def fit(self, policy: str, free: int, request: int) -> Fit:
        """One container asking ``request`` whole CPUs (0: none) under ``policy``."""
        if request <= 0:
            best, _pref, admit = self.best(policy, None)
            return Fit(admit, best or 0, 0)
        hints, smallest = self.hints(free, request)
        best, _pref, admit = self.best(policy, hints)
        if not admit:
            return Fit(False, 0, 0, self.short(policy, free, request, smallest))
        return Fit(True, best or 0, self.assign(free, request, best))

    def short(self, policy: str, free: int, request: int, smallest: int) -> str:
        """Why ``request`` CPUs find no aligned place: the free CPUs per NUMA node."""
        avail = free & ~self.reserved
        free_of = ", ".join(
            f"numa{i}: {(avail & self.numa_mask[i]).bit_count()}" for i in self.numa_ids
        )
        total = self.all.bit_count()
        if request > total:
            return f"{policy} policy, the node has {total} CPUs, fewer than {request}"
        if policy == SINGLE_NUMA_NODE and smallest > 1:
            sizes = ", ".join(f"numa{i}: {self.numa_mask[i].bit_count()}" for i in self.numa_ids)
            return f"{policy} policy, no NUMA node has {request} CPUs at all ({sizes})"
        if smallest == 1:
            return f"{policy} policy, no NUMA node has {request} free CPUs ({free_of})"
        return (
            f"{policy} policy, no {smallest} NUMA nodes together have {request} free CPUs "
            f"({free_of})"
        )

    def numa_count(self, cpus: int) -> int:
        """How many NUMA nodes the CPUs of ``cpus`` span."""
        return sum(1 for i in self.numa_ids if cpus & self.numa_mask[i])


__all__ = [
    "ALIGNING",
    "BEST_EFFORT",
    "NONE",
    "RESTRICTED",
    "SINGLE_NUMA_NODE",
    "CpuTopology",
    "Fit",
    "bits",
    "mask_of",
    "merge_hints",
]
