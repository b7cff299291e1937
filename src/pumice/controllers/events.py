"""Kubernetes Events the controllers record (what ``kubectl describe`` shows).

An Event is named for its object and what it says, so the same Event again bumps its
``count`` and ``lastTimestamp`` instead of piling up, as Kubernetes' recorder does.
Events of a cluster-scoped object (a Queue) go to namespace ``default``, as Kubernetes
records them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pumice.controllers.store import Store


def record(
    store: Store,
    involved: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    *,
    component: str,
    counts: dict[str, int] | None = None,
) -> None:
    """Record an Event (``type_`` Normal or Warning) about the object ``involved``
    (``apiVersion``, ``kind``, ``name``, ``uid`` and, if namespaced, ``namespace``).
    ``counts`` keeps how often each Event was recorded, so that a repeat is one write;
    without it, a repeat reads the Event back for its count."""
    name, uid = str(involved.get("name", "")), str(involved.get("uid", ""))
    ns = str(involved.get("namespace") or "default")
    digest = hashlib.sha1(f"{uid}\0{type_}\0{reason}\0{message}".encode()).hexdigest()[:16]
    ev_name = f"{name}.{digest}"
    now = store.stamp()
    made = store.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": ev_name, "namespace": ns},
            "involvedObject": dict(involved),
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
    )
    key = f"{ns}/{ev_name}"
    if made is not None:
        if counts is not None:
            counts[key] = 1
        return
    if counts is None:
        old = store.get("Event", key) or {}
        count = int(old.get("count") or 1) + 1
    else:
        count = counts[key] = counts.get(key, 1) + 1
    store.patch("Event", key, {"count": count, "lastTimestamp": now})


__all__ = ["record"]
