"""The PodGroup controller over the in-memory store: what Volcano's pg-controller makes
for plain pods, and that ``pumice cycle``'s implicit groups carry the same names."""

from __future__ import annotations

import copy

import yaml

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cluster.memory import MemoryCluster
from pumice.controllers.manager import Manager
from pumice.controllers.podgroup import PodGroupController
from pumice.controllers.store import MemoryStore

GROUP = "scheduling.k8s.io/group-name"

# A Deployment's ReplicaSet with two pods (as kubectl prints them), a StatefulSet with
# two pods, a batch/v1 Job asking for a gang of 2, a bare pod with a queue and priority
# class, a pod of another scheduler, and a pod that already names its group.
MANIFESTS = """
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-6d4cf56db6
  namespace: shop
  uid: 3f1e0c1a-rs
  annotations: {deployment.kubernetes.io/revision: "1", volcano.sh/team: storefront}
  ownerReferences:
  - {apiVersion: apps/v1, kind: Deployment, name: web, uid: 9a0b-deploy,
     controller: true, blockOwnerDeletion: true}
spec: {replicas: 2, selector: {matchLabels: {app: web}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-6d4cf56db6-a7k2p
  namespace: shop
  uid: pod-web-1
  labels: {app: web, volcano.sh/preemptable: "true"}
  annotations: {scheduling.volcano.sh/queue-name: frontend}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-6d4cf56db6, uid: 3f1e0c1a-rs,
     controller: true, blockOwnerDeletion: true}
spec:
  schedulerName: volcano
  priorityClassName: high
  initContainers:
  - name: warm
    image: busybox
    resources: {requests: {cpu: "2", memory: 256Mi}}
  containers:
  - name: app
    image: nginx
    resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}
  - name: sidecar
    image: envoy
    resources: {requests: {cpu: 250m, memory: 128Mi}}
status: {phase: Pending}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-6d4cf56db6-q9m4z
  namespace: shop
  uid: pod-web-2
  labels: {app: web}
  annotations: {scheduling.volcano.sh/queue-name: frontend}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-6d4cf56db6, uid: 3f1e0c1a-rs,
     controller: true, blockOwnerDeletion: true}
spec:
  schedulerName: volcano
  priorityClassName: high
  containers:
  - name: app
    image: nginx
    resources: {requests: {cpu: 500m, memory: 1Gi}}
status: {phase: Pending}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop, uid: 77c2-sts}
spec: {replicas: 2, serviceName: db, selector: {matchLabels: {app: db}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: db-0
  namespace: shop
  uid: pod-db-0
  labels: {app: db}
  ownerReferences:
  - {apiVersion: apps/v1, kind: StatefulSet, name: db, uid: 77c2-sts,
     controller: true, blockOwnerDeletion: true}
spec:
  schedulerName: volcano
  containers:
  - {name: pg, image: postgres, resources: {requests: {cpu: "1", memory: 2Gi}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: db-1
  namespace: shop
  uid: pod-db-1
  labels: {app: db}
  ownerReferences:
  - {apiVersion: apps/v1, kind: StatefulSet, name: db, uid: 77c2-sts,
     controller: true, blockOwnerDeletion: true}
spec:
  schedulerName: volcano
  containers:
  - {name: pg, image: postgres, resources: {requests: {cpu: "1", memory: 2Gi}}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: etl
  namespace: data
  uid: 5e5e-batch
  annotations: {scheduling.volcano.sh/group-min-member: "2", volcano.sh/sla-waiting-time: 1h}
spec: {parallelism: 2, completions: 2}
---
apiVersion: v1
kind: Pod
metadata:
  name: etl-abcde
  namespace: data
  uid: pod-etl-1
  annotations: {volcano.sh/jdb-max-unavailable: "1"}
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: etl, uid: 5e5e-batch,
     controller: true, blockOwnerDeletion: true}
spec:
  schedulerName: volcano
  containers:
  - {name: etl, image: spark, resources: {requests: {cpu: "3", memory: 4Gi, nvidia.com/gpu: "1"}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: notebook
  namespace: lab
  uid: pod-notebook
  annotations:
    scheduling.volcano.sh/queue-name: research
    volcano.sh/network-topology-mode: soft
    volcano.sh/network-topology-highest-tier: "2"
spec:
  schedulerName: volcano
  priorityClassName: low
  overhead: {cpu: 100m}
  containers:
  - {name: jupyter, image: jupyter, resources: {requests: {cpu: "2", memory: 8Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: coredns-1, namespace: kube-system, uid: pod-coredns}
spec:
  schedulerName: default-scheduler
  containers:
  - {name: coredns, image: coredns, resources: {requests: {cpu: 100m}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: trainer-0
  namespace: lab
  uid: pod-trainer
  annotations: {scheduling.k8s.io/group-name: trainer}
spec:
  schedulerName: volcano
  containers:
  - {name: t, image: torch, resources: {requests: {cpu: "4"}}}
"""


