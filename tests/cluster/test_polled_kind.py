"""A kind the API lists but cannot watch (metrics.k8s.io NodeMetrics): polled, diffed by
content, and never holding the scheduler's sync up."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from pumice.cluster.informer import Informer


class ListOnly:
    """A stub API client: ``answers`` is a list of (status, body) handed out in turn
    (the last one repeats); a watch would be a test failure."""

    def __init__(self, answers: list[tuple[int, dict[str, Any]]]) -> None:
        self.answers = answers
        self.lists = 0

    def request(self, method: str, path: str, query: Any = None) -> tuple[int, dict[str, Any]]:
        assert path == "/apis/metrics.k8s.io/v1beta1/nodes"
        answer = self.answers[min(self.lists, len(self.answers) - 1)]
        self.lists += 1
        return answer

    def stream(self, *_args: Any, **_kw: Any):
        raise AssertionError("NodeMetrics cannot be watched")


def metrics(cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": "n1"}, "timestamp": "2024-01-01T00:00:00Z",
            "usage": {"cpu": cpu, "memory": "1Gi"}}  # fmt: skip


def start(client: ListOnly) -> tuple[Informer, list[tuple[str, str]], threading.Event]:
    seen: list[tuple[str, str]] = []
    stop = threading.Event()
    informer = Informer(
        client,  # type: ignore[arg-type]
        "NodeMetrics",
        lambda kind, _k, key, obj: seen.append((kind, obj["usage"]["cpu"])),
        stop=stop,
        backoff=(0.01, 0.01),
    )
    informer.resource = dataclasses.replace(informer.resource, poll=0.01)
    informer.start()
    return informer, seen, stop


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_polled_kind_is_listed_again_and_changes_arrive_as_modified() -> None:
    client = ListOnly([(200, {"items": [metrics("100m")]}), (200, {"items": [metrics("900m")]})])
    informer, seen, stop = start(client)
    try:
        wait_for(lambda: ("MODIFIED", "900m") in seen)
        assert seen[0] == ("ADDED", "100m")
        assert informer.synced.is_set() and informer.served
        count = len(seen)
        wait_for(lambda: client.lists > 4)
        assert len(seen) == count  # the same list again is no change
    finally:
        stop.set()
        informer.join(1)


def test_metrics_server_down_counts_as_none_and_does_not_hold_the_sync() -> None:
    client = ListOnly([(503, {"message": "service unavailable"})])
    informer, seen, stop = start(client)
    try:
        assert informer.synced.wait(5)
        assert not informer.served and seen == []
    finally:
        stop.set()
        informer.join(1)
