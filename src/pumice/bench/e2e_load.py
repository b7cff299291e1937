"""The objects of the end-to-end benchmark, and putting them into an API server fast.

Why a module of its own: every scheduler under test gets the same objects, made the same
way, so the figures differ only by the scheduler. Pods are small (one container,
100m CPU and 128Mi, so 5,000 or 10,000 of them fit 1,000 nodes of
:data:`~pumice.sandbox.nodes.CPU_NODE` many times over), carry the label
:data:`LABEL` (what the bind watch selects on) and, for a gang, the annotation
:data:`GROUP_ANNOTATION` naming their PodGroup (what Volcano and pumice group by).

:func:`create_all` sends the objects with ``workers`` clients at once, in the order
given (each client takes the next object when its last one is answered), and retries
what the server refuses for the moment (429, 5xx, no answer); it returns when every
object is created or has failed for good.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pumice.cluster.kube_client import RESOURCES, ApiUnavailable, KubeClient, status_message

#: Every benchmark pod has this label (value: the run's workload), and no other pod.
LABEL = "pumice.bench/e2e"
#: How Volcano (and pumice) learn a pod's PodGroup.
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
NAMESPACE = "default"
QUEUE = "default"
POD_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
#: Statuses worth another try: the server is busy, not saying no.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
ATTEMPTS = 8


class LoadError(RuntimeError):
    """The API server refused an object of the benchmark for good."""


def pod(name: str, scheduler_name: str, workload: str, group: str | None = None) -> dict:
    """A benchmark pod: one container, small requests, the scheduler's name."""
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "labels": {LABEL: workload}}
    if group is not None:
        meta["annotations"] = {GROUP_ANNOTATION: group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.8",
                    "resources": {"requests": dict(POD_REQUESTS)},
                }
            ],
        },
    }


def podgroup(name: str, min_member: int, queue: str = QUEUE) -> dict:
    """A ``scheduling.volcano.sh/v1beta1`` PodGroup of ``min_member`` in ``queue``."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": min_member, "queue": queue},
    }


def queue(name: str = QUEUE) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True},
    }


@dataclass(slots=True)
class Created:
    """What :func:`create_all` did: when it started and ended (monotonic seconds),
    how many objects were created, and the errors of those that failed for good."""

    started: float = 0.0
    finished: float = 0.0
    created: int = 0
    retries: int = 0
    errors: list[str] = field(default_factory=list)


def _path(obj: dict) -> str:
    res = RESOURCES[obj["kind"]]
    return res.path(obj["metadata"].get("namespace", ""))


def create_one(client: KubeClient, obj: dict, stats: Created | None = None) -> str | None:
    """POST ``obj``, retrying a busy server; None when created (or already there),
    else the reason it was refused."""
    path = _path(obj)
    reason = ""
    for attempt in range(ATTEMPTS):
        try:
            status, body = client.request("POST", path, body=obj)
        except ApiUnavailable as err:
            status, body, reason = 0, None, str(err)
        if status in (200, 201, 409):
            return None
        if status and status not in RETRY_STATUSES:
            return f"HTTP {status}: {status_message(body)}"
        if status:
            reason = f"HTTP {status}: {status_message(body)}"
        if stats is not None:
            stats.retries += 1
        time.sleep(min(2.0, 0.05 * 2**attempt))
    return reason or "gave up"


def create_all(client: KubeClient, objects: Iterable[dict], workers: int = 16) -> Created:
    """Create ``objects`` in order with ``workers`` clients at once (see the module)."""
    stats = Created()
    source = iter(objects)
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                obj = next(source, None)
            if obj is None:
                return
            error = create_one(client, obj, stats)
            with lock:
                if error is None:
                    stats.created += 1
                else:
                    stats.errors.append(f"{obj['kind']} {obj['metadata']['name']}: {error}")

    stats.started = time.monotonic()
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="create") as pool:
        for f in [pool.submit(work) for _ in range(max(1, workers))]:
            f.result()
    stats.finished = time.monotonic()
    return stats


def interleave(*groups: Sequence[dict]) -> list[dict]:
    """Objects of several lists alternately (a PodGroup, then its pod, ...)."""
    return [o for pair in itertools.zip_longest(*groups) for o in pair if o is not None]


# -- the default queue ---------------------------------------------------------


def ensure_queue(client: KubeClient, name: str = QUEUE, timeout: float = 30.0) -> None:
    """The Queue ``name``, Open (its status written, as Volcano's controller would):
    retried while the just-established CRD is not served yet."""
    res = RESOURCES["Queue"]
    deadline = time.monotonic() + timeout
    while True:
        status, body = client.request("POST", res.path(), body=queue(name))
        if status in (200, 201, 409):
            break
        if time.monotonic() > deadline:
            raise LoadError(f"Queue {name}: HTTP {status}: {status_message(body)}")
        time.sleep(0.3)
    client.request(
        "PATCH",
        res.path("", name, "status"),
        body={"status": {"state": "Open"}},
        content_type="application/merge-patch+json",
    )


__all__ = [
    "GROUP_ANNOTATION",
    "LABEL",
    "NAMESPACE",
    "QUEUE",
    "Created",
    "LoadError",
    "create_all",
    "create_one",
    "ensure_queue",
    "interleave",
    "pod",
    "podgroup",
    "queue",
]


def wait_bound(
    client: KubeClient,
    pod_name: str,
    procs: Mapping[str, subprocess.Popen[bytes]],
    timeout: float,
    what: str = "warm-up pod",
) -> tuple[float | None, str | None]:
    """Seconds until the pod ``pod_name`` (in :data:`NAMESPACE`) is bound, or (None, why
    not): a process of ``procs`` (by name) that exits first, or ``timeout``."""
    path = RESOURCES["Pod"].path(NAMESPACE, pod_name)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        for name, proc in procs.items():
            if proc.poll() is not None:
                return None, f"{name} exited with code {proc.returncode} during start-up"
        try:
            status, body = client.request("GET", path)
        except ApiUnavailable:
            status, body = 0, None
        if status == 200 and (body.get("spec") or {}).get("nodeName"):
            return time.monotonic() - started, None
        time.sleep(0.1)
    return None, f"{what} not bound in {timeout:.0f}s"
