"""Fit checks are exact up to the largest quantity pumice accepts, and larger ones are
refused with one line naming file, object and field.

Amounts are floats in canonical units; floats hold integers exactly only up to 2**53.
pumice refuses any amount above 2**52 bytes or millis (and a pod whose containers add
up to more), so that ``used + request`` of amounts under a node's allocatable is always
computed exactly. The property test recomputes every node's load from the manifests
with Python integers.
"""

from __future__ import annotations

import io
import json
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pumice.cli import main
from pumice.fuzz.invariants import check

LIMIT = 2**52  # bytes, or millis


def _node(name: str, cpu: str, memory: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def _pod(name: str, cpu: str, memory: str, node: str = "", containers: int = 1) -> dict:
    spec: dict = {
        "schedulerName": "volcano",
        "containers": [
            {"name": f"c{i}", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            for i in range(containers)
        ],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        spec["nodeName"] = node
    return pod


QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "default"},
    "spec": {"weight": 1},
    "status": {"state": "Open"},
}


def _cycle(objects: list[dict]) -> tuple[int, dict | None, str]:
    """``pumice cycle`` on the objects (and the default Queue) written as a YAML file:
    (exit status, decisions, standard error)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "snapshot.yaml"
        path.write_text(yaml.safe_dump_all([QUEUE, *objects]))
        out = io.TextIOWrapper(io.BytesIO())
        err = io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["cycle", str(path)])
        out.flush()
        raw = out.buffer.getvalue()
    return code, (json.loads(raw) if code == 0 else None), err.getvalue()


def test_an_exbibyte_pod_is_refused_with_one_line_naming_it() -> None:
    code, _, err = _cycle(
        [
            _node("n1", "4", "4Pi"),
            _pod("small", "1m", "1", node="n1"),
            _pod("big", "1m", "4Ei"),
        ]
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert "snapshot.yaml" in lines[0] and "Pod default/big" in lines[0]
    assert "spec.containers[0].resources.requests.memory" in lines[0]
    assert "too large" in lines[0] and "4Pi" in lines[0]


def test_a_node_of_an_exbibyte_is_refused() -> None:
    code, _, err = _cycle([_node("n1", "4", "4Ei"), _pod("p", "1m", "1")])
    assert code == 2
    assert "Node n1" in err and "status.allocatable.memory" in err


@pytest.mark.parametrize(
    ("request_bytes", "binds"),
    [(LIMIT - 1, True), (LIMIT, False)],
    ids=["fits-exactly", "one-byte-over"],
)
def test_the_largest_node_is_filled_to_the_byte(request_bytes: int, binds: bool) -> None:
    """A node of 4Pi (the largest) with one byte used takes 4Pi - 1 more, not 4Pi."""
    code, decisions, err = _cycle(
        [
            _node("n1", "4", "4Pi"),
            _pod("small", "1m", "1", node="n1"),
            _pod("big", "1m", str(request_bytes)),
        ]
    )
    assert code == 0, err
    assert ("default/big" in decisions["binds"]) is binds


def test_the_largest_cpu_amount_is_filled_to_the_millicore() -> None:
    code, decisions, err = _cycle(
        [
            _node("n1", f"{LIMIT}m", "1Gi"),
            _pod("small", "1m", "1", node="n1"),
            _pod("fits", f"{LIMIT - 1}m", "1"),
            _pod("over", f"{LIMIT}m", "1"),
        ]
    )
    assert code == 0, err
    assert decisions["binds"] == {"default/fits": "n1"}


def test_one_millicore_past_the_limit_is_refused() -> None:
    code, _, err = _cycle([_node("n1", f"{LIMIT + 1}m", "1Gi"), _pod("p", "1m", "1")])
    assert code == 2 and "status.allocatable.cpu" in err


def test_a_pod_whose_containers_add_up_past_the_limit_is_refused() -> None:
    code, _, err = _cycle([_node("n1", "4", "4Pi"), _pod("p", "1m", "3Pi", containers=2)])
    assert code == 2
    assert "Pod default/p" in err and "in total" in err and "memory 6Pi" in err
    assert len(err.strip().splitlines()) == 1


#: Amounts near the limit, where a float sum of two would round, anywhere below, and
#: beyond (up to 8Ei, where floats are 1024 apart).
AMOUNTS = st.one_of(
    st.integers(LIMIT - 2**12, LIMIT),
    st.integers(2**62 - 2**12, 2**62 + 2**12),
    st.integers(LIMIT, 2**63 - 1),
    st.integers(LIMIT // 2 - 2**10, LIMIT // 2 + 2**10),
    st.integers(0, LIMIT),
    st.sampled_from([0, 1, LIMIT - 1, LIMIT, LIMIT // 2, LIMIT // 2 + 1]),
)


SMALL = st.integers(0, 2**12)


@st.composite
def clusters(draw) -> list[dict]:
    """Nodes of large amounts, bound pods (which may overcommit a node), and pending
    pods asking about what is left on some node, a few units either side."""
    objects: list[dict] = []
    left: list[list[int]] = []
    for i in range(draw(st.integers(1, 3))):
        cpu, memory = draw(AMOUNTS), draw(AMOUNTS)
        objects.append(_node(f"n{i}", f"{cpu}m", str(memory)))
        left.append([cpu, memory])
    for i in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, len(left) - 1))
        cpu, memory = draw(st.one_of(SMALL, AMOUNTS)), draw(st.one_of(SMALL, AMOUNTS))
        objects.append(_pod(f"bound-{i}", f"{cpu}m", str(memory), node=f"n{n}"))
        left[n][0] -= cpu
        left[n][1] -= memory
    for i in range(draw(st.integers(1, 6))):
        n = draw(st.integers(0, len(left) - 1))
        cpu = max(0, left[n][0] + draw(st.integers(-4, 4))) if draw(st.booleans()) else draw(SMALL)
        memory = max(0, left[n][1] + draw(st.integers(-4, 4)))
        objects.append(_pod(f"p-{i}", f"{cpu}m", str(memory)))
    return objects


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_no_node_ends_over_its_allocatable_in_exact_arithmetic(objects: list[dict]) -> None:
    """Decisions within every node's allocatable, or one line refusing an amount."""
    code, decisions, err = _cycle(objects)
    if code == 2:
        assert "too large" in err and len(err.strip().splitlines()) == 1
        return
    assert code == 0, err
    assert [v for v in check(objects, decisions, gang_ready=True) if v.startswith("capacity")] == []


def test_quota_style_memory_in_min_resources_is_counted_in_bytes() -> None:
    """``requests.memory: 12Ti`` in a PodGroup's minResources (as tools and the
    simulator's generator write it) is 12 TiB, well under the limit; it was once scaled
    as millis and refused, which stopped the built-in demo."""
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {
            "minMember": 1,
            "queue": "default",
            "minResources": {"requests.memory": "12Ti", "limits.memory": "12Ti"},
        },
    }
    pod = _pod("p", "1", "1Gi")
    pod["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "big"}
    code, decisions, err = _cycle([_node("n1", "4", "16Ti"), group, pod])
    assert code == 0, err
    assert decisions is not None
    assert list(decisions["binds"]) == ["default/p"]
