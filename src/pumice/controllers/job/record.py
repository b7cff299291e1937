"""Kubernetes Events about a Job (what ``kubectl describe job`` shows).

An Event is named for the Job and what it says, so the same Event again bumps its
``count`` and ``lastTimestamp`` instead of piling up, as Kubernetes' recorder does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pumice.controllers.job.spec import API_VERSION, KIND
from pumice.controllers.store import Store

COMPONENT = "pumice-job-controller"


def record(
    store: Store,
    job: Mapping[str, Any],
    type_: str,
    reason: str,
    message: str,
    counts: dict[str, int] | None = None,
) -> None:
    """Record an Event (``type_`` Normal or Warning) about ``job``. ``counts`` keeps
    how often each Event was recorded, so a repeat is one write (no read of Events)."""
    meta = job.get("metadata") or {}
    ns, name, uid = meta.get("namespace") or "default", meta.get("name", ""), meta.get("uid", "")
    digest = hashlib.sha1(f"{uid}\0{type_}\0{reason}\0{message}".encode()).hexdigest()[:16]
    ev_name = f"{name}.{digest}"
    now = store.stamp()
    made = store.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": ev_name, "namespace": ns},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": name,
                "namespace": ns,
                "uid": uid,
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
    )
    key = f"{ns}/{ev_name}"
    if counts is None:
        counts = {}
    if made is None:
        counts[key] = counts.get(key, 1) + 1
        store.patch("Event", key, {"count": counts[key], "lastTimestamp": now})
    else:
        counts[key] = 1


__all__ = ["COMPONENT", "record"]
