"""The controllers' view of the simulated cluster: deletes as the API server does them.

The job controller deletes pods through a :class:`~pumice.controllers.store.Store`.
On a real API server a pod that is bound to a node and still running is not removed at
once: it is marked for deletion (``deletionTimestamp``, ``deletionGracePeriodSeconds``)
and its kubelet removes it after the grace period, while it keeps its node's resources;
a pod on no node, or one that already ended, goes at once (Kubernetes' pod
``CheckGracefulDelete``). :class:`SimStore` gives the in-memory store that rule, so a
restart in ``pumice simulate`` frees the nodes when a cluster would. The simulated
kubelet (:mod:`pumice.sim.kubelet`) finishes the deletion when the grace is over.
"""

from __future__ import annotations

from pumice.cluster.memory import MemoryCluster
from pumice.controllers.store import MemoryStore

#: The ssh plugin's key pair in a simulation: fixed, so a run is fast and repeatable
#: (nothing in a simulation logs in with it).
SIM_KEYS = (
    "-----BEGIN RSA PRIVATE KEY-----\npumice-simulated-key\n-----END RSA PRIVATE KEY-----\n",
    "ssh-rsa AAAApumicesimulatedkey pumice@simulation\n",
)


def sim_keygen() -> tuple[str, str]:
    return SIM_KEYS


class SimStore(MemoryStore):
    """:class:`MemoryStore` whose pod deletions are graceful where the API server's are
    (see the module docstring); ``grace`` is the default grace period in seconds."""

    def __init__(self, cluster: MemoryCluster, *, grace: float) -> None:
        super().__init__(cluster)
        self.grace = grace

    def delete(self, kind: str, key: str, *, cascade: bool = True) -> bool:
        if kind == "Pod":
            pod = self.cluster.get("Pod", key)
            if pod is None:
                return False
            spec = pod.get("spec") or {}
            phase = (pod.get("status") or {}).get("phase")
            if spec.get("nodeName") and phase not in ("Succeeded", "Failed"):
                meta = pod["metadata"]
                if meta.get("deletionTimestamp") is None:
                    given = spec.get("terminationGracePeriodSeconds")
                    grace = self.grace if given is None else float(given)
                    now = self.now()

                    def mark(obj: dict) -> None:
                        obj["metadata"]["deletionTimestamp"] = now
                        obj["metadata"]["deletionGracePeriodSeconds"] = grace

                    self.cluster.modify("Pod", key, mark)
                return True
        return super().delete(kind, key, cascade=cascade)


__all__ = ["SIM_KEYS", "SimStore", "sim_keygen"]
