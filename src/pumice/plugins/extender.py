"""extender: ask an HTTP service for the decisions of a plugin (Volcano's extender).

The service lives at ``extender.urlPrefix``; each configured verb is a path under it
that pumice POSTs JSON to, in Volcano's shapes (:mod:`pumice.plugins.extender_wire`):

==========================  =========================  ===================================
argument                    request                    answer
==========================  =========================  ===================================
``onSessionOpenVerb``       ``{"Jobs", "Nodes",        (ignored) once per cycle; when it
                            "Queues", ...}``           fails, the extender takes no part in
                                                       the cycle (unless ignorable)
``onSessionCloseVerb``      ``{}``                     (ignored) at the end of the cycle
``predicateVerb``           ``{"task", "node"}``,      ``{"status": "why not", "code"}``:
                            for each node              a non-empty ``status`` refuses the
                                                       node
``prioritizeVerb``          ``{"task", "nodes"}``      ``{"nodeScore": {node: score},
                                                       "errorMessage"}``, added to the
                                                       other plugins' scores
``preemptableVerb``,        ``{"evictor",              ``{"status": -1/0/1, "victims"}``:
``reclaimableVerb``         "evictees"}``              0 abstains, else the victims allowed
``jobEnqueueableVerb``      ``{"job"}``                ``{"status": -1/0/1}``, a vote
``jobEnqueuedVerb``         ``{"job"}``                (ignored) the job was admitted
``queueOverusedVerb``       ``{"queue"}``              ``{"overused": bool}``
``jobReadyVerb``            ``{"job"}``                ``{"status": bool}``
``allocateFuncVerb``,       ``{"task"}``               ``{"errorMessage"}``: told of each
``deallocateFuncVerb``                                 placement and eviction
==========================  =========================  ===================================

Every argument key is ``extender.<name>``. A call that fails (no answer within
``extender.httpTimeout``, default ``1s``; an HTTP status other than 200; an answer that
is not the JSON expected or larger than 10 MiB) refuses: the node is refused with the
error's text, no victim is allowed, the job is not admitted, the queue counts as
overused, the job is not ready. With ``extender.ignorable: true`` a failed call is
ignored instead: the extender abstains. ``extender.managedResources`` (a list of
resource names) limits the per-task calls to pods that request one of them; for the
others the extender abstains.

Differences from Volcano: an ignorable failure abstains everywhere (Volcano permits an
enqueue, allows no victim, and holds a job not ready); an error in the
``allocateFuncVerb`` answer is logged but cannot undo the placement (pumice's event
handlers only listen); and ``Pod``/``Node`` in the requests are rebuilt from pumice's
model (see :mod:`pumice.plugins.extender_wire`).

The extender's answers may change at any time, so a cycle with an extender always runs
(``valid_until`` is -inf), and its per-task calls keep allocate off its fast path: the
predicate is not *by placement* (another pod of the same shape may get another answer),
and the score has no separable form.
"""

from __future__ import annotations

import http.client
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import orjson

from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments, go_duration
from pumice.errors import InputError, shown
from pumice.framework.session import EventHandler, Session
from pumice.plugins.extender_wire import job_json, node_json, queue_json, task_json

log = logging.getLogger("pumice.extender")

PREFIX = "extender."
URL_PREFIX = "extender.urlPrefix"
HTTP_TIMEOUT = "extender.httpTimeout"
IGNORABLE = "extender.ignorable"
MANAGED_RESOURCES = "extender.managedResources"
VERBS = (
    "onSessionOpen",
    "onSessionClose",
    "predicate",
    "prioritize",
    "preemptable",
    "reclaimable",
    "queueOverused",
    "jobEnqueueable",
    "jobEnqueued",
    "jobReady",
    "allocateFunc",
    "deallocateFunc",
)
#: Volcano's limit on an answer's size.
MAX_BODY = 10 << 20
DEFAULT_TIMEOUT = 1.0
_OWNER = "plugin extender"


class ExtenderError(Exception):
    """A call to the extender that got no usable answer."""


