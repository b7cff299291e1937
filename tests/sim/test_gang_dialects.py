"""pumice simulate on workloads written in the other gang dialects: scheduler-plugins
coscheduling PodGroups, Kubernetes' v1alpha1 Workloads and v1alpha2 PodGroups.

Each runs end to end with its group object in its own dialect in the simulated cluster,
decides as its Volcano twin does, times out and backs off on the virtual clock, and
mixes with the others in one queue."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from pumice.errors import InputError
from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import SimOptions, SimResult, Simulation
from pumice.sim.loader import load_workload
from pumice.sim.objects import to_compact
from pumice.sim.report import write_report

GiB = float(2**30)
QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "default"},
    "spec": {"weight": 1},
}
#: The Volcano twins run on the PodGroup model with their pods made at arrival, as the
#: pods of the other dialects are (no controller of theirs waits for an admission).
UPFRONT = SimOptions(pods_on_admission=False, job_controller=False)

#: (name, arrival, duration, pods, cpu per pod): on one 8-cpu node, b waits for a and c
#: for b, each less than coscheduling's 60 s timeout.
GANGS = [
    ("a", 0, 40, 3, 2),
    ("b", 10, 30, 4, 2),
    ("c", 20, 20, 2, 3),
    ("d", 25, 10, 1, 1),
]


def _pod(name: str, cpu: int, **join: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": {"cpu": str(cpu)}}}]
    }
    if "label" in join:
        meta["labels"] = {"scheduling.x-k8s.io/pod-group": join["label"]}
    if "annotation" in join:
        meta["annotations"] = {"scheduling.k8s.io/group-name": join["annotation"]}
    if "group" in join:
        spec["schedulingGroup"] = {"podGroupName": join["group"]}
    if "ref" in join:
        spec["workloadRef"] = join["ref"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _sim(arrival: int, duration: int, **more: str) -> dict[str, str]:
    return {"pumice.sim/arrival": str(arrival), "pumice.sim/duration": str(duration), **more}


def _manifests(dialect: str) -> list[dict[str, Any]]:
    """The gangs of :data:`GANGS` in ``dialect``: each its own group object (a v1alpha1
    Workload holds them all, one replica key each)."""
    out: list[dict[str, Any]] = [QUEUE]
    if dialect == "workload":
        out.append(
            {
                "apiVersion": "scheduling.k8s.io/v1alpha1",
                "kind": "Workload",
                "metadata": {"name": "train"},
                "spec": {
                    "podGroups": [
                        {"name": name, "policy": {"gang": {"minCount": pods}}}
                        for name, _a, _d, pods, _c in GANGS
                    ]
                },
            }
        )
    for name, arrival, duration, pods, cpu in GANGS:
        meta = {"name": name, "annotations": _sim(arrival, duration)}
        if dialect == "volcano":
            out.append(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": meta,
                    "spec": {"minMember": pods},
                }
            )
            joins = [{"annotation": name}] * pods
        elif dialect == "coscheduling":
            out.append(
                {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": meta,
                    "spec": {"minMember": pods},
                }
            )
            joins = [{"label": name}] * pods
        elif dialect == "podgroup":
            out.append(
                {
                    "apiVersion": "scheduling.k8s.io/v1alpha2",
                    "kind": "PodGroup",
                    "metadata": meta,
                    "spec": {"schedulingPolicy": {"gang": {"minCount": pods}}},
                }
            )
            joins = [{"group": name}] * pods
        else:  # the Workload's pod group `name`; the sim facts on its pods
            joins = [{"ref": {"name": "train", "podGroup": name}}] * pods
        for i, join in enumerate(joins):
            pod = _pod(f"{name}-{i}", cpu, **join)
            if dialect == "workload":
                pod["metadata"]["annotations"] = _sim(arrival, duration)
            out.append(pod)
    return out


def _write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def _nodes(cpu: int = 8) -> list[dict[str, Any]]:
    return [node_object("n0", {"cpu": cpu * 1000.0, "memory": 64 * GiB, "pods": 110.0})]


DEFAULT = SimOptions()


def _run(paths: list[str], options: SimOptions = DEFAULT, nodes=None) -> Simulation:
    sim = Simulation(nodes or _nodes(), load_workload(paths), Scheduler.from_file(None), options)
    sim.run()
    return sim


def _short(uid: str) -> str:
    """A job's name without its dialect: ``default/coscheduling:a`` -> ``a``,
    ``default/workload:train:a`` -> ``a``."""
    return uid.rpartition("/")[2].rpartition(":")[2]


def _summary(sim: Simulation) -> dict[str, Any]:
    """The run's summary but for how many cycles it took (a gang of another dialect
    has a timeout, which wakes the simulation to check on it)."""
    out = sim.metrics.summary()
    for key in ("cycles", "skipped_ticks"):
        out.pop(key)
    return out


def _per_job(sim: Simulation) -> dict[str, tuple]:
    return {
        _short(j.uid): (j.submit, j.start, j.end, j.outcome, j.pods)
        for j in sim.metrics.jobs.values()
    }


@pytest.mark.parametrize("dialect", ["coscheduling", "workload", "podgroup"])
def test_each_dialect_runs_end_to_end_as_its_volcano_twin(tmp_path: Path, dialect: str):
    """The same four gangs written in another dialect start, wait and end when their
    Volcano twins do (each gang whole: none is short of a pod), and the summary is the
    same; the jobs carry their dialect in their names."""
    twin = _run([_write(tmp_path, "volcano.yaml", _manifests("volcano"))], UPFRONT)
    sim = _run([_write(tmp_path, f"{dialect}.yaml", _manifests(dialect))])
    uids = sorted(sim.metrics.jobs)
    prefix = {"workload": "workload:train:"}.get(dialect, f"{dialect}:")
    assert uids == [f"default/{prefix}{name}" for name in "abcd"]
    assert _per_job(sim) == _per_job(twin)
    waits = {_short(j.uid): j.start - j.submit for j in sim.metrics.jobs.values()}
    assert waits["b"] > 0 and waits["c"] > 0  # the twins agree on real waiting
    assert _summary(sim) == _summary(twin)
    assert sim.metrics.summary()["jobs_succeeded"] == 4


def test_group_objects_reach_the_cluster_in_their_own_dialect(tmp_path: Path):
    """While the gangs run, the store holds a coscheduling PodGroup, a v1alpha2 PodGroup
    and a Workload, each under its own kind, and no Volcano PodGroup made for them; the
    pods join them as their dialect says."""
    cos, pg, wl = _manifests("coscheduling"), _manifests("podgroup"), _manifests("workload")
    docs = [QUEUE]
    docs += [d for d in cos[1:] if d["metadata"]["name"].startswith("a")]  # PodGroup a
    docs += [d for d in pg[1:] if d["metadata"]["name"].startswith("b")]  # PodGroup b
    docs += [wl[1]] + [d for d in wl[2:] if d["metadata"]["name"].startswith("c-")]
    path = _write(tmp_path, "mixed.yaml", docs)
    sim = Simulation(_nodes(24), load_workload([path]), Scheduler.from_file(None))
    seen: dict[str, list] = {}

    def look(s: Simulation) -> None:
        for kind in ("PodGroup", "CoschedulingPodGroup", "WorkloadPodGroup", "Workload"):
            seen[kind] = [(o["apiVersion"], o["metadata"]["name"]) for o in s.store.list(kind)]
        seen["pods"] = sorted(
            (o["metadata"]["name"], bool(o["spec"].get("nodeName"))) for o in s.store.list("Pod")
        )

    sim.clock.at(30.0, 9, ("call", look))
    sim.run()
    assert seen["PodGroup"] == []
    assert seen["CoschedulingPodGroup"] == [("scheduling.x-k8s.io/v1alpha1", "a")]
    assert seen["WorkloadPodGroup"] == [("scheduling.k8s.io/v1alpha2", "b")]
    assert seen["Workload"] == [("scheduling.k8s.io/v1alpha1", "train")]
    assert all(bound for _name, bound in seen["pods"])
    assert sorted(sim.metrics.jobs) == [
        "default/coscheduling:a",
        "default/podgroup:b",
        "default/workload:train:c",
    ]
    assert sim.store.list("Workload") == []  # gone with its last gang


def _timeout_workload(tmp_path: Path) -> str:
    """A one-pod job holding half of a 4-cpu node for 120 s, and a coscheduling gang of
    two 2-cpu pods (timeout 20 s) that cannot fit while it runs."""
    blocker = _pod("blocker", 2)
    blocker["metadata"]["annotations"] = _sim(0, 120)
    gang = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "annotations": _sim(10, 60)},
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 20},
    }
    pods = [_pod(f"train-{i}", 2, label="train") for i in range(2)]
    return _write(tmp_path, "timeout.yaml", [QUEUE, blocker, gang, *pods])


def test_coscheduling_gang_times_out_and_backs_off_on_the_virtual_clock(tmp_path: Path):
    """The gang's scheduling starts at its arrival (10 s); it times out 20 s later, backs
    off 1 s (kube-scheduler's pod backoff), is tried again at 31 s, times out at 51 s,
    backs off 2 s, and so on, doubling up to 10 s, with no other event to wake the
    simulation; once the blocker ends it starts whole."""
    sim = Simulation(_nodes(4), load_workload([_timeout_workload(tmp_path)]),
                     Scheduler.from_file(None))  # fmt: skip
    reasons: list[tuple[float, str]] = []
    record = sim.metrics.cycle

    def cycle(pending: Mapping[str, str], names: Mapping[str, str] | None = None) -> None:
        if "default/coscheduling:train" in pending:
            reasons.append((sim.clock.now, pending["default/coscheduling:train"]))
        record(pending, names)

    sim.metrics.cycle = cycle  # type: ignore[method-assign]
    sim.run()
    timed_out = [(t, r) for t, r in reasons if r.startswith("not schedulable: gang timed out")]
    assert [t for t, _r in timed_out] == [30.0, 51.0, 73.0, 97.0, 125.0]
    retries = [t for t, r in reasons if r.startswith("gang short")]
    assert retries == [10.0, 11.0, 31.0, 53.0, 77.0, 105.0]
    _t, reason = timed_out[0]
    assert reason == (
        "not schedulable: gang timed out: its scheduling started at 1970-01-01T00:00:10Z "
        "and it was not ready 20s later (scheduleTimeoutSeconds); backing off until "
        "1970-01-01T00:00:31Z, then tried again"
    )
    assert "backing off until 1970-01-01T00:02:15Z" in timed_out[-1][1]  # 10 s: the cap
    # The blocker ends at 126 s; the gang still backs off, and says so.
    assert reasons[-1] == (
        126.0,
        "not schedulable: backing off until 1970-01-01T00:02:15Z: its gang timed out "
        "(20s, scheduleTimeoutSeconds); it is tried again then",
    )
    job = sim.metrics.jobs["default/coscheduling:train"]
    assert job.start == 135.0 and job.end == 200.0  # tried again once the backoff ended
    assert job.outcome == "succeed"


def test_gang_that_never_fits_ends_the_run_with_its_timeout_as_reason(tmp_path: Path):
    """With nothing else left to happen, a gang that can never fit does not keep the
    simulation retrying forever: the run ends and says why it never ran."""
    path = _timeout_workload(tmp_path)
    docs = list(yaml.safe_load_all(Path(path).read_text()))
    docs = [d for d in docs if d["metadata"]["name"] != "blocker"]
    for d in docs[2:]:
        d["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    # Each pod fits the big node, the cluster holds the gang's 6 cpu, but never both pods.
    nodes = [*_nodes(4), node_object("n1", {"cpu": 2000.0, "memory": 64 * GiB, "pods": 110.0})]
    sim = Simulation(nodes, load_workload([_write(tmp_path, "never.yaml", docs)]),
                     Scheduler.from_file(None))  # fmt: skip
    timeouts: list[float] = []
    record = sim.metrics.cycle

    def cycle(pending: Mapping[str, str], names: Mapping[str, str] | None = None) -> None:
        if "gang timed out: its" in pending.get("default/coscheduling:train", ""):
            timeouts.append(sim.clock.now)
        record(pending, names)

    sim.metrics.cycle = cycle  # type: ignore[method-assign]
    sim.run()
    job = sim.metrics.jobs["default/coscheduling:train"]
    assert job.start is None
    assert timeouts[:2] == [30.0, 51.0]  # it was retried on the clock, then given up on
    assert "2 insufficient cpu" in job.pending_reason
    assert sim.clock.now < 300


def test_three_dialects_and_volcano_in_one_queue(tmp_path: Path):
    """A Volcano PodGroup, a coscheduling PodGroup, a v1alpha2 PodGroup and two replicas
    of a Workload's pod group share the default queue and one node: all run, in turn,
    and the report's CSV reads back with the colons of their names intact."""
    docs: list[dict[str, Any]] = [
        QUEUE,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "vol", "annotations": _sim(0, 30)},
            "spec": {"minMember": 2},
        },
        *[_pod(f"vol-{i}", 2, annotation="vol") for i in range(2)],
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "cos", "annotations": _sim(5, 30)},
            "spec": {"minMember": 2},
        },
        *[_pod(f"cos-{i}", 2, label="cos") for i in range(2)],
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "annotations": _sim(10, 30)},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        },
        *[_pod(f"pg-{i}", 2, group="pg") for i in range(3)],
        {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "wl", "annotations": _sim(15, 30)},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
        },
    ]
    for key in ("r1", "r2"):
        ref = {"name": "wl", "podGroup": "workers", "podGroupReplicaKey": key}
        docs += [_pod(f"wl-{key}-{i}", 2, ref=ref) for i in range(2)]
    sim = _run([_write(tmp_path, "all.yaml", docs)], nodes=_nodes(6))
    jobs = sim.metrics.jobs
    assert sorted(jobs) == [
        "default/coscheduling:cos",
        "default/podgroup:pg",
        "default/vol",
        "default/workload:wl:workers:r1",
        "default/workload:wl:workers:r2",
    ]
    assert all(j.outcome == "succeed" and j.end is not None for j in jobs.values())
    assert {j.queue for j in jobs.values()} == {"default"}
    assert sim.metrics.summary()["gang_violations"] == 0
    # 6 cpu: no two of these gangs (4 or 6 cpu each) fit at once; they run in turn
    spans = sorted((j.start, j.end) for j in jobs.values())
    assert all(a_end <= b_start for (_s, a_end), (b_start, _e) in itertools.pairwise(spans))
    out = tmp_path / "report"
    result = SimResult(sim.metrics, sim.metrics.summary(), sim.events, sim.clock.now,
                       sim.workload)  # fmt: skip
    write_report(result, out)
    rows = list(csv.DictReader((out / "jobs.csv").open()))
    assert sorted(r["job"] for r in rows) == sorted(jobs)
    assert {r["outcome"] for r in rows} == {"succeed"}


