"""The resource-claim controller: a pod's template entries get their claims (owned by
the pod, recorded in its status), a claim of that name the pod does not own is left
alone, and a claim's devices come back when its pods are done."""

from __future__ import annotations

from typing import Any

from tests.plugins.test_devices import claim, template

from pumice.api.dra import pod_claim_names
from pumice.cluster.memory import MemoryCluster
from pumice.controllers.manager import Manager
from pumice.controllers.registry import ALL, parse_names
from pumice.controllers.resourceclaims import ResourceClaimController
from pumice.controllers.store import MemoryStore

RESULT = {"request": "gpu", "driver": "gpu.example.com", "pool": "n0", "device": "gpu-0"}
ALLOCATION = {"devices": {"results": [RESULT]}}


def _pod(name: str, *entries: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x"}], "resourceClaims": list(entries)},
    }


def _world() -> tuple[MemoryStore, Manager, ResourceClaimController, list[int]]:
    store = MemoryStore(MemoryCluster())
    released: list[int] = []
    controller = ResourceClaimController(store, on_release=lambda: released.append(1))
    return store, Manager(store, [controller]), controller, released


def _bind(store: MemoryStore, pod_key: str, claim_key: str, node: str = "n0") -> None:
    """What the scheduler's bind writes: the claim's allocation, the pod among its users,
    the pod on its node."""
    pod = store.get("Pod", pod_key)
    assert pod is not None
    user = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
    have = (store.get("ResourceClaim", claim_key) or {}).get("status") or {}
    users = [*(have.get("reservedFor") or []), user]
    store.patch("ResourceClaim", claim_key,
                {"status": {"allocation": ALLOCATION, "reservedFor": users}},
                subresource="status")  # fmt: skip
    store.patch("Pod", pod_key, {"spec": {"nodeName": node}})


def _end(store: MemoryStore, pod_key: str, phase: str = "Succeeded") -> None:
    store.patch("Pod", pod_key, {"status": {"phase": phase}}, subresource="status")


