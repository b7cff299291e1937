"""Lifecycle policies: which action an event calls for.

Volcano's ``applyPolicies``: a task's policies first (for an event about one of its
pods), then the Job's; a policy matches when it names the event (or ``*``), or when its
``exitCode`` is the failed container's. The first match wins; no match is ``SyncJob``.
``PodPending`` only matches a policy with a ``timeout`` (a pod is pending for a while
before it is a problem). A matching policy with a ``timeout`` acts only once its event
has held that long (:class:`Decision.delay`).

With no policy at all, every event is ``SyncJob``: a failed pod stays failed (it counts
in the completion rule), an evicted or deleted pod is created again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pumice.controllers.job.spec import JobSpec, Policy
from pumice.controllers.job.state import SYNC


@dataclass(frozen=True, slots=True)
class Decision:
    action: str
    delay: float = 0.0


def _match(policies: tuple[Policy, ...], event: str, exit_code: int | None) -> Decision | None:
    for p in policies:
        named = p.events and (event in p.events or "*" in p.events)
        if named and (event != "PodPending" or p.timeout is not None):
            return Decision(p.action, p.timeout or 0.0)
        if p.exit_code is not None and exit_code is not None and p.exit_code == exit_code:
            return Decision(p.action, p.timeout or 0.0)
    return None


def action_for(
    spec: JobSpec, event: str, *, task: str = "", exit_code: int | None = None
) -> Decision:
    """The action ``event`` (about a pod of ``task``, whose container exited with
    ``exit_code``) calls for under ``spec``'s policies."""
    if task:
        t = spec.task(task)
        if t is not None:
            got = _match(t.policies, event, exit_code)
            if got is not None:
                return got
    return _match(spec.policies, event, exit_code) or Decision(SYNC)


__all__ = ["Decision", "action_for"]
