"""A thin JSON transport to the Kubernetes API, on the official client's configuration.

Why not the client's API classes: they turn every response into generated model
objects, which costs far more than the request itself and hands the scheduler objects
it would have to turn back into dicts. pumice's cache consumes Kubernetes-shaped dicts,
so responses are decoded from raw JSON with orjson and requests are encoded with it.

What *is* taken from the official client is everything about reaching and trusting the
server: kubeconfig and in-cluster loading (contexts, exec plugins, token files and their
refresh, client certificates, CA bundles, proxies) and its urllib3 connection pool. No
credential is parsed here.

Contract: :meth:`KubeClient.request` returns ``(status, decoded body)`` for every HTTP
status (callers decide what 404 or 409 mean to them) and raises :class:`ApiUnavailable`
only when no HTTP answer came (connection refused or reset, timeout). It is safe to
call from many threads at once (one keep-alive pool, sized by ``pool_size``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlencode

import orjson
import urllib3

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiUnavailable(Exception):
    """No answer from the API server (refused, reset, timed out)."""


#: Answers that mean the server is not serving (restarting, overloaded, behind a
#: proxy that cannot reach it): they count towards an outage as no answer does.
NOT_SERVING = frozenset({502, 503, 504})

log = logging.getLogger("pumice.client")


class Reachability:
    """Whether the API server answers, said in two lines per outage.

    Every thread that talks to the server (informers, binders, writers, the lease)
    meets an outage at once, and each retries: logging each failure floods the log
    with the same news. Instead the first failure after a good answer says the server
    is unreachable (once, a WARNING), failures meanwhile are only counted, and once it
    has answered for ``settle`` seconds without a failure (a restarting server answers
    some paths with 503 for a while) one line says how long it lasted and how many
    requests failed. A ``503`` (a server still starting: its CRD paths not installed)
    counts as a failure during an outage but does not start one: it is an answer.
    :meth:`poll` ends an outage on a quiet client (called by the owner's loop).
    Thread-safe; ``outages`` counts the outages seen (only grows)."""

    def __init__(self, host: str, *, settle: float = 2.0, clock: Any = time.monotonic) -> None:
        self.host = host
        self.settle = settle
        self.clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._last_failure = 0.0
        #: The first good answer after the last failure (None: none yet).
        self._answered_at: float | None = None
        self._failures = 0
        self._ended_at = -1e18
        self.outages = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def troubled(self, window: float = 60.0) -> bool:
        """Down, or up again for less than ``window`` seconds (retries that began
        during the outage still land): what each retrier need not log on its own."""
        return self._since is not None or self.clock() - self._ended_at < window

    def failed(self, what: str, *, answer: bool = False) -> None:
        """A request got no answer (``answer``: one that means not serving)."""
        now = self.clock()
        with self._lock:
            first = self._since is None
            if first and answer:
                return  # (an answer: not an outage's start)
            if first:
                self._since = now
                self._failures = 0
                self.outages += 1
            self._failures += 1
            self._last_failure = now
            self._answered_at = None
        if first:
            log.warning(
                "API server %s is not answering (%s); retrying, and saying when it answers",
                self.host,
                what,
            )

    def answered(self) -> None:
        if self._since is None:  # (the common case, without the lock)
            return
        with self._lock:
            if self._answered_at is None:
                self._answered_at = self.clock()
        self.poll()

    def poll(self) -> None:
        """End the outage when the server has answered for ``settle`` seconds."""
        if self._since is None:
            return
        with self._lock:
            since, at = self._since, self._answered_at
            if since is None or at is None or self.clock() - self._last_failure < self.settle:
                return
            self._since = None
            self._ended_at = self.clock()
            failures = self._failures
        log.warning(
            "API server %s answers again after %.1fs; %d requests failed meanwhile",
            self.host,
            at - since,
            failures,
        )


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives in the API: ``/api/v1`` or ``/apis/<group>/<version>``."""

    kind: str
    prefix: str
    plural: str
    namespaced: bool
    #: Older API versions' prefixes, newest first, read where ``prefix`` is not served
    #: (``resource.k8s.io/v1beta2`` and ``v1beta1`` before Kubernetes 1.34).
    older: tuple[str, ...] = ()

    def versions(self) -> tuple[Resource, ...]:
        """This resource at each API version it may be served at, newest first."""
        return (self, *(replace(self, prefix=p, older=()) for p in self.older))

    #: The API can watch the kind; otherwise an informer lists it again every
    #: :attr:`poll` seconds (metrics.k8s.io serves lists only).
    watch: bool = True
    poll: float = 30.0

    def path(self, namespace: str = "", name: str = "", sub: str = "") -> str:
        """Collection or object path; an empty namespace on a namespaced kind means all
        namespaces (the list and watch of every pod)."""
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if sub:
            parts.append(sub)
        return "/".join(parts)

    def key_path(self, key: str, sub: str = "") -> str:
        """Object path from a cache key (``namespace/name`` or ``name``)."""
        if self.namespaced:
            namespace, _, name = key.partition("/")
            return self.path(namespace, name, sub)
        return self.path("", key, sub)


#: Dynamic resource allocation's API, and its beta versions (Kubernetes 1.32 and 1.33).
DRA = "/apis/resource.k8s.io/v1"
DRA_OLDER = ("/apis/resource.k8s.io/v1beta2", "/apis/resource.k8s.io/v1beta1")

#: The kinds pumice reads and writes, by kind name.
RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        Resource("Node", "/api/v1", "nodes", False),
        Resource("Pod", "/api/v1", "pods", True),
        Resource("Event", "/api/v1", "events", True),
        Resource("Namespace", "/api/v1", "namespaces", False),
        Resource("PodGroup", "/apis/scheduling.volcano.sh/v1beta1", "podgroups", True),
        Resource("Queue", "/apis/scheduling.volcano.sh/v1beta1", "queues", False),
        Resource("PriorityClass", "/apis/scheduling.k8s.io/v1", "priorityclasses", False),
        Resource("PodDisruptionBudget", "/apis/policy/v1", "poddisruptionbudgets", True),
        Resource("HyperNode", "/apis/topology.volcano.sh/v1alpha1", "hypernodes", False),
        Resource("PersistentVolume", "/api/v1", "persistentvolumes", False),
        Resource("PersistentVolumeClaim", "/api/v1", "persistentvolumeclaims", True),
        Resource("StorageClass", "/apis/storage.k8s.io/v1", "storageclasses", False),
        Resource("CSINode", "/apis/storage.k8s.io/v1", "csinodes", False),
        Resource("CSIDriver", "/apis/storage.k8s.io/v1", "csidrivers", False),
        Resource("ResourceSlice", DRA, "resourceslices", False, DRA_OLDER),
        Resource("DeviceClass", DRA, "deviceclasses", False, DRA_OLDER),
        Resource("ResourceClaim", DRA, "resourceclaims", True, DRA_OLDER),
        Resource("ResourceClaimTemplate", DRA, "resourceclaimtemplates", True, DRA_OLDER),
        Resource("NodeMetrics", "/apis/metrics.k8s.io/v1beta1", "nodes", False, watch=False),
        Resource("Numatopology", "/apis/nodeinfo.volcano.sh/v1alpha1", "numatopologies", False),
        Resource("ResourceQuota", "/api/v1", "resourcequotas", True),
        # The gangs of other dialects (pumice.api.gang_apis), by kind names of their own.
        Resource("CoschedulingPodGroup", "/apis/scheduling.x-k8s.io/v1alpha1", "podgroups", True),
        Resource("WorkloadPodGroup", "/apis/scheduling.k8s.io/v1alpha2", "podgroups", True),
        Resource("Workload", "/apis/scheduling.k8s.io/v1alpha1", "workloads", True),
        Resource("WorkloadV1alpha2", "/apis/scheduling.k8s.io/v1alpha2", "workloads", True),
        Resource("Lease", "/apis/coordination.k8s.io/v1", "leases", True),
        # What the controllers read and write (pumice.controllers).
        Resource("Job", "/apis/batch.volcano.sh/v1alpha1", "jobs", True),
        Resource("Command", "/apis/bus.volcano.sh/v1alpha1", "commands", True),
        Resource("Service", "/api/v1", "services", True),
        Resource("Secret", "/api/v1", "secrets", True),
        Resource("ConfigMap", "/api/v1", "configmaps", True),
        Resource("ReplicaSet", "/apis/apps/v1", "replicasets", True),
        Resource("StatefulSet", "/apis/apps/v1", "statefulsets", True),
        Resource("Deployment", "/apis/apps/v1", "deployments", True),
        # Kubernetes' own batch/v1 Job, told apart from Volcano's Job by this name.
        Resource("BatchJob", "/apis/batch/v1", "jobs", True),
    )
}

