"""predicates filter nodes and explain; nodeorder and binpack choose among them."""

from __future__ import annotations

from tests.kit import conf, node, pod, podgroup, queue, run

CONF = conf("allocate", ["gang"], ["predicates", "nodeorder"])


def one(pod_obj, *nodes, config=CONF):
    return run([queue(), podgroup("pg"), pod_obj, *nodes], config)


def test_taint_blocks_and_is_named_in_the_reason() -> None:
    taint = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    d = one(pod("p", group="pg"), node("n1", taints=taint))
    assert d.binds == {}
    assert "1 had untolerated taint dedicated=infra:NoSchedule" in d.pending["default/pg"]


def test_toleration_lets_the_pod_onto_the_tainted_node() -> None:
    taint = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    tol = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
    d = one(pod("p", group="pg", tolerations=tol), node("n1", taints=taint))
    assert d.binds == {"default/p": "n1"}


def test_node_selector_and_required_affinity() -> None:
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                ]
            }
        }
    }
    nodes = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"})]
    assert one(pod("p", group="pg", affinity=aff), *nodes).binds == {"default/p": "n2"}
    sel = one(pod("p", group="pg", nodeSelector={"zone": "a"}), *nodes)
    assert sel.binds == {"default/p": "n1"}
    none = one(pod("p", group="pg", nodeSelector={"zone": "c"}), *nodes)
    assert "2 didn't match the pod's node selector/affinity" in none.pending["default/pg"]


def test_cordoned_node_is_skipped() -> None:
    d = one(pod("p", group="pg"), node("n1", unschedulable=True), node("n2"))
    assert d.binds == {"default/p": "n2"}


def test_host_port_conflict() -> None:
    ports = [
        {
            "name": "c",
            "ports": [{"containerPort": 80, "hostPort": 8080}],
            "resources": {"requests": {"cpu": "1"}},
        }
    ]
    used = pod("web", node="n1", scheduler="other", containers=ports)
    d = run(
        [
            queue(),
            podgroup("pg"),
            used,
            pod("p", group="pg", containers=ports),
            node("n1", cpu="8"),
            node("n2", cpu="8"),
        ],
        CONF,
    )
    assert d.binds == {"default/p": "n2"}


def test_extended_resource_fit_and_reason() -> None:
    d = one(pod("p", group="pg", gpu="2"), node("n1", nvidia_gpu="1"), node("n2"))
    assert d.binds == {}
    assert "2 insufficient nvidia.com/gpu" in d.pending["default/pg"]


def test_least_requested_spreads_and_binpack_packs() -> None:
    busy = pod("busy", cpu="2", node="n1", scheduler="other")
    nodes = [node("n1", cpu="4"), node("n2", cpu="4")]
    spread = run([queue(), podgroup("pg"), busy, pod("p", group="pg"), *nodes], CONF)
    assert spread.binds == {"default/p": "n2"}
    pack = conf("allocate", ["gang"], ["predicates", "binpack"])
    packed = run([queue(), podgroup("pg"), busy, pod("p", group="pg"), *nodes], pack)
    assert packed.binds == {"default/p": "n1"}


def test_preferred_affinity_wins_over_free_space() -> None:
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                }
            ]
        }
    }
    busy = pod("busy", cpu="1", node="n2", scheduler="other")
    d = run(
        [
            queue(),
            podgroup("pg"),
            busy,
            pod("p", group="pg", affinity=pref),
            node("n1", cpu="4"),
            node("n2", cpu="4", labels={"disk": "ssd"}),
        ],
        CONF,
    )
    assert d.binds == {"default/p": "n2"}


def test_equal_scores_tie_break_to_the_first_node_name() -> None:
    d = one(pod("p", group="pg"), node("zeta"), node("alpha"), node("mid"))
    assert d.binds == {"default/p": "alpha"}


def _not_ready(n: dict, status: str = "False") -> dict:
    n["status"]["conditions"] = [{"type": "Ready", "status": status}]
    return n


def test_nodes_left_out_are_noted_and_counted_in_the_reason() -> None:
    """Not-ready nodes are out of the session: nothing goes there, ``pumice cycle``
    notes them, and a task that fits only there says so."""
    d = one(pod("p", group="pg", cpu="6"), _not_ready(node("a", cpu="8")), node("b", cpu="4"))
    assert d.binds == {}
    reason = d.pending["default/pg"]
    assert "0/2 nodes are available: 1 insufficient cpu, 1 was not ready" in reason
    assert any("left out 1 node not ready" in n and ": a" in n for n in d.notes)


def test_a_cluster_of_left_out_nodes_is_not_an_empty_cluster() -> None:
    d = one(pod("p", group="pg"), _not_ready(node("a"), "Unknown"), _not_ready(node("b")))
    assert "0/2 nodes are available: 2 were not ready" in d.pending["default/pg"]


def test_a_pipelined_pod_and_a_terminating_one_both_hold_pod_slots() -> None:
    """Volcano's pod count takes every pod on the node: with 3 slots, a running and a
    terminating pod, one pending pod is pipelined onto the releasing cpu, the next finds
    the node full."""
    objs = [
        queue(),
        pod("run", cpu="2", node="n1", scheduler="other"),
        pod("leaving", cpu="2", node="n1", scheduler="other", terminating=True),
        podgroup("a"),
        pod("a-0", group="a", created="2026-01-01T00:00:01Z"),
        podgroup("b"),
        pod("b-0", group="b", created="2026-01-01T00:00:02Z"),
        node("n1", cpu="4", pods="3"),
    ]
    d = run(objs, CONF)
    assert d.pipelined == {"default/a-0": "n1"} and d.binds == {}
    assert "1 too many pods" in d.pending["default/b"]


def test_balanced_score_counts_gpus_only_for_a_task_that_asks_for_them() -> None:
    """A cpu-only task on a GPU node is scored on cpu and memory alone, as Kubernetes'
    balanced allocation does: its idle GPUs do not make the node look unbalanced."""
    weights = {"name": "nodeorder", "arguments": {"leastrequested.weight": 0,
               "balancedresource.weight": 1, "tainttoleration.weight": 0}}  # fmt: skip
    config = conf("allocate", ["gang"], [weights])
    nodes = [node("a-gpu", cpu="8", memory="16Gi", nvidia_gpu="8"),
             node("b-cpu", cpu="8", memory="32Gi")]  # fmt: skip
    cpu_only = run([queue(), podgroup("pg"), pod("p", group="pg", cpu="2", memory="4Gi"), *nodes],
                   config)  # fmt: skip
    assert cpu_only.binds == {"default/p": "a-gpu"}
