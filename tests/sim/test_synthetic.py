"""Tests for the synthetic workload generator: its calibration, shapes and determinism."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import orjson
import pytest

from pumice.api.quantity import to_canonical
from pumice.sim.cluster_spec import default_cluster
from pumice.sim.loader import load_workload
from pumice.sim.objects import job_objects, to_compact, workload_objects
from pumice.sim.synthetic import default_workload, generate
from pumice.sim.workload import GPU, JobSpec, Workload

N = 20_000
SEED = 7


@pytest.fixture(scope="module")
def big() -> Workload:
    return generate(N, seed=SEED)


@pytest.fixture(scope="module")
def demo() -> Workload:
    return default_workload()


def job_gpus(w: Workload) -> np.ndarray:
    return np.array([j.total(GPU) for j in w.jobs])


def node_shapes() -> list[dict[str, float]]:
    shapes = []
    for n in default_cluster():
        a = n["status"]["allocatable"]
        shapes.append({k: to_canonical(k, v) for k, v in a.items()})
    return shapes


def fits(requests, shape) -> bool:
    return all(amount <= shape.get(name, 0.0) for name, amount in requests.items())


def test_same_seed_same_workload():
    """The same seed gives an identical workload; another seed a different one."""
    a = generate(2000, seed=42)
    assert a == generate(2000, seed=42)
    assert a != generate(2000, seed=43)
    assert [j.arrival for j in a.jobs] != [j.arrival for j in generate(2000, seed=43).jobs]


def test_job_count_and_order(big):
    """Exactly n jobs, sorted by arrival, named uniquely in arrival order."""
    assert len(big.jobs) == N
    arrivals = [j.arrival for j in big.jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] >= 0
    assert len({j.name for j in big.jobs}) == N
    assert big.jobs[0].name == "job-00000"


def test_about_80_percent_single_gpu(big):
    """About 80% of jobs use one GPU; every job's GPU count is a power of two."""
    gpus = job_gpus(big)
    assert abs((gpus == 1).mean() - 0.80) < 0.02
    assert np.all((gpus >= 1) & (np.bitwise_and(gpus.astype(int), gpus.astype(int) - 1) == 0))
    assert gpus.max() <= 256
    assert (gpus >= 64).sum() > 0, "the tail of wide gangs is present"


def test_runtime_median_and_tail(big):
    """Median run time is 10-20 minutes, with a heavy tail capped at 7 days."""
    d = np.array([j.duration for j in big.jobs])
    assert 600 <= np.median(d) <= 1200
    assert np.percentile(d, 99) > 12 * 3600 and d.max() > 2 * 86400
    assert d.max() <= 7 * 86400 and d.min() >= 10


def test_larger_jobs_run_longer(big):
    """Multi-node gangs run longer than single-GPU jobs at the median."""
    gpus, d = job_gpus(big), np.array([j.duration for j in big.jobs])
    assert np.median(d[gpus >= 16]) > 1.5 * np.median(d[gpus == 1])


def test_outcomes_about_a_fifth_do_not_succeed(big):
    """About 12% fail and 8% are cancelled, ending part-way through."""
    c = Counter(j.outcome for j in big.jobs)
    assert abs(c["fail"] / N - 0.12) < 0.015 and abs(c["cancel"] / N - 0.08) < 0.015
    fractions = [j.end_fraction for j in big.jobs if j.outcome != "succeed"]
    assert all(0 < f <= 1 for f in fractions) and np.median(fractions) < 0.5
    assert all(j.end_fraction == 1.0 for j in big.jobs if j.outcome == "succeed")


def test_every_pod_fits_a_node_and_gangs_are_whole_nodes(big):
    """Every pod fits some node of the demo cluster; wide jobs are gangs of 8-GPU pods."""
    shapes = node_shapes()
    seen = set()
    for job in big.jobs:
        assert job.replicas <= 32
        assert 1 <= job.min_available <= job.replicas
        for task in job.tasks:
            key = tuple(sorted(task.requests.items()))
            if key not in seen:
                assert any(fits(task.requests, s) for s in shapes), task
                seen.add(key)
        if job.total(GPU) > 8:
            (worker,) = [t for t in job.tasks if t.name == "worker"]
            assert worker.requests[GPU] == 8
            assert worker.replicas == job.total(GPU) / 8