def test_compact_form_says_the_dialect_of_each_job(tmp_path: Path):
    """``dialect:`` in the compact form: a coscheduling job and two pod groups of one
    Workload decide as their Volcano twins do, and the workload writes back to itself."""
    jobs = [
        {"name": "a", "arrival": 0, "duration": 40, "replicas": 3, "requests": {"cpu": "2"}},
        {"name": "b", "arrival": 10, "duration": 30, "replicas": 4, "requests": {"cpu": "2"}},
        {"name": "c", "arrival": 20, "duration": 20, "replicas": 2, "requests": {"cpu": "3"}},
    ]
    doc = {"apiVersion": "pumice.io/v1alpha1", "kind": "Workload",
           "queues": [{"name": "default"}], "jobs": jobs}  # fmt: skip
    twin = _run([_write(tmp_path, "volcano.yaml", [doc])], UPFRONT)
    dialects = [
        {"dialect": "coscheduling"},
        {"dialect": "workload", "name": "train", "podGroup": "b"},
        {"dialect": "workload", "name": "train", "podGroup": "c"},
    ]
    doc = {**doc, "jobs": [{**j, **d} for j, d in zip(jobs, dialects, strict=True)]}
    path = _write(tmp_path, "compact.yaml", [doc])
    sim = _run([path])
    assert sorted(sim.metrics.jobs) == [
        "default/coscheduling:a",
        "default/workload:train:b",
        "default/workload:train:c",
    ]
    assert _per_job(sim) == _per_job(twin)
    loaded = load_workload([path])
    again = load_workload([_write(tmp_path, "again.yaml", [to_compact(loaded)])])
    assert again.jobs == loaded.jobs


