"""Node churn during a benchmark run: what kubelets and operators do to Node objects.

On a real cluster every kubelet rewrites its Node's status periodically (a heartbeat in
the ``Ready`` condition) and labels change under autoscalers and operators; a scheduler
receives all of it on its node watch, and most of it changes nothing it decides on.
:class:`NodeChurn` plays that, compressed to the length of a run: every node's status is
rewritten once per ``period`` seconds, the nodes spread evenly over the period (1,000
nodes and 10 s: 100 status writes a second), and every ``label_every`` seconds one node
gets a new value of the label :data:`CHURN_LABEL` (no benchmark pod selects on it).

The status write is a JSON merge patch of ``status.conditions`` with the same ``Ready``
condition and a new ``lastHeartbeatTime``: capacity and allocatable are untouched, so
the churn never changes where pods fit.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pumice.cluster.kube_client import MERGE_PATCH, RESOURCES, ApiUnavailable, KubeClient, rfc3339

CHURN_LABEL = "pumice.bench/churn"
#: How often the heartbeat thread sends what is due.
TICK = 0.1


@dataclass(slots=True)
class ChurnStats:
    status_writes: int = 0
    label_writes: int = 0
    failures: int = 0


class NodeChurn:
    """Rewrites node statuses and labels on threads until :meth:`stop` (see module)."""

    def __init__(
        self,
        client: KubeClient,
        nodes: Sequence[str],
        *,
        period: float = 10.0,
        label_every: float = 1.0,
        workers: int = 8,
    ) -> None:
        self.client = client
        self.nodes = list(nodes)
        self.period = period
        self.label_every = label_every
        self.stats = ChurnStats()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="churn")
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._heartbeats, name="churn-status", daemon=True),
            threading.Thread(target=self._labels, name="churn-labels", daemon=True),
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> ChurnStats:
        self._stop.set()
        for t in self._threads:
            t.join(5.0)
        self._pool.shutdown(wait=True, cancel_futures=True)
        return self.stats

    def _patch(self, path: str, body: dict, counter: str) -> None:
        try:
            status, _ = self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH)
        except ApiUnavailable:
            status = 0
        with self._lock:
            if status == 200:
                setattr(self.stats, counter, getattr(self.stats, counter) + 1)
            else:
                self.stats.failures += 1

    def _heartbeats(self) -> None:
        """Every tenth of a second, send the heartbeats due by now: the rate holds even
        when this thread is slow to wake (a busy process, the GIL)."""
        res = RESOURCES["Node"]
        count = len(self.nodes)
        start = time.monotonic()
        sent = 0
        while count and not self._stop.wait(TICK):
            due = int((time.monotonic() - start) / self.period * count)
            now = rfc3339()
            for turn in range(sent, due):
                name = self.nodes[turn % count]
                ready = {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "fake node of pumice's sandbox",
                    "lastHeartbeatTime": now,
                }
                body = {"status": {"conditions": [ready]}}
                self._submit(res.path("", name, "status"), body, "status_writes")
            sent = max(sent, due)

    def _labels(self) -> None:
        res = RESOURCES["Node"]
        turn = 0
        while not self._stop.wait(self.label_every):
            name = self.nodes[(turn * 7919) % len(self.nodes)]
            body = {"metadata": {"labels": {CHURN_LABEL: str(turn)}}}
            self._submit(res.path("", name), body, "label_writes")
            turn += 1

    def _submit(self, path: str, body: dict, counter: str) -> None:
        with contextlib.suppress(RuntimeError):  # stopping
            self._pool.submit(self._patch, path, body, counter)


__all__ = ["CHURN_LABEL", "ChurnStats", "NodeChurn"]