class Client:
    """POSTs JSON to ``<urlPrefix>/<verb>`` over one kept-alive connection (the cycle
    runs in one thread)."""

    def __init__(self, url_prefix: str, timeout: float) -> None:
        parts = urlsplit(url_prefix)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(
                f"expected an http:// or https:// URL, got {shown(url_prefix)}",
                obj=_OWNER,
                field=f"arguments.{URL_PREFIX}",
            )
        self.prefix = url_prefix.rstrip("/")
        self.path = parts.path.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self.scheme == "https":
                self._conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout)
            else:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def send(self, verb: str, body: Mapping[str, Any]) -> Any:
        """The decoded answer to ``body`` POSTed to ``verb``; ExtenderError when none."""
        url = f"{self.prefix}/{verb}"
        data = orjson.dumps(body)
        try:
            conn = self._connection()
            conn.request(
                "POST", f"{self.path}/{verb}", body=data,
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            resp = conn.getresponse()
            payload = resp.read(MAX_BODY + 1)
            if resp.will_close:
                self.close()
        except (OSError, http.client.HTTPException) as err:
            self.close()
            raise ExtenderError(f"{verb} with extender at URL {url}: {err}") from None
        if resp.status != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {resp.status}")
        if len(payload) > MAX_BODY:
            self.close()
            raise ExtenderError(f"{verb} with extender at URL {url}: answer over 10 MiB")
        if not payload.strip():
            return {}
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise ExtenderError(f"{verb} with extender at URL {url}: no JSON answer") from None


def _field(answer: Any, key: str, kind: type | tuple[type, ...], default: Any, verb: str) -> Any:
    """``answer[key]`` checked to be ``kind`` (absent: ``default``)."""
    if not isinstance(answer, dict):
        raise ExtenderError(f"{verb}: the answer is not a JSON object")
    value = answer.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ExtenderError(f"{verb}: {shown(key)} is not of the expected type: {shown(value)}")
    return value


class ExtenderPlugin:
    name = "extender"
    argument_keys = (
        URL_PREFIX,
        HTTP_TIMEOUT,
        IGNORABLE,
        MANAGED_RESOURCES,
        *(f"{PREFIX}{verb}Verb" for verb in VERBS),
    )

    def __init__(self, arguments: Arguments) -> None:
        self.verbs: dict[str, str] = {}
        for verb in VERBS:
            value = arguments.get_str(f"{PREFIX}{verb}Verb", "")
            if value:
                self.verbs[verb] = value.strip("/")
        prefix = arguments.get_str(URL_PREFIX, "")
        timeout = DEFAULT_TIMEOUT
        if HTTP_TIMEOUT in arguments:
            raw = arguments.get_str(HTTP_TIMEOUT, "")
            seconds = go_duration(raw)
            if seconds is None or seconds <= 0:
                raise InputError(
                    f"expected a positive duration such as 100ms or 1s, got {shown(raw)}",
                    obj=_OWNER,
                    field=f"arguments.{HTTP_TIMEOUT}",
                )
            timeout = seconds
        self.ignorable = arguments.get_bool(IGNORABLE, False)
        managed = arguments.raw(MANAGED_RESOURCES)
        if managed is None:
            managed = []
        if not isinstance(managed, list) or not all(isinstance(m, str) for m in managed):
            raise InputError(
                f"expected a list of resource names, got {shown(managed)}",
                obj=_OWNER,
                field=f"arguments.{MANAGED_RESOURCES}",
            )
        self.managed = frozenset(managed)
        if self.verbs and not prefix:
            raise InputError(
                "is required when a verb is configured", obj=_OWNER, field=f"arguments.{URL_PREFIX}"
            )
        self.client = Client(prefix, timeout) if prefix else None
        #: The extender takes part in this cycle (its onSessionOpen answered).
        self.active = False
        self._ssn: Session | None = None
        #: Per cycle: the task uids interested by resource (managedResources).
        self._interested: dict[str, bool] = {}

    # -- calls --------------------------------------------------------------------------

    def call(self, verb: str, body: Mapping[str, Any]) -> Any:
        """The answer of ``verb`` (which must be configured)."""
        assert self.client is not None
        return self.client.send(self.verbs[verb], body)

    def interested(self, task: TaskInfo) -> bool:
        """Does ``task`` request a resource the extender manages (any, without a
        ``managedResources`` list)?"""
        if not self.managed:
            return True
        got = self._interested.get(task.uid)
        if got is None:
            assert self._ssn is not None
            names = self._ssn.space.names
            asked = np.flatnonzero((task.resreq > 0) | (task.init_resreq > 0)).tolist()
            got = interested_names(sorted(self.managed), [names[d] for d in asked])
            self._interested[task.uid] = got
        return got

    def _failed(self, verb: str, err: ExtenderError) -> None:
        log.warning("extender %s failed: %s", verb, err)

    # -- the cycle ----------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        verbs = self.verbs
        if "predicate" in verbs:
            ssn.on("predicate", self.name, self._predicate, per_task=True)
        if "prioritize" in verbs:
            ssn.on("node_order", self.name, self._prioritize)
        if "preemptable" in verbs:
            ssn.on("preemptable", self.name, self._victims_fn("preemptable"))
        if "reclaimable" in verbs:
            ssn.on("reclaimable", self.name, self._victims_fn("reclaimable"))
        if "jobEnqueueable" in verbs:
            ssn.on("job_enqueueable", self.name, self._enqueueable)
        if "jobEnqueued" in verbs:
            ssn.on("job_enqueued", self.name, self._enqueued)
        if "queueOverused" in verbs:
            ssn.on("overused", self.name, self._overused)
        if "jobReady" in verbs:
            ssn.on("job_ready", self.name, self._ready)
        if "allocateFunc" in verbs or "deallocateFunc" in verbs:
            ssn.add_event_handler(
                EventHandler(
                    allocate=self._event("allocateFunc") if "allocateFunc" in verbs else None,
                    deallocate=(
                        self._event("deallocateFunc") if "deallocateFunc" in verbs else None
                    ),
                )
            )

    def on_cycle_open(self, ssn: Session) -> None:
        """Tell the extender of the cycle (``onSessionOpenVerb``); when that fails and
        failures are not ignorable, the extender takes no part in this cycle."""
        self._ssn = ssn
        self._interested = {}
        self.active = self.client is not None
        if "onSessionOpen" not in self.verbs:
            return
        names = ssn.space.names
        nodes = ssn.nodes
        all_nodes = {nodes.names[i]: node_json(nodes, i) for i in range(len(nodes))}
        revocable = {n: body for n, body in all_nodes.items() if body["RevocableZone"]}
        body = {
            "Jobs": {uid: job_json(job, names) for uid, job in ssn.jobs.items()},
            "Nodes": all_nodes,
            "Queues": {name: queue_json(q, names) for name, q in ssn.queues.items()},
            "NamespaceInfo": {},
            "RevocableNodes": revocable,
            "NodeList": None,
        }
        try:
            self.call("onSessionOpen", body)
        except ExtenderError as err:
            self._failed("onSessionOpen", err)
            if not self.ignorable:
                self.active = False

    def on_session_close(self, _ssn: Session) -> None:
        if self.active and "onSessionClose" in self.verbs:
            try:
                self.call("onSessionClose", {})
            except ExtenderError as err:
                self._failed("onSessionClose", err)

    def valid_until(self, _ssn: Session) -> float:
        """Never past this cycle: the extender may answer otherwise at any time."""
        return -math.inf

    # -- the hooks ----------------------------------------------------------------------

    def _predicate(self, task: TaskInfo) -> tuple[np.ndarray | None, list]:
        if not self.active or not self.interested(task):
            return None, []
        assert self._ssn is not None
        nodes = self._ssn.nodes
        names = self._ssn.space.names
        body_task = task_json(task, names)
        by_reason: dict[str, list[int]] = {}
        for i in range(len(nodes)):
            try:
                answer = self.call("predicate", {"task": body_task, "node": node_json(nodes, i)})
                why = _field(answer, "status", str, "", "predicate")
                _field(answer, "code", int, 0, "predicate")
            except ExtenderError as err:
                self._failed("predicate", err)
                if self.ignorable:
                    continue
                why = str(err)
            if why:
                by_reason.setdefault(f"were refused by the extender: {why}", []).append(i)
        if not by_reason:
            return None, []
        reasons = []
        blocked = np.zeros(len(nodes), dtype=bool)
        for why, rows in by_reason.items():
            mask = np.zeros(len(nodes), dtype=bool)
            mask[rows] = True
            blocked |= mask
            reasons.append((why, mask))
        return blocked, reasons

    def _prioritize(self, task: TaskInfo, cand: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(cand))
        if not self.active or not self.interested(task):
            return scores
        assert self._ssn is not None
        nodes = self._ssn.nodes
        names = self._ssn.space.names
        body = {
            "task": task_json(task, names),
            "nodes": [node_json(nodes, i) for i in cand.tolist()],
        }
        try:
            answer = self.call("prioritize", body)
            message = _field(answer, "errorMessage", str, "", "prioritize")
            given = _field(answer, "nodeScore", dict, None, "prioritize")
            if message or given is None:
                raise ExtenderError(f"prioritize: {message or 'no nodeScore in the answer'}")
        except ExtenderError as err:
            self._failed("prioritize", err)
            return scores
        for k, i in enumerate(cand.tolist()):
            value = given.get(nodes.names[i])
            if isinstance(value, int | float) and not isinstance(value, bool):
                scores[k] = float(value)
        return scores

    def _victims_fn(self, verb: str) -> Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo] | None]:
        def victims(evictor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            if not self.active or not self.interested(evictor):
                return None
            assert self._ssn is not None
            names = self._ssn.space.names
            body = {
                "evictor": task_json(evictor, names),
                "evictees": [task_json(t, names) for t in candidates],
            }
            try:
                answer = self.call(verb, body)
                status = _field(answer, "status", int, 0, verb)
                chosen = _field(answer, "victims", list, [], verb)
            except ExtenderError as err:
                self._failed(verb, err)
                return None if self.ignorable else []
            if status == 0:
                return None
            uids = {v.get("UID") for v in chosen if isinstance(v, dict)}
            return [t for t in candidates if t.uid in uids]

        return victims

    def _job_call(self, verb: str, job: JobInfo) -> Any:
        assert self._ssn is not None
        return self.call(verb, {"job": job_json(job, self._ssn.space.names)})

    def _enqueueable(self, job: JobInfo) -> int:
        if not self.active:
            return 0
        try:
            answer = self._job_call("jobEnqueueable", job)
            status = _field(answer, "status", int, 0, "jobEnqueueable")
        except ExtenderError as err:
            self._failed("jobEnqueueable", err)
            return 0 if self.ignorable else -1
        return (status > 0) - (status < 0)

    def _enqueued(self, job: JobInfo) -> None:
        if not self.active:
            return
        try:
            self._job_call("jobEnqueued", job)
        except ExtenderError as err:
            self._failed("jobEnqueued", err)

    def _overused(self, queue: QueueInfo) -> bool:
        if not self.active:
            return False
        assert self._ssn is not None
        body = {"queue": queue_json(queue, self._ssn.space.names)}
        try:
            return bool(_field(self.call("queueOverused", body), "overused", bool, False,
                               "queueOverused"))  # fmt: skip
        except ExtenderError as err:
            self._failed("queueOverused", err)
            return not self.ignorable

    def _ready(self, job: JobInfo) -> bool:
        if not self.active:
            return True
        try:
            return bool(_field(self._job_call("jobReady", job), "status", bool, False, "jobReady"))
        except ExtenderError as err:
            self._failed("jobReady", err)
            return self.ignorable

    def _event(self, verb: str) -> Callable[[TaskInfo], None]:
        def told(task: TaskInfo) -> None:
            if not self.active or not self.interested(task):
                return
            assert self._ssn is not None
            try:
                answer = self.call(verb, {"task": task_json(task, self._ssn.space.names)})
                message = _field(answer, "errorMessage", str, "", verb)
            except ExtenderError as err:
                self._failed(verb, err)
                return
            if message:
                log.warning("extender %s for %s: %s", verb, task.key, message)

        return told


def interested_names(managed: Sequence[str], requested: Sequence[str]) -> bool:
    """Whether a pod requesting ``requested`` resources interests an extender managing
    ``managed`` (every pod when ``managed`` is empty)."""
    return not managed or any(r in managed for r in requested)


__all__ = ["Client", "ExtenderError", "ExtenderPlugin", "interested_names"]
