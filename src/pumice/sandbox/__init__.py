"""A real Kubernetes control plane on this machine, and a way to load manifests into it.

:class:`ControlPlane` runs etcd and kube-apiserver on free loopback ports (tests,
benchmarks, the sandbox); :func:`apply` creates or updates every object of YAML files or
directories, like ``kubectl apply -f``. Binaries are found through ``PUMICE_K8S_BIN``,
``KUBEBUILDER_ASSETS`` or ``PATH`` (:func:`find_binary`).
"""

from pumice.sandbox.apply import ApplyError, apply
from pumice.sandbox.binaries import BinaryNotFoundError, find_binary, missing_binaries
from pumice.sandbox.controlplane import (
    ControlPlane,
    ControlPlaneError,
    Identity,
    service_account,
)

__all__ = [
    "ApplyError",
    "BinaryNotFoundError",
    "ControlPlane",
    "ControlPlaneError",
    "Identity",
    "apply",
    "find_binary",
    "missing_binaries",
    "service_account",
]
