"""Time the scheduling core on a scenario and check that its decisions are valid.

For each repeat the scenario's objects go through :func:`build_snapshot` (timed apart)
and one :meth:`Scheduler.cycle` (the figure that counts: pods decided per second and
cycle latency). Peak memory is the process's peak resident set size, measured in a
fresh child process per scenario (``fork``) so that one scenario's peak does not hide
the next one's.

The validity check is independent of the scheduler's own accounting: it re-reads the
objects and adds up, per node, the requests of the pods already there and of the pods
bound this cycle (no node may go over its allocatable), and per PodGroup, the pods
running plus bound (a group that got any bind must reach its minMember); what pods
attach is checked likewise (:mod:`pumice.bench.checks`: GPU cards, NUMA nodes, DRA
devices).

Simulator scenarios (:class:`~pumice.bench.scenarios.SimScenario`) are timed by
:mod:`pumice.bench.sim_peak`; :func:`run_one` and :func:`run_isolated` take either kind.
"""

from __future__ import annotations

import gc
import multiprocessing
import resource
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pumice.api import parse
from pumice.api.node import NodeSpec
from pumice.bench.checks import card_problems, device_problems, numa_problems
from pumice.bench.scenarios import AnyScenario, Scenario, SimScenario
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.framework.decisions import Decisions
from pumice.scheduler import Scheduler

if TYPE_CHECKING:
    from pumice.bench.sim_peak import PeakResult

#: Tolerance for summed float requests (canonical units: millicores, bytes).
EPSILON = 1e-6


@dataclass(slots=True)
class Result:
    """The figures of one scenario."""

    name: str
    nodes: int
    pending: int
    repeats: int
    build_s: float  # median time to build the snapshot from the objects
    cycle_p50_s: float
    cycle_p99_s: float
    cycle_cpu_s: float  # median CPU time of a cycle (less sensitive to a busy machine)
    pods_per_s: float  # pending pods decided per second of cycle (p50)
    bound: int
    pipelined: int
    waiting: int
    peak_rss_mib: float
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


#: The kinds the checks of what pods attach read (:mod:`pumice.bench.checks`).
ATTACHED_KINDS = ("Numatopology", "ResourceSlice", "ResourceClaim")


def check_decisions(objects: Iterable[Mapping[str, Any]], decisions: Decisions) -> list[str]:
    """Problems with ``decisions`` on the cluster ``objects``: nodes over capacity after
    the binds, PodGroups bound below their minMember, a PV chosen for two claims or for
    a pod on a node it does not reach (by its ``kubernetes.io/hostname``), and what
    pods attach (shared GPU cards over their memory, NUMA nodes short of a pod's CPUs,
    devices given twice: :mod:`pumice.bench.checks`). Empty when valid."""
    alloc: dict[str, dict[str, float]] = {}
    specs: dict[str, NodeSpec] = {}
    pods: dict[str, parse.PodRecord] = {}
    min_member: dict[str, int] = {}
    hostnames: dict[str, str] = {}
    pv_hosts: dict[str, set[str] | None] = {}
    attached: dict[str, list[Mapping[str, Any]]] = {k: [] for k in ATTACHED_KINDS}
    for obj in objects:
        kind = obj.get("kind")
        if kind == "PersistentVolume":
            pv_hosts[obj["metadata"]["name"]] = _hostnames(obj)
        elif kind in attached:
            attached[kind].append(obj)
        elif kind == "Node":
            spec = parse.parse_node(obj)
            specs[spec.name] = spec
            alloc[spec.name] = spec.allocatable
            labels = (obj.get("metadata") or {}).get("labels") or {}
            hostnames[spec.name] = labels.get("kubernetes.io/hostname", spec.name)
        elif kind == "Pod":
            p = parse.parse_pod(obj)
            pods[f"{p.namespace}/{p.name}"] = p
        elif kind == "PodGroup":
            g = parse.parse_podgroup(obj)
            min_member[f"{g.namespace}/{g.name}"] = g.min_member
    problems: list[str] = []
    used: dict[str, dict[str, float]] = {n: {} for n in alloc}
    ready: dict[str, int] = {}
    bound: dict[str, int] = {}

    def take(node_name: str, req: Mapping[str, float]) -> None:
        u = used.setdefault(node_name, {})
        for r, v in req.items():
            u[r] = u.get(r, 0.0) + v

    for p in pods.values():
        if p.node_name and p.phase in ("Running", "Pending"):
            take(p.node_name, p.resreq)
            if p.group:
                g = f"{p.namespace}/{p.group}"
                ready[g] = ready.get(g, 0) + 1
    for key, node_name in decisions.binds.items():
        p = pods.get(key)
        if p is None:
            problems.append(f"bound pod {key} does not exist")
            continue
        if p.node_name:
            problems.append(f"pod {key} was already on node {p.node_name}")
        if node_name not in alloc:
            problems.append(f"pod {key} bound to unknown node {node_name}")
            continue
        take(node_name, p.resreq)
        if p.group:
            g = f"{p.namespace}/{p.group}"
            bound[g] = bound.get(g, 0) + 1
    for node_name, u in sorted(used.items()):
        cap = alloc.get(node_name)
        if cap is None:
            continue
        for r, v in sorted(u.items()):
            if v > cap.get(r, 0.0) + EPSILON:
                problems.append(f"node {node_name} over capacity in {r}: {v:g} > {cap.get(r, 0):g}")
    for g, n in sorted(bound.items()):
        need = min_member.get(g, 1)
        have = n + ready.get(g, 0)
        if have < need:
            problems.append(f"podgroup {g} bound {n} pods, {have} placed < minMember {need}")
    given: dict[str, str] = {}
    for pod_key, pre in sorted(decisions.prebind.items()):
        node_name = decisions.binds.get(pod_key)
        for claim, pv in sorted(pre.volumes.items()):
            other = given.setdefault(pv, claim)
            if other != claim:
                problems.append(f"PV {pv} given to claims {other} and {claim}")
            hosts = pv_hosts.get(pv)
            host = hostnames.get(node_name or "")
            if node_name is not None and hosts is not None and host not in hosts:
                problems.append(f"pod {pod_key} on {node_name}, its claim's PV {pv} elsewhere")
    problems += card_problems(specs, pods, decisions)
    problems += numa_problems(attached["Numatopology"], pods, decisions)
    problems += device_problems(
        attached["ResourceSlice"], attached["ResourceClaim"], pods, decisions
    )
    return problems