def load(text: str = MANIFESTS) -> tuple[MemoryCluster, MemoryStore]:
    cluster = MemoryCluster()
    store = MemoryStore(cluster)
    for obj in yaml.safe_load_all(text):
        if obj["kind"] == "Job" and obj["apiVersion"] == "batch/v1":
            obj["kind"] = "BatchJob"  # (pumice's name for Kubernetes' own Job)
        store.create(obj)
    return cluster, store


def run(store: MemoryStore, **kw) -> Manager:
    manager = Manager(store, [PodGroupController(store, **kw)])
    manager.step()
    return manager


def groups(cluster: MemoryCluster) -> dict[str, dict]:
    return {
        pg["metadata"]["namespace"] + "/" + pg["metadata"]["name"]: pg
        for pg in cluster.list("PodGroup")
    }


def group_of(cluster: MemoryCluster, key: str) -> str | None:
    return (cluster.get("Pod", key)["metadata"].get("annotations") or {}).get(GROUP)


def test_one_podgroup_per_controlling_owner_or_bare_pod():
    """Pods of a ReplicaSet, a StatefulSet and a Job each share their owner's group; a
    bare pod gets its own; each pod is annotated with the name of its group."""
    cluster, store = load()
    run(store)
    assert sorted(groups(cluster)) == [
        "data/podgroup-5e5e-batch",
        "lab/podgroup-pod-notebook",
        "shop/podgroup-3f1e0c1a-rs",
        "shop/podgroup-77c2-sts",
    ]
    assert group_of(cluster, "shop/web-6d4cf56db6-a7k2p") == "podgroup-3f1e0c1a-rs"
    assert group_of(cluster, "shop/web-6d4cf56db6-q9m4z") == "podgroup-3f1e0c1a-rs"
    assert group_of(cluster, "shop/db-0") == group_of(cluster, "shop/db-1") == "podgroup-77c2-sts"
    assert group_of(cluster, "data/etl-abcde") == "podgroup-5e5e-batch"
    assert group_of(cluster, "lab/notebook") == "podgroup-pod-notebook"


def test_other_schedulers_and_grouped_pods_are_left_alone():
    """A pod of another scheduler and a pod that names its group get nothing."""
    cluster, store = load()
    run(store)
    assert group_of(cluster, "kube-system/coredns-1") is None
    assert group_of(cluster, "lab/trainer-0") == "trainer"
    assert not any(pg["metadata"]["namespace"] == "kube-system" for pg in cluster.list("PodGroup"))
    assert "lab/trainer" not in groups(cluster)


