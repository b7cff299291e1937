"""``bus.volcano.sh/v1alpha1`` Commands: how users steer Jobs and Queues.

A Command is a request to act on one object, named by ``target`` (an ownerReference:
``apiVersion``, ``kind``, ``name``, ``uid``), with an ``action`` (``AbortJob``,
``ResumeJob``, ``OpenQueue``, ``CloseQueue``...). The controller that owns the target's
kind applies it and then deletes it: a Command is consumed, and its effect lives on in
the target's status. vcctl (and ``pumice job suspend`` / ``pumice queue close``)
creates them in the target's namespace (``default`` for a cluster-scoped Queue), named
``<target>-<action in lower case>-<random suffix>``, with an ownerReference to the
target as well, so that deleting the target deletes its unapplied Commands.

Every controller reads Commands through :func:`parse_command` and picks its own with
:meth:`Command.targets`, so the Job and Queue controllers agree on what a Command is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pumice.errors import InputError

API_VERSION = "bus.volcano.sh/v1alpha1"
KIND = "Command"

QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"
JOB_API_VERSION = "batch.volcano.sh/v1alpha1"

OPEN_QUEUE = "OpenQueue"
CLOSE_QUEUE = "CloseQueue"
#: The actions a Command may ask of a Queue (Volcano's queue state machine).
QUEUE_ACTIONS = frozenset({OPEN_QUEUE, CLOSE_QUEUE})
#: The actions a Command may ask of a Job (Volcano's job state machine).
JOB_ACTIONS = frozenset(
    {
        "AbortJob",
        "RestartJob",
        "RestartTask",
        "RestartPod",
        "TerminateJob",
        "CompleteJob",
        "ResumeJob",
    }
)


@dataclass(frozen=True, slots=True)
class Command:
    """One Command, validated (see the module docstring)."""

    namespace: str
    name: str
    action: str
    target_api_version: str
    target_kind: str
    target_name: str
    target_uid: str
    reason: str = ""
    message: str = ""
    #: ``metadata.creationTimestamp`` as written (RFC 3339 sorts as text), for ordering
    #: several Commands to one target.
    created: str = ""

    @property
    def key(self) -> str:
        """The Command's store key, ``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def targets(self, kind: str) -> bool:
        """Whether the Command is for an object of ``kind`` (``Queue``, ``Job``): the kind
        and, when the target gives one, the API group Volcano gives that kind. A target
        ``apiVersion`` of another group (a ``batch/v1`` Job) is someone else's."""
        if self.target_kind != kind:
            return False
        expected = {"Queue": QUEUE_API_VERSION, "Job": JOB_API_VERSION}.get(kind)
        if not self.target_api_version or expected is None:
            return True
        return self.target_api_version.split("/")[0] == expected.split("/")[0]

    def order(self) -> tuple[str, str]:
        """Oldest first, then by name: the order in which Commands to one target apply."""
        return (self.created, self.name)


def _text(value: Any, field: str, obj: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", obj=obj, field=field)
    return value


def parse_command(obj: Mapping[str, Any]) -> Command:
    """A Command object as a :class:`Command`; :class:`InputError` naming the Command and
    the field when ``action`` or ``target`` is missing or malformed."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    where = f"Command {namespace}/{name}"
    action = _text(obj.get("action"), "action", where)
    if not action:
        raise InputError("is required", obj=where, field="action")
    target = obj.get("target")
    if target is None:
        raise InputError("is required (the object the command is for)", obj=where, field="target")
    if not isinstance(target, Mapping):
        raise InputError("expected an object reference", obj=where, field="target")
    kind = _text(target.get("kind"), "target.kind", where)
    target_name = _text(target.get("name"), "target.name", where)
    for field, value in (("target.kind", kind), ("target.name", target_name)):
        if not value:
            raise InputError("is required", obj=where, field=field)
    created = meta.get("creationTimestamp")
    return Command(
        namespace=namespace,
        name=name,
        action=action,
        target_api_version=_text(target.get("apiVersion"), "target.apiVersion", where),
        target_kind=kind,
        target_name=target_name,
        target_uid=_text(target.get("uid"), "target.uid", where),
        reason=_text(obj.get("reason"), "reason", where),
        message=_text(obj.get("message"), "message", where),
        created="" if created is None else str(created),
    )


def new_command(
    target: Mapping[str, Any], action: str, *, name: str = "", namespace: str = ""
) -> dict[str, Any]:
    """A Command for ``target`` (a Job or Queue object) as vcctl makes it: in the
    target's namespace (``namespace`` for a cluster-scoped target, else ``default``),
    ``target`` and an ownerReference pointing at it. Without ``name`` it carries
    ``generateName: <target>-<action in lower case>-`` for the API server to complete."""
    meta = target.get("metadata") or {}
    ref = {
        "apiVersion": str(target.get("apiVersion") or ""),
        "kind": str(target.get("kind") or ""),
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    cmd_meta: dict[str, Any] = {
        "namespace": str(meta.get("namespace") or namespace or "default"),
        "ownerReferences": [dict(ref)],
    }
    if name:
        cmd_meta["name"] = name
    else:
        cmd_meta["generateName"] = f"{ref['name']}-{action.lower()}-"
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": cmd_meta,
        "action": action,
        "target": ref,
    }


__all__ = [
    "CLOSE_QUEUE",
    "JOB_ACTIONS",
    "OPEN_QUEUE",
    "QUEUE_ACTIONS",
    "Command",
    "new_command",
    "parse_command",
]
