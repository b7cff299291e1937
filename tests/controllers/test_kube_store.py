"""The controllers' store over a real API server: reads from informers, writes through
the REST API, each state seen once on the watch, and the Store contract's answers
(None for what exists, False for what is gone)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.run import kube_kit as k

from pumice.cluster.kube_client import RESOURCES, KubeClient
from pumice.cluster.protocol import ADDED, DELETED, MODIFIED
from pumice.controllers.kube_store import KubeStore, WriteError
from pumice.sandbox import ControlPlane

pytestmark = pytest.mark.k8s


@pytest.fixture(scope="module")
def plane(k8s_binaries: None) -> Iterator[ControlPlane]:
    """One API server for the module, with pumice's CRDs (Job and Command included)."""
    cp = ControlPlane().start()
    client = KubeClient.from_config(cp.kubeconfig)
    k.install_crds(client)
    k.wait_for(
        "the Job and Command CRDs",
        lambda: all(client.request("GET", RESOURCES[kind].path())[0] == 200
                    for kind in ("Job", "Command")),
    )  # fmt: skip
    client.close()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def make_store(plane: ControlPlane) -> Iterator[Any]:
    stores: list[KubeStore] = []

    def make(kinds: tuple[str, ...] = ("ConfigMap",), **kw: Any) -> KubeStore:
        store = KubeStore(KubeClient.from_config(plane.kubeconfig), kinds, **kw)
        store.start()
        assert store.wait_synced(20)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


def configmap(ns: str, name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}, "data": dict(data)}  # fmt: skip


def vcjob(ns: str, name: str, **spec: Any) -> dict:
    task = {
        "name": "worker",
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minAvailable": 2, "tasks": [task], **spec},
    }


def events_of(watch: Any, key: str) -> list[str]:
    return [e.type for e in watch.drain() if e.key == key]


def test_create_is_seen_at_once_and_once_on_the_watch(
    make_store: Any, admin: KubeClient, ns: str
) -> None:
    """A create's answer is in the view before the watch catches up, and the watch's own
    event for it is not delivered a second time; creating it again returns None."""
    store = make_store()
    watch = store.watch(["ConfigMap"])
    key = f"{ns}/cm"
    made = store.create(configmap(ns, "cm", a="1"))
    assert made is not None and made["metadata"]["uid"]
    assert store.get("ConfigMap", key)["data"] == {"a": "1"}  # no wait: the answer
    assert store.create(configmap(ns, "cm", a="2")) is None
    # A later change by someone else arrives; by then the create's own event has too.
    k.ok(admin.request("PATCH", RESOURCES["ConfigMap"].key_path(key), body={"data": {"b": "2"}},
                       content_type="application/merge-patch+json"))  # fmt: skip
    k.wait_for("the other write", lambda: (store.get("ConfigMap", key) or {}).get("data", {})
               .get("b") == "2")  # fmt: skip
    assert events_of(watch, key) == [ADDED, MODIFIED]
    assert store.get("ConfigMap", key)["data"] == {"a": "1", "b": "2"}


def test_objects_made_by_others_arrive_sorted(make_store: Any, admin: KubeClient, ns: str) -> None:
    """What another client creates reaches the view and the watch; list sorts by key."""
    store = make_store()
    watch = store.watch(["ConfigMap"])
    for name in ("b", "a", "c"):
        k.ok(admin.request("POST", RESOURCES["ConfigMap"].path(ns), body=configmap(ns, name)))
    k.wait_for(
        "three configmaps",
        lambda: len([o for o in store.list("ConfigMap") if o["metadata"]["namespace"] == ns]) == 3,
    )
    names = [o["metadata"]["name"] for o in store.list("ConfigMap")
             if o["metadata"]["namespace"] == ns]  # fmt: skip
    assert names == ["a", "b", "c"]
    seen = [(e.type, e.key) for e in watch.drain() if e.key.startswith(f"{ns}/")]
    assert sorted(seen) == [(ADDED, f"{ns}/a"), (ADDED, f"{ns}/b"), (ADDED, f"{ns}/c")]


def test_merge_patch_and_status_subresource(make_store: Any, admin: KubeClient, ns: str) -> None:
    """patch is a JSON merge patch (None deletes a key); with subresource="status" only
    the status changes (the Job CRD has a status subresource); a patch of what is gone
    is False."""
    store = make_store(("Job",))
    job = store.create(vcjob(ns, "j1"))
    assert job is not None
    key = f"{ns}/j1"
    assert job["spec"]["maxRetry"] == 3  # (the CRD's default, as Volcano's)
    assert store.patch("Job", key, {"metadata": {"labels": {"a": "1", "b": "2"}}})
    assert store.patch("Job", key, {"metadata": {"labels": {"a": None}}})
    assert store.get("Job", key)["metadata"]["labels"] == {"b": "2"}
    assert store.patch(
        "Job", key,
        {"spec": {"minAvailable": 1}, "status": {"state": {"phase": "Pending"}, "running": 0}},
        subresource="status",
    )  # fmt: skip
    server = k.get(admin, "Job", key)
    assert server["status"]["state"]["phase"] == "Pending"
    assert server["spec"]["minAvailable"] == 2  # (the status subresource ignores spec)
    assert store.get("Job", key)["status"]["state"]["phase"] == "Pending"
    assert store.patch("Job", f"{ns}/nothing", {"metadata": {"labels": {"a": "1"}}}) is False
    assert store.patch("Job", f"{ns}/nothing", {"status": {}}, subresource="status") is False


