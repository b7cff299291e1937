"""The Queue controller: a queue's state (Open, Closing, Closed) and its PodGroup counts.

Volcano's ``queue-controller``, over a :class:`pumice.controllers.store.Store`:

- **State.** Volcano's Queue has no desired state in its spec: the state lives in
  ``status.state`` and changes through ``bus.volcano.sh/v1alpha1`` Commands whose target
  is the Queue (``pumice queue close``, ``vcctl queue operate -a close``). ``OpenQueue``
  opens it; ``CloseQueue`` makes it ``Closed`` when no PodGroup of the queue is left,
  else ``Closing``; a ``Closing`` queue becomes ``Closed`` once its last PodGroup is gone
  (Volcano's rule counts every PodGroup that names the queue, whatever its phase, so a
  finished PodGroup still held by its Job keeps the queue Closing until it is deleted).
  A queue written with a state (a snapshot's ``status.state``, a status patch) is taken
  as it says, except that ``Closing`` with no PodGroup left is ``Closed``; a queue with
  no state is ``Open``. Each Command is deleted once applied (consumed), with a Normal
  Event on the Queue (or a Warning when it could not apply).
- **Hierarchy.** A queue whose ``spec.parent`` is Closing or Closed is closed too,
  and marked ``volcano.sh/closed-by-parent: "true"``; such a queue opens again with
  its parent. A queue under a closed parent cannot be opened by itself (the Command
  waits a little, as Volcano retries it, in case the parent is being opened, then is
  dropped with a Warning); ``root`` cannot be closed.
- **Counts.** ``status.pending``, ``inqueue``, ``running``, ``unknown`` and
  ``completed``: the queue's PodGroups by phase (a PodGroup with no phase yet counts as
  Pending, and one with no ``spec.queue`` belongs to the default queue, as the
  scheduler reads them). These and ``status.state`` are the fields this controller
  writes, by merge patch: ``status.allocated`` is the scheduler's.
- **Default queues.** The default queue (weight 1, reclaimable) is created when it is
  missing, and ``root`` (weight 1, not reclaimable) too with ``hierarchy``, as Volcano's
  scheduler does at start.

A closed queue admits nothing new: pumice's scheduler enqueues no job of a queue that is
not Open, and allocates nothing to it (see ``QueueInfo.is_open``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pumice.api import parse
from pumice.cluster.protocol import DELETED, WatchEvent
from pumice.controllers import events
from pumice.controllers.commands import (
    CLOSE_QUEUE,
    OPEN_QUEUE,
    QUEUE_API_VERSION,
    Command,
    parse_command,
)
from pumice.controllers.store import Store
from pumice.errors import InputError

log = logging.getLogger("pumice.controllers.queue")

OPEN = "Open"
CLOSING = "Closing"
CLOSED = "Closed"
UNKNOWN = "Unknown"
ROOT = "root"
CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"
COMPONENT = "pumice-queue-controller"
#: The status fields this controller writes: PodGroup phase -> status field.
COUNTS = {
    "Pending": "pending",
    "Inqueue": "inqueue",
    "Running": "running",
    "Unknown": "unknown",
    "Completed": "completed",
}
#: Tries (a second apart) of an OpenQueue whose parent is closed, before it is dropped.
OPEN_TRIES = 10
_CMD = "command:"


def next_state(state: str, action: str, podgroups: int) -> str:
    """Volcano's queue state machine: the state after ``action`` (OpenQueue, CloseQueue,
    or anything else: a sync) of a queue in ``state`` holding ``podgroups`` PodGroups."""
    state = state or OPEN
    if action == OPEN_QUEUE:
        return OPEN
    if action == CLOSE_QUEUE:
        if state == CLOSED:
            return CLOSED
        return CLOSING if podgroups else CLOSED
    if state == CLOSING and not podgroups:
        return CLOSED
    return state


def _closed(state: str) -> bool:
    return state in (CLOSING, CLOSED)


def _queue_of_group(pg: Mapping[str, Any], default: str) -> str:
    return str((pg.get("spec") or {}).get("queue") or default)


def _pg_key(pg: Mapping[str, Any]) -> str:
    meta = pg.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


class QueueController:
    """See the module docstring. ``default_queue``: the queue of a PodGroup that names
    none, created when missing; ``hierarchy``: also create ``root``."""

    name = "queue"
    kinds = ("Queue", "PodGroup", "Command")

    def __init__(
        self, store: Store, *, default_queue: str = parse.DEFAULT_QUEUE, hierarchy: bool = False
    ) -> None:
        self.store = store
        self.default_queue = default_queue
        self.hierarchy = hierarchy
        #: Queue name -> keys of its PodGroups, and PodGroup key -> its queue, kept from
        #: the watch (Volcano's index), so a count reads only the queue's own groups.
        self._groups: dict[str, set[str]] = {}
        self._queue_of: dict[str, str] = {}
        #: The state last seen per queue: a change concerns the queue's children.
        self._seen: dict[str, str] = {}
        #: Tries so far of OpenQueue Commands waiting for a closed parent.
        self._tries: dict[str, int] = {}

    # -- the Controller protocol ----------------------------------------------------

    def keys_for(self, event: WatchEvent) -> Iterable[str]:
        if event.kind == "PodGroup":
            return self._index(event)
        if event.kind == "Command":
            if event.type == DELETED:
                self._tries.pop(event.key, None)
                return ()
            return (_CMD + event.key,) if self._for_queue(event.obj) else ()
        name = event.key
        state = "" if event.type == DELETED else self._state(event.obj)
        keys = [name]
        if self._seen.get(name, state) != state:
            keys.extend(self._children(name))
        if event.type == DELETED:
            self._seen.pop(name, None)
        else:
            self._seen[name] = state
        return keys

    def resync(self) -> Iterable[str]:
        for pg in self.store.list("PodGroup"):
            self._add(_pg_key(pg), _queue_of_group(pg, self.default_queue))
        names = {str((q.get("metadata") or {}).get("name", "")) for q in self.store.list("Queue")}
        names.add(self.default_queue)
        if self.hierarchy:
            names.add(ROOT)
        commands = [_CMD + _pg_key(c) for c in self.store.list("Command") if self._for_queue(c)]
        return [*sorted(names), *commands]

    def reconcile(self, key: str) -> float | None:
        if key.startswith(_CMD):
            return self._command(key[len(_CMD) :])
        queue = self.store.get("Queue", key)
        if queue is None:
            self._create_missing(key)
            return None
        self._sync(queue, "")
        return None

    # -- PodGroups ------------------------------------------------------------------

    def _index(self, event: WatchEvent) -> list[str]:
        key = event.key
        before = self._queue_of.get(key)
        if event.type == DELETED:
            self._drop(key)
            return [before or _queue_of_group(event.obj, self.default_queue)]
        now = _queue_of_group(event.obj, self.default_queue)
        if before != now:
            self._drop(key)
            self._add(key, now)
        return [now] if before in (None, now) else [now, before]

    def _add(self, key: str, queue: str) -> None:
        self._queue_of[key] = queue
        self._groups.setdefault(queue, set()).add(key)

    def _drop(self, key: str) -> None:
        queue = self._queue_of.pop(key, None)
        if queue is not None:
            keys = self._groups.get(queue)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._groups[queue]

    def _podgroups(self, name: str) -> list[Mapping[str, Any]]:
        """The queue's PodGroups as the store has them (stale index entries dropped)."""
        out = []
        for key in sorted(self._groups.get(name, ())):
            pg = self.store.get("PodGroup", key)
            if pg is None or _queue_of_group(pg, self.default_queue) != name:
                self._drop(key)
                if pg is not None:
                    self._add(key, _queue_of_group(pg, self.default_queue))
                continue
            out.append(pg)
        return out

    # -- queue state ----------------------------------------------------------------

    @staticmethod
    def _state(queue: Mapping[str, Any]) -> str:
        return str((queue.get("status") or {}).get("state") or "")

    def _children(self, name: str) -> list[str]:
        return [
            str(q["metadata"]["name"])
            for q in self.store.list("Queue")
            if (q.get("spec") or {}).get("parent") == name and q.get("metadata")
        ]

    def _sync(self, queue: Mapping[str, Any], action: str) -> str:
        """Apply ``action`` ("" for a sync) and the parent's state to ``queue``; write the
        state and counts that changed; the state it ends in."""
        meta = queue.get("metadata") or {}
        name = str(meta.get("name", ""))
        current = self._state(queue)
        closed_by_parent = (meta.get("annotations") or {}).get(CLOSED_BY_PARENT) == "true"
        parent_name = str((queue.get("spec") or {}).get("parent") or "")
        parent = self.store.get("Queue", parent_name) if parent_name else None
        parent_closed = parent is not None and _closed(self._state(parent))
        if not action:
            if parent_closed and not _closed(current or OPEN):
                self._mark(name, "true")
                action = CLOSE_QUEUE
            elif parent is not None and not parent_closed and closed_by_parent:
                if _closed(current):
                    action = OPEN_QUEUE
                self._mark(name, "false")
        elif action == OPEN_QUEUE:
            self._mark(name, "false")
        groups = self._podgroups(name)
        state = next_state(current, action, len(groups))
        status: dict[str, Any] = {}
        if state != current:
            status["state"] = state
        counts = dict.fromkeys(COUNTS.values(), 0)
        for pg in groups:
            phase = str((pg.get("status") or {}).get("phase") or "Pending")
            field = COUNTS.get(phase)
            if field is not None:
                counts[field] += 1
        stored = queue.get("status") or {}
        for field, n in counts.items():
            if stored.get(field) != n:
                status[field] = n
        if status:
            self.store.patch("Queue", name, {"status": status}, subresource="status")
        if state != current and current:
            log.info("queue %s: %s -> %s", name, current, state)
        return state

    def _mark(self, name: str, value: str) -> None:
        """The ``volcano.sh/closed-by-parent`` annotation, written when it changes."""
        queue = self.store.get("Queue", name) or {}
        annotations = (queue.get("metadata") or {}).get("annotations") or {}
        if annotations.get(CLOSED_BY_PARENT) == value:
            return
        if value == "false" and CLOSED_BY_PARENT not in annotations:
            return
        self.store.patch("Queue", name, {"metadata": {"annotations": {CLOSED_BY_PARENT: value}}})

    def _create_missing(self, name: str) -> None:
        if name == self.default_queue:
            reclaimable = True
        elif self.hierarchy and name == ROOT:
            reclaimable = False
        else:
            return
        made = self.store.create(
            {
                "apiVersion": QUEUE_API_VERSION,
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1, "reclaimable": reclaimable},
            }
        )
        if made is not None:
            log.info("queue %s created", name)

    # -- Commands -------------------------------------------------------------------

    @staticmethod
    def _for_queue(obj: Mapping[str, Any]) -> bool:
        target = obj.get("target")
        return isinstance(target, Mapping) and target.get("kind") == "Queue"

    def _command(self, key: str) -> float | None:
        obj = self.store.get("Command", key)
        if obj is None:
            self._tries.pop(key, None)
            return None
        try:
            cmd = parse_command(obj)
        except InputError as err:
            log.warning("Command dropped: %s", err.render())
            self._consume(key)
            return None
        if not cmd.targets("Queue"):
            return None
        queue = self.store.get("Queue", cmd.target_name)
        if queue is None:
            log.warning("Command %s dropped: queue %s does not exist", key, cmd.target_name)
            self._consume(key)
            return None
        refusal = self._refusal(queue, cmd)
        if refusal is not None:
            tries = self._tries.get(key, 0) + 1
            if cmd.action == OPEN_QUEUE and tries < OPEN_TRIES:
                self._tries[key] = tries
                return 1.0
            self._event(queue, "Warning", cmd.action, refusal)
            self._consume(key)
            return None
        before = self._state(queue) or OPEN
        after = self._sync(queue, cmd.action if cmd.action in (OPEN_QUEUE, CLOSE_QUEUE) else "")
        if after != before:
            verb = "Open" if cmd.action == OPEN_QUEUE else "Close"
            self._event(queue, "Normal", cmd.action, f"{verb} queue succeed")
        self._consume(key)
        return None

    def _refusal(self, queue: Mapping[str, Any], cmd: Command) -> str | None:
        """Why ``cmd`` cannot apply to ``queue`` (None: it can)."""
        name = cmd.target_name
        if cmd.action == CLOSE_QUEUE and name == ROOT:
            return "the root queue cannot be closed"
        if cmd.action == OPEN_QUEUE:
            parent = str((queue.get("spec") or {}).get("parent") or "")
            if parent and parent != ROOT:
                p = self.store.get("Queue", parent)
                if p is not None and _closed(self._state(p)):
                    return (
                        f"queue {name} cannot open: its parent queue {parent} is "
                        f"{self._state(p)}; open the parent first"
                    )
        return None

    def _consume(self, key: str) -> None:
        self._tries.pop(key, None)
        self.store.delete("Command", key, cascade=False)

    def _event(self, queue: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """An Event about ``queue`` (in namespace ``default``, as Kubernetes records
        them for cluster-scoped objects); the same Event again is counted."""
        meta = queue.get("metadata") or {}
        involved = {
            "apiVersion": QUEUE_API_VERSION,
            "kind": "Queue",
            "name": str(meta.get("name", "")),
            "uid": str(meta.get("uid", "")),
        }
        events.record(self.store, involved, type_, reason, message, component=COMPONENT)


__all__ = ["QueueController", "next_state"]
