"""Synthetic GPU-cluster workloads, calibrated to published deep-learning cluster traces.

Why: a scheduler has to be judged on a workload that looks like real ones (mostly small
jobs, a heavy tail of long and wide gangs, bursts, a daily cycle, failures), and a
simulation must be reproducible. :func:`generate` draws such a workload from
``numpy.random.default_rng(seed)``: the same arguments give an identical
:class:`~pumice.sim.workload.Workload`; the sampling is vectorized, so 100,000 jobs take
well under a few seconds.

Calibration (the defaults of :class:`Calibration`; ``docs/traces.md`` has the same table).
The targets were chosen within what these studies report, read from their text and
figures; they are not a fit to the raw traces:

- [Philly] Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
  Training Workloads", USENIX ATC'19 (Microsoft Philly, 2017).
- [Helios] Hu et al., "Characterization and Prediction of Deep Learning Workloads in
  Large-Scale GPU Datacenters", SC'21 (SenseTime Helios, 2020).
- [PAI] Weng et al., "MLaaS in the Wild: Workload Analysis and Scheduling in Large-Scale
  Heterogeneous GPU Clusters", NSDI'22 (Alibaba PAI, 2020).

=====================  ==========================================  =======================
quantity               pumice's model (default)                    source
=====================  ==========================================  =======================
GPUs per job           powers of two; 80% one GPU; the rest        Philly, Helios: most
                       falling off towards 256 (8-GPU jobs a       jobs use one GPU, few
                       local peak)                                 use more than one node
multi-node jobs        whole-node pods of ``gpus_per_node`` GPUs,  PAI: gang-scheduled
                       at most ``max_gang`` pods; 30% of 2..8-GPU  multi-instance jobs;
                       jobs run as 1-GPU workers; 20% of gangs     PS/worker roles
                       carry 1-4 CPU-only parameter servers
run time               lognormal, median 14 min for 1 GPU, growing Helios, Philly: median
                       as gpus**0.3, sigma 1.9 (p90 ~ 2.7 h),      of minutes to tens of
                       capped at 7 days                            minutes, heavy tail of
                                                                   multi-day jobs; larger
                                                                   jobs run longer
outcome                12% fail (early: end fraction Beta(0.7,     Philly, Helios: roughly
                       2)), 8% cancelled (Beta(1.2, 1.2))          a fifth to a third of
                                                                   jobs do not complete
arrivals               non-homogeneous Poisson, daily cycle        Helios, Philly: diurnal
                       (peak 15:00, peak:trough 3:1); 7% of        submission pattern;
                       submissions are job arrays of ~8 jobs       bursts of similar jobs
                       from one user a few seconds apart, of one   (hyper-parameter sweeps),
                       shape drawn mostly small (85% one GPU, at   dominated by many small,
                       most two nodes); single submissions carry   often one-GPU jobs
                       the rest, so every job's GPUs still follow
                       the row above
tenants                ``n_queues`` queues, Zipf weights           PAI, Helios: usage is
                       (2n/rank); demand per queue skewed and      heavily skewed over
                       not proportional to weight                  users and groups
cpu, memory            per GPU: 2-8 cores and 16-64 GiB, capped    PAI: CPU and memory
                       so an 8-GPU pod fits a 64-core/512Gi node   requested per GPU vary
                                                                   widely
=====================  ==========================================  =======================

The offered load is what the arrival rate is set by: without ``horizon``, arrivals are
spread over ``total GPU-seconds / (capacity_gpus * load)``, so the jobs arriving in the
horizon ask for ``load`` times the cluster's GPUs over it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pumice.sim.workload import GPU, JobSpec, Outcome, QueueSpec, TaskSpec, Workload, sort_jobs

GiB = float(2**30)
DAY = 86400.0

TEAM_NAMES = (
    "vision",
    "nlp",
    "speech",
    "recsys",
    "rl",
    "multimodal",
    "search",
    "ads",
    "robotics",
    "genomics",
    "translation",
    "platform",
    "safety",
    "video",
    "ocr",
    "maps",
    "health",
    "finance",
    "science",
    "edge",
    "games",
    "security",
    "audio",
    "llm",
    "infra",
)

PRIORITY_CLASSES = {"high": 1000, "normal": 100, "low": 10}


@dataclass(frozen=True, slots=True)
class Calibration:
    """The knobs of :func:`generate`, defaulting to the calibration in the module docstring."""

    gpu_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    gpu_weights: tuple[float, ...] = (0.80, 0.05, 0.045, 0.06, 0.02, 0.012, 0.008, 0.003, 0.002)
    # GPUs of a job array (a burst), over ``gpu_sizes``: sweeps are mostly one-GPU jobs and
    # rarely wider than a node. Single submissions make up the rest of ``gpu_weights``.
    burst_gpu_weights: tuple[float, ...] = (0.85, 0.06, 0.04, 0.04, 0.01, 0.0, 0.0, 0.0, 0.0)
    split_fraction: float = 0.3  # 2..split_max_gpus-GPU jobs run as 1-GPU workers
    split_max_gpus: int = 0  # 0: gpus_per_node (a split job never spans nodes by size)
    ps_fraction: float = 0.2  # gangs with CPU-only parameter servers
    elastic_fraction: float = 0.1  # gangs that can start with half their workers
    cpu_per_gpu: tuple[float, ...] = (2.0, 4.0, 6.0, 8.0)  # cores
    cpu_per_gpu_weights: tuple[float, ...] = (0.2, 0.35, 0.25, 0.2)
    memory_per_gpu: tuple[float, ...] = (16.0, 32.0, 48.0, 64.0)  # GiB
    memory_per_gpu_weights: tuple[float, ...] = (0.25, 0.35, 0.2, 0.2)
    median_runtime: float = 840.0  # seconds, one-GPU jobs
    runtime_sigma: float = 1.9
    runtime_gpu_exponent: float = 0.3
    min_runtime: float = 10.0
    max_runtime: float = 7 * DAY
    array_jitter_sigma: float = 0.3  # spread of run times inside a job array
    fail_fraction: float = 0.12
    cancel_fraction: float = 0.08
    fail_end_beta: tuple[float, float] = (0.7, 2.0)
    cancel_end_beta: tuple[float, float] = (1.2, 1.2)
    diurnal_amplitude: float = 0.5  # rate = mean * (1 + a cos(...)): peak:trough 3:1
    peak_hour: float = 15.0
    array_fraction: float = 0.07  # share of submissions that are job arrays
    array_mean_size: float = 8.0
    array_max_size: int = 64
    array_gap: float = 5.0  # mean seconds between jobs of one array
    queue_skew: float = 0.8  # sigma of the lognormal noise on per-queue demand
    priority_weights: tuple[float, float, float] = (0.1, 0.7, 0.2)  # high, normal, low
    priority_classes: dict[str, int] = field(default_factory=lambda: dict(PRIORITY_CLASSES))


DEFAULT_CALIBRATION = Calibration()


def queue_names(n: int) -> list[str]:
    """``n`` tenant queue names: team names first, then ``team-NN``."""
    names = list(TEAM_NAMES[:n])
    names += [f"team-{i:02d}" for i in range(len(names), n)]
    return names


def _choice(
    rng: np.random.Generator, values: Sequence[float], weights: Sequence[float], size: int
) -> np.ndarray:
    p = np.asarray(weights, dtype=float)
    return np.asarray(values)[rng.choice(len(p), size=size, p=p / p.sum())]


def _single_weights(job_p: np.ndarray, burst_p: np.ndarray, burst_share: float) -> np.ndarray:
    """The GPU distribution of single submissions that, mixed with bursts making up
    ``burst_share`` of the jobs, gives every job the distribution ``job_p``.

    Why: bursts are drawn small, and the calibrated per-job distribution (80% one GPU, the
    tail of wide gangs) must still hold over all jobs, so the singles carry what the bursts
    leave out. Where bursts alone would exceed a size's share, that size gets no singles
    and the rest is renormalized (the per-job share of that size is then a little high).
    """
    if burst_share >= 1.0:
        return job_p
    single = np.clip(job_p - burst_share * burst_p, 0.0, None) / (1.0 - burst_share)
    total = single.sum()
    return single / total if total > 0 else job_p


def _submission_gpus(
    rng: np.random.Generator, sizes: np.ndarray, max_gpus: int, c: Calibration
) -> np.ndarray:
    """GPUs of each submission: job arrays (``sizes > 1``) from ``burst_gpu_weights``,
    single jobs from what keeps the per-job mix at ``gpu_weights``; sizes above
    ``max_gpus`` are left out of both. One uniform draw per submission, in order."""
    if len(c.burst_gpu_weights) != len(c.gpu_sizes):
        raise ValueError("burst_gpu_weights needs one weight per gpu_sizes entry")
    values = np.asarray(c.gpu_sizes, dtype=np.int64)
    ok = values <= max_gpus
    values = values[ok]
    job_p = np.asarray(c.gpu_weights, dtype=float)[ok]
    job_p = job_p / job_p.sum()
    burst_p = np.asarray(c.burst_gpu_weights, dtype=float)[ok]
    burst_p = burst_p / burst_p.sum() if burst_p.sum() > 0 else job_p
    is_burst = sizes > 1
    burst_share = float(sizes[is_burst].sum()) / float(sizes.sum())
    single_p = _single_weights(job_p, burst_p, burst_share)
    u = rng.random(len(sizes))
    pick = np.where(is_burst, _inverse_cdf(burst_p, u), _inverse_cdf(single_p, u))
    return values[pick]


def _inverse_cdf(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices drawn from weights ``p`` by uniforms ``u`` in [0, 1); a size of weight 0
    is never drawn (the last bound is exactly 1.0, so rounding cannot reach past it)."""
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    return np.searchsorted(cdf, u, side="right")


