"""deploy/'s RBAC is enough: on an API server that enforces it, the controllers run as
their ServiceAccount, the scheduler as its own, and a Volcano Job with the svc and ssh
plugins runs to Completed with no write refused (and its Service and Secret, made while
it runs, go when it is done, as in Volcano)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from tests.controllers.test_kube_e2e import phase, submit, vcjob
from tests.run import kube_kit as k

from pumice.cluster.kube_client import KubeClient
from pumice.controllers import registry
from pumice.controllers.kube_store import KubeStore
from pumice.controllers.loop import ControllerLoop
from pumice.run.runner import RunOptions
from pumice.sandbox import ControlPlane, service_account
from pumice.sandbox.apply import apply
from pumice.sandbox.kubelet import FakeKubelet

pytestmark = pytest.mark.k8s

CONTROLLERS = service_account("pumice-system", "pumice-controllers")
SCHEDULER = service_account("pumice-system", "pumice")


def test_the_shipped_roles_are_enough_to_run_a_job(
    make_control_plane: Callable[..., ControlPlane],
) -> None:
    cp = make_control_plane(authorization_mode="RBAC", identities=dict([CONTROLLERS, SCHEDULER]))
    admin = KubeClient.from_config(cp.kubeconfig)
    apply(cp.kubeconfig, [str(k.CRDS)])
    k.wait_for("the Job CRD", lambda: admin.request("GET", "/apis/batch.volcano.sh/v1alpha1/jobs")
               [0] == 200)  # fmt: skip
    nodes = k.nodes(admin, 2, cpu="4")
    kubelet = FakeKubelet(admin, nodes, startup_delay=0.1)
    kubelet.start()
    store = KubeStore(KubeClient.from_config(cp.kubeconfig_for(CONTROLLERS[0])))
    loop = ControllerLoop(store, registry.ALL, idle=0.2)
    thread = loop.start_thread()
    try:
        with k.running(cp.kubeconfig_for(SCHEDULER[0]), options=RunOptions(period=0.2)):
            job: dict[str, Any] = vcjob("default", "mpi", duration="3s")
            job["spec"]["plugins"] = {"svc": [], "ssh": [], "env": []}
            submit(admin, job)
            k.wait_for(
                "the plugins' Service and Secret",
                lambda: (
                    k.get(admin, "Service", "default/mpi")
                    and k.get(admin, "Secret", "default/mpi-ssh")
                ),
            )
            k.wait_for("the job Completed", lambda: phase(admin, "default/mpi") == "Completed",
                       timeout=60)  # fmt: skip
        k.wait_for(
            "the plugins' objects gone",
            lambda: (
                k.get(admin, "Service", "default/mpi") is None
                and k.get(admin, "Secret", "default/mpi-ssh") is None
            ),
        )
        refused = {label: n for label, n in store.writes.items()
                   if not label.endswith((":200", ":201", ":404", ":409"))}  # fmt: skip
        assert refused == {}
    finally:
        loop.stop.set()
        thread.join(10)
        store.close()
        kubelet.stop()
        admin.close()
    assert isinstance(thread, threading.Thread) and not thread.is_alive()