#: The API version and kind each list item lacks (a list's items carry neither).
API_VERSIONS: dict[str, str] = {
    "Node": "v1",
    "Pod": "v1",
    "Event": "v1",
    "Namespace": "v1",
    "PodGroup": "scheduling.volcano.sh/v1beta1",
    "Queue": "scheduling.volcano.sh/v1beta1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "PodDisruptionBudget": "policy/v1",
    "HyperNode": "topology.volcano.sh/v1alpha1",
    "PersistentVolume": "v1",
    "PersistentVolumeClaim": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
    "CSIDriver": "storage.k8s.io/v1",
    "ResourceSlice": "resource.k8s.io/v1",
    "DeviceClass": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    "NodeMetrics": "metrics.k8s.io/v1beta1",
    "Numatopology": "nodeinfo.volcano.sh/v1alpha1",
    "ResourceQuota": "v1",
    "CoschedulingPodGroup": "scheduling.x-k8s.io/v1alpha1",
    "WorkloadPodGroup": "scheduling.k8s.io/v1alpha2",
    "Workload": "scheduling.k8s.io/v1alpha1",
    "WorkloadV1alpha2": "scheduling.k8s.io/v1alpha2",
    "Lease": "coordination.k8s.io/v1",
    "Job": "batch.volcano.sh/v1alpha1",
    "Command": "bus.volcano.sh/v1alpha1",
    "Service": "v1",
    "Secret": "v1",
    "ConfigMap": "v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "Deployment": "apps/v1",
    "BatchJob": "batch/v1",
}