def test_a_replicaset_group_is_built_from_its_first_pod():
    """minMember 1, minResources the pod's effective requests (the init container's
    2 cpu beat the containers' 750m), queue from the pod's annotation, priority class
    from its spec, owner references the pod's own (garbage collected with the
    ReplicaSet), volcano.sh/ annotations inherited from the owner, the preemptable
    label copied."""
    cluster, store = load()
    run(store)
    pg = groups(cluster)["shop/podgroup-3f1e0c1a-rs"]
    assert pg["spec"] == {
        "minMember": 1,
        "minResources": {"cpu": "2000m", "memory": "1152Mi", "pods": "1"},
        "queue": "frontend",
        "priorityClassName": "high",
    }
    assert pg["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web-6d4cf56db6",
            "uid": "3f1e0c1a-rs",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pg["metadata"]["annotations"] == {"volcano.sh/team": "storefront"}
    assert pg["metadata"]["labels"] == {"volcano.sh/preemptable": "true"}


def test_owner_min_member_annotation_scales_min_resources():
    """A Job annotated scheduling.volcano.sh/group-min-member: "2" makes a gang of 2
    whose minResources are two pods' requests; the pod's jdb annotation is copied."""
    cluster, store = load()
    run(store)
    pg = groups(cluster)["data/podgroup-5e5e-batch"]
    assert pg["spec"]["minMember"] == 2
    assert pg["spec"]["minResources"] == {
        "cpu": "6000m",
        "memory": "8Gi",
        "nvidia.com/gpu": "2",
        "pods": "2",
    }
    assert pg["spec"]["queue"] == "default"
    assert pg["metadata"]["annotations"] == {
        "volcano.sh/sla-waiting-time": "1h",
        "volcano.sh/jdb-max-unavailable": "1",
    }


def test_bad_min_member_annotation_keeps_one():
    """An annotation that is not a whole number >= 0 leaves minMember at 1."""
    text = MANIFESTS.replace('group-min-member: "2"', 'group-min-member: "two"')
    cluster, store = load(text)
    run(store)
    assert groups(cluster)["data/podgroup-5e5e-batch"]["spec"]["minMember"] == 1


def test_bare_pod_group_is_owned_by_the_pod():
    """A pod without a controller owns its group (it goes with the pod); network
    topology annotations become spec.networkTopology; overhead counts in the request."""
    cluster, store = load()
    run(store)
    pg = groups(cluster)["lab/podgroup-pod-notebook"]
    assert pg["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "notebook",
            "uid": "pod-notebook",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pg["spec"]["queue"] == "research"
    assert pg["spec"]["priorityClassName"] == "low"
    assert pg["spec"]["minResources"] == {"cpu": "2100m", "memory": "8Gi", "pods": "1"}
    assert pg["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}
    store.delete("Pod", "lab/notebook")
    assert "lab/podgroup-pod-notebook" not in groups(cluster)


def test_new_pods_join_the_existing_group_without_a_second_create():
    """A pod added later by the ReplicaSet is annotated with the same group, which is
    not rebuilt (it keeps what the first pod gave it)."""
    cluster, store = load()
    manager = run(store)
    before = copy.deepcopy(groups(cluster))
    pod = copy.deepcopy(cluster.get("Pod", "shop/web-6d4cf56db6-q9m4z"))
    pod["metadata"].update(name="web-6d4cf56db6-new", uid="pod-web-3", annotations={})
    store.create(pod)
    manager.step()
    assert group_of(cluster, "shop/web-6d4cf56db6-new") == "podgroup-3f1e0c1a-rs"
    assert groups(cluster) == before


def test_scaling_a_replicaset_to_zero_deletes_its_group():
    """As Volcano does: a ReplicaSet at zero replicas loses its PodGroup."""
    cluster, store = load()
    manager = run(store)
    store.patch("ReplicaSet", "shop/web-6d4cf56db6", {"spec": {"replicas": 0}})
    manager.step()
    assert "shop/podgroup-3f1e0c1a-rs" not in groups(cluster)
    assert "shop/podgroup-77c2-sts" in groups(cluster)


def test_scheduler_names_are_configurable():
    """Pods of another configured scheduler name get groups; volcano's no longer do."""
    text = MANIFESTS.replace(
        "schedulerName: volcano\n  priorityClassName: low",
        "schedulerName: pumice\n  priorityClassName: low",
    )
    cluster, store = load(text)
    run(store, scheduler_names=("pumice",))
    assert sorted(groups(cluster)) == ["lab/podgroup-pod-notebook"]


def test_cycle_implicit_groups_carry_the_controllers_names():
    """``pumice cycle`` on the unannotated pods groups them exactly as the controller
    does: the same job names, the same members, the same minMember and queue."""
    cluster, store = load()
    pristine = [copy.deepcopy(p) for p in cluster.list("Pod")]
    run(store)
    by_controller: dict[str, set[str]] = {}
    for pod in cluster.list("Pod"):
        name = (pod["metadata"].get("annotations") or {}).get(GROUP)
        if name and name != "trainer":
            by_controller.setdefault(f"{pod['metadata']['namespace']}/{name}", set()).add(
                pod["metadata"]["name"]
            )
    queues = [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q}}
        for q in ("default", "frontend", "research")
    ]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}},
    }
    snap = build_snapshot([SourcedObject(o) for o in [node, *queues, *pristine]])
    implicit = {uid: {t.name for t in job.tasks.values()} for uid, job in snap.jobs.items()}
    assert implicit == by_controller
    made = groups(cluster)
    for uid, job in snap.jobs.items():
        assert job.queue == made[uid]["spec"]["queue"]
        assert job.priority_class == made[uid]["spec"].get("priorityClassName", "")
    # minMember: the cycle cannot see the owners, so every implicit group is a job of 1;
    # the controller reads the batch Job's gang of 2 from its annotation.
    assert {j.min_available for j in snap.jobs.values()} == {1}
    assert made["data/podgroup-5e5e-batch"]["spec"]["minMember"] == 2


def test_scheduler_cache_keeps_the_pods_when_the_controllers_group_arrives():
    """The scheduler's cache holds unannotated pods as the implicit job
    ``podgroup-<owner uid>``; when the controller's PodGroup of that name arrives, the
    job is the PodGroup's, with the same pods, and a cycle binds them."""
    from pumice.cache.cache import SchedulerCache
    from pumice.scheduler import Scheduler

    cluster, store = load()
    for q in ("default", "frontend", "research"):
        store.create(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": q},
            }
        )
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}},
        }
    )
    cache = SchedulerCache(cluster)
    cache.sync()
    implicit = cache.jobs["shop/podgroup-3f1e0c1a-rs"]
    assert implicit.bare and len(implicit.tasks) == 2
    run(store)
    cache.sync()
    job = cache.jobs["shop/podgroup-3f1e0c1a-rs"]
    assert not job.bare
    assert sorted(t.name for t in job.tasks.values()) == [
        "web-6d4cf56db6-a7k2p",
        "web-6d4cf56db6-q9m4z",
    ]
    decisions = Scheduler.from_file(None).cycle(cache.snapshot())
    assert {"shop/web-6d4cf56db6-a7k2p", "shop/web-6d4cf56db6-q9m4z"} <= set(decisions.binds)
