"""Writes the dialect variants of each case below: the same gangs as a Volcano PodGroup,
a scheduler-plugins coscheduling PodGroup, a pod group of a ``scheduling.k8s.io/v1alpha1``
Workload and a ``scheduling.k8s.io/v1alpha2`` PodGroup (with its Workload), each in
``<case>/<dialect>/`` with the expected decisions under that dialect's job uids.

Run ``python tests/scenarios/gang-apis/generate.py`` after changing a case; the YAML it
writes is what the scenario tests read (``tests/test_scenarios.py``), and
``tests/cache/test_gang_apis.py`` checks that the variants of a case decide alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).parent
NS = "default"
T0 = "2026-01-01T00:00:00Z"
DIALECTS = ("volcano", "coscheduling", "workload-v1alpha1", "workload-v1alpha2")


@dataclass
class Gang:
    name: str
    min: int | None  # None: a basic group (independent pods; minMember 1)
    pods: list[tuple[str, str]]  # (pod name, cpu)
    queue: str = ""
    priority_class: str = ""
    created: str = T0


@dataclass
class Case:
    name: str
    description: str
    nodes: list[tuple[str, str]]  # (name, cpu)
    gangs: list[Gang]
    #: pods of no gang already on nodes: (name, node, cpu, terminating)
    running: list[tuple[str, str, str, bool]] = field(default_factory=list)
    queues: list[str] = field(default_factory=lambda: ["default"])
    priority_classes: dict[str, int] = field(default_factory=dict)
    binds: dict[str, str] = field(default_factory=dict)
    pipelined: dict[str, str] = field(default_factory=dict)
    #: gang -> substrings of its pending reason
    pending: dict[str, list[str]] = field(default_factory=dict)
    not_pending: list[str] = field(default_factory=list)


def job_uid(dialect: str, gang: str) -> str:
    return {
        "volcano": f"{NS}/{gang}",
        "coscheduling": f"{NS}/coscheduling:{gang}",
        "workload-v1alpha1": f"{NS}/workload:{gang}:workers",
        "workload-v1alpha2": f"{NS}/podgroup:{gang}",
    }[dialect]


def _meta(name: str, created: str = T0, **extra) -> dict:
    return {"name": name, "namespace": NS, "creationTimestamp": created, **extra}


def _policy(g: Gang) -> dict:
    return {"basic": {}} if g.min is None else {"gang": {"minCount": g.min}}


def group_objects(dialect: str, g: Gang) -> list[dict]:
    annotations = {"scheduling.volcano.sh/queue-name": g.queue} if g.queue else {}
    if dialect == "volcano":
        spec = {"minMember": 1 if g.min is None else g.min}
        if g.queue:
            spec["queue"] = g.queue
        if g.priority_class:
            spec["priorityClassName"] = g.priority_class
        return [{
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": _meta(g.name, g.created),
            "spec": spec,
            "status": {"phase": "Pending"},
        }]  # fmt: skip
    meta = _meta(g.name, g.created, **({"annotations": annotations} if annotations else {}))
    if dialect == "coscheduling":
        return [{
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": meta,
            "spec": {"minMember": 1 if g.min is None else g.min, "scheduleTimeoutSeconds": 60},
        }]  # fmt: skip
    if dialect == "workload-v1alpha1":
        return [{
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": meta,
            "spec": {"podGroups": [{"name": "workers", "policy": _policy(g)}]},
        }]  # fmt: skip
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": _meta(g.name, g.created),
            "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": _policy(g)}]},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": meta,
            "spec": {
                "podGroupTemplateRef": {"workloadName": g.name, "podGroupTemplateName": "workers"},
                "schedulingPolicy": _policy(g),
            },
        },
    ]


def pod(dialect: str, g: Gang, name: str, cpu: str) -> dict:
    meta = _meta(name, g.created, uid=f"{NS}-{name}")
    spec: dict = {
        "schedulerName": "volcano",
        "containers": [{
            "name": "main",
            "image": "busybox",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
        }],
    }  # fmt: skip
    if g.priority_class:
        spec["priorityClassName"] = g.priority_class
    if dialect == "volcano":
        meta["annotations"] = {"scheduling.k8s.io/group-name": g.name}
    elif dialect == "coscheduling":
        meta["labels"] = {"scheduling.x-k8s.io/pod-group": g.name}
    elif dialect == "workload-v1alpha1":
        spec["workloadRef"] = {"name": g.name, "podGroup": "workers"}
    else:
        spec["schedulingGroup"] = {"podGroupName": g.name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Pending"}}  # fmt: skip


def snapshot(case: Case, dialect: str) -> list[dict]:
    out: list[dict] = []
    for q in case.queues:
        out.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": q, "creationTimestamp": T0},
            "spec": {"weight": 1, "reclaimable": True},
            "status": {"state": "Open"},
        })  # fmt: skip
    for name, value in case.priority_classes.items():
        out.append({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        })  # fmt: skip
    for name, cpu in case.nodes:
        res = {"cpu": cpu, "memory": "32Gi", "pods": "110"}
        out.append({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                         "creationTimestamp": T0},
            "spec": {},
            "status": {"capacity": res, "allocatable": res,
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })  # fmt: skip
    for name, node, cpu, terminating in case.running:
        meta = _meta(name, uid=f"{NS}-{name}")
        if terminating:
            meta["deletionTimestamp"] = T0
        out.append({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"schedulerName": "default-scheduler", "nodeName": node, "containers": [
                {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": "Running"},
        })  # fmt: skip
    for g in case.gangs:
        if not g.name.startswith("missing-"):
            out.extend(group_objects(dialect, g))
        out.extend(pod(dialect, g, name, cpu) for name, cpu in g.pods)
    return out


def expected(case: Case, dialect: str) -> dict:
    return {
        "description": f"{case.description} ({dialect})",
        "source": "pumice; the same gangs in each dialect decide alike (generate.py)",
        "binds": {f"{NS}/{p}": n for p, n in case.binds.items()},
        "pipelined": {f"{NS}/{p}": n for p, n in case.pipelined.items()},
        "evictions": [],
        "pending": {job_uid(dialect, g): needles for g, needles in case.pending.items()},
        "not_pending": [job_uid(dialect, g) for g in case.not_pending],
    }


CASES = [
    Case(
        "gang-beyond-min-member",
        "room for three of six pods, minMember 3: three are bound, three wait",
        nodes=[("n1", "4"), ("n2", "4"), ("n3", "4")],
        gangs=[Gang("nginx", 3, [(f"nginx-{i}", "3") for i in range(6)])],
        binds={"nginx-0": "n1", "nginx-1": "n2", "nginx-2": "n3"},
        pending={"nginx": ["task nginx-3: 0/3 nodes are available: 3 insufficient cpu"]},
    ),
    Case(
        "gang-too-large",
        "room for three pods, minMember 4: none is bound",
        nodes=[("n1", "4"), ("n2", "4"), ("n3", "4")],
        gangs=[Gang("nginx", 4, [(f"nginx-{i}", "3") for i in range(6)])],
        binds={},
        pending={"nginx": ["gang"]},
    ),
    Case(
        "basic-group",
        "a basic group (minMember 1) with room for two of three pods: two are bound",
        nodes=[("n1", "4"), ("n2", "4")],
        gangs=[Gang("web", None, [(f"web-{i}", "3") for i in range(3)])],
        binds={"web-0": "n1", "web-1": "n2"},
        pending={"web": ["task web-2"]},
    ),
    Case(
        "pipelined-on-releasing",
        "a gang of two fits only once a terminating pod is gone: both are pipelined",
        nodes=[("n1", "4")],
        running=[("old", "n1", "4", True)],
        gangs=[Gang("train", 2, [("train-0", "2"), ("train-1", "2")])],
        binds={},
        pipelined={"train-0": "n1", "train-1": "n1"},
    ),
    Case(
        "too-few-pods",
        "minMember 3 with two pods: the gang waits for its third pod, though it would fit",
        nodes=[("n1", "8")],
        gangs=[Gang("train", 3, [("train-0", "1"), ("train-1", "1")])],
        binds={},
        pending={"train": ["not enough valid tasks for gang scheduling: 2 exist"]},
    ),
    Case(
        "priority-from-pods",
        "two gangs in one queue with room for one: the pods' priority class orders them",
        nodes=[("n1", "4")],
        priority_classes={"high": 1000},
        gangs=[
            Gang("low", 2, [("low-0", "2"), ("low-1", "2")]),
            Gang(
                "high",
                2,
                [("high-0", "2"), ("high-1", "2")],
                priority_class="high",
                created="2026-01-01T00:01:00Z",
            ),
        ],
        binds={"high-0": "n1", "high-1": "n1"},
        pending={"low": ["gang"]},
    ),
    Case(
        "queue-annotation",
        "a gang in queue q1 by the queue annotation, room for it: bound",
        nodes=[("n1", "4")],
        queues=["default", "q1"],
        gangs=[Gang("train", 2, [("train-0", "2"), ("train-1", "2")], queue="q1")],
        binds={"train-0": "n1", "train-1": "n1"},
        not_pending=["train"],
    ),
    Case(
        "missing-group",
        "pods whose group object does not exist wait, though they would fit; never alone",
        nodes=[("n1", "8")],
        gangs=[Gang("missing-train", 2, [("train-0", "1"), ("train-1", "1")])],
        binds={},
        pending={"missing-train": ["does not exist"]},
    ),
]


def mixed() -> tuple[list[dict], dict]:
    """One gang of each dialect in queue q1, room for three: the pods' priority class
    puts the last-created first, then creation order."""
    gangs = [
        ("volcano", Gang("a", 2, [("a-0", "2"), ("a-1", "2")], queue="q1")),
        ("coscheduling", Gang("b", 2, [("b-0", "2"), ("b-1", "2")], queue="q1",
                              created="2026-01-01T00:01:00Z")),
        ("workload-v1alpha1", Gang("c", 2, [("c-0", "2"), ("c-1", "2")], queue="q1",
                                   created="2026-01-01T00:02:00Z")),
        ("workload-v1alpha2", Gang("d", 2, [("d-0", "2"), ("d-1", "2")], queue="q1",
                                   priority_class="high", created="2026-01-01T00:03:00Z")),
    ]  # fmt: skip
    case = Case("mixed", "", nodes=[("n1", "4"), ("n2", "4"), ("n3", "4")], gangs=[],
                queues=["default", "q1"], priority_classes={"high": 1000})  # fmt: skip
    docs = snapshot(case, "volcano")
    for dialect, g in gangs:
        docs.extend(group_objects(dialect, g))
        docs.extend(pod(dialect, g, name, cpu) for name, cpu in g.pods)
    want = {
        "description": "a Volcano PodGroup, a coscheduling PodGroup, a v1alpha1 Workload's pod "
        "group and a v1alpha2 PodGroup share queue q1 with room for three gangs: the "
        "high-priority one (its pods' class) first, then by creation",
        "source": "pumice (generate.py)",
        "bind_count": 6,
        "binds_within": {f"default/{g}-{i}": ["n1", "n2", "n3"] for g in "abd" for i in (0, 1)},
        "evictions": [],
        "pending": {job_uid("workload-v1alpha1", "c"): ["gang"]},
        "not_pending": [job_uid("volcano", "a"), job_uid("coscheduling", "b"),
                        job_uid("workload-v1alpha2", "d")],
    }  # fmt: skip
    return docs, want


def main() -> None:
    for case in CASES:
        for dialect in DIALECTS:
            d = HERE / case.name / dialect
            d.mkdir(parents=True, exist_ok=True)
            docs = snapshot(case, dialect)
            (d / "snapshot.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
            (d / "expected.yaml").write_text(
                yaml.safe_dump(expected(case, dialect), sort_keys=False, width=100)
            )
    docs, want = mixed()
    d = HERE / "mixed-kinds-one-queue"
    d.mkdir(exist_ok=True)
    (d / "snapshot.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    (d / "expected.yaml").write_text(yaml.safe_dump(want, sort_keys=False, width=100))


if __name__ == "__main__":
    main()