def _diurnal_times(rng: np.random.Generator, n: int, horizon: float, c: Calibration) -> np.ndarray:
    """``n`` arrival times on ``[0, horizon)`` of a Poisson process with a daily cycle
    (given ``n`` events, they are independent draws from the normalized rate)."""
    points = int(min(1_000_000, max(1024, horizon / 60.0)))
    grid = np.linspace(0.0, horizon, points)
    phase = 2 * np.pi * (grid / DAY - c.peak_hour / 24.0)
    rate = 1.0 + c.diurnal_amplitude * np.cos(phase)
    cdf = np.concatenate(([0.0], np.cumsum((rate[1:] + rate[:-1]) * 0.5 * np.diff(grid))))
    return np.interp(rng.random(n) * cdf[-1], cdf, grid)


def generate(
    n_jobs: int,
    *,
    seed: int,
    n_queues: int = 12,
    gpus_per_node: int = 8,
    max_gang: int = 32,
    horizon: float | None = None,
    load: float = 1.2,
    capacity_gpus: int = 384,
    max_job_gpus: int | None = None,
    calibration: Calibration = DEFAULT_CALIBRATION,
) -> Workload:
    """Draw a workload of ``n_jobs`` GPU jobs (see the module docstring for the model).

    Jobs needing more than ``gpus_per_node`` GPUs are gangs of whole-node pods
    (``gpus_per_node`` GPUs each); no job has more than ``max_gang`` pods, parameter
    servers included. Every pod fits a node of
    ``gpus_per_node`` GPUs with ``8 * gpus_per_node`` cores and ``64 GiB * gpus_per_node``
    under the default calibration. No job asks for more than ``max_job_gpus`` GPUs
    (default: ``max_gang`` whole nodes). Arrivals fall in ``[0, horizon)`` (array members a few
    seconds later); without ``horizon`` it is set so the offered GPU load is ``load`` times
    ``capacity_gpus``. Jobs go to ``n_queues`` queues named after teams, in namespaces of
    the same names. The same arguments always give an equal workload.
    """
    if n_jobs < 0:
        raise ValueError("n_jobs must be >= 0")
    if n_queues < 1 or gpus_per_node < 1 or max_gang < 1:
        raise ValueError("n_queues, gpus_per_node and max_gang must be >= 1")
    if horizon is not None and horizon <= 0:
        raise ValueError("horizon must be > 0")
    if load <= 0 or capacity_gpus < 1:
        raise ValueError("load and capacity_gpus must be > 0")
    c = calibration
    rng = np.random.default_rng(seed)
    names = queue_names(n_queues)
    queues = _queues(names, capacity_gpus, gpus_per_node, max_gang)
    if n_jobs == 0:
        return Workload((), queues, dict(c.priority_classes))

    # Submissions: single jobs and job arrays (same user, shape and queue).
    is_array = rng.random(n_jobs) < c.array_fraction
    extra = rng.geometric(1.0 / max(1.0, c.array_mean_size - 1.0), n_jobs)
    sizes = np.where(is_array, np.minimum(1 + extra, c.array_max_size), 1)
    ends = np.cumsum(sizes)
    n_sub = int(np.searchsorted(ends, n_jobs) + 1)
    sizes = sizes[:n_sub].copy()
    sizes[-1] -= ends[n_sub - 1] - n_jobs

    # Per submission: queue, priority, GPUs and shape.
    weights = np.array([q.weight for q in queues], dtype=float)
    popularity = np.sqrt(weights) * rng.lognormal(0.0, c.queue_skew, n_queues)
    sub_queue = rng.choice(n_queues, size=n_sub, p=popularity / popularity.sum())
    sub_pc = rng.choice(3, size=n_sub, p=np.asarray(c.priority_weights) / sum(c.priority_weights))
    max_gpus = max_gang * gpus_per_node
    if max_job_gpus is not None:
        max_gpus = min(max_gpus, max_job_gpus)
    sub_gpus = _submission_gpus(rng, sizes, max_gpus, c)
    multi_node = sub_gpus > gpus_per_node
    pods = np.where(multi_node, -(-sub_gpus // gpus_per_node), 1)
    gpus_per_pod = np.where(multi_node, gpus_per_node, sub_gpus)
    split_max = min(c.split_max_gpus or gpus_per_node, max_gang)
    split = (sub_gpus > 1) & (sub_gpus <= split_max) & (rng.random(n_sub) < c.split_fraction)
    pods = np.where(split, sub_gpus, pods)
    gpus_per_pod = np.where(split, 1, gpus_per_pod)
    cpu_per_gpu = _choice(rng, c.cpu_per_gpu, c.cpu_per_gpu_weights, n_sub)
    mem_per_gpu = _choice(rng, c.memory_per_gpu, c.memory_per_gpu_weights, n_sub)
    gang = pods > 1
    n_ps = 1 + np.minimum(3, pods // 4)
    has_ps = gang & (rng.random(n_sub) < c.ps_fraction) & (pods + n_ps <= max_gang)
    ps_replicas = np.where(has_ps, n_ps, 0)
    ps_cpu = _choice(rng, (4.0, 8.0), (0.6, 0.4), n_sub)
    ps_mem = _choice(rng, (16.0, 32.0), (0.6, 0.4), n_sub)
    elastic = gang & (rng.random(n_sub) < c.elastic_fraction)
    total_gpus = pods * gpus_per_pod
    log_median = np.log(c.median_runtime) + c.runtime_gpu_exponent * np.log(total_gpus)
    sub_runtime = log_median + c.runtime_sigma * rng.standard_normal(n_sub)

    # Per job: expand submissions, jitter run times, draw outcomes.
    sub_of_job = np.repeat(np.arange(n_sub), sizes)
    jitter = np.where(
        sizes[sub_of_job] > 1, c.array_jitter_sigma * rng.standard_normal(n_jobs), 0.0
    )
    duration = np.clip(
        np.round(np.exp(sub_runtime[sub_of_job] + jitter)), c.min_runtime, c.max_runtime
    )
    u = rng.random(n_jobs)
    outcome = np.where(
        u < c.fail_fraction, 1, np.where(u < c.fail_fraction + c.cancel_fraction, 2, 0)
    )
    end_fraction = np.where(
        outcome == 1,
        rng.beta(*c.fail_end_beta, n_jobs),
        np.where(outcome == 2, rng.beta(*c.cancel_end_beta, n_jobs), 1.0),
    )
    end_fraction = np.where(outcome == 0, 1.0, np.clip(np.round(end_fraction, 4), 0.001, 1.0))

    if horizon is None:
        demand = float(np.sum(total_gpus[sub_of_job] * duration * end_fraction))
        horizon = max(60.0, demand / (capacity_gpus * load))
    sub_start = _diurnal_times(rng, n_sub, horizon, c)
    first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    index_in_sub = np.arange(n_jobs) - first[sub_of_job]
    gaps = rng.exponential(c.array_gap, n_jobs) * (index_in_sub > 0)
    offsets = np.cumsum(gaps) - np.cumsum(gaps)[first][sub_of_job]
    arrival = np.round(sub_start[sub_of_job] + offsets, 3)

    return Workload(
        jobs=_build_jobs(
            arrival=arrival,
            duration=duration,
            outcome=outcome,
            end_fraction=end_fraction,
            sub_of_job=sub_of_job,
            queue=[names[i] for i in sub_queue],
            pc=[list(c.priority_classes)[i] for i in sub_pc],
            pods=pods,
            gpus_per_pod=gpus_per_pod,
            cpu_per_gpu=cpu_per_gpu,
            mem_per_gpu=mem_per_gpu,
            ps_replicas=ps_replicas,
            ps_cpu=ps_cpu,
            ps_mem=ps_mem,
            elastic=elastic,
        ),
        queues=queues,
        priority_classes=dict(c.priority_classes),
    )


def _queues(
    names: list[str], capacity_gpus: int, gpus_per_node: int, max_gang: int
) -> tuple[QueueSpec, ...]:
    """Zipf-weighted queues; the last quarter capped at half the cluster's GPUs (never
    below the largest gang, so every job can run in its queue)."""
    n = len(names)
    cap = float(max(capacity_gpus // 2, gpus_per_node * max_gang))
    capped_from = n - n // 4
    return tuple(
        QueueSpec(
            name=name,
            weight=max(1, round(2 * n / (i + 1))),
            capability={GPU: cap} if i >= capped_from else None,
        )
        for i, name in enumerate(names)
    )


_OUTCOMES: tuple[Outcome, ...] = ("succeed", "fail", "cancel")


def _build_jobs(
    *,
    arrival: np.ndarray,
    duration: np.ndarray,
    outcome: np.ndarray,
    end_fraction: np.ndarray,
    sub_of_job: np.ndarray,
    queue: list[str],
    pc: list[str],
    pods: np.ndarray,
    gpus_per_pod: np.ndarray,
    cpu_per_gpu: np.ndarray,
    mem_per_gpu: np.ndarray,
    ps_replicas: np.ndarray,
    ps_cpu: np.ndarray,
    ps_mem: np.ndarray,
    elastic: np.ndarray,
) -> tuple[JobSpec, ...]:
    """Turn the per-job arrays into JobSpecs, numbered in arrival order.

    Identical task shapes share one requests dict (they are read-only), which keeps a
    100,000-job workload small.
    """
    n = len(arrival)
    order = np.argsort(arrival, kind="stable")
    width = max(5, len(str(n - 1)))
    shapes: dict[tuple[float, float, float], dict[str, float]] = {}

    def requests(cpu: float, mem: float, gpus: float) -> dict[str, float]:
        key = (cpu, mem, gpus)
        r = shapes.get(key)
        if r is None:
            r = {"cpu": cpu, "memory": mem}
            if gpus:
                r[GPU] = gpus
            shapes[key] = r
        return r

    # Python lists are much faster to index one element at a time than numpy arrays.
    arrival_l = arrival.tolist()
    duration_l = duration.tolist()
    outcome_l = outcome.tolist()
    end_l = end_fraction.tolist()
    sub_l = sub_of_job.tolist()
    pods_l = pods.tolist()
    gpp_l = gpus_per_pod.tolist()
    cpg_l = cpu_per_gpu.tolist()
    mpg_l = mem_per_gpu.tolist()
    ps_l = ps_replicas.tolist()
    ps_cpu_l = ps_cpu.tolist()
    ps_mem_l = ps_mem.tolist()
    elastic_l = elastic.tolist()
    jobs = []
    for rank, j in enumerate(order.tolist()):
        s = sub_l[j]
        workers, gpp = pods_l[s], gpp_l[s]
        worker_req = requests(
            float(round(cpg_l[s] * gpp * 1000.0)), mpg_l[s] * gpp * GiB, float(gpp)
        )
        n_ps = ps_l[s]
        if elastic_l[s]:
            worker_min = -(-workers // 2)
            min_available = worker_min + n_ps
        else:
            worker_min = workers if n_ps else None
            min_available = workers + n_ps
        tasks = [TaskSpec("worker", workers, worker_req, worker_min)]
        if n_ps:
            ps_req = requests(ps_cpu_l[s] * 1000.0, ps_mem_l[s] * GiB, 0.0)
            tasks.insert(0, TaskSpec("ps", n_ps, ps_req, n_ps))
        jobs.append(
            JobSpec(
                name=f"job-{rank:0{width}d}",
                namespace=queue[s],
                queue=queue[s],
                arrival=arrival_l[j],
                duration=duration_l[j],
                tasks=tuple(tasks),
                min_available=min_available,
                priority_class=pc[s],
                outcome=_OUTCOMES[outcome_l[j]],
                end_fraction=end_l[j],
            )
        )
    return sort_jobs(jobs)


def default_workload(seed: int = 1) -> Workload:
    """The built-in demo scenario for :func:`pumice.sim.cluster_spec.default_cluster`.

    3,000 jobs in 12 queues on 384 GPUs (8 per node), gangs of up to 32 pods, arriving at
    a rate that offers 1.2 times the cluster's GPUs over the horizon (about four days
    with seed 1), so queues contend and fair share, gang scheduling, preemption and reclaim all
    have work to do.
    """
    return generate(
        3000,
        seed=seed,
        n_queues=12,
        gpus_per_node=8,
        max_gang=32,
        load=1.2,
        capacity_gpus=384,
    )
