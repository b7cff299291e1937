"""The ``default`` Queue, created by the scheduler as Volcano's vc-scheduler does.

Jobs and pods that name no queue go to the default queue (``pumice run
--default-queue``). vc-scheduler creates that Queue at its start (weight 1, reclaimable)
when it is absent, so installing Volcano needs no Queue manifest, which could not be
applied in one go with the Queue CRD anyway (the CRD is not served yet when the Queue
comes). pumice does the same, with two differences that suit a scheduler started before
its CRDs: the Queue is created when the Queue CRD is first seen served (at the start, or
later when the CRD is installed), and only by the leader (a standby writes nothing).

It is ensured once per time the CRD becomes served: a default Queue deleted on purpose
afterwards stays deleted until the scheduler restarts (vc-scheduler too recreates it only
at its start). A refused create (RBAC without ``create`` on queues) is logged once and
tried again after :data:`RETRY_SECONDS`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from pumice.cluster.kube import KubeCluster
from pumice.cluster.kube_client import RESOURCES, ApiUnavailable, status_message

log = logging.getLogger("pumice.run")

#: How long after a failed create the next one is tried.
RETRY_SECONDS = 30.0


def default_queue_body(name: str) -> dict:
    """The Queue vc-scheduler creates: weight 1, reclaimable (its other fields left to
    their defaults: no capability, open)."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True},
    }


class DefaultQueue:
    """Call :meth:`ensure` every loop turn: it writes at most once per CRD appearance.

    ``may_write`` is the leader gate; ``clock`` is monotonic seconds (tests pass theirs).
    """

    def __init__(
        self,
        cluster: KubeCluster,
        name: str,
        may_write: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.name = name
        self.may_write = may_write
        self.clock = clock
        #: Whether the Queue was seen or created since the CRD was last seen served.
        self.done = False
        self._retry_at = 0.0
        self._failure: str | None = None

    def ensure(self) -> bool:
        """Create the default Queue if it is due; True when it was created now."""
        if not self.cluster.served("Queue"):
            self.done = False  # (the CRD removed: check again once it is back)
            return False
        if self.done or not self.may_write() or self.clock() < self._retry_at:
            return False
        if self.cluster.get("Queue", self.name) is not None:
            self.done = True
            return False
        try:
            status, answer = self.cluster.client.request(
                "POST", RESOURCES["Queue"].path(), body=default_queue_body(self.name)
            )
        except ApiUnavailable as err:
            return self._failed(str(err))
        if status == 409:  # created meanwhile (the informer has not shown it yet)
            self.done = True
            return False
        if status not in (200, 201):
            return self._failed(f"HTTP {status}: {status_message(answer)}")
        self.done = True
        log.info(
            "created the default Queue %r (weight 1, reclaimable): jobs that name no queue "
            "go there",
            self.name,
        )
        return True

    def _failed(self, reason: str) -> bool:
        self._retry_at = self.clock() + RETRY_SECONDS
        if reason != self._failure:
            log.warning(
                "cannot create the default Queue %r: %s; jobs that name no queue wait until "
                "it exists (create it, or give the scheduler's ClusterRole `create` on "
                "queues.scheduling.volcano.sh); trying again every %.0fs",
                self.name,
                reason,
                RETRY_SECONDS,
            )
            self._failure = reason
        return False


__all__ = ["RETRY_SECONDS", "DefaultQueue", "default_queue_body"]