@pytest.mark.parametrize(
    ("job", "field", "message"),
    [
        ({"dialect": "kueue"}, "jobs[0].dialect", "expected one of"),
        ({"dialect": "coscheduling", "podGroup": "x"}, "jobs[0].podGroup", "dialect workload"),
        (
            {"dialect": "podgroup", "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
            "jobs[0].networkTopology",
            "only a Volcano PodGroup",
        ),
    ],
)
def test_compact_dialect_mistakes_are_refused(tmp_path: Path, job, field, message):
    doc = {
        "kind": "Workload",
        "queues": [{"name": "default"}],
        "jobs": [{"name": "a", "duration": 10, "replicas": 2, **job}],
    }
    with pytest.raises(InputError) as err:
        load_workload([_write(tmp_path, "bad.yaml", [doc])])
    assert err.value.field == field
    assert message in err.value.message


def test_pods_naming_a_missing_group_are_refused(tmp_path: Path):
    """A pod whose coscheduling PodGroup no file declares is an error naming the label,
    as one naming a missing Volcano PodGroup is."""
    pod = _pod("x-0", 1, label="ghost")
    pod["metadata"]["annotations"] = _sim(0, 10)
    with pytest.raises(InputError) as err:
        load_workload([_write(tmp_path, "ghost.yaml", [QUEUE, pod])])
    assert "scheduling.x-k8s.io/pod-group" in err.value.message
    assert "ghost" in err.value.message