def test_gangs_have_roles_and_some_are_elastic(big):
    """Some gangs carry parameter servers with per-role minimums; some start at half size."""
    with_ps = [j for j in big.jobs if len(j.tasks) == 2]
    assert with_ps and all(
        j.tasks[0].name == "ps" and GPU not in j.tasks[0].requests for j in with_ps
    )
    assert all(j.tasks[0].min_available == j.tasks[0].replicas for j in with_ps)
    elastic = [j for j in big.jobs if j.min_available < j.replicas]
    assert elastic and all(j.replicas > 1 for j in elastic)


def test_arrivals_follow_a_daily_cycle():
    """Over several days, afternoons see clearly more submissions than nights."""
    w = generate(N, seed=SEED, horizon=5 * 86400)
    hours = (np.array([j.arrival for j in w.jobs]) % 86400) // 3600
    afternoon = np.isin(hours, range(12, 18)).sum()
    night = np.isin(hours, range(0, 6)).sum()
    assert afternoon > 1.8 * night
    assert max(j.arrival for j in w.jobs) < 5 * 86400 + 3600


def test_bursts_of_job_arrays(big):
    """Job arrays put runs of same-shaped jobs of one queue within seconds of each other."""
    gaps = np.diff([j.arrival for j in big.jobs])
    close = 0
    for a, b, gap in zip(big.jobs, big.jobs[1:], gaps, strict=False):
        if gap < 30 and a.queue == b.queue and a.tasks[-1].requests is b.tasks[-1].requests:
            close += 1
    assert close > 0.1 * N


def bursts(w: Workload, gap: float = 60.0) -> list[list[JobSpec]]:
    """Runs of two or more jobs in arrival order, each within ``gap`` seconds of the one
    before, in one queue and of one shape: how a job array shows in a workload whose single
    submissions are hours apart."""
    runs: list[list[JobSpec]] = []
    run = [w.jobs[0]]
    for a, b in itertools.pairwise(w.jobs):
        if b.arrival - a.arrival < gap and a.queue == b.queue and a.tasks == b.tasks:
            run.append(b)
        else:
            if len(run) > 1:
                runs.append(run)
            run = [b]
    if len(run) > 1:
        runs.append(run)
    return runs


SPARSE_SEEDS = range(40)


@pytest.fixture(scope="module")
def sparse() -> list[Workload]:
    """Workloads whose single submissions are about six hours apart, so the job arrays
    (members about 5 s apart) stand out as bursts."""
    return [generate(600, seed=seed, horizon=30 * 86400) for seed in SPARSE_SEEDS]


def test_burst_members_are_mostly_small(sparse):
    """Over many seeds, job arrays are mostly one-GPU jobs and never wider than two nodes,
    while single submissions keep the tail of wide gangs."""
    members, singles = [], []
    for w in sparse:
        runs = bursts(w)
        assert runs, "every workload has bursts"
        in_burst = {j.name for run in runs for j in run}
        members += [j.total(GPU) for run in runs for j in run]
        singles += [j.total(GPU) for j in w.jobs if j.name not in in_burst]
    members_a, singles_a = np.array(members), np.array(singles)
    assert len(members_a) > 1000
    assert (members_a == 1).mean() > 0.78
    assert members_a.max() <= 16
    assert (members_a > 8).mean() < 0.03
    assert (singles_a >= 32).sum() > 0, "wide gangs come from single submissions"
    assert (singles_a > 8).mean() > 3 * (members_a > 8).mean()


def test_every_job_still_follows_the_calibrated_gpu_mix(sparse):
    """Small bursts do not skew the job mix: over all jobs, about 80% use one GPU and
    multi-node jobs keep their share (singles carry what the bursts leave out)."""
    gpus = np.array([j.total(GPU) for w in sparse for j in w.jobs])
    assert abs((gpus == 1).mean() - 0.80) < 0.03
    assert abs((gpus > 8).mean() - 0.045) < 0.015


