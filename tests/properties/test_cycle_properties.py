"""Invariants of one cycle on random clusters: capacity, gangs, determinism."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import node, pod, podgroup, queue, run

from pumice.api.parse import resources

CPUS = st.sampled_from(["500m", "1", "2", "3"])


@st.composite
def clusters(draw):
    objs = [queue("default", weight=1), queue("other", weight=2)]
    n_nodes = draw(st.integers(1, 5))
    for i in range(n_nodes):
        objs.append(
            node(
                f"n{i}",
                cpu=draw(st.sampled_from(["2", "4", "8"])),
                memory=draw(st.sampled_from(["4Gi", "16Gi"])),
                pods=draw(st.sampled_from(["3", "110"])),
            )
        )
    gangs = {}
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 6))
        minimum = draw(st.integers(1, size))
        q = draw(st.sampled_from(["default", "other"]))
        phase = draw(st.sampled_from(["Inqueue", "Pending"]))
        cpu = draw(CPUS)
        objs.append(
            podgroup(
                f"g{j}",
                min_member=minimum,
                queue=q,
                phase=phase,
                min_resources={"cpu": "1"} if draw(st.booleans()) else None,
                created=f"2026-01-01T00:00:{j:02d}Z",
            )
        )
        gangs[f"default/g{j}"] = (minimum, size)
        for k in range(size):
            objs.append(pod(f"g{j}-w-{k}", group=f"g{j}", cpu=cpu, memory="1Gi"))
    # some running load
    for r in range(draw(st.integers(0, 3))):
        objs.append(
            pod(
                f"busy{r}", cpu="1", node=f"n{draw(st.integers(0, n_nodes - 1))}", scheduler="other"
            )
        )
    return objs, gangs


def _capacity(objs):
    cap, used = {}, Counter()
    for o in objs:
        if o["kind"] == "Node":
            cap[o["metadata"]["name"]] = resources(o["status"]["allocatable"], "a")
    for o in objs:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            req = resources(o["spec"]["containers"][0]["resources"]["requests"], "r")
            n = o["spec"]["nodeName"]
            used[(n, "cpu")] += req.get("cpu", 0)
            used[(n, "memory")] += req.get("memory", 0)
            used[(n, "pods")] += 1
    return cap, used


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_no_node_over_capacity_and_no_half_gang(case) -> None:
    objs, gangs = case
    d = run(objs)
    cap, used = _capacity(objs)
    pods = {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
        for o in objs
        if o["kind"] == "Pod"
    }
    for key, n in d.binds.items():
        req = resources(pods[key]["spec"]["containers"][0]["resources"]["requests"], "r")
        used[(n, "cpu")] += req.get("cpu", 0)
        used[(n, "memory")] += req.get("memory", 0)
        used[(n, "pods")] += 1
    # Running pods of other schedulers may overload a node on their own; a node that
    # receives a bind must end within its allocatable.
    for (n, r), amount in used.items():
        if n in d.binds.values():
            assert amount <= cap[n][r] + 1e-6, f"{n} over {r}"
    bound_per_job = Counter("default/" + k.split("/")[1].rsplit("-w-", 1)[0] for k in d.binds)
    for job, count in bound_per_job.items():
        minimum, _size = gangs[job]
        assert count >= minimum, f"{job}: {count} bound, minimum {minimum}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_same_input_same_decisions(case) -> None:
    objs, _ = case
    assert run(objs).to_json(sessions=False) == run(objs).to_json(sessions=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_every_waiting_job_is_explained(case) -> None:
    objs, gangs = case
    d = run(objs)
    bound = Counter("default/" + k.split("/")[1].rsplit("-w-", 1)[0] for k in d.binds)
    piped = Counter("default/" + k.split("/")[1].rsplit("-w-", 1)[0] for k in d.pipelined)
    for job, (_minimum, size) in gangs.items():
        if bound[job] + piped[job] < size:
            assert d.pending.get(job), f"{job} waits without a reason"
