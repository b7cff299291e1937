"""deploy/'s ClusterRole on an API server enforcing RBAC: the scheduler's service account
can make every call the scheduler makes, and nothing beyond."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from pumice.run.default_queue import default_queue_body
from pumice.sandbox import ControlPlane, apply, service_account

pytestmark = pytest.mark.k8s

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"
SCHEDULER, _ = service_account("pumice-system", "pumice")


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": "pg"}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]},
    }


def _forbidden(call: Callable[[], Any]) -> None:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 403, err.value.body
    assert SCHEDULER in err.value.body


def _seed(admin: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(admin)
    core.create_node({"metadata": {"name": "n1"}})
    for name in ("p", "victim", "doomed"):
        core.create_namespaced_pod("default", _pod(name))
    core.create_persistent_volume({
        "metadata": {"name": "pv"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/tmp/pv"}},
    })  # fmt: skip
    k8s.CustomObjectsApi(admin).create_namespaced_custom_object(
        GROUP, VERSION, "default", "podgroups",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup",
         "metadata": {"name": "pg"}, "spec": {"minMember": 1}},
    )  # fmt: skip


def test_the_service_account_can_do_what_the_scheduler_does(
    rbac_control_plane: ControlPlane,
) -> None:
    cp = rbac_control_plane
    apply(cp.kubeconfig, DEPLOY)
    with cp.client() as admin:
        _seed(admin)
    with cp.client(SCHEDULER) as api:
        core = k8s.CoreV1Api(api)
        custom = k8s.CustomObjectsApi(api)
        # read and watch everything the cache holds
        assert [n.metadata.name for n in core.list_node().items] == ["n1"]
        assert len(core.list_pod_for_all_namespaces().items) == 3
        for watch in (
            lambda **kw: core.list_node(**kw),
            lambda **kw: core.list_pod_for_all_namespaces(**kw),
            lambda **kw: custom.list_cluster_custom_object(GROUP, VERSION, "podgroups", **kw),
            lambda **kw: custom.list_cluster_custom_object(GROUP, VERSION, "queues", **kw),
            lambda **kw: core.list_resource_quota_for_all_namespaces(**kw),
            lambda **kw: custom.list_cluster_custom_object(
                "nodeinfo.volcano.sh", "v1alpha1", "numatopologies", **kw
            ),
            lambda **kw: core.list_persistent_volume(**kw),
            lambda **kw: core.list_persistent_volume_claim_for_all_namespaces(**kw),
            lambda **kw: k8s.StorageV1Api(api).list_storage_class(**kw),
            lambda **kw: k8s.StorageV1Api(api).list_csi_node(**kw),
            lambda **kw: k8s.StorageV1Api(api).list_csi_driver(**kw),
        ):
            resp = watch(watch=True, timeout_seconds=1, _preload_content=False)
            assert resp.status == 200
            resp.release_conn()
        core.read_node("n1")
        core.read_namespaced_pod("p", "default")
        assert custom.list_cluster_custom_object(GROUP, VERSION, "queues")["items"] == []
        k8s.SchedulingV1Api(api).list_priority_class()
        k8s.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces()

        # before a bind: the annotations a device plugin reads, a chosen PV's claimRef
        note = {"metadata": {"annotations": {"volcano.sh/gpu-index": "0"}}}
        core.patch_namespaced_pod("p", "default", note)
        core.patch_persistent_volume("pv", {"spec": {"claimRef": {"namespace": "default",
                                                                  "name": "data"}}})  # fmt: skip

        # bind, record why a pod waits, evict, delete
        binding = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
        core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
        assert core.read_namespaced_pod("p", "default").spec.node_name == "n1"
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        core.patch_namespaced_pod_status("p", "default", {"status": {"conditions": [condition]}})
        core.create_namespaced_pod_eviction(
            "victim", "default", {"metadata": {"name": "victim", "namespace": "default"}}
        )
        core.delete_namespaced_pod("doomed", "default", grace_period_seconds=0)

        # podgroup and queue status (and the object itself, for Volcano's PodGroup CRD)
        status = {"status": {"phase": "Inqueue"}}
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, "default", "podgroups", "pg", status
        )
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", "podgroups", "pg", {"metadata": {"labels": {"a": "b"}}}
        )
        # the default Queue, created when absent (deploy/ holds none), then its status
        custom.create_cluster_custom_object(GROUP, VERSION, "queues", default_queue_body("default"))
        custom.patch_cluster_custom_object_status(
            GROUP, VERSION, "queues", "default", {"status": {"state": "Open", "running": 1}}
        )

        # events, both APIs
        now = dt.datetime.now(dt.UTC)
        event = core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": "p.1"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
                "reason": "Scheduled",
                "message": "bound to n1",
                "type": "Normal",
                "count": 1,
            },
        )
        core.patch_namespaced_event(event.metadata.name, "default", {"count": 2})
        k8s.EventsV1Api(api).create_namespaced_event(
            "default",
            {
                "metadata": {"name": "p.2"},
                "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "reportingController": "pumice",
                "reportingInstance": "pumice-0",
                "action": "Binding",
                "reason": "Scheduled",
                "type": "Normal",
                "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
            },
        )

        # leader election
        leases = k8s.CoordinationV1Api(api)
        spec = {"holderIdentity": "pumice-0", "leaseDurationSeconds": 15}
        leases.create_namespaced_lease(
            "pumice-system", {"metadata": {"name": "pumice"}, "spec": spec}
        )
        lease = leases.read_namespaced_lease("pumice", "pumice-system")
        lease.spec.holder_identity = "pumice-1"
        leases.replace_namespaced_lease("pumice", "pumice-system", lease)


def test_the_service_account_can_do_nothing_beyond(rbac_control_plane: ControlPlane) -> None:
    cp = rbac_control_plane
    apply(cp.kubeconfig, DEPLOY)
    with cp.client() as admin:
        _seed(admin)
    with cp.client(SCHEDULER) as api:
        core = k8s.CoreV1Api(api)
        custom = k8s.CustomObjectsApi(api)
        _forbidden(lambda: core.create_node({"metadata": {"name": "n2"}}))
        _forbidden(lambda: core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}}))
        _forbidden(lambda: core.create_namespaced_pod("default", _pod("mine")))
        _forbidden(lambda: core.delete_persistent_volume("pv"))
        _forbidden(lambda: core.create_persistent_volume({"metadata": {"name": "mine"}}))
        _forbidden(
            lambda: core.create_namespaced_resource_quota(
                "default", {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}}}
            )
        )
        numatopology = {
            "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
            "kind": "Numatopology",
            "metadata": {"name": "n1"},
        }
        _forbidden(
            lambda: custom.create_cluster_custom_object(
                "nodeinfo.volcano.sh", "v1alpha1", "numatopologies", numatopology
            )
        )
        _forbidden(lambda: core.list_namespaced_secret("pumice-system"))
        _forbidden(lambda: core.list_namespaced_config_map("pumice-system"))
        _forbidden(lambda: custom.delete_cluster_custom_object(GROUP, VERSION, "queues", "default"))
        _forbidden(
            lambda: custom.patch_cluster_custom_object(
                GROUP, VERSION, "queues", "default", {"spec": {"weight": 100}}
            )
        )
        _forbidden(
            lambda: custom.delete_namespaced_custom_object(
                GROUP, VERSION, "default", "podgroups", "pg"
            )
        )
        _forbidden(
            lambda: k8s.CoordinationV1Api(api).delete_namespaced_lease("pumice", "pumice-system")
        )
        _forbidden(lambda: k8s.RbacAuthorizationV1Api(api).list_cluster_role())
