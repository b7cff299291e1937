"""A Job's ``spec.volumes``: the claims the controller makes (named as Volcano names
them, owned by the Job, gone with it), the claims it waits for, the mounts of every pod,
and what the webhook would refuse; and the generic ephemeral volume controller."""

from __future__ import annotations

from tests.controllers.test_job_world import World, job_yaml

from pumice.cluster.memory import MemoryCluster
from pumice.controllers.ephemeral import EphemeralClaimController
from pumice.controllers.job.spec import parse_job
from pumice.controllers.job.validate import problems
from pumice.controllers.manager import Manager
from pumice.controllers.registry import ALL, parse_names
from pumice.controllers.store import MemoryStore

TRAIN = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  minAvailable: 2
  volumes:
    - mountPath: /scratch
      volumeClaim:
        storageClassName: local-nvme
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 100Gi}}
    - mountPath: /data
      volumeClaimName: dataset
  tasks:
    - name: worker
      replicas: 2
      template:
        spec:
          containers:
            - {name: a, image: x, resources: {requests: {cpu: "1"}}}
            - {name: b, image: x}
"""


def _claims(w: World) -> dict[str, dict]:
    return {c["metadata"]["name"]: c for c in w.store.list("PersistentVolumeClaim")}


def _dataset(w: World) -> None:
    w.store.create({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "dataset", "namespace": "ml"},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Ti"}}},
    })  # fmt: skip


def test_a_claim_from_volumeclaim_is_made_for_the_job_and_every_pod_mounts_both():
    w = World()
    _dataset(w)
    key = w.submit(job_yaml(TRAIN))
    job = w.job(key)
    assert job is not None
    made = [n for n in _claims(w) if n != "dataset"]
    assert len(made) == 1
    name = made[0]
    assert name.startswith("train-pvc-") and len(name) == len("train-pvc-") + 12
    claim = _claims(w)[name]
    assert claim["spec"]["storageClassName"] == "local-nvme"
    assert claim["spec"]["resources"] == {"requests": {"storage": "100Gi"}}
    (ref,) = claim["metadata"]["ownerReferences"]
    assert ref["kind"] == "Job" and ref["uid"] == job["metadata"]["uid"] and ref["controller"]
    assert w.status(key)["controlledResources"] == {
        f"volume-pvc-{name}": name, "volume-pvc-dataset": "dataset",
    }  # fmt: skip
    w.admit(key)
    pods = w.pods(key)
    assert len(pods) == 2
    for pod in pods:
        vols = {v["persistentVolumeClaim"]["claimName"]: v["name"] for v in pod["spec"]["volumes"]}
        assert set(vols) == {name, "dataset"}
        for c in pod["spec"]["containers"]:
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            assert mounts == {"/scratch": vols[name], "/data": vols["dataset"]}
    # the name is the same on every reconcile: nothing more is made
    w.advance(10)
    assert len(_claims(w)) == 2


def test_the_generated_name_is_deterministic_and_skips_a_claim_of_another_owner():
    names = []
    for _ in range(2):
        w = World()
        _dataset(w)
        w.submit(job_yaml(TRAIN))
        names.append(sorted(_claims(w)))
    assert names[0] == names[1]
    # a claim of that name already there, not the Job's: the next name is taken
    w = World()
    _dataset(w)
    taken = next(n for n in names[0] if n != "dataset")
    w.store.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": taken, "namespace": "ml"}, "spec": {}})  # fmt: skip
    w.submit(job_yaml(TRAIN))
    mine = [n for n in _claims(w) if n not in ("dataset", taken)]
    assert len(mine) == 1 and mine[0].startswith("train-pvc-")


def test_a_missing_named_claim_keeps_the_job_pending_until_it_exists():
    w = World()
    key = w.submit(job_yaml(TRAIN))
    assert w.phase(key) == "Pending"
    assert w.podgroup(key) is None
    warnings = [e for e in w.events(key) if e["reason"] == "PVCError"]
    assert warnings and "dataset" in warnings[0]["message"]
    _dataset(w)
    w.until_due()
    assert w.podgroup(key) is not None


def test_the_claims_go_with_the_job():
    w = World()
    _dataset(w)
    key = w.submit(job_yaml(TRAIN))
    assert len(_claims(w)) == 2
    w.store.delete("Job", key)
    assert list(_claims(w)) == ["dataset"]  # the user's claim stays


def test_volumes_the_webhook_would_refuse():
    def refused(volumes: list) -> list[str]:
        job = job_yaml(TRAIN)
        job["spec"]["volumes"] = volumes
        return problems(parse_job(job), lambda _q: "Open")

    claim = {"resources": {"requests": {"storage": "1Gi"}}}
    assert refused([{"mountPath": "/a", "volumeClaim": claim}]) == []
    assert "mountPath is required" in refused([{"volumeClaim": claim}])[0]
    assert (
        "used by another volume"
        in refused(
            [{"mountPath": "/a", "volumeClaim": claim}, {"mountPath": "/a", "volumeClaimName": "x"}]
        )[0]
    )
    assert "give volumeClaim" in refused([{"mountPath": "/a"}])[0]
    assert "both" in refused([{"mountPath": "/a", "volumeClaim": claim, "volumeClaimName": "x"}])[0]
    assert "not a valid claim name" in refused([{"mountPath": "/a", "volumeClaimName": "A_b"}])[0]


# -- generic ephemeral volumes ----------------------------------------------------------------


def _pod(name: str, uid: str, node: str = "") -> dict:
    spec: dict = {
        "containers": [{"name": "c", "image": "x"}],
        "volumes": [
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                "metadata": {"labels": {"kind": "scratch"}},
                "spec": {"storageClassName": "local-nvme", "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "10Gi"}}}}}},
            {"name": "cfg", "configMap": {"name": "x"}},
        ],
    }  # fmt: skip
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": spec,
    }


def test_the_ephemeral_controller_makes_the_pods_claim_owned_by_the_pod():
    cluster = MemoryCluster()
    store = MemoryStore(cluster)
    mgr = Manager(store, [EphemeralClaimController(store)])
    store.create(_pod("p", "uid-p"))
    mgr.step()
    claim = store.get("PersistentVolumeClaim", "default/p-scratch")
    assert claim is not None
    assert claim["spec"]["resources"] == {"requests": {"storage": "10Gi"}}
    assert claim["metadata"]["labels"] == {"kind": "scratch"}
    (ref,) = claim["metadata"]["ownerReferences"]
    assert ref["kind"] == "Pod" and ref["name"] == "p" and ref["controller"]
    assert ref["uid"] == store.get("Pod", "default/p")["metadata"]["uid"]
    assert [c["metadata"]["name"] for c in store.list("PersistentVolumeClaim")] == ["p-scratch"]
    # the claim goes with its pod
    store.delete("Pod", "default/p")
    assert store.get("PersistentVolumeClaim", "default/p-scratch") is None


def test_the_ephemeral_controller_leaves_a_claim_of_another_owner_alone():
    cluster = MemoryCluster()
    store = MemoryStore(cluster)
    store.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                  "metadata": {"name": "p-scratch", "namespace": "default"},
                  "spec": {"storageClassName": "other"}})  # fmt: skip
    mgr = Manager(store, [EphemeralClaimController(store)])
    store.create(_pod("p", "uid-p"))
    mgr.step()
    claim = store.get("PersistentVolumeClaim", "default/p-scratch")
    assert claim["spec"] == {"storageClassName": "other"}
    assert "ownerReferences" not in claim["metadata"]


def test_the_ephemeral_controller_is_optional():
    assert "ephemeral" not in ALL
    assert parse_names("all") == ALL
    assert parse_names("all,ephemeral") == (*ALL, "ephemeral")
    assert parse_names("ephemeral") == ("ephemeral",)
