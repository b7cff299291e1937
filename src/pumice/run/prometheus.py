"""Nodes' average load from Prometheus, for the usage plugin in ``pumice run``.

When the configuration's ``metrics`` section names ``type: prometheus`` with an
``address``, a background thread asks Prometheus every ``interval`` (default 30s), node
by node, the two queries Volcano asks: the CPU busy percentage and the memory used
percentage, each averaged over the last 10 minutes (node-exporter's
``node_cpu_seconds_total``, ``node_memory_MemAvailable_bytes`` and
``node_memory_MemTotal_bytes``, the ``instance`` label being the node's name). Each
round's answers become :class:`~pumice.api.node_metrics.NodeMetricsRecord` (percentages,
``source: prometheus``) that the scheduling loop hands to the scheduler cache
(:meth:`~pumice.cache.cache.SchedulerCache.take_node_metrics`) before a cycle: a cycle
never waits for Prometheus. A query that fails leaves that node's last answer in place
(it ages out of the usage plugin's five minutes); an answer without data counts 0, as
in Volcano.

HTTP is the standard library's (``urllib``), with a timeout; ``tls.insecureSkipVerify:
"true"`` turns off certificate checks for an ``https`` address.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pumice.api.node_metrics import NodeMetricsRecord
from pumice.conf.arguments import go_duration

log = logging.getLogger("pumice.prometheus")

#: Volcano's averaging period (``NODE_METRICS_PERIOD``).
PERIOD = "10m"
DEFAULT_INTERVAL = 30.0
TIMEOUT = 10.0
SOURCE = "prometheus"


def cpu_query(node: str) -> str:
    """The CPU busy percentage of ``node``, averaged over :data:`PERIOD`."""
    return (
        "avg_over_time(clamp_min(100 - (avg by (instance) "
        f'(rate(node_cpu_seconds_total{{mode="idle",instance="{node}"}}[5m])) * 100), 0)'
        f"[{PERIOD}:30s])"
    )


def memory_query(node: str) -> str:
    """The memory used percentage of ``node``, averaged over :data:`PERIOD`."""
    return (
        f'100*avg_over_time(((1-node_memory_MemAvailable_bytes{{instance="{node}"}}'
        f'/node_memory_MemTotal_bytes{{instance="{node}"}}))[{PERIOD}:30s])'
    )


class QueryError(Exception):
    """Prometheus did not answer a query (no connection, an HTTP error, bad JSON)."""


def first_value(answer: Mapping[str, Any]) -> float:
    """The value of the first sample of an instant query's answer (the query API's
    JSON); 0 when it holds no sample or is not a vector, as Volcano reads it."""
    if answer.get("status") != "success":
        raise QueryError(str(answer.get("error") or "the query did not succeed"))
    data = answer.get("data") or {}
    if data.get("resultType") != "vector":
        return 0.0
    result = data.get("result") or []
    if not result:
        return 0.0
    value = result[0].get("value") or [None, "0"]
    try:
        return float(value[1])
    except (TypeError, ValueError, IndexError):
        raise QueryError(f"unreadable sample {value!r}") from None


class PrometheusSource:
    """Fetches every node's load on a thread of its own; :meth:`take` hands over the
    newest round (each round once)."""

    def __init__(
        self,
        settings: Mapping[str, str],
        nodes: Callable[[], Sequence[str]],
        *,
        clock: Callable[[], float] = time.time,
        timeout: float = TIMEOUT,
    ) -> None:
        self.settings = dict(settings)
        self.address = settings["address"].rstrip("/")
        interval = go_duration(settings.get("interval", "")) if "interval" in settings else None
        self.interval = interval if interval is not None and interval > 0 else DEFAULT_INTERVAL
        self.nodes = nodes
        self.clock = clock
        self.timeout = timeout
        self._context: ssl.SSLContext | None = None
        if settings.get("tls.insecureSkipVerify") == "true":
            log.warning("metrics: TLS certificate verification is off for %s", self.address)
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            self._context = context
        self._lock = threading.Lock()
        self._known: dict[str, NodeMetricsRecord] = {}
        self._fresh = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Counters for logs and tests.
        self.rounds = 0
        self.errors = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="metrics-prometheus", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def take(self) -> dict[str, NodeMetricsRecord] | None:
        """Every node's last answer, by node name, when a round finished since the
        last call; None otherwise."""
        with self._lock:
            if not self._fresh:
                return None
            self._fresh = False
            return dict(self._known)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.fetch_round()
            self._stop.wait(self.interval)

    def fetch_round(self) -> None:
        """Ask for every node's load once (the thread's work; tests call it directly)."""
        got: dict[str, NodeMetricsRecord] = {}
        for node in list(self.nodes()):
            if self._stop.is_set():
                return
            try:
                cpu = first_value(self.query(cpu_query(node)))
                memory = first_value(self.query(memory_query(node)))
            except QueryError as err:
                self.errors += 1
                log.warning("metrics: node %s: %s", node, err)
                continue
            got[node] = NodeMetricsRecord(
                node, self.clock(), cpu_percent=cpu, memory_percent=memory, source=SOURCE
            )
        with self._lock:
            names = set(self.nodes())
            self._known = {n: r for n, r in {**self._known, **got}.items() if n in names}
            self._fresh = True
        self.rounds += 1

    def query(self, promql: str) -> Mapping[str, Any]:
        """One instant query (``/api/v1/query``), its JSON answer."""
        params = urllib.parse.urlencode({"query": promql, "time": f"{self.clock():.3f}"})
        url = f"{self.address}/api/v1/query?{params}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout, context=self._context) as resp:
                body = resp.read()
        except urllib.error.HTTPError as err:
            body = err.read()
            try:
                return json.loads(body)  # (the API answers errors in JSON too)
            except ValueError:
                raise QueryError(f"HTTP {err.code} from {self.address}") from None
        except (urllib.error.URLError, OSError) as err:
            raise QueryError(f"cannot reach {self.address}: {err}") from None
        try:
            answer = json.loads(body)
        except ValueError:
            raise QueryError(f"{self.address} answered no JSON") from None
        if not isinstance(answer, dict):
            raise QueryError(f"{self.address} answered no JSON object")
        return answer


__all__ = ["PrometheusSource", "QueryError", "cpu_query", "first_value", "memory_query"]
