"""What went wrong in a run, said with its numbers: the report's "Findings".

The summary's averages hide the stories a person running a cluster cares about: a gang
that waited days while half the GPUs sat idle shows up as a p95 wait of a few hours and
a mean fairness gap of a few hundredths. These functions read a run's
:class:`~pumice.sim.metrics.Metrics` (the jobs' records, what held each waiting job as
the scheduler explained it at every sample, the time series of utilization and of
allocated and deserved shares) and return :class:`Finding` records:

- ``long_waits``: the longest waits, each with the reasons that held the job and for how
  long (hours, from the samples);
- ``queue_share``: a queue far from its deserved share over a long stretch, and why: a
  gang larger than the queue's deserved share can never be let in by ``proportion``;
- ``idle_while_waiting``: capacity of the main resource (GPUs, else CPU) idle while jobs
  that asked for it waited, the longest such stretch, and what the waiting jobs were
  told then (for instance ``overcommit`` refusing admission because admitted gangs that
  cannot be placed hold its budget);
- ``standstill``: the run ended with jobs waiting and nothing running, what they were
  told last, and the admitted gangs their queue's deserved share or capability refused
  (which, admitted, hold ``overcommit``'s budget);
- a ``remedy`` where one is known: a guarantee (``spec.guarantee.resource``) of the
  gang's whole request, with a modest weight as the other way where one would do (at
  most ``MODEST_WEIGHT`` times the largest of the other queues' weights), or a higher
  capability when the queue's capability is below its gang; a higher
  ``overcommit-factor`` when the admitted jobs holding its budget wait only for room, a
  lower one when they are gangs their queue refuses (more admission only divides the
  cluster among more of them), ``binpack`` when idle GPUs are scattered over nodes.

Everything is a pure function of the metrics: the same run gives the same findings. The
remedies are estimates from what the run measured (the deserved share is the
simulator's yardstick, the weighted max-min division of the cluster among the queues'
demand, see :mod:`pumice.sim.metrics`); they say what to try, not what is proven.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pumice.api.quantity import render_resources

if TYPE_CHECKING:
    from pumice.sim.metrics import JobRecord, Metrics

GPU = "nvidia.com/gpu"
HOUR = 3600.0

#: A queue is "far" from its deserved share when its share is this far below (in
#: dominant share) for at least ``MIN_STRETCH`` of the run's sampled time.
FAR = 0.1
MIN_STRETCH = 0.1
#: Idle capacity counts as a stretch when at least this share of the main resource is
#: idle while some job that asks for it waits.
IDLE_SHARE = 0.25
#: Waits shorter than this are not findings.
MIN_WAIT = HOUR
#: A weight is suggested only up to this many times the largest weight of the other
#: queues: beyond, the queue would outweigh every other tenant several times over for
#: one gang, which no admin would do; a guarantee says what the gang needs instead.
MODEST_WEIGHT = 3.0


@dataclass(slots=True)
class Finding:
    """One thing the report says near the top.

    ``kind`` names the analysis (``long_waits``, ``queue_share``, ``idle_while_waiting``);
    ``title`` is one line; ``text`` says what happened with its numbers; ``remedy`` what
    to try ("" when none is known); ``numbers`` the same facts for programs (seconds,
    counts, shares), written to ``metrics.json``.
    """

    kind: str
    title: str
    text: str
    remedy: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Span:
    """A stretch ``[start, end)`` of simulated time in which a job waited, told ``text``."""

    start: float
    end: float
    text: str

    @property
    def seconds(self) -> float:
        return self.end - self.start


# -- reasons -----------------------------------------------------------------------------

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


#: How the volume checks say a node has no volume for a pod's claim.
_NO_VOLUME = "didn't find available persistent volumes to bind"
#: How the device checks say a node cannot serve a pod's ResourceClaims.
_NO_DEVICES = "cannot allocate all claims"


def reason_label(text: str) -> str:
    """A short name for the stage an explanation stopped at, to group and count them:
    ``not admitted (overcommit)``, ``gang short: queue's deserved share``, ``gang short:
    no node had room``, ``waiting for its pods``, ..."""
    t = text.strip()
    if t.startswith("not enqueued"):
        rest = t.split(":", 2)
        plugin = rest[1].strip() if len(rest) > 2 else ""
        if plugin and " " not in plugin:
            return f"not admitted ({plugin})"
        return "not admitted"
    if t.startswith("admitted; waiting for"):
        return "admitted, waiting for its pods to be created"
    if "gang short" in t:
        if "deserved share" in t:
            return "gang short: queue's deserved share"
        if "capability" in t:
            return "gang short: queue's capability"
        if "nodes are available" in t:
            if _NO_VOLUME in t:  # (kube-scheduler's words for a WaitForFirstConsumer claim)
                return "gang short: no free volume"
            if _NO_DEVICES in t:  # (the predicates plugin's device checks)
                return "gang short: no free devices"
            return "gang short: no node had room"
        return "gang short"
    if "deserved share" in t:
        return "queue's deserved share"
    head = re.split(r"[:;(]", t, maxsplit=1)[0].strip()
    return _NUMBER.sub("N", head) or "waiting"


def wait_spans(rec: JobRecord, run_end: float) -> list[Span]:
    """The stretches in which ``rec`` waited, each with what it was told (from the
    samples: a stretch starts at the first sample that saw its reason)."""
    out: list[Span] = []
    timeline = rec.reasons
    for k, (t, text) in enumerate(timeline):
        if not text:
            continue
        end = timeline[k + 1][0] if k + 1 < len(timeline) else run_end
        if end > t:
            out.append(Span(t, end, text))
    return out


def reason_hours(spans: Sequence[Span]) -> list[dict[str, Any]]:
    """Time per reason label, longest first: ``{reason, seconds, example}`` (the example
    is the latest full explanation of that label)."""
    total: dict[str, float] = {}
    example: dict[str, str] = {}
    for s in spans:
        label = reason_label(s.text)
        total[label] = total.get(label, 0.0) + s.seconds
        example[label] = s.text
    return [
        {"reason": label, "seconds": round(sec, 3), "example": example[label]}
        for label, sec in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


# -- what the run measured ---------------------------------------------------------------


@dataclass(slots=True)
class _View:
    """The parts of the metrics every analysis reads, as arrays."""

    resource: str  # the main resource (GPUs, else cpu)
    total: float  # of the main resource
    time: list[float]
    idle: list[float]  # of the main resource, per sample
    share: list[list[float]]  # per sample, per queue
    deserved: list[list[float]]
    demand: list[list[float]]
    queues: list[str]
    weights: list[float]
    run_end: float
    spans: dict[str, list[Span]]
    #: per sample, the jobs waiting then and the stretch that covers it
    at: list[list[tuple[str, Span]]]

    def size(self, rec: JobRecord) -> float:
        return rec.gpus if self.resource == GPU else rec.cpu

    def dt(self, k: int) -> float:
        """The stretch sample ``k`` stands for (to the next sample, or the run's end)."""
        nxt = self.time[k + 1] if k + 1 < len(self.time) else self.run_end
        return max(nxt - self.time[k], 0.0)


def _view(m: Metrics) -> _View:
    resource = GPU if GPU in m.index and m.total[m.index[GPU]] > 0 else "cpu"
    ri = m.index.get(resource)
    total = float(m.total[ri]) if ri is not None else 0.0
    s = m.series
    idle = [total * (1.0 - u[ri]) if ri is not None else 0.0 for u in s.utilization]
    run_end = max(m.last_change, m.last_end, s.time[-1] if s.time else 0.0)
    spans = {uid: wait_spans(rec, run_end) for uid, rec in m.jobs.items() if rec.reasons}
    at: list[list[tuple[str, Span]]] = [[] for _ in s.time]
    for uid, mine in spans.items():
        for span in mine:
            for k in range(bisect_left(s.time, span.start), bisect_left(s.time, span.end)):
                at[k].append((uid, span))
    return _View(
        resource=resource,
        total=total,
        time=list(s.time),
        idle=idle,
        share=s.queue_share,
        deserved=s.queue_deserved,
        demand=s.queue_demand,
        queues=list(m.queues),
        weights=[float(w) for w in m.weights],
        run_end=run_end,
        spans=spans,
        at=at,
    )


def _unit(resource: str) -> str:
    return "GPUs" if resource == GPU else "CPUs"


def _amount(v: _View, x: float) -> str:
    """``x`` of the main resource, in its unit (cpu is kept in millicores)."""
    if v.resource == GPU:
        return f"{x:,.0f} GPUs"
    return f"{x / 1000.0:,.0f} CPUs"


def _h(seconds: float) -> str:
    return f"{seconds / HOUR:,.1f} h"


# -- the analyses ------------------------------------------------------------------------


def long_waits(m: Metrics, n: int = 5) -> Finding | None:
    """The ``n`` longest waits (first start, or never), with what held each and how
    long; None when no job waited ``MIN_WAIT`` or more."""
    v = _view(m)
    waits: list[tuple[float, JobRecord]] = []
    for rec in m.jobs.values():
        w = rec.wait if rec.wait is not None else v.run_end - rec.submit
        if w >= MIN_WAIT:
            waits.append((w, rec))
    if not waits:
        return None
    waits.sort(key=lambda x: (-x[0], x[1].uid))
    rows: list[dict[str, Any]] = []
    for w, rec in waits[:n]:
        rows.append(
            {
                "job": rec.uid,
                "queue": rec.queue,
                "pods": rec.pods,
                "gpus": rec.gpus,
                "wait": round(w, 3),
                "never_ran": rec.start is None,
                "reasons": reason_hours(v.spans.get(rec.uid, [])),
            }
        )
    first = rows[0]
    held = first["reasons"][0] if first["reasons"] else None
    why = f": {held['reason']} for {_h(held['seconds'])}" if held else ""
    ran = " and never ran" if first["never_ran"] else ""
    text = (
        f"{len(waits):,} job(s) waited an hour or more. The longest, {first['job']} "
        f"({first['pods']} pods, {first['gpus']:g} GPUs), waited {_h(first['wait'])}{ran}"
        f"{why}."
    )
    return Finding(
        kind="long_waits",
        title=f"Longest wait: {_h(first['wait'])} ({first['job']})",
        text=text,
        numbers={"waited_an_hour": len(waits), "jobs": rows},
    )


def _fill(demand: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Weighted max-min division of the cluster (1.0) among queues asking ``demand``
    (dominant shares): the deserved share, in one dimension."""
    out = [0.0] * len(demand)
    left = 1.0
    active = [i for i, d in enumerate(demand) if d > 1e-9]
    while active and left > 1e-9:
        w = sum(weights[i] for i in active)
        portion = {i: left * weights[i] / w for i in active}
        capped = [i for i in active if out[i] + portion[i] >= demand[i] - 1e-12]
        if not capped:
            for i in active:
                out[i] += portion[i]
            break
        for i in capped:
            left -= demand[i] - out[i]
            out[i] = demand[i]
        active = [i for i in active if i not in capped]
    return out


def _estimate_weight(
    demand: Sequence[float], weights: Sequence[float], qi: int, gang: float
) -> int | None:
    """The smallest weight that gives queue ``qi`` a deserved share of at least ``gang``
    when the queues ask ``demand`` (dominant shares; the queue asks at least its gang);
    None when no weight up to 1,000 would, or its weight already does."""
    want = list(demand)
    want[qi] = max(want[qi], gang)
    if gang > 1.0 + 1e-9 or _fill(want, weights)[qi] >= gang - 1e-6:
        return None
    for w in range(int(weights[qi]) + 1, 1001):
        trial = list(weights)
        trial[qi] = float(w)
        if _fill(want, trial)[qi] >= gang - 1e-6:
            return w
    return None


def queue_share(m: Metrics) -> list[Finding]:
    """Queues whose allocated share stayed ``FAR`` below their deserved share for at
    least ``MIN_STRETCH`` of the run, and why: the largest of their gangs that waited
    then, against the queue's deserved share while it waited."""
    v = _view(m)
    if not v.time:
        return []
    sampled = sum(v.dt(k) for k in range(len(v.time)))
    out: list[Finding] = []
    for qi, q in enumerate(v.queues):
        below = [k for k in range(len(v.time)) if v.deserved[k][qi] - v.share[k][qi] >= FAR]
        seconds = sum(v.dt(k) for k in below)
        if not below or seconds < MIN_STRETCH * sampled:
            continue
        gap = sum((v.deserved[k][qi] - v.share[k][qi]) * v.dt(k) for k in below) / seconds
        # the queue's jobs that waited in those samples: time waited then, and what
        # they were told then (each sample's share of its stretch, so that a reason
        # told before or after the queue fell behind does not count)
        waited: dict[str, float] = {}
        inside: dict[str, list[Span]] = {}
        seen_at: dict[str, list[int]] = {}
        for k in below:
            for uid, span in v.at[k]:
                if m.jobs[uid].queue == q:
                    waited[uid] = waited.get(uid, 0.0) + v.dt(k)
                    inside.setdefault(uid, []).append(
                        Span(v.time[k], v.time[k] + v.dt(k), span.text)
                    )
                    seen_at.setdefault(uid, []).append(k)
        text = (
            f"Queue {q} held {gap:.2f} less than its deserved share for {_h(seconds)} "
            f"({seconds / sampled:.0%} of the run)"
        )
        numbers: dict[str, Any] = {
            "queue": q,
            "seconds_below": round(seconds, 3),
            "mean_gap_below": round(gap, 6),
        }
        remedy = ""
        if waited:
            uid = min(waited, key=lambda u: (-v.size(m.jobs[u]), -waited[u], u))
            rec = m.jobs[uid]
            size = v.size(rec)
            need = size / v.total if v.total else 0.0
            at = seen_at[uid]
            des = [v.deserved[k][qi] for k in at]
            top = max(des)
            typical = sorted(des)[len(des) // 2]
            labels = reason_hours(inside[uid])
            numbers.update(
                job=rec.uid,
                job_size=size,
                job_share=round(need, 6),
                deserved_max=top,
                deserved_median=typical,
                reasons=labels,
            )
            text += (
                f": its largest waiting gang, {rec.uid} ({rec.pods} pods, "
                f"{_amount(v, size)} = {need:.2f} of the cluster), waited "
                f"{_h(waited[uid])} then"
            )
            if labels:
                text += f" ({labels[0]['reason']})"
            if need > top + 1e-6:
                weight = v.weights[qi]
                mid = sorted(at, key=lambda k: v.deserved[k][qi])[len(at) // 2]
                est = (
                    _estimate_weight(v.demand[mid], v.weights, qi, need)
                    if mid < len(v.demand)
                    else None
                )
                text += (
                    f". The queue's deserved share was at most {top:.2f} "
                    f"({_amount(v, top * v.total)}) while it waited, smaller than the gang: "
                    f"proportion never lets a queue allocate beyond its deserved share, so "
                    f"the gang cannot be placed whole"
                )
                numbers["weight"] = weight
                remedy = _share_remedy(m, v, qi, rec, est, typical, need, numbers)
        out.append(
            Finding(
                kind="queue_share",
                title=f"Queue {q} far below its deserved share for {_h(seconds)}",
                text=text + ".",
                remedy=remedy,
                numbers=numbers,
            )
        )
    return out


_FACTOR = re.compile(r"beyond factor (\d+(?:\.\d+)?)")


def _share_remedy(
    m: Metrics,
    v: _View,
    qi: int,
    rec: JobRecord,
    est: int | None,
    typical: float,
    need: float,
    numbers: dict[str, Any],
) -> str:
    """What an admin can change so that queue ``qi``'s gang ``rec`` fits its deserved
    share; notes the figures in ``numbers``.

    A capability below the gang caps the deserved share whatever the weight or
    guarantee: raise it. Otherwise a guarantee of the gang's whole request (proportion
    never divides a queue less than its guarantee) and, when a weight up to
    ``MODEST_WEIGHT`` times the largest of the other queues' would do, that weight."""
    q = v.queues[qi]
    unit = "nvidia.com/gpu" if v.resource == GPU else "cpu"
    size = v.size(rec)
    ri = m.index.get(v.resource)
    cap = float(m.capability[qi, ri]) if ri is not None and qi < len(m.capability) else math.inf
    if cap < size - 1e-9:
        numbers["capability"] = cap
        return (
            f"Try: raise queue {q}'s capability (spec.capability) in {unit} from "
            f"{_quantity(v, cap)} to at least {_quantity(v, size)}, the gang's request: the "
            f"capability caps the queue's deserved share, so no weight or guarantee lets "
            f"the gang in. The gang still waits for other queues' pods to end unless reclaim "
            f"takes them back."
        )
    want = {"cpu": rec.cpu, "memory": rec.memory, GPU: rec.gpus}
    guarantee = render_resources({r: x for r, x in want.items() if x > 0})
    # whole cores and the largest binary unit, as people write them
    if rec.cpu > 0 and rec.cpu % 1000 == 0:
        guarantee["cpu"] = f"{rec.cpu / 1000:g}"
    for suffix, unit_bytes in (("Pi", 2.0**50), ("Ti", 2.0**40)):
        if rec.memory >= unit_bytes and rec.memory % unit_bytes == 0:
            guarantee["memory"] = f"{rec.memory / unit_bytes:g}{suffix}"
            break
    numbers["guarantee"] = guarantee
    figure = ", ".join(f"{r}: {x}" for r, x in guarantee.items())
    others = [w for i, w in enumerate(v.weights) if i != qi]
    largest = max(others, default=v.weights[qi])
    weight = v.weights[qi]
    modest = est is not None and est <= MODEST_WEIGHT * largest
    if est is not None:
        numbers["weight_estimate"] = est
        numbers["weight_modest"] = modest
    parts = [
        f"give queue {q} a guarantee (spec.guarantee.resource) of {figure}, the gang's "
        f"whole request (more if the queue runs other jobs meanwhile): proportion never "
        f"divides a queue less than its guarantee, so its deserved share holds the gang"
    ]
    if modest:  # the lighter change first
        parts.insert(
            0,
            f"raise queue {q}'s weight from {weight:g} to about {est} (its deserved share was "
            f"{typical:.2f} at weight {weight:g}; with the other queues' demand of that "
            f"time, {need:.2f} needs {est})",
        )
    note = ""
    if est is not None and not modest:
        note = (
            f" No reasonable weight would do: it would take about {est}, "
            f"{est / largest:.0f} times the largest of the other queues' weights ({largest:g})."
        )
    elif est is None:
        note = " No weight up to 1,000 would do."
    return (
        "Try: " + "; or ".join(parts) + "." + note + " The gang still waits for other "
        "queues' pods to end unless reclaim takes them back."
    )


def _quantity(v: _View, x: float) -> str:
    """``x`` of the main resource as a quantity (cpu is kept in millicores)."""
    return f"{x:g}" if v.resource == GPU else f"{x / 1000.0:g}"


def idle_while_waiting(m: Metrics) -> Finding | None:
    """Capacity of the main resource idle while jobs asking for it waited: the
    resource-hours idle that the waiting jobs could have used (at each sample, the
    smaller of the idle amount and what they asked for), and the longest stretch with at
    least ``IDLE_SHARE`` idle, with what the waiting jobs were told then."""
    v = _view(m)
    if not v.time or v.total <= 0:
        return None
    usable = 0.0
    stretches: list[tuple[int, int]] = []
    start: int | None = None
    for k in range(len(v.time)):
        waiting = [(uid, s) for uid, s in v.at[k] if v.size(m.jobs[uid]) > 0]
        asked = sum(v.size(m.jobs[uid]) for uid, _s in waiting)
        usable += min(v.idle[k], asked) * v.dt(k)
        hit = bool(waiting) and v.idle[k] >= IDLE_SHARE * v.total
        if hit and start is None:
            start = k
        if not hit and start is not None:
            stretches.append((start, k))
            start = None
    if start is not None:
        stretches.append((start, len(v.time)))
    if usable < HOUR * max(1.0, v.total * 0.01) and not stretches:
        return None
    unit = "GPU" if v.resource == GPU else "CPU"
    hours = usable / HOUR if v.resource == GPU else usable / HOUR / 1000.0
    numbers: dict[str, Any] = {
        "resource": v.resource,
        "idle_while_waiting_hours": round(hours, 3),
    }
    text = (
        f"{hours:,.0f} {unit}-hours sat idle while jobs that asked for them waited "
        f"(at each sample, the smaller of the idle {_unit(v.resource)} and what the "
        f"waiting jobs asked for)"
    )
    remedy = ""
    title = f"{hours:,.0f} {unit}-hours idle while jobs waited"
    if stretches:
        a, b = max(stretches, key=lambda s: sum(v.dt(k) for k in range(*s)))
        seconds = sum(v.dt(k) for k in range(a, b))
        t0, t1 = v.time[a], v.time[a] + seconds
        idle_mean = sum(v.idle[k] * v.dt(k) for k in range(a, b)) / max(seconds, 1e-9)
        told: dict[str, float] = {}
        for k in range(a, b):
            for _uid, s in v.at[k]:
                told[reason_label(s.text)] = told.get(reason_label(s.text), 0.0) + v.dt(k)
        counts = [len(v.at[k]) for k in range(a, b)]
        ranked = sorted(told.items(), key=lambda kv: (-kv[1], kv[0]))
        title = (
            f"{idle_mean / v.total:.0%} of {_unit(v.resource)} idle for {_h(seconds)} "
            f"while jobs waited"
        )
        text += (
            f". The longest stretch: from {_h(t0)} to {_h(t1)} ({_h(seconds)}), "
            f"{_amount(v, idle_mean)} idle on average ({idle_mean / v.total:.0%}) while "
            f"{min(counts)} to {max(counts)} jobs waited; what they were told, in job-hours: "
            + ", ".join(f"{label} {_h(sec)}" for label, sec in ranked[:3])
        )
        numbers.update(
            stretch_start=round(t0, 3),
            stretch_end=round(t1, 3),
            stretch_idle_mean=round(idle_mean, 3),
            stretch_waiting=[min(counts), max(counts)],
            stretch_reasons={label: round(sec, 3) for label, sec in ranked},
        )
        remedy, extra, more = _idle_remedy(m, v, ranked, a, b)
        text += extra
        numbers.update(more)
    return Finding(
        kind="idle_while_waiting", title=title, text=text + ".", remedy=remedy, numbers=numbers
    )


_ADMITTED = ("gang short", "admitted", "queue's")
#: What a job admitted but not placed is told when its queue will not let its gang in
#: whole (proportion's deserved share, or its capability): admitting more jobs cannot
#: help it, and it keeps its place in overcommit's budget while it waits.
_REFUSED_BY_SHARE = frozenset(
    {
        "gang short: queue's deserved share",
        "gang short: queue's capability",
        "queue's deserved share",
    }
)
#: Volcano's default ``overcommit-factor``.
DEFAULT_FACTOR = 1.2


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def _idle_remedy(
    m: Metrics, v: _View, ranked: Sequence[tuple[str, float]], a: int, b: int
) -> tuple[str, str, dict[str, Any]]:
    """(remedy, a sentence for the text, numbers) for the stretch of samples ``[a, b)``
    of idle capacity, from what the waiting jobs were told most there.

    When it is overcommit refusing admission, the budget it admits against (factor ×
    the cluster, less what is in use) was held by jobs admitted but not placed: per
    sample, their minimum is taken as their size (a gang's whole request), and the
    factor that would have let the smallest refused job in is the median over the
    samples of (in use + admitted + that job) / cluster. That factor is suggested only
    when the admitted jobs wait for room: when gangs refused by their queue's deserved
    share or capability hold at least half of the admitted jobs' budget over the stretch,
    a higher factor would only admit more such gangs, and fewer admitted at once (a
    lower factor) or a queue whose share holds its gang is suggested instead."""
    if not ranked:
        return "", "", {}
    top = ranked[0][0]
    if top.startswith("not admitted (overcommit)"):
        factor = DEFAULT_FACTOR
        held_for: dict[str, float] = {}
        share_for: dict[str, float] = {}  # of those, the time told their queue's share
        admitted_k: list[float] = []
        stuck_k: list[float] = []
        need_k: list[float] = []
        held_area = stuck_area = 0.0
        for k in range(a, b):
            admitted = stuck = 0.0
            refused: list[float] = []
            for uid, span in v.at[k]:
                label = reason_label(span.text)
                size = v.size(m.jobs[uid])
                if label.startswith(_ADMITTED):
                    admitted += size
                    held_for[uid] = held_for.get(uid, 0.0) + v.dt(k)
                    if label in _REFUSED_BY_SHARE:
                        stuck += size
                        share_for[uid] = share_for.get(uid, 0.0) + v.dt(k)
                elif label == top:
                    refused.append(size)
                    hit = _FACTOR.search(span.text)
                    if hit:
                        factor = float(hit.group(1))
            admitted_k.append(admitted)
            stuck_k.append(stuck)
            held_area += admitted * v.dt(k)
            stuck_area += stuck * v.dt(k)
            if refused:
                need_k.append((v.total - v.idle[k] + admitted + min(refused)) / v.total)
        held = sorted(held_for, key=lambda u: (-held_for[u], -v.size(m.jobs[u]), u))
        # most of the budget held first (size × time refused)
        by_share = sorted(
            share_for, key=lambda u: (-share_for[u] * v.size(m.jobs[u]), -share_for[u], u)
        )
        admitted = _median(admitted_k)
        need = _median(need_k)
        # the budget is held, most of the time, by gangs their queue will not let in:
        # admitting more jobs only adds gangs that wait the same way
        stuck = stuck_area > 0 and stuck_area >= 0.5 * held_area
        numbers: dict[str, Any] = {
            "overcommit_factor": factor,
            "admitted_not_placed": held[:10],
            "admitted_not_placed_count": len(held),
            "admitted_not_placed_median": round(admitted, 3),
            "admitted_refused_by_share": by_share[:10],
            "admitted_refused_by_share_count": len(by_share),
            "admitted_refused_by_share_median": round(_median(stuck_k), 3),
            "budget_held_by_refused_gangs": round(stuck_area / held_area, 6) if held_area else 0,
            "factor_needed_median": round(need, 3),
        }
        extra = ""
        if held:
            first = m.jobs[held[0]]
            extra = (
                f". overcommit admits a job while the minimum resources of the jobs already "
                f"admitted plus its own fit {factor:g} × the cluster less what is in use; "
                f"jobs admitted but not placed held {_amount(v, admitted)} of that budget "
                f"(median over the stretch): {len(held)} job(s), the longest "
                + ", ".join(
                    f"{u} ({_amount(v, v.size(m.jobs[u]))}, {_h(held_for[u])})" for u in held[:3]
                )
                + f"; {first.uid} was told: {reason_label(_last_text(v, first.uid, a, b))}"
            )
        if stuck:
            extra += (
                f". {len(by_share)} of them were refused by their queue's deserved share or "
                f"capability ({_amount(v, _median(stuck_k))} of the budget, median; "
                f"{stuck_area / held_area:.0%} of what admitted jobs held over the "
                f"stretch): proportion does not let such a gang in whole, and admitted, it "
                f"keeps its place in overcommit's budget"
            )
        remedy = ""
        if stuck:
            # the queues of the gangs refused for a tenth of the stretch or more (the
            # others were refused a while, then placed)
            stretch = sum(v.dt(k) for k in range(a, b))
            lasting = [u for u in by_share if share_for[u] >= MIN_STRETCH * stretch]
            queues = list(dict.fromkeys(m.jobs[u].queue for u in lasting or by_share[:1]))
            remedy = _refused_gangs_remedy(factor, queues)
        elif need > factor:
            remedy = (
                f"Try: raise overcommit's overcommit-factor from {factor:g} to about "
                f"{math.ceil(need * 10) / 10:g} (the median over the stretch of in use + "
                f"admitted + the smallest refused job, over the cluster's "
                f"{_amount(v, v.total)}), or make the admitted gangs placeable (see the "
                f"queue findings)."
            )
        return remedy, extra, numbers
    if top == "gang short: no free volume":
        return (
            f"Try: more volumes where the {_unit(v.resource)} sat idle (local disks on more "
            "nodes, e.g. localVolumes in the cluster file, or a class that provisions "
            "there): the waiting pods' claims found no free volume on the nodes with room.",
            "",
            {},
        )
    if top == "gang short: no free devices":
        return (
            f"Try: more devices where the {_unit(v.resource)} sat idle (a devices block on "
            "more node groups of the cluster file, or more ResourceSlices), or claims asking "
            "for fewer devices each: the waiting pods' ResourceClaims found too few free "
            "devices on the nodes with room.",
            "",
            {},
        )
    if top == "gang short: no node had room":
        return (
            "Try: the binpack plugin (e.g. src/pumice/examples/configs/binpack-heavy.yaml): "
            f"{_unit(v.resource)} were idle but spread over nodes, so no node had room for "
            "one pod of the waiting gangs.",
            "",
            {},
        )
    return "", "", {}


def _refused_gangs_remedy(factor: float | None, queues: Sequence[str]) -> str:
    """What to try when admitted gangs are refused by their queue's deserved share or
    capability: queues whose deserved share holds a gang; and when they hold
    overcommit's budget (``factor`` given), fewer gangs admitted at once."""
    parts = []
    if factor is not None and factor > DEFAULT_FACTOR + 1e-9:
        parts.append(
            f"lower overcommit's overcommit-factor from {factor:g} toward "
            f"{DEFAULT_FACTOR:g} (Volcano's default), so that fewer gangs are admitted at "
            f"once and proportion divides the cluster among fewer of them"
        )
    named = ", ".join(queues[:6]) + (f" and {len(queues) - 6} more" if len(queues) > 6 else "")
    parts.append(
        f"give queue{'s' if len(queues) > 1 else ''} {named} the weight or a guarantee "
        f"(spec.guarantee.resource) with which each gang fits its deserved share (see the "
        f"queue findings)"
    )
    head = (
        "Do not raise overcommit-factor: the admitted gangs holding overcommit's budget "
        "wait for their queue's deserved share, not for admission, and more admitted gangs "
        "only divide the cluster further. "
        if factor is not None
        else ""
    )
    return head + "Try: " + "; or ".join(parts) + "."


def standstill(m: Metrics) -> Finding | None:
    """The run ended with jobs waiting and none running: nothing was left that could
    change a decision, and the cluster sat idle. Says what the waiting jobs were told
    last, and names the gangs admitted but refused by their queue's deserved share or
    capability that, admitted, hold overcommit's budget; None when the run ended with
    nothing waiting, or with something still running."""
    v = _view(m)
    waiting: list[JobRecord] = []
    for rec in m.jobs.values():
        if rec.end is not None:
            continue
        if rec.restart_start is not None:
            return None  # still running: not a standstill
        waiting.append(rec)
    if not waiting:
        return None
    waiting.sort(key=lambda r: (-v.size(r), r.submit, r.uid))
    told: dict[str, list[JobRecord]] = {}
    factor: float | None = None
    for rec in waiting:
        text = rec.pending_reason or next((t for _t, t in reversed(rec.reasons) if t), "")
        label = reason_label(text) if text else "no explanation"
        told.setdefault(label, []).append(rec)
        hit = _FACTOR.search(text)
        if hit:
            factor = float(hit.group(1))
    sizes: dict[float, int] = {}
    for rec in waiting:
        sizes[v.size(rec)] = sizes.get(v.size(rec), 0) + 1
    never = sum(1 for r in waiting if r.start is None)
    ranked = sorted(told.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    stuck = [r for label, recs in ranked if label in _REFUSED_BY_SHARE for r in recs]
    stuck.sort(key=lambda r: (-v.size(r), r.submit, r.uid))
    queues = list(dict.fromkeys(r.queue for r in stuck))
    refused = told.get("not admitted (overcommit)", [])
    ended = (
        f"the last job ended at {_h(m.last_end)}"
        if any(r.start is not None for r in m.jobs.values())
        else "no job ever started"
    )
    text = (
        f"The run ended at {_h(v.run_end)} in a standstill: {never:,} job(s) never ran ("
        + ", ".join(f"{n} of {_amount(v, size)}" for size, n in sorted(sizes.items(), reverse=True))
        + ")"
        + (f", {len(waiting) - never:,} more waited to start again" if len(waiting) > never else "")
        + f" and no pod was running: {ended}, and from then on all {_amount(v, v.total)} sat "
        "idle with nothing left that could change a decision. What they were told last: "
        + ", ".join(f"{label} {len(recs)}" for label, recs in ranked)
    )
    numbers: dict[str, Any] = {
        "waiting": len(waiting),
        "never_ran": never,
        "run_end": round(v.run_end, 3),
        "last_end": round(m.last_end, 3),
        "by_reason": {label: len(recs) for label, recs in ranked},
        "by_size": {f"{size:g}": n for size, n in sorted(sizes.items(), reverse=True)},
        "refused_gangs": [r.uid for r in stuck],
        "refused_gangs_size": sum(v.size(r) for r in stuck),
        "refused_gangs_queues": queues,
    }
    remedy = ""
    if stuck:
        text += (
            f". {len(stuck)} admitted gang(s) of queue{'s' if len(queues) > 1 else ''} "
            f"{', '.join(queues)} ({_amount(v, sum(v.size(r) for r in stuck))} in all) were "
            f"refused by their queue's deserved share or capability: "
            + ", ".join(f"{r.uid} ({_amount(v, v.size(r))})" for r in stuck[:8])
            + (f" and {len(stuck) - 8} more" if len(stuck) > 8 else "")
            + ". Each asks more than its queue's deserved share (or capability) allows: "
            "proportion divides the cluster among the queues that ask for it, by weight, so "
            "none could be placed, and none could end to make room"
        )
        if refused:
            shown = factor if factor is not None else DEFAULT_FACTOR
            numbers["overcommit_factor"] = shown
            text += (
                f"; admitted, they kept their place in overcommit's budget ({shown:g} × the "
                f"cluster), so the {len(refused)} job(s) it refused could not be admitted "
                f"either"
            )
            remedy = _refused_gangs_remedy(shown, queues)
        else:
            remedy = _refused_gangs_remedy(None, queues)
    left = f"{never:,} job(s) never ran" if never else f"{len(waiting):,} job(s) left waiting"
    title = f"Standstill: {left} and all {_amount(v, v.total)} sat idle at the end"
    return Finding(kind="standstill", title=title, text=text + ".", remedy=remedy, numbers=numbers)


def _last_text(v: _View, uid: str, a: int, b: int) -> str:
    """What ``uid`` was told last within samples ``[a, b)``."""
    text = ""
    for k in range(a, b):
        for u, span in v.at[k]:
            if u == uid:
                text = span.text
    return text


def findings(m: Metrics) -> list[Finding]:
    """Every finding of a run, in the order the report shows them: a standstill at the
    end, the idle capacity, the queues far from their share, the longest waits."""
    out: list[Finding] = []
    stall = standstill(m)
    if stall is not None:
        out.append(stall)
    idle = idle_while_waiting(m)
    if idle is not None:
        out.append(idle)
    out += queue_share(m)
    waits = long_waits(m)
    if waits is not None:
        out.append(waits)
    return out


__all__ = [
    "Finding",
    "Span",
    "findings",
    "idle_while_waiting",
    "long_waits",
    "queue_share",
    "reason_hours",
    "reason_label",
    "standstill",
    "wait_spans",
]
