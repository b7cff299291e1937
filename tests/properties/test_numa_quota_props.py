"""numa-aware and resourcequota over random clusters.

- single-numa-node: after a cycle, the Guaranteed pods bound to each node can be given
  one NUMA node each without any NUMA node holding more whole CPUs than it had free
  (checked by trying every way to share them out): no NUMA node is over its CPUs,
  whatever the order, the gangs given back, or the per-shape shortcuts.
- resourcequota: the jobs admitted in one cycle, with what each quota already counts
  as used, exceed no quota in any resource they name.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, podgroup, queue, run
from tests.plugins.test_numa_aware import gpod, numatopo

from pumice.api.parse import quota_amounts
from pumice.plugins.resourcequota import asked


@st.composite
def numa_clusters(draw) -> tuple[list[dict], dict[str, list[int]]]:
    """Nodes of 2-3 NUMA nodes of 2-4 CPUs with some CPUs taken, gangs of Guaranteed
    pods of 1-5 CPUs; and each node's free CPUs per NUMA node."""
    objs: list[dict] = [queue()]
    free_of: dict[str, list[int]] = {}
    for i in range(draw(st.integers(1, 3))):
        sizes = draw(st.lists(st.integers(2, 4), min_size=2, max_size=3))
        numa_of: dict[int, int] = {}
        free: list[int] = []
        per_numa: list[int] = []
        for n, size in enumerate(sizes):
            cpus = list(range(len(numa_of), len(numa_of) + size))
            numa_of.update(dict.fromkeys(cpus, n))
            left = draw(st.integers(0, size))
            free += cpus[:left]
            per_numa.append(left)
        name = f"n{i}"
        free_of[name] = per_numa
        objs.append(node(name, cpu="64", memory="256Gi"))
        objs.append(numatopo(name, free=",".join(map(str, free)), numa_of=numa_of))
    for j in range(draw(st.integers(1, 5))):
        n = draw(st.integers(1, 3))
        cpus = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
        same = draw(st.booleans())  # (a gang of one shape: the shortcuts' case)
        objs.append(podgroup(f"g{j}", min_member=draw(st.integers(1, n))))
        for k in range(n):
            c = cpus[0] if same else cpus[k]
            created = f"2026-01-01T00:0{j}:0{k}Z"
            objs.append(gpod(f"g{j}-{k}", str(c), group=f"g{j}", created=created))
    return objs, free_of


def _fits_one_numa_each(asks: list[int], free: list[int]) -> bool:
    for choice in itertools.product(range(len(free)), repeat=len(asks)):
        left = list(free)
        for ask, n in zip(asks, choice, strict=True):
            left[n] -= ask
        if min(left) >= 0:
            return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(numa_clusters(), st.sampled_from(["enqueue, allocate", "enqueue, allocate, backfill"]))
def test_no_numa_node_is_over_its_cpus_under_single_numa_node(cluster, actions: str) -> None:
    objs, free_of = cluster
    config = conf(actions, ["priority", "gang"], ["predicates", "nodeorder", "numa-aware"])
    d = run(objs, config)
    cpus_of = {
        f"default/{o['metadata']['name']}": int(
            o["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        )
        for o in objs
        if o["kind"] == "Pod"
    }
    for name, free in free_of.items():
        asks = [cpus_of[p] for p, where in d.binds.items() if where == name]
        assert all(a <= max(free) for a in asks), (name, asks, free)
        assert _fits_one_numa_each(asks, free), (name, asks, free)


NAMESPACES = ("a", "b")
RESOURCES = ("cpu", "requests.cpu", "memory", "pods", "limits.cpu")


@st.composite
def quota_backlogs(draw) -> list[dict[str, Any]]:
    objs: list[dict] = [queue(), node("n1", cpu="64", memory="256Gi")]
    for ns in NAMESPACES:
        for q in range(draw(st.integers(0, 2))):
            names = draw(st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=3, unique=True))
            hard = {r: str(draw(st.integers(0, 12))) for r in names}
            used = {r: str(draw(st.integers(0, 8))) for r in names if draw(st.booleans())}
            objs.append(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": f"q{q}", "namespace": ns},
                    "spec": {"hard": hard},
                    "status": {"hard": hard, "used": used},
                }
            )
    for j in range(draw(st.integers(1, 8))):
        names = draw(st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=4, unique=True))
        asks = {r: str(draw(st.integers(0, 5))) for r in names}
        pg = podgroup(
            f"j{j}",
            ns=draw(st.sampled_from(NAMESPACES)),
            phase="Pending",
            min_resources=asks if draw(st.integers(0, 5)) else None,
            created=f"2026-01-01T00:00:0{j}Z",
        )
        objs.append(pg)
    return objs


@settings(max_examples=80, deadline=None)
@given(quota_backlogs())
def test_the_jobs_admitted_in_a_cycle_exceed_no_quota(objs: list[dict[str, Any]]) -> None:
    d = run(objs, conf("enqueue", ["resourcequota"], ["overcommit"]))
    admitted = {
        k for k, v in d.podgroups.items() if v.phase == "Inqueue"
    }  # (the jobs that were Pending and are now admitted)
    for q in (o for o in objs if o["kind"] == "ResourceQuota"):
        ns = q["metadata"]["namespace"]
        hard = quota_amounts(q["status"]["hard"], "hard")
        used = quota_amounts(q["status"]["used"], "used")
        for dim, limit in hard.items():
            total, named = used.get(dim, 0.0), False
            for pg in objs:
                key = f"{pg['metadata'].get('namespace')}/{pg['metadata']['name']}"
                if pg["kind"] != "PodGroup" or key not in admitted or not key.startswith(f"{ns}/"):
                    continue
                min_res = pg["spec"].get("minResources")
                mine = asked(quota_amounts(min_res, "m"), dim) if min_res is not None else None
                if mine is not None:
                    total, named = total + mine, True
            assert not named or total <= limit, (q["metadata"], dim, total, limit)