def test_delete_then_gone(make_store: Any, ns: str) -> None:
    """delete is True once, then False; the watch shows the deletion and the view loses
    the object."""
    store = make_store()
    watch = store.watch(["ConfigMap"])
    key = f"{ns}/gone"
    store.create(configmap(ns, "gone"))
    assert store.delete("ConfigMap", key)
    k.wait_for("the deletion", lambda: store.get("ConfigMap", key) is None)
    assert store.delete("ConfigMap", key) is False
    assert events_of(watch, key) == [ADDED, DELETED]


def test_a_kind_read_before_it_is_followed(make_store: Any, admin: KubeClient, ns: str) -> None:
    """get or list of a kind no informer follows yet starts one and reads a complete
    view (what existed before); a Secret is read by a request of its own instead (no
    informer over every Secret of the cluster)."""
    k.ok(admin.request("POST", RESOURCES["ConfigMap"].path(ns), body=configmap(ns, "before")))
    k.ok(admin.request("POST", RESOURCES["Secret"].path(ns), body={
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
        "stringData": {"x": "y"}}))  # fmt: skip
    store = make_store(("Job",))
    assert "ConfigMap" not in store.kinds
    assert store.get("ConfigMap", f"{ns}/before")["kind"] == "ConfigMap"
    assert "ConfigMap" in store.kinds
    secret = store.get("Secret", f"{ns}/s")
    assert secret is not None and secret["kind"] == "Secret"
    assert store.get("Secret", f"{ns}/none") is None
    assert "Secret" not in store.kinds


def test_refusals_name_object_and_reason(make_store: Any, ns: str) -> None:
    """What the server refuses raises WriteError with the object and the server's
    reason: an invalid task name (the Job CRD's schema, as Volcano's)."""
    store = make_store(("Job",))
    bad = vcjob(ns, "bad")
    bad["spec"]["tasks"][0]["name"] = "Not_A_Name"
    with pytest.raises(WriteError) as err:
        store.create(bad)
    assert err.value.status == 422
    assert f"create Job {ns}/bad" in str(err.value) and "spec.tasks[0].name" in str(err.value)


def test_no_write_without_the_lease(make_store: Any, admin: KubeClient, ns: str) -> None:
    """may_write False: every write raises and nothing reaches the server."""
    store = make_store(may_write=lambda: False)
    with pytest.raises(WriteError, match="not the leader"):
        store.create(configmap(ns, "no"))
    assert k.get(admin, "ConfigMap", f"{ns}/no") is None
    with pytest.raises(WriteError):
        store.delete("ConfigMap", f"{ns}/no")


def test_kubernetes_batch_job_beside_volcano_job(make_store: Any, ns: str) -> None:
    """A batch/v1 Job is the kind BatchJob, keyed namespace/name, apart from Volcano's."""
    store = make_store(("BatchJob", "Job"))
    made = store.create({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "same", "namespace": ns},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}},
    })  # fmt: skip
    assert made is not None and made["apiVersion"] == "batch/v1"
    assert store.create(vcjob(ns, "same")) is not None  # the same name, another kind
    assert store.get("BatchJob", f"{ns}/same")["apiVersion"] == "batch/v1"
    assert store.get("Job", f"{ns}/same")["apiVersion"] == "batch.volcano.sh/v1alpha1"


def test_command_crd_serves_volcano_commands(make_store: Any, ns: str) -> None:
    """A Command as vcctl writes one (action and target at the top level) is stored."""
    store = make_store(("Command",))
    made = store.create({
        "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
        "metadata": {"name": "j1-abortjob-x", "namespace": ns},
        "action": "AbortJob",
        "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j1",
                   "uid": "1234", "controller": True},
    })  # fmt: skip
    assert made is not None and made["action"] == "AbortJob"
    assert store.get("Command", f"{ns}/j1-abortjob-x")["target"]["name"] == "j1"


def owned(ns: str, name: str, owner: dict) -> dict:
    body = configmap(ns, name)
    body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                            "name": owner["metadata"]["name"],
                                            "uid": owner["metadata"]["uid"]}]  # fmt: skip
    return body


def test_delete_without_cascade_keeps_what_the_object_owns(
    make_store: Any, admin: KubeClient, ns: str, plane: ControlPlane, garbage_collector: Any
) -> None:
    """cascade=False orphans the dependents (the garbage collector lets the owner go
    and leaves them); the default cascade removes them."""
    garbage_collector(plane)
    store = make_store()
    keep_owner = store.create(configmap(ns, "keep-owner"))
    store.create(owned(ns, "kept", keep_owner))
    gone_owner = store.create(configmap(ns, "gone-owner"))
    store.create(owned(ns, "collected", gone_owner))
    assert store.delete("ConfigMap", f"{ns}/keep-owner", cascade=False)
    assert store.delete("ConfigMap", f"{ns}/gone-owner")
    k.wait_for(
        "both owners gone",
        lambda: (
            k.get(admin, "ConfigMap", f"{ns}/keep-owner") is None
            and k.get(admin, "ConfigMap", f"{ns}/gone-owner") is None
        ),
        timeout=60,
    )
    k.wait_for(
        "the dependent collected",
        lambda: k.get(admin, "ConfigMap", f"{ns}/collected") is None,
        timeout=60,
    )
    kept = k.get(admin, "ConfigMap", f"{ns}/kept")
    assert kept is not None and not kept["metadata"].get("ownerReferences")


def test_delete_without_cascade_of_a_leaf_needs_no_garbage_collector(
    make_store: Any, admin: KubeClient, ns: str
) -> None:
    """An object that owns nothing goes at once without cascade, garbage collector or
    not (no orphan finalizer holds it)."""
    store = make_store()
    store.create(configmap(ns, "leaf"))
    assert store.delete("ConfigMap", f"{ns}/leaf", cascade=False)
    assert k.get(admin, "ConfigMap", f"{ns}/leaf") is None