def _hostnames(pv: Mapping[str, Any]) -> set[str] | None:
    """The hostnames a PV's node affinity names (None: it names none, or more than
    hostnames, and is not checked here)."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    out: set[str] = set()
    for term in required.get("nodeSelectorTerms") or ():
        exprs = term.get("matchExpressions") or ()
        if term.get("matchFields") or len(exprs) != 1:
            return None
        e = exprs[0]
        if e.get("key") != "kubernetes.io/hostname" or e.get("operator") != "In":
            return None
        out.update(e.get("values") or ())
    return out or None


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with few repeats p99 is the slowest run)."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def run_scenario(
    scenario: Scenario, scheduler: Scheduler, repeats: int = 3, check: bool = True
) -> Result:
    """Time ``repeats`` cycles of ``scenario`` (in this process)."""
    objects = scenario.build()
    builds: list[float] = []
    cycles: list[float] = []
    cpu: list[float] = []
    decisions: Decisions | None = None
    for _ in range(max(1, repeats)):
        gc.collect()
        t0 = time.perf_counter()
        snapshot = build_snapshot(SourcedObject(o) for o in objects)
        t1, c1 = time.perf_counter(), time.process_time()
        decisions = scheduler.cycle(snapshot)
        t2, c2 = time.perf_counter(), time.process_time()
        builds.append(t1 - t0)
        cycles.append(t2 - t1)
        cpu.append(c2 - c1)
        del snapshot
    assert decisions is not None
    p50 = percentile(cycles, 50)
    problems = check_decisions(objects, decisions) if check else []
    bound, pipelined = len(decisions.binds), len(decisions.pipelined)
    return Result(
        name=scenario.name,
        nodes=scenario.nodes,
        pending=scenario.pending,
        repeats=len(cycles),
        build_s=percentile(builds, 50),
        cycle_p50_s=p50,
        cycle_p99_s=percentile(cycles, 99),
        cycle_cpu_s=percentile(cpu, 50),
        pods_per_s=scenario.pending / p50 if p50 > 0 else float("inf"),
        bound=bound,
        pipelined=pipelined,
        waiting=scenario.pending - bound - pipelined,
        peak_rss_mib=peak_rss_mib(),
        problems=problems,
    )


def peak_rss_mib() -> float:
    """The peak resident set size of this process so far, in MiB."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


def run_one(
    scenario: AnyScenario, scheduler: Scheduler, repeats: int = 3, check: bool = True
) -> Result | PeakResult:
    """Run a scenario of either kind in this process: a snapshot scenario for
    ``repeats`` cycles (:func:`run_scenario`), a simulator scenario once (its window
    holds many cycles; :func:`pumice.bench.sim_peak.run_peak`)."""
    if isinstance(scenario, SimScenario):
        from pumice.bench.sim_peak import run_peak

        return run_peak(scenario, scheduler, check)
    from pumice.bench.quiet import QuietScenario, run_quiet

    if isinstance(scenario, QuietScenario):
        return run_quiet(scenario, scheduler, check)  # type: ignore[return-value]
    from pumice.bench.visibility import VisibilityScenario, run_visibility

    if isinstance(scenario, VisibilityScenario):
        return run_visibility(scenario, scheduler, check)  # type: ignore[return-value]
    return run_scenario(scenario, scheduler, repeats, check)


def _child(conn, scenario: AnyScenario, scheduler: Scheduler, repeats: int, check: bool) -> None:
    try:
        result = run_one(scenario, scheduler, repeats, check)
        conn.send(("ok", type(result).__name__, asdict(result)))
    except BaseException as exc:  # report any failure to the parent
        conn.send(("error", "", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_isolated(
    scenario: AnyScenario, scheduler: Scheduler, repeats: int = 3, check: bool = True
) -> Result | PeakResult:
    """:func:`run_one` in a forked child, so its peak memory is its own."""
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        return run_one(scenario, scheduler, repeats, check)
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, scenario, scheduler, repeats, check))
    proc.start()
    child.close()
    try:
        status, kind, payload = parent.recv()
    except EOFError:  # the child died without a word (killed, out of memory)
        proc.join()
        raise RuntimeError(
            f"scenario {scenario.name} failed: its process ended with code {proc.exitcode}"
        ) from None
    proc.join()
    if status != "ok":
        raise RuntimeError(f"scenario {scenario.name} failed: {payload}")
    if kind == "PeakResult":
        from pumice.bench.sim_peak import PeakResult

        return PeakResult(**payload)
    if kind == "QuietResult":
        from pumice.bench.quiet import QuietResult

        return QuietResult(**payload)  # type: ignore[return-value]
    if kind == "VisibilityResult":
        from pumice.bench.visibility import VisibilityResult

        return VisibilityResult(**payload)  # type: ignore[return-value]
    return Result(**payload)