def test_a_template_entry_gets_its_claim_owned_by_the_pod_and_recorded_in_its_status():
    store, mgr, controller, _ = _world()
    store.create(template("one-gpu"))
    store.create(_pod("train-0", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
    mgr.step()
    pod = store.get("Pod", "default/train-0")
    [status] = pod["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpu" and status["resourceClaimName"].startswith("train-0-gpu-")
    made = store.get("ResourceClaim", f"default/{status['resourceClaimName']}")
    assert made is not None
    [owner] = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", "train-0",
                                                             pod["metadata"]["uid"])  # fmt: skip
    assert owner["controller"] is True
    assert made["spec"] == template("one-gpu")["spec"]["spec"]
    # the scheduler now finds the claim the pod names
    [ref] = pod_claim_names(pod)
    assert not ref.waiting and ref.claim_name == status["resourceClaimName"]
    # nothing more on a later step: one claim, made once
    mgr.step()
    assert len(store.list("ResourceClaim")) == 1 and controller.made == 1


def test_a_pod_waits_for_its_template_and_gets_the_claim_when_it_appears():
    store, mgr, _, _ = _world()
    store.create(_pod("p", {"name": "gpu", "resourceClaimTemplateName": "late"}))
    mgr.step()
    assert store.list("ResourceClaim") == []
    assert "resourceClaimStatuses" not in (store.get("Pod", "default/p").get("status") or {})
    store.create(template("late"))
    mgr.step()
    assert len(store.list("ResourceClaim")) == 1
    assert store.get("Pod", "default/p")["status"]["resourceClaimStatuses"][0]["name"] == "gpu"


def test_a_claim_of_that_name_the_pod_does_not_own_is_left_alone(caplog):
    store, mgr, _, _ = _world()
    store.create(template("one-gpu"))
    pod = store.create(_pod("p", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
    from pumice.api.dra import generated_claim_name

    name = generated_claim_name("p", pod["metadata"]["uid"], "gpu")
    squatter = claim(name, count=3)
    store.create(squatter)
    with caplog.at_level("WARNING", logger="pumice.controllers.resourceclaims"):
        mgr.step()
    kept = store.get("ResourceClaim", f"default/{name}")
    assert "ownerReferences" not in kept["metadata"]
    assert kept["spec"]["devices"]["requests"][0]["exactly"]["count"] == 3
    # the pod is not told it has a claim: it keeps waiting, and the log says why
    assert "resourceClaimStatuses" not in (store.get("Pod", "default/p").get("status") or {})
    assert any("is not the pod's" in r.getMessage() for r in caplog.records)


def test_a_claim_made_for_a_pod_goes_when_the_pod_ends_and_its_devices_come_back():
    store, mgr, controller, released = _world()
    store.create(template("one-gpu"))
    store.create(_pod("p", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
    mgr.step()
    name = store.get("Pod", "default/p")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    key = f"default/{name}"
    _bind(store, "default/p", key)
    mgr.step()
    assert store.get("ResourceClaim", key)["status"]["allocation"] == ALLOCATION  # still in use
    _end(store, "default/p")
    mgr.step()
    assert store.get("ResourceClaim", key) is None  # made for the pod: deleted
    assert released and controller.released == 1


def test_a_shared_claim_is_released_when_its_last_pod_ends_and_then_kept():
    store, mgr, _, released = _world()
    store.create(claim("shared"))
    for name in ("a", "b"):
        store.create(_pod(name, {"name": "gpu", "resourceClaimName": "shared"}))
        _bind(store, f"default/{name}", "default/shared")
    mgr.step()
    _end(store, "default/a")
    mgr.step()
    status = store.get("ResourceClaim", "default/shared")["status"]
    assert [u["name"] for u in status["reservedFor"]] == ["b"]  # b still uses it
    assert status["allocation"] == ALLOCATION and not released
    store.delete("Pod", "default/b")  # (gone without ending first: evicted, say)
    mgr.step()
    kept = store.get("ResourceClaim", "default/shared")
    assert kept is not None  # the user's own claim stays ...
    assert "allocation" not in kept["status"] and "reservedFor" not in kept["status"]
    assert released  # ... and its devices are free


def test_a_pod_deleted_before_it_ran_takes_its_claim_with_it():
    store, mgr, _, _ = _world()
    store.create(template("one-gpu"))
    store.create(_pod("p", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
    mgr.step()
    assert len(store.list("ResourceClaim")) == 1
    store.cluster.delete("Pod", "default/p")  # (as a kubelet removes it: no cascade)
    mgr.step()
    assert store.list("ResourceClaim") == []


def test_a_pod_that_is_done_gets_no_claim():
    store, mgr, _, _ = _world()
    store.create(template("one-gpu"))
    pod = _pod("p", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"})
    pod["status"] = {"phase": "Failed"}
    store.create(pod)
    mgr.step()
    assert store.list("ResourceClaim") == []


def test_the_resourceclaim_controller_is_optional():
    assert "resourceclaim" not in ALL
    assert parse_names("all,resourceclaim") == (*ALL, "resourceclaim")
    assert parse_names("resourceclaim,ephemeral") == ("ephemeral", "resourceclaim")


def test_a_recorded_claim_deleted_before_the_pod_got_a_node_is_made_again():
    store, mgr, controller, _ = _world()
    store.create(template("one-gpu"))
    store.create(_pod("p", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
    mgr.step()
    [made] = store.list("ResourceClaim")
    key = f"default/{made['metadata']['name']}"
    store.delete("ResourceClaim", key)
    mgr.step()
    again = store.get("ResourceClaim", key)
    assert again is not None and again["metadata"]["uid"] != made["metadata"]["uid"]
    # once the pod is on a node, nothing is made again: it is too late for the scheduler
    store.patch("Pod", "default/p", {"spec": {"nodeName": "n0"}})
    store.delete("ResourceClaim", key)
    mgr.step()
    assert store.get("ResourceClaim", key) is None and controller.made == 2
