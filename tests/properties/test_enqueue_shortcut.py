"""enqueue decides the same when it refuses a whole backlog without ordering it.

When no Pending job can be admitted, enqueue asks every job once, in any order, through
the voting functions' side-effect-free forms, and skips working out the queue and job
orders (see ``pumice.actions.enqueue._refuse_all``). Random backlogs of gangs with
minResources, over open and closed queues with capabilities, some jobs without
minResources, on partly full nodes, are decided both ways: the admissions, the podgroup
status and every pending job's explanation must be the same.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.actions import enqueue

QUEUES = ("q1", "q2", "q3")


@st.composite
def backlogs(draw) -> list[dict]:
    objs: list[dict] = []
    for name in QUEUES:
        cap = draw(st.sampled_from([None, 2, 4, 8]))
        objs.append(
            queue(
                name,
                weight=draw(st.integers(1, 3)),
                capability={"cpu": str(cap)} if cap is not None else None,
                state=draw(st.sampled_from(["Open", "Open", "Open", "Closed"])),
            )
        )
    sizes = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=3))
    for i, cpus in enumerate(sizes):
        objs.append(node(f"n{i}", cpu=str(cpus), memory="64Gi"))
        for k in range(draw(st.integers(0, cpus))):  # running pods, one job per node
            if k == 0:
                objs.append(podgroup(f"r{i}", queue=draw(st.sampled_from(QUEUES)), phase="Running"))
            objs.append(pod(f"r{i}-{k}", group=f"r{i}", cpu="1", node=f"n{i}"))
    for j in range(draw(st.integers(1, 8))):  # the backlog
        size = draw(st.integers(1, 4))
        cpu = draw(st.integers(1, 4))
        with_min = draw(st.integers(0, 5)) > 0
        objs.append(
            podgroup(
                f"w{j}",
                queue=draw(st.sampled_from(QUEUES)),
                min_member=size,
                phase="Pending",
                min_resources={"cpu": str(cpu * size)} if with_min else None,
                created=f"2024-01-01T00:00:{j:02d}Z",
            )
        )
        for k in range(size):
            objs.append(pod(f"w{j}-{k}", group=f"w{j}", cpu=str(cpu)))
    return objs


CONFIGS = {
    "default": conf(
        "enqueue, allocate",
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ),
    "proportion first": conf(
        "enqueue, allocate",
        ["priority", "gang"],
        ["proportion", "overcommit", "predicates"],
    ),
    "tight overcommit": conf(
        "enqueue, allocate",
        ["priority", "gang"],
        [
            {"name": "overcommit", "arguments": {"overcommit-factor": 1.0}},
            "predicates",
            "proportion",
        ],
    ),
    # capacity's vote has no side-effect-free form: the loop runs as always.
    "capacity": conf(
        "enqueue, allocate", ["priority", "gang"], ["overcommit", "predicates", "capacity"]
    ),
}


def _seen(objs: list[dict], config: str) -> dict:
    return run(objs, config).to_json(sessions=False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(backlogs(), st.sampled_from(sorted(CONFIGS)))
def test_refusing_the_backlog_at_once_changes_no_decision(objs: list[dict], name: str) -> None:
    shipped = _seen(objs, CONFIGS[name])
    with mock.patch.object(enqueue, "_refuse_all", lambda *_args: False):
        reference = _seen(objs, CONFIGS[name])
    assert shipped == reference


def _full_cluster_backlog() -> list[dict]:
    """Two nodes held by running pods, and a backlog that overcommit or a queue's
    capability refuses (one job of a closed queue)."""
    objs = [
        queue("q1", capability={"cpu": "4"}),
        queue("q2"),
        queue("q3", state="Closed"),
        node("n0", cpu="4", memory="64Gi"),
        node("n1", cpu="4", memory="64Gi"),
        podgroup("r", queue="q2", min_member=8, phase="Running"),
    ]
    objs += [pod(f"r-{k}", group="r", cpu="1", node=f"n{k % 2}") for k in range(8)]
    for j, (q, cpu) in enumerate([("q1", 6), ("q2", 4), ("q3", 1), ("q1", 2)]):
        objs.append(
            podgroup(
                f"w{j}", queue=q, min_member=1, phase="Pending", min_resources={"cpu": str(cpu)}
            )
        )
        objs.append(pod(f"w{j}-0", group=f"w{j}", cpu=str(cpu)))
    return objs


def test_a_refused_backlog_is_explained_without_working_out_the_orders() -> None:
    """The shortcut is taken (the job order is never asked for), and each job is told
    why it waits, by the plugin that refused it."""
    with mock.patch.object(enqueue, "job_key", side_effect=AssertionError("ordered")):
        d = run(_full_cluster_backlog(), CONFIGS["default"]).to_json(sessions=False)
    pending = d["pending"]
    assert pending["default/w2"] == "not enqueued: queue q3 is Closed"
    for uid in ("default/w0", "default/w1", "default/w3"):
        assert "not enqueued: overcommit: cluster would be overcommitted" in pending[uid]
    # The figures a person needs to act: what the job asks, what is admitted, what the
    # cluster can take at the factor (8 cpu x 1.2, less the 8 in use).
    assert pending["default/w1"].endswith(
        "this job's minResources (cpu 4) plus those of the jobs already admitted (cpu 0) "
        "exceed what the cluster can take at that factor (cpu 1600m: its total times the "
        "factor, less what is in use)"
    )
    assert all(pg["phase"] == "Pending" for uid, pg in d["podgroups"].items() if "/w" in uid)


def test_a_backlog_with_room_for_one_is_served_in_order() -> None:
    """When a job could be admitted, the loop runs in job order: of two jobs that each
    fit alone but not together, the older is admitted and the younger refused."""
    objs = [queue("q2"), node("n0", cpu="8", memory="64Gi")]  # overcommit: room for 9.6
    for name, created in (("young", "2024-01-01T00:00:09Z"), ("old", "2024-01-01T00:00:01Z")):
        objs.append(
            podgroup(
                name, queue="q2", min_member=1, phase="Pending", min_resources={"cpu": "6"},
                created=created,
            )
        )  # fmt: skip
        objs.append(pod(f"{name}-0", group=name, cpu="6"))
    d = run(objs, CONFIGS["default"]).to_json(sessions=False)
    assert d["podgroups"]["default/old"]["phase"] == "Inqueue"
    assert d["podgroups"]["default/young"]["phase"] == "Pending"
    assert d["pending"]["default/young"].startswith("not enqueued: overcommit")
