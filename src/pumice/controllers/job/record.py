"""Kubernetes Events about a Job (what ``kubectl describe job`` shows), through
:func:`pumice.controllers.events.record`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pumice.controllers import events
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
    involved = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace") or "default",
        "uid": meta.get("uid", ""),
    }
    events.record(store, involved, type_, reason, message, component=COMPONENT, counts=counts)


__all__ = ["COMPONENT", "record"]
