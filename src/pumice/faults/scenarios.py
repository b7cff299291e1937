"""The fault scenarios: ``pumice run`` processes against a real API server, a fault
injected while gangs are being bound, then the cluster checked (:mod:`pumice.faults.checks`).

Every run starts from an emptied cluster (one control plane serves every run): four fake
nodes of 4 CPUs, two Queues, and gangs made in two waves, the second while or after the
fault strikes. Four gangs of 3 pods (1 CPU each) fit; a fifth (minMember 5, 3 CPUs a
pod) never does, so a scheduler that binds part of it is caught. Each scheduler is a
``python -m pumice.cli run`` process reaching the API server through a
:class:`~pumice.faults.proxy.FaultProxy` of its own, which records every bind.

Scenarios (``SCENARIOS``, by name):

- ``apiserver-restart``: the API server is killed and started again between the binds
  of the first wave (the proxy's second bind sets it off).
- ``watch-drops``: every open watch is cut every 0.3 s until the run settles.
- ``bind-409``, ``bind-500``: every 3rd bind answered 409 (or 500) without reaching the
  server; for 500 also every 4th forwarded, landed, and answered 500 all the same.
- ``bind-timeout``: every 4th bind held unanswered past the client's 30 s timeout (not
  forwarded), every 5th forwarded and its answer held as long (it landed).
- ``scheduler-kill``: the only scheduler is killed with SIGKILL at its second bind, a new
  one started a second later.
- ``leader-kill``: two ``--leader-elect`` replicas; the leader is killed with SIGKILL at
  its second bind; the standby must take over and finish.
- ``leader-partition``: two replicas; at the leader's second bind its proxy blackholes
  it (lease renewals included) for 8 s, twice its lease, then heals. Its own check:
  no bind the cut-off replica sent reaches the server after the heal (it is no longer
  the leader then: the other replica holds the lease).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.faults.checks import GROUP, Violation, check_cluster
from pumice.faults.proxy import BindFault, FaultProxy
from pumice.sandbox import ControlPlane
from pumice.sandbox.nodes import NodeShape, create_nodes
from pumice.sandbox.pki import make_pki
from pumice.sandbox.process import Child

NODES = 4
NODE = NodeShape("fault", {"cpu": "4", "memory": "8Gi", "pods": "110"})
#: (name, queue, pods = minMember, cpu a pod, wave)
GANGS = (
    ("g0", "default", 3, "1", 1),
    ("g1", "q1", 3, "1", 1),
    ("g2", "default", 3, "1", 2),
    ("g3", "q1", 3, "1", 2),
    ("toobig", "q1", 5, "3", 2),
)
FITTING = sum(n for name, _, n, _, _ in GANGS if name != "toobig")
LEASE = (
    "--leader-elect-lease-duration",
    "4s",
    "--leader-elect-renew-deadline",
    "3s",
    "--leader-elect-retry-period",
    "0.5s",
)
_WIPE = ("Pod", "PodGroup", "Node", "Queue", "Event", "Lease")


@dataclass(slots=True)
class RunResult:
    """One run of one scenario: faults injected by kind, violations, pods bound."""

    scenario: str
    faults: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    bound: int = 0
    seconds: float = 0.0
    error: str = ""


class Bench:
    """One control plane, emptied before each run, and the processes of a run."""

    def __init__(self, plane: ControlPlane, workdir: Path, log: Callable[[str], None]) -> None:
        self.plane = plane
        self.workdir = workdir
        self.log = log
        self.client = KubeClient.from_config(plane.kubeconfig)
        self.pki = make_pki(workdir / "proxy-pki")
        self.proxies: list[FaultProxy] = []
        self.children: list[Child] = []
        #: Checks of a scenario's own, run with the common ones.
        self.after: list[Callable[[], list[Violation]]] = []
        self._n = 0

    def close(self) -> None:
        self.client.close()

    # -- set-up ---------------------------------------------------------------------

    def reset(self) -> None:
        """An empty cluster with the nodes and Queues of a run."""
        c = self.client
        for kind in _WIPE:
            res = RESOURCES[kind]
            c.request(
                "DELETE",
                res.path("default") if res.namespaced else res.path(),
                query={"gracePeriodSeconds": 0},
            )
        deadline = time.monotonic() + 30
        while any(_list(c, k) for k in ("Pod", "PodGroup", "Queue", "Node")):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster could not be emptied")
            time.sleep(0.1)
        create_nodes(c, NODES, NODE, workers=4)
        for q in ("default", "q1"):
            _ok(
                c.request(
                    "POST",
                    RESOURCES["Queue"].path(),
                    body={
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "Queue",
                        "metadata": {"name": q},
                        "spec": {"weight": 1, "reclaimable": True},
                    },
                )
            )

    def wave(self, wave: int) -> None:
        for name, queue, size, cpu, w in GANGS:
            if w == wave:
                make_gang(self.client, name, queue, size, cpu)

    def proxy(self, *faults: BindFault) -> FaultProxy:
        p = FaultProxy(
            self.plane.server, self.plane.ca_file, self.pki.serving_cert, self.pki.serving_key
        ).start()
        p.bind_faults = list(faults)
        self.proxies.append(p)
        return p

    def scheduler(self, proxy: FaultProxy, *, leader: bool = False) -> Child:
        self._n += 1
        kubeconfig = proxy.kubeconfig(
            self.workdir / f"proxy-{self._n}.kubeconfig", self.plane.admin_token
        )
        argv = [
            sys.executable,
            "-m",
            "pumice.cli",
            "run",
            "--kubeconfig",
            kubeconfig,
            "--schedule-period",
            "0.2s",
        ]
        if leader:
            argv += ["--leader-elect", *LEASE]
        child = Child(f"pumice-{self._n}", argv, self.workdir / f"pumice-{self._n}.log")
        child.start()
        self.children.append(child)
        return child

    def teardown(self) -> None:
        for child in self.children:
            child.stop(5)
        for p in self.proxies:
            p.stop()
        self.children.clear()
        self.proxies.clear()
        self.after.clear()

    # -- the end of a run -----------------------------------------------------------

    def bound(self) -> int:
        return sum(1 for p in _list(self.client, "Pod") if (p.get("spec") or {}).get("nodeName"))

    def settle(self, timeout: float) -> None:
        """Until the fitting gangs are bound and no bind is in flight at any proxy for
        2 s, or ``timeout``."""
        deadline = time.monotonic() + timeout
        calm_since = None
        while time.monotonic() < deadline:
            busy = any(p.in_flight for p in self.proxies) or self.bound() < FITTING
            if busy:
                calm_since = None
            elif calm_since is None:
                calm_since = time.monotonic()
            elif time.monotonic() - calm_since >= 2.0:
                return
            time.sleep(0.2)

    def check(self, timeout: float = 15.0) -> list[Violation]:
        """The checks, again until they pass or ``timeout`` (statuses come late)."""
        binds = [b for p in self.proxies for b in p.binds]
        deadline = time.monotonic() + timeout
        while True:
            found = check_cluster(self.client, binds)
            found += [v for check in self.after for v in check()]
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.5)


def make_gang(client: KubeClient, name: str, queue: str, size: int, cpu: str) -> None:
    _ok(
        client.request(
            "POST",
            RESOURCES["PodGroup"].path("default"),
            body={
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"minMember": size, "queue": queue},
            },
        )
    )
    for i in range(size):
        _ok(
            client.request(
                "POST",
                RESOURCES["Pod"].path("default"),
                body={
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{i}",
                        "namespace": "default",
                        "annotations": {GROUP: name},
                    },
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}},
                            }
                        ],
                    },
                },
            )
        )


def _list(client: KubeClient, kind: str) -> list[dict]:
    status, body = client.request("GET", RESOURCES[kind].path())
    return list(body.get("items") or ()) if status == 200 else []


def _ok(answer: tuple[int, object]) -> None:
    status, body = answer
    if status not in (200, 201):
        raise RuntimeError(f"HTTP {status}: {body}")


def _at_bind(proxy: FaultProxy, n: int, act: Callable[[], None]) -> threading.Event:
    """Call ``act`` (once) when ``proxy`` sees its ``n``-th bind, before forwarding it."""
    done = threading.Event()

    def hook(count: int) -> None:
        if count == n and not done.is_set():
            done.set()
            act()

    proxy.on_bind = hook
    return done


# -- the scenarios --------------------------------------------------------------------


def apiserver_restart(b: Bench, r: RunResult) -> float:
    """The kill happens on this thread (the servers die with the thread that started
    them); the proxy holds the second bind until the server is down, then forwards it."""
    p = b.proxy()
    b.scheduler(p)
    go, down = threading.Event(), threading.Event()

    def strike() -> None:
        go.set()
        down.wait(30)

    _at_bind(p, 2, strike)
    b.wave(1)
    if go.wait(30):
        b.plane.stop_apiserver(graceful=False)
        down.set()
        b.plane.start_apiserver()
        r.faults["apiserver restart"] += 1
    b.wave(2)
    return 60


def watch_drops(b: Bench, r: RunResult) -> float:
    p = b.proxy()
    b.scheduler(p)
    stop = threading.Event()

    def dropping() -> None:
        while not stop.wait(0.3):
            p.drop_watches()

    t = threading.Thread(target=dropping, daemon=True)
    t.start()
    b.wave(1)
    time.sleep(1.0)
    b.wave(2)
    b.settle(45)
    stop.set()
    t.join()
    return 10


def bind_faults(*faults: BindFault) -> Callable[[Bench, RunResult], float]:
    def scenario(b: Bench, r: RunResult) -> float:
        b.scheduler(b.proxy(*faults))
        b.wave(1)
        time.sleep(0.5)
        b.wave(2)
        return 60 + max((f.hold for f in faults), default=0) * 3

    return scenario


def scheduler_kill(b: Bench, r: RunResult) -> float:
    p = b.proxy()
    child = b.scheduler(p)

    def kill() -> None:
        child.stop(kill=True)
        r.faults["scheduler kill -9"] += 1

    killed = _at_bind(p, 2, kill)
    b.wave(1)
    killed.wait(30)
    time.sleep(1.0)
    b.scheduler(b.proxy())
    b.wave(2)
    return 60


def _replicas(b: Bench, r: RunResult, act: Callable[[FaultProxy, Child], None]) -> None:
    """Two leader-electing replicas; ``act`` strikes the one that binds first, at its
    second bind."""
    struck = threading.Event()
    for _ in range(2):
        p = b.proxy()
        child = b.scheduler(p, leader=True)

        def hook(count: int, p: FaultProxy = p, child: Child = child) -> None:
            if count == 2 and not struck.is_set():
                struck.set()
                act(p, child)

        p.on_bind = hook
    b.wave(1)
    struck.wait(30)
    b.wave(2)


def leader_kill(b: Bench, r: RunResult) -> float:
    def kill(p: FaultProxy, child: Child) -> None:
        child.stop(kill=True)
        r.faults["leader kill -9"] += 1

    _replicas(b, r, kill)
    return 60


def leader_partition(b: Bench, r: RunResult) -> float:
    """Beyond the common checks: the cut-off replica lost its lease during the cut (it
    lasted twice the lease), so no bind of its may reach the server after the heal."""
    healed: dict[str, float] = {}
    cut_off: list[FaultProxy] = []

    def heal(p: FaultProxy) -> None:
        healed["at"] = time.monotonic()
        p.heal()

    def cut(p: FaultProxy, child: Child) -> None:
        cut_off.append(p)
        p.partition()
        threading.Timer(8.0, heal, (p,)).start()

    def deposed_binds() -> list[Violation]:
        if not cut_off or "at" not in healed:
            return []
        return [
            Violation(
                "leader writes only",
                f"{rec.pod}: bound to {rec.node} (HTTP "
                f"{rec.status}) by the deposed leader {rec.at - healed['at']:.1f}s "
                "after the partition healed",
            )
            for rec in cut_off[0].binds
            if rec.at > healed["at"]
        ]

    b.after.append(deposed_binds)
    _replicas(b, r, cut)
    return 60


SCENARIOS: dict[str, Callable[[Bench, RunResult], float]] = {
    "apiserver-restart": apiserver_restart,
    "watch-drops": watch_drops,
    "bind-409": bind_faults(BindFault(3, 409)),
    "bind-500": bind_faults(BindFault(4, 500, before=False), BindFault(3, 500)),
    "bind-timeout": bind_faults(
        BindFault(5, 0, before=False, hold=31.0), BindFault(4, 0, hold=31.0)
    ),
    "scheduler-kill": scheduler_kill,
    "leader-kill": leader_kill,
    "leader-partition": leader_partition,
}


def run_scenario(b: Bench, name: str) -> RunResult:
    """One run of scenario ``name`` on an emptied cluster; never raises (a failure to
    run is the result's ``error``)."""
    r = RunResult(name)
    start = time.monotonic()
    try:
        b.reset()
        timeout = SCENARIOS[name](b, r)
        b.settle(timeout)
        for p in b.proxies:
            r.faults.update(p.injected)
        r.violations = b.check()
        r.bound = b.bound()
        if r.bound < FITTING:
            r.violations.append(
                Violation("fitting gangs bound", f"{r.bound} of {FITTING} fitting pods bound")
            )
    except Exception as err:  # a run that could not run is reported, the others go on
        r.error = f"{type(err).__name__}: {err}"
    finally:
        with contextlib.suppress(Exception):
            b.teardown()
    r.seconds = time.monotonic() - start
    return r


__all__ = ["FITTING", "GANGS", "SCENARIOS", "Bench", "RunResult", "make_gang", "run_scenario"]
