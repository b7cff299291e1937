"""``pumice run``'s loop: the simulator's loop on a real clock against a real cluster.

Wiring, as in :mod:`pumice.sim.engine` with the in-memory store replaced by the API:
informers feed :class:`~pumice.cluster.kube.KubeCluster`; the one
:class:`~pumice.cache.cache.SchedulerCache` follows it; every schedule period the
runner syncs the cache, runs :meth:`Scheduler.cycle` on a snapshot when there is
something to decide, and applies the decisions (binds and status go out on worker
threads: a cycle never waits for the writes of the one before).

Around that loop: the first cycle waits for every informer's initial list; with leader
election only the leader cycles (a standby keeps its cache warm, so a failover starts
scheduling at once) and every write is gated on the lease being held; the config file
is re-read before each cycle (a bad one is refused, the last good one stays); SIGUSR1
writes the cache as a snapshot; SIGTERM ends the loop, lets binds in flight finish
(bounded), releases the lease and returns 0.

HyperNodes (``topology.volcano.sh``) are optional: without their CRD the start says so
and jobs with a network-topology constraint are placed as if the cluster had none; the
CRD installed later is picked up on the informer's next list. What the HyperNode tree
leaves unsaid (nodes in no HyperNode, members that match nothing) is logged when the
tree changes. The gang APIs of other dialects (coscheduling's PodGroups, Kubernetes'
Workloads and PodGroups) are optional the same way: the start logs which are served and
which are not (the pods of a dialect not served wait for their group), and says so
again when that changes.

With ``controllers`` (``pumice run --controllers``), Volcano's controllers run on a
thread beside the loop (:class:`~pumice.controllers.loop.ControllerLoop`), over their
own informers on the same client, reconciling and writing only while this process
leads.

The default Queue (``default_queue``) is created by the leader when the Queue CRD is
served and the Queue is absent, as vc-scheduler does (:mod:`pumice.run.default_queue`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pumice.cache.cache import SchedulerCache
from pumice.cluster.kube import KubeCluster
from pumice.cluster.kube_client import KubeClient
from pumice.conf.catalog import METRICS_PROMETHEUS
from pumice.run.default_queue import DefaultQueue
from pumice.run.dump import write_dump
from pumice.run.events import EventRecorder
from pumice.run.prometheus import PrometheusSource
from pumice.run.reload import ConfigWatcher
from pumice.run.report import Reporter
from pumice.scheduler import Scheduler

log = logging.getLogger("pumice.run")

#: The gang APIs of other dialects, by the cluster's kind name: what the start says.
GANG_APIS = {
    "CoschedulingPodGroup": "scheduling.x-k8s.io/v1alpha1 podgroups (coscheduling)",
    "Workload": "scheduling.k8s.io/v1alpha1 workloads",
    "WorkloadPodGroup": "scheduling.k8s.io/v1alpha2 podgroups",
    "WorkloadV1alpha2": "scheduling.k8s.io/v1alpha2 workloads",
}

#: How long SIGTERM waits for binds in flight before abandoning them.
DRAIN_SECONDS = 10.0


class Elector(Protocol):
    """What the runner needs of leader election (see :mod:`pumice.run.leader`)."""

    def start(self) -> None: ...

    def is_leader(self) -> bool: ...

    def stop(self, release: bool = True) -> None: ...


@dataclass(slots=True)
class RunOptions:
    scheduler_names: Sequence[str] = ("volcano",)
    period: float = 1.0
    default_queue: str = "default"
    eviction_api: bool = False
    dump_dir: str | None = None
    identity: str = field(default_factory=lambda: f"pumice-{os.getpid()}")
    bind_workers: int = 16
    sync_timeout: float | None = None  # None: wait for the initial lists for ever
    #: How long a stop waits for binds in flight before abandoning them.
    drain_seconds: float = DRAIN_SECONDS
    #: Controllers to run on a thread beside the scheduler, under its lease
    #: (:mod:`pumice.controllers.loop`); none by default.
    controllers: Sequence[str] = ()


class Runner:
    """One scheduler process against one API server (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        config: ConfigWatcher,
        scheduler: Scheduler,
        options: RunOptions | None = None,
        *,
        elector: Elector | None = None,
        metrics: Any = None,
        health: Any = None,
    ) -> None:
        self.client = client
        self.config = config
        self.scheduler = scheduler
        self.options = options = options or RunOptions()
        self.elector = elector
        self.metrics = metrics
        self.health = health
        self.stop = threading.Event()
        self._dump = threading.Event()
        self.cycles = 0
        self._seen_counts: dict[tuple[str, str], int] = {}
        #: The HyperNode tree whose notes were logged last, and those notes.
        self._topology: Any = None
        self._topology_notes: set[str] = set()
        self._hypernodes_served: bool | None = None
        #: Whether each gang API of another dialect was served, as last said.
        self._gang_served: dict[str, bool] = {}
        self.last_decisions: Any = None
        self.cluster = KubeCluster(
            client,
            bind_workers=options.bind_workers,
            eviction_api=options.eviction_api,
            may_write=self.may_write,
            on_bound=self._bound,
            on_bind_failed=self._bind_failed,
        )
        self.events = EventRecorder(self.cluster.create_event, instance=options.identity)
        self.reporter = Reporter(self.cluster, self.events, scheduler_names=options.scheduler_names)
        #: The default Queue, created (by the leader) when absent, as vc-scheduler does.
        self.default_queue = DefaultQueue(self.cluster, options.default_queue, self.may_write)
        self.cache: SchedulerCache | None = None
        self.controllers: Any = None  # the ControllerLoop, with --controllers
        self._controllers_thread: threading.Thread | None = None
        #: Called after each cycle with (decisions, applied): tests and the benchmark.
        self.on_cycle: Callable[[Any, Any], None] | None = None
        #: Called with the runner at the end of each loop turn, between cycles (the
        #: cache is still): the start forecast's copy and its learned run times.
        self.between_cycles: list[Callable[[Any], None]] = []
        #: The Prometheus source of nodes' load, while the configuration names one.
        self.node_load: PrometheusSource | None = None
        #: The node names the source asks about (read on its thread).
        self._node_names: tuple[str, ...] = ()

    def may_write(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    # -- callbacks from worker threads --------------------------------------------------

    def _bound(self, pod: str, node: str, seconds: float) -> None:
        self.reporter.on_bound(pod, node)
        if self.metrics is not None:
            self.metrics.bound(pod, node, seconds=seconds)

    def _bind_failed(self, pod: str, node: str, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.bind_failed(pod, node, reason)

    # -- signals ------------------------------------------------------------------------

    def install_signals(self) -> None:
        """SIGTERM/SIGINT end the loop; SIGUSR1 asks for a dump (main thread only)."""
        signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
        signal.signal(signal.SIGINT, lambda *_: self.stop.set())
        signal.signal(signal.SIGUSR1, lambda *_: self._dump.set())

    def request_dump(self) -> None:
        self._dump.set()

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> int:
        """Schedule until :attr:`stop` is set; 0 on a clean stop."""
        for warning in self.scheduler.config.warnings:
            log.warning("config %s: %s", self.scheduler.config.source, warning)
        cluster = self.cluster
        cluster.start()
        if self.elector is not None:
            self.elector.start()
        try:
            if self.options.controllers:
                self._start_controllers()
            if not self._wait_synced():
                return 0
            self.cache = SchedulerCache(
                cluster,
                scheduler_name=self.options.scheduler_names,
                clock=time.time,
                on_bad=self.reporter.bad_object,
                default_queue=self.options.default_queue,
            )
            if self.health is not None:
                self.health.set_ready(True)
            log.info(
                "caches synced: %d nodes, %d pods, %d podgroups, %d queues, %d hypernodes",
                len(cluster.list("Node")), len(cluster.list("Pod")),
                len(cluster.list("PodGroup")), len(cluster.list("Queue")),
                len(cluster.list("HyperNode")),
            )  # fmt: skip
            self._optional_apis()
            self._hypernodes()
            self._gang_apis()
            self._loop()
        finally:
            self._shutdown()
        return 0

    def _wait_synced(self) -> bool:
        deadline = (
            None if self.options.sync_timeout is None
            else time.monotonic() + self.options.sync_timeout
        )  # fmt: skip
        while not self.stop.is_set():
            if self.cluster.wait_synced(1.0):
                return True
            if deadline is not None and time.monotonic() > deadline:
                log.error("caches did not sync in %.0fs", self.options.sync_timeout)
                return False
            if self.health is not None:
                self.health.heartbeat()
        return False

    def _loop(self) -> None:
        period = self.options.period
        cache = self.cache
        assert cache is not None
        seen_changes = -1
        next_at = time.monotonic()
        while not self.stop.is_set():
            if self.health is not None:
                self.health.heartbeat()
            self.client.reachability.poll()  # (an outage's end, said once)
            if self._dump.is_set():
                self._dump.clear()
                self._write_dump()
            reload = self.config.poll()
            if reload is not None:
                self._reloaded(reload)
            self.default_queue.ensure()
            cache.sync()
            self._node_load(cache)
            self._hypernodes()
            self._gang_apis()
            leading = self.may_write()
            if self.metrics is not None:
                self.metrics.set_leader(leading)
            if leading and (cache.has_pending_work() or cache.changes != seen_changes):
                try:
                    self._cycle(cache)
                except Exception:  # a bug in one cycle must not stop the scheduler
                    log.exception("cycle %d failed; the next one starts afresh", self.cycles)
                seen_changes = cache.changes
            if leading:
                self.reporter.queues(cache)  # (throttled; a quiet cluster still converges)
            if self.metrics is not None:
                self._counters()
            for hook in self.between_cycles:
                hook(self)
            next_at += period
            delay = next_at - time.monotonic()
            if delay < 0:  # a long cycle: start the next period now, do not catch up
                next_at, delay = time.monotonic(), 0.0
            self.stop.wait(delay)

    def _node_load(self, cache: SchedulerCache) -> None:
        """Keep a Prometheus source running while the configuration's ``metrics``
        section names one (started, restarted on a new section, stopped without one),
        and hand its newest round to the cache: never waiting for it."""
        settings = self.scheduler.config.metrics
        wanted = dict(settings) if settings.get("type") == METRICS_PROMETHEUS else None
        source = self.node_load
        if source is not None and source.settings != wanted:
            source.stop(0.0)
            self.node_load = source = None
            cache.take_node_metrics({}, METRICS_PROMETHEUS)
        self._node_names = tuple(cache.nodes_r)
        if wanted is not None and source is None:
            source = self.node_load = PrometheusSource(wanted, lambda: self._node_names)
            source.start()
            log.info("metrics: reading nodes' load from Prometheus at %s", source.address)
        if source is not None:
            got = source.take()
            if got is not None:
                cache.take_node_metrics(got, METRICS_PROMETHEUS)

    def _optional_apis(self) -> None:
        """Say in one line which of the kinds pumice reads this API server does not
        serve (each counts as empty and is looked for again now and then); HyperNodes
        and the gang APIs of other dialects are said on their own lines."""
        said = {"HyperNode", *GANG_APIS}
        missing = [
            f"{kind} ({inf.resource.path()})"
            for kind, inf in self.cluster.informers.items()
            if kind not in said and not inf.served
        ]
        if missing:
            log.info(
                "not served by this API server, so read as empty (and looked for again later): %s",
                ", ".join(missing),
            )

    def _hypernodes(self) -> None:
        """Say whether HyperNodes are served (at the start, and when that changes), and
        log the new notes of a HyperNode tree the cache built again."""
        served = self.cluster.served("HyperNode")
        if served != self._hypernodes_served:
            if not served:
                log.log(
                    logging.INFO if self._hypernodes_served is None else logging.WARNING,
                    "HyperNodes are not installed (the API server does not serve "
                    "topology.volcano.sh/v1alpha1 hypernodes): network-topology "
                    "constraints are placed as if the cluster had no HyperNodes",
                )
            elif self._hypernodes_served is not None:
                log.info("HyperNodes are served now (topology.volcano.sh/v1alpha1)")
            self._hypernodes_served = served
        cache = self.cache
        topology = cache.topology if cache is not None else None
        if topology is self._topology:
            return
        self._topology = topology
        notes = list(topology.notes) if topology is not None else []
        for note in notes:
            if note not in self._topology_notes:
                log.info("HyperNodes: %s", note)
        self._topology_notes = set(notes)

    def _gang_apis(self) -> None:
        """Say which gang APIs of other dialects are served (at the start: all of them,
        served and not; later: those that changed)."""
        served = {kind: self.cluster.served(kind) for kind in GANG_APIS}
        if served == self._gang_served:
            return
        first = not self._gang_served
        changed = [k for k in GANG_APIS if first or served[k] != self._gang_served.get(k)]
        self._gang_served = served
        yes = [GANG_APIS[k] for k in changed if served[k]]
        no = [GANG_APIS[k] for k in changed if not served[k]]
        if yes:
            log.info("gang APIs served: %s", ", ".join(yes))
        if no:
            log.info("gang APIs not installed: %s (pods of that dialect wait)", ", ".join(no))

    def _cycle(self, cache: SchedulerCache) -> None:
        start = time.perf_counter()
        observer = self.metrics.observer() if self.metrics is not None else None
        snapshot = cache.snapshot()
        decisions = (
            self.scheduler.cycle(snapshot)
            if observer is None
            else self.scheduler.cycle(snapshot, observer)
        )
        applied = cache.apply(decisions)
        self.cycles += 1
        self.last_decisions = decisions
        self.reporter.after_cycle(cache, decisions, applied)
        if self.metrics is not None:
            self.metrics.cycle_done(decisions, observer, snapshot, time.perf_counter() - start)
        if decisions.binds or decisions.evictions:
            log.info(
                "cycle %d: %d binds, %d evictions, %d jobs waiting",
                self.cycles, len(applied.bound), len(applied.evicted), len(decisions.pending),
            )  # fmt: skip
        else:
            log.debug("cycle %d: nothing to bind, %d jobs waiting", self.cycles,
                      len(decisions.pending))  # fmt: skip
        if self.on_cycle is not None:
            self.on_cycle(decisions, applied)

    def _counters(self) -> None:
        """Hand the cluster's counters to the metrics as deltas (informers and writers
        count on their own threads; the metrics see them once per loop turn)."""
        seen = self._seen_counts
        for kind, inf in self.cluster.informers.items():
            relists = max(0, inf.lists - 1)  # (the first list is no relist)
            self.metrics.observe_relist(kind, relists - seen.get(("relist", kind), 0))
            seen[("relist", kind)] = relists
            counts = dict(inf.events)
            self.metrics.observe_watch_events(
                kind, {t: n - seen.get((kind, t), 0) for t, n in counts.items()}
            )
            seen.update(((kind, t), n) for t, n in counts.items())
        stats = self.cluster.stats
        for table, result in ((stats.writes, "success"), (stats.write_failures, "error")):
            for label, count in list(table.items()):
                kind = label.split(":")[0]
                self.metrics.observe_api_write(kind, result, count - seen.get((result, label), 0))
                seen[(result, label)] = count

    def _reloaded(self, reload: Any) -> None:
        if reload.scheduler is not None:
            self.scheduler = reload.scheduler
            if self.metrics is not None:
                self.metrics.config_reload(True)
            return
        if self.metrics is not None:
            self.metrics.config_reload(False)
        own = own_pod()
        if own is not None:  # (outside a pod, the log line the watcher wrote says it)
            self.events.record("Pod", own, "Warning", "ConfigRefused", reload.error)

    def _write_dump(self) -> None:
        folder = self.options.dump_dir or "."
        try:
            path = write_dump(self.cluster, folder)
        except OSError as err:
            log.error("cache dump to %s failed: %s", folder, err)
            return
        log.info("cache dumped to %s", path)

    def _start_controllers(self) -> None:
        """The controllers on a thread, over a store of their own (their own informers)
        on the same client, writing only while the scheduler leads."""
        from pumice.controllers.kube_store import KubeStore
        from pumice.controllers.loop import ControllerLoop
        from pumice.controllers.registry import Settings

        store = KubeStore(self.client, may_write=self.may_write)
        settings = Settings(
            scheduler_names=tuple(self.options.scheduler_names),
            default_queue=self.options.default_queue,
        )
        self.controllers = ControllerLoop(
            store, self.options.controllers, settings, may_run=self.may_write, stop=self.stop
        )
        self._controllers_thread = self.controllers.start_thread()

    def _shutdown(self) -> None:
        if self.node_load is not None:
            self.node_load.stop(0.0)
        if self._controllers_thread is not None:
            self.stop.set()
            self._controllers_thread.join(10)
            self.controllers.store.close(close_client=False)
        in_flight = self.cluster.binds_in_flight()
        if in_flight:
            log.info("stopping: waiting for %d binds in flight", in_flight)
            if not self.cluster.drain_binds(self.options.drain_seconds):
                log.warning("stopping: abandoning binds still in flight")
        if self.elector is not None:
            self.elector.stop(release=True)
        if self.health is not None:
            self.health.set_ready(False)
        self.cluster.close()


def own_pod() -> dict[str, Any] | None:
    """The Pod this scheduler runs in, which events about the scheduler itself are
    attached to (``kubectl describe pod`` shows them): the Deployment passes POD_NAME,
    POD_NAMESPACE and POD_UID. None outside a pod: an Event must name an object that
    exists, so there the log says it alone."""
    name = os.environ.get("POD_NAME")
    if not name:
        return None
    return {
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": os.environ.get("POD_NAMESPACE") or "default",
            **({"uid": os.environ["POD_UID"]} if os.environ.get("POD_UID") else {}),
        },
    }


__all__ = ["RunOptions", "Runner"]