def test_bursts_are_the_same_for_a_seed(sparse):
    """A seed always gives the same bursts (members, shapes and times); another seed others."""
    again = generate(600, seed=SPARSE_SEEDS[3], horizon=30 * 86400)
    assert bursts(again) == bursts(sparse[3])
    assert bursts(sparse[3]) != bursts(sparse[4])


def test_queues_are_skewed_and_all_used(big):
    """Queues have Zipf-like weights; jobs use every queue, unevenly."""
    assert len(big.queues) == 12
    weights = [q.weight for q in big.queues]
    assert weights == sorted(weights, reverse=True) and weights[0] >= 8 * weights[-1]
    counts = Counter(j.queue for j in big.jobs)
    assert set(counts) == {q.name for q in big.queues}
    assert max(counts.values()) > 3 * min(counts.values())
    assert all(j.namespace == j.queue for j in big.jobs)
    capped = [q for q in big.queues if q.capability]
    assert capped and all(q.capability[GPU] >= 256 for q in capped)


def test_priority_classes_mix(big):
    """A few priority classes, every one declared, normal the most common."""
    assert set(big.priority_classes) == {"high", "normal", "low"}
    c = Counter(j.priority_class for j in big.jobs)
    assert set(c) == {"high", "normal", "low"} and c.most_common(1)[0][0] == "normal"


def test_queue_count_range():
    """Between 10 and 25 queues get distinct team names."""
    for n in (10, 25, 30):
        w = generate(200, seed=1, n_queues=n)
        assert len({q.name for q in w.queues}) == n


def test_default_workload_loads_the_demo_cluster(demo):
    """The demo offers 1.1-1.3x the cluster's GPU capacity, 3000 jobs, gangs up to 32 pods."""
    assert len(demo.jobs) == 3000 and len(demo.queues) == 12
    horizon = max(j.arrival for j in demo.jobs)
    demand = sum(j.total(GPU) * j.duration * j.end_fraction for j in demo.jobs)
    assert 1.1 <= demand / (384 * horizon) <= 1.3
    assert max(j.replicas for j in demo.jobs) <= 32
    assert any(j.replicas >= 16 for j in demo.jobs)


def test_default_workload_survives_the_file_loader(demo, tmp_path):
    """The demo workload written in the compact form loads back unchanged (so it is valid)."""
    path = tmp_path / "demo.json"
    path.write_bytes(orjson.dumps(to_compact(demo)))
    assert load_workload([str(path)]).jobs == demo.jobs


def test_generated_jobs_render_objects(demo):
    """A generated gang renders one PodGroup and one pod per replica."""
    job = max(demo.jobs, key=lambda j: j.replicas)
    objs = job_objects(job)
    assert objs[0]["kind"] == "PodGroup" and len(objs) == 1 + job.replicas


def test_small_and_degenerate_arguments():
    """Zero jobs gives an empty workload; nonsense arguments are refused."""
    assert generate(0, seed=1).jobs == ()
    w = generate(50, seed=1, gpus_per_node=4, max_gang=4)
    assert all(j.replicas <= 4 and j.total(GPU) <= 16 for j in w.jobs)
    for kwargs in ({"n_queues": 0}, {"horizon": -1.0}, {"load": 0.0}):
        with pytest.raises(ValueError):
            generate(10, seed=1, **kwargs)


def test_demo_objects_parse_with_the_scheduler_parser(demo):
    """Every object of the demo workload and cluster is accepted by pumice's own parser."""
    parse = pytest.importorskip("pumice.api.parse")
    parsers = {
        "Pod": parse.parse_pod,
        "PodGroup": parse.parse_podgroup,
        "Queue": parse.parse_queue,
        "PriorityClass": parse.parse_priority_class,
        "Node": parse.parse_node,
    }
    objects = workload_objects(demo) + default_cluster()
    records = [parsers[o["kind"]](o) for o in objects]
    groups = [r for r in records if isinstance(r, parse.PodGroupRecord)]
    assert len(groups) == len(demo.jobs)
    job = demo.jobs[0]
    assert (groups[0].name, groups[0].min_member, groups[0].queue) == (
        job.name,
        job.min_available,
        job.queue,
    )