#: The ``kind`` field of each kind name that differs from it (the API's own kind).
API_KINDS: dict[str, str] = {
    "BatchJob": "Job",
    "CoschedulingPodGroup": "PodGroup",
    "WorkloadPodGroup": "PodGroup",
    "WorkloadV1alpha2": "Workload",
}


def _decode(data: bytes) -> Any:
    if not data:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return {"message": data[:500].decode("utf-8", "replace")}


class KubeClient:
    """Requests to one API server with the credentials of a loaded configuration."""

    def __init__(self, configuration: Any, *, pool_size: int = 32) -> None:
        from kubernetes import client as k8s

        # Room for ``pool_size`` requests at once, plus a watch of every kind for the
        # scheduler's informers and the controllers' (each holds a connection while it
        # reads): a pool too small discards connections, and urllib3 warns of each.
        configuration.connection_pool_maxsize = max(
            pool_size + 2 * len(RESOURCES), configuration.connection_pool_maxsize or 0
        )
        self.configuration = configuration
        self._api = k8s.ApiClient(configuration)
        self._pool: urllib3.PoolManager = self._api.rest_client.pool_manager
        self.host = configuration.host.rstrip("/")
        #: Watch responses being read: :meth:`close` shuts them down, so informer
        #: threads blocked in a read return at once.
        self._streams: set[Any] = set()
        self._streams_lock = threading.Lock()
        self._auth: dict[str, str] | None = None
        #: Outages, said once each (see :class:`Reachability`).
        self.reachability = Reachability(self.host)
        self._closed = False

    @classmethod
    def from_config(
        cls, kubeconfig: str | None = None, context: str | None = None, *, pool_size: int = 32
    ) -> KubeClient:
        """Load credentials the way kubectl does: an explicit kubeconfig, else the
        in-cluster service account when running in a pod, else ``$KUBECONFIG`` or
        ``~/.kube/config``."""
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config

        configuration = k8s.Configuration()
        if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        return cls(configuration, pool_size=pool_size)

    def _prepare(
        self, method: str, path: str, query: Mapping[str, Any] | None, content_type: str
    ) -> tuple[str, dict[str, str]]:
        headers: dict[str, str] = {"Accept": JSON, "Content-Type": content_type}
        headers.update(self._api.default_headers)
        queries: list[tuple[str, str]] = []
        # The client's own auth step: bearer tokens, refreshed by its hooks (exec
        # plugins, projected service-account tokens); client certs live in the pool.
        # Without a refresh hook the token cannot change: its headers are kept (the
        # step costs a tenth of a busy scheduler's CPU otherwise).
        if self.configuration.refresh_api_key_hook is not None or self._auth is None:
            auth: dict[str, str] = {}
            self._api.update_params_for_auth(auth, queries, ["BearerToken"], path, method, None)
            if self.configuration.refresh_api_key_hook is None and not queries:
                self._auth = auth
        else:
            auth = self._auth
        headers.update(auth)
        url = self.host + path
        params = [
            (k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()
        ]
        params.extend(queries)
        if params:
            url += "?" + urlencode(params)
        return url, headers

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        """One request; ``(HTTP status, decoded JSON body or None)``."""
        url, headers = self._prepare(method, path, query, content_type)
        payload = None if body is None else orjson.dumps(body)
        try:
            resp = self._pool.request(
                method,
                url,
                body=payload,
                headers=headers,
                timeout=urllib3.Timeout(total=timeout),
                retries=False,
                preload_content=True,
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            self._failed(f"{method} {path}: {err}")
            raise ApiUnavailable(f"{method} {path}: {err}") from err
        self._answered(resp.status, f"{method} {path}")
        return resp.status, _decode(resp.data)

    def _failed(self, what: str, *, answer: bool = False) -> None:
        if not self._closed:  # (a stop breaks the watches being read: no outage)
            self.reachability.failed(what, answer=answer)

    def _answered(self, status: int, what: str) -> None:
        if status in NOT_SERVING:
            self._failed(f"{what}: HTTP {status}", answer=True)
        else:
            self.reachability.answered()

    def stream(
        self, path: str, query: Mapping[str, Any], *, timeout: float
    ) -> Iterator[tuple[int, Any]]:
        """A watch: yields ``(status, event)`` per line (one ``(status, body)`` for a
        refused request). Ends when the server closes the stream; raises
        :class:`ApiUnavailable` when the connection breaks."""
        url, headers = self._prepare("GET", path, query, JSON)
        try:
            resp = self._pool.request(
                "GET",
                url,
                headers=headers,
                timeout=urllib3.Timeout(connect=10.0, read=timeout),
                retries=False,
                preload_content=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            self._failed(f"watch {path}: {err}")
            raise ApiUnavailable(f"watch {path}: {err}") from err
        self._answered(resp.status, f"watch {path}")
        with self._streams_lock:
            self._streams.add(resp)
        try:
            if resp.status != 200:
                yield resp.status, _decode(resp.read())
                return
            buf = b""
            for chunk in resp.stream(65536, decode_content=True):
                buf += chunk
                if b"\n" not in chunk:
                    continue
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line:
                        yield 200, orjson.loads(line)
            if buf.strip():
                yield 200, orjson.loads(buf)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            self._failed(f"watch {path}: {err}")
            raise ApiUnavailable(f"watch {path}: {err}") from err
        finally:
            with self._streams_lock:
                self._streams.discard(resp)
            resp.release_conn()

    def close(self) -> None:
        """Close every connection, the watches being read included."""
        self._closed = True
        with self._streams_lock:
            streams = list(self._streams)
        for resp in streams:
            with contextlib.suppress(RuntimeError, OSError):  # (released or closed meanwhile)
                resp.shutdown()
        self._pool.clear()


def rfc3339(wall: float | None = None) -> str:
    """A time (unix seconds; default now) as the API writes one: UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


def status_message(body: Any) -> str:
    """The human part of an API error body (a ``Status`` object)."""
    if isinstance(body, Mapping):
        return str(body.get("message") or body.get("reason") or "")
    return ""


def list_items(kind: str, body: Mapping[str, Any]) -> Sequence[dict[str, Any]]:
    """A list response's items with ``apiVersion`` and ``kind`` filled in (the API
    leaves them out of list items; the cache's parsers read ``kind``)."""
    items = body.get("items") or []
    version = body.get("apiVersion") or API_VERSIONS.get(kind, "v1")  # (as served)
    api_kind = API_KINDS.get(kind, kind)
    for item in items:
        item.setdefault("apiVersion", version)
        item.setdefault("kind", api_kind)
    return items


def kind_name(obj: Mapping[str, Any]) -> str:
    """The kind name (a key of :data:`RESOURCES`) of an object: its ``kind``, except
    Kubernetes' batch/v1 Job, which is ``BatchJob`` beside Volcano's Job."""
    kind = str(obj.get("kind") or "")
    if kind == "Job" and str(obj.get("apiVersion") or "").startswith("batch/"):
        return "BatchJob"
    return kind


__all__ = [
    "API_KINDS",
    "API_VERSIONS",
    "MERGE_PATCH",
    "RESOURCES",
    "STRATEGIC_PATCH",
    "ApiUnavailable",
    "KubeClient",
    "Resource",
    "kind_name",
    "list_items",
    "rfc3339",
    "status_message",
]
