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


def record(store: Store, job: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
    """Record an Event (``type_`` Normal or Warning) about ``job``."""
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
    if made is None:
        old = store.get("Event", f"{ns}/{ev_name}") or {}
        store.patch(
            "Event",
            f"{ns}/{ev_name}",
            {"count": int(old.get("count") or 1) + 1, "lastTimestamp": now},
        )


__all__ = ["COMPONENT", "record"]
