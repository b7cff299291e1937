"""The control plane: a real etcd and kube-apiserver per test."""

from __future__ import annotations

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from pumice.sandbox import ControlPlane, ControlPlaneError

pytestmark = pytest.mark.k8s


def _configmap(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


def test_it_starts_answers_and_keeps_objects_across_an_api_server_restart(
    control_plane: ControlPlane, kube_admin: str
) -> None:
    cp = control_plane
    assert kube_admin == cp.kubeconfig
    assert cp.server == f"https://127.0.0.1:{cp.port}"
    assert set(cp.pids) == {"etcd", "kube-apiserver"}
    with cp.client() as api:
        assert k8s.VersionApi(api).get_code().git_version.startswith("v1.")
        core = k8s.CoreV1Api(api)
        assert "default" in {n.metadata.name for n in core.list_namespace().items}
        core.create_namespaced_config_map("default", _configmap("kept"))
    before = cp.pids["kube-apiserver"]
    cp.restart_apiserver()
    assert cp.pids["kube-apiserver"] != before and cp.running
    with cp.client() as api:  # same port, same etcd, same admin token
        assert k8s.CoreV1Api(api).read_namespaced_config_map("kept", "default").data == {"k": "v"}


def test_each_control_plane_is_its_own_cluster(make_control_plane) -> None:
    one, two = make_control_plane(), make_control_plane()
    assert one.port != two.port and one.etcd_port != two.etcd_port
    with one.client() as api:
        k8s.CoreV1Api(api).create_namespaced_config_map("default", _configmap("only-in-one"))
    with two.client() as api, pytest.raises(ApiException) as err:
        k8s.CoreV1Api(api).read_namespaced_config_map("only-in-one", "default")
    assert err.value.status == 404


def test_tokens_authenticate_the_identities_given(make_control_plane) -> None:
    cp = make_control_plane(authorization_mode="RBAC", identities={"alice": ["devs"]})
    with cp.client("alice") as api, pytest.raises(ApiException) as err:
        k8s.CoreV1Api(api).list_namespace()
    assert err.value.status == 403  # authenticated (not 401), and RBAC grants alice nothing
    assert 'User "alice" cannot list' in json.loads(err.value.body)["message"]
    with pytest.raises(KeyError, match="no identity 'bob'"):
        cp.kubeconfig_for("bob")


def test_a_failed_start_quotes_the_servers_log_and_leaves_nothing_running(k8s_binaries) -> None:
    plane = ControlPlane(apiserver_args=["--no-such-flag"])
    with pytest.raises(ControlPlaneError) as err:
        plane.start()
    message = str(err.value)
    assert "kube-apiserver exited" in message and "no-such-flag" in message
    assert plane.pids == {} and not plane.running
    assert plane.workdir is not None and not plane.workdir.exists()
