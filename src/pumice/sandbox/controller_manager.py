"""kube-controller-manager for the sandbox, with the controllers a laptop cluster needs.

Without it a Deployment or a ``batch/v1`` Job never gets pods, a deleted Volcano Job
leaves its pods behind (no garbage collector follows ownerReferences) and a deleted
namespace never goes away. The sandbox runs it when the binary is found (beside
kube-apiserver, looked up like it), with only controllers that need neither a cloud nor
service-account tokens (the API server runs without the ServiceAccount admission plugin,
and no controller here signs tokens).
"""

from __future__ import annotations

from pathlib import Path

from pumice.sandbox.process import Child

#: The controllers started, in kube-controller-manager's names.
CONTROLLERS = (
    "garbagecollector",
    "namespace",
    "deployment",
    "replicaset",
    "job",
    "ttl-after-finished",
    "persistentvolume-binder",
    "pvc-protection",
    "pv-protection",
)


def controller_manager(binary: Path, kubeconfig: Path, log: Path) -> Child:
    """The kube-controller-manager process (not started) against ``kubeconfig``: no
    leader election (one instance), no serving port, ``CONTROLLERS`` only."""
    argv = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--controllers={','.join(CONTROLLERS)}",
        "--leader-elect=false",
        "--secure-port=0",
        "--concurrent-gc-syncs=5",
        "--v=1",
    ]
    return Child("kube-controller-manager", argv, log)


__all__ = ["CONTROLLERS", "controller_manager"]
