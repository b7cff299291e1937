"""enqueue: admit Pending jobs (phase Pending -> Inqueue) when the plugins allow.

Queues are served in queue order, each with its jobs in job order (see
:meth:`EnqueueAction.execute`). A job without minResources is always admitted; otherwise
the ``job_enqueueable`` vote decides, and a refused job stays Pending with the refusing
plugin's reason. A gang whose pods do not exist yet is admitted like any other (a
vcjob's pods are created on admission); placing it waits for the pods.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from pumice.api.job import INQUEUE, PENDING, JobInfo
from pumice.api.queue import QueueInfo
from pumice.conf.arguments import Arguments
from pumice.framework.orders import job_key, queue_key
from pumice.framework.parking import Rows
from pumice.framework.pqueue import PriorityQueue
from pumice.framework.said import Layer, Text
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless

#: How every explanation of a job enqueue refused begins (``Session.not_enqueued``).
NOT_ENQUEUED = "not enqueued: "


def refusal_texts(ssn: Session) -> Callable[[str | None], Callable[[JobInfo], Text]]:
    """``text_for(plugin)``: the function saying why ``plugin`` refused a job, as a
    sentence naming the gate that refused it and why (after :data:`NOT_ENQUEUED`).
    A refused backlog asks this for every job in every cycle: each refusing plugin's
    explanation is looked up once per session, and a plugin that can say it later
    (``explain_later(ssn, job, head)``, see :mod:`pumice.framework.said`) hands over the
    facts it would quote, after ``head``, instead of the sentence (and one that can say
    many with the same figures, ``explain_each``, says the parked jobs' refusals as one
    layer: see :func:`_lay_refusals` and :class:`_Turns`)."""
    texts: dict[str | None, Callable[[JobInfo], Text]] = {}

    def text_for(plugin_name: str | None) -> Callable[[JobInfo], Text]:
        text = texts.get(plugin_name)
        if text is None:
            text = texts[plugin_name] = _refusal_text(ssn, plugin_name)
        return text

    return text_for


def _refusal_text(ssn: Session, plugin_name: str | None) -> Callable[[JobInfo], Text]:
    """The sentence for the jobs ``plugin_name`` refuses."""
    for plugin in ssn.plugins:
        if plugin.name == plugin_name:
            head = f"{NOT_ENQUEUED}{plugin_name}: "
            later = getattr(plugin, "explain_later", None)
            if later is not None:
                return functools.partial(later, ssn, head=head)
            explain = getattr(plugin, "explain_enqueue", None) or getattr(plugin, "explain", None)
            if explain is not None:
                return lambda job: head + explain(ssn, job)
    text = f"{NOT_ENQUEUED}{plugin_name or 'a plugin'} refused to admit the job"
    return lambda job: text


class EnqueueAction:
    name = "enqueue"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        """Volcano's loop pops the first queue, serves one job of it and pushes the
        queue back. Nothing enqueue does changes a queue's order (it allocates nothing,
        and the order is total: ties fall back to creation time and name), so the queue
        popped first is popped again until it runs out of jobs: the loop serves the
        queues one after the other, in queue order, each with all its jobs in job order.
        That is how it is written here, with one sort of the queues instead of a heap
        operation per job; and when no job can be admitted, without the orders at all
        (see :func:`_refuse_all`). When some can, the parked jobs the first voting
        function rejected at once are said refused in their turn without being put in
        order (see :func:`_serve`)."""
        jobs_of: dict[str, list[JobInfo]] = {}
        # Only Pending jobs have anything to enqueue: the active ones and the parked.
        # The parked ones the first voting function rejects at once (see
        # _parked_refused) join the others only when the loop in order runs.
        vote = _parked_refused(ssn)
        for job in ssn.active.values():
            if job.phase == PENDING:
                jobs_of.setdefault(job.queue, []).append(job)
        for job in vote.unrefused if vote is not None else [p.job for p in ssn.parked.values()]:
            jobs_of.setdefault(job.queue, []).append(job)
        if _refuse_all(ssn, jobs_of, vote):
            return
        jkey = job_key(ssn)  # job order cannot change during enqueue either
        # The parked jobs the first function rejected are refused by it in their turn
        # (see _parked_refused), by queue; with a job key they are not put in order
        # with the others (see _serve).
        refused_of: dict[str, list[JobInfo]] = {}
        for job in vote.jobs() if vote is not None else ():
            refused_of.setdefault(job.queue, []).append(job)
        first = vote.first if vote is not None else ""
        refused: set[str] = set()
        if jkey is None:  # (put in order with the others, from a heap)
            for name, jobs in refused_of.items():
                jobs_of.setdefault(name, []).extend(jobs)
                refused.update(job.uid for job in jobs)
            refused_of = {}

        def cmp(a: QueueInfo, b: QueueInfo) -> int:
            return -1 if ssn.queue_less(a, b) else (1 if ssn.queue_less(b, a) else 0)

        names = jobs_of.keys() | refused_of.keys()
        qkey = queue_key(ssn)  # (the same order, where the plugins offer keys)
        queues = sorted(
            (ssn.queues[name] for name in names),
            key=functools.cmp_to_key(cmp) if qkey is None else qkey,
        )
        text_for = refusal_texts(ssn)
        say = _Turns(ssn, vote, text_for) if refused_of and vote is not None else None
        unparked = False
        for queue in queues:
            jobs = jobs_of.get(queue.name, [])
            rejected = refused_of.get(queue.name)
            if not queue.is_open():
                closed = f"{NOT_ENQUEUED}queue {queue.name} is {queue.state}"
                for job in itertools.chain(jobs, rejected or ()):  # (in any order)
                    ssn.not_enqueued[job.uid] = closed
                continue
            if rejected and say is not None and jkey is not None:
                # (The keys the sort made are the ones _serve compares: made once.)
                keys = list(map(jkey, jobs))
                at = sorted(range(len(jobs)), key=keys.__getitem__)
                ordered = _serve([jobs[i] for i in at], rejected, jkey, say, [keys[i] for i in at])
            else:
                ordered = _in_order(ssn, jobs, jkey)
            for job in ordered:
                if job.min_resources is None:
                    admitted, refuser = True, None
                elif job.uid in refused:  # (and still is: see _parked_refused)
                    admitted, refuser = False, first
                else:
                    admitted, refuser = ssn.hooks.vote_detail("job_enqueueable", job)
                if admitted:
                    ssn.hooks.each("job_enqueued", job)
                    job.phase = INQUEUE
                    ssn.not_enqueued.pop(job.uid, None)
                    if ssn.parked:
                        unparked |= _unpark(ssn, job)
                else:
                    ssn.not_enqueued[job.uid] = text_for(refuser)(job)
        if say is not None:
            say.lay()
        if unparked:  # (the active jobs are in uid order)
            ssn.active = dict(sorted(ssn.active.items()))


def _serve(
    ordered: Iterable[JobInfo],
    rejected: list[JobInfo],
    key: Callable[[JobInfo], tuple],
    say: _Turns,
    ordered_keys: Sequence[tuple],
) -> Iterator[JobInfo]:
    """The jobs of an open queue for the loop to decide on, in job order (``ordered``),
    while the parked jobs of the queue the first voting function rejected
    (``rejected``, in any order; ``key`` is the job key) are said refused (``say``)
    just before the first job that comes after them in job order is decided, or at
    the end: each in its turn, on the cycle's figures as the loop in order would
    find them when it refused the job, without putting them in order (they are
    refused without a vote, which moves nothing; and where no other job of the queue
    is decided on, none of them needs its key). ``ordered_keys``: the key of each
    job of ``ordered`` (no job's key moves while enqueue decides on the others)."""
    # The rejected jobs in key order (``rank``), as places in ``rejected``; those before
    # ``said`` in it are said. Job order is total, so the ones to say before a job
    # are the next ones in that order whose key is smaller than the job's.
    keys: list[tuple] = []
    rank: list[int] = []
    said = 0
    for job, at in zip(ordered, ordered_keys, strict=True):
        if said < len(rejected):
            if not rank:
                keys = list(map(key, rejected))
                rank = sorted(range(len(rejected)), key=keys.__getitem__)
            end = said
            while end < len(rank) and keys[rank[end]] < at:
                end += 1
            if end > said:
                say([rejected[i] for i in sorted(rank[said:end])])  # (in parking order)
                said = end
        yield job
    if not rank:
        if rejected:
            say(rejected)
    elif said < len(rank):
        say([rejected[i] for i in sorted(rank[said:])])


class _Turns:
    """Says why the parked jobs the first voting function rejected (``vote``) are
    refused, a group of them at a time, each group on the cycle's figures as they
    stand when it is said (see :func:`_serve`): one by one (``Session.not_enqueued``),
    or, those that are not valid gangs, where the refusing plugin can say many on the
    same figures (``explain_each``, see :func:`_lay_refusals`), as one layer for the
    cycle (:meth:`lay`), each job's sentence on the figures of its group."""

    __slots__ = ("each", "head", "invalid", "said", "says", "ssn", "vote")

    def __init__(
        self,
        ssn: Session,
        vote: _ParkedVote,
        text_for: Callable[[str | None], Callable[[JobInfo], Text]],
    ) -> None:
        self.ssn = ssn
        self.vote = vote
        self.said = text_for(vote.first)
        self.head = f"{NOT_ENQUEUED}{vote.first}: "
        plugin = next((p for p in ssn.plugins if p.name == vote.first), None)
        self.each: Callable[..., Callable[[JobInfo], str]] | None = (
            getattr(plugin, "explain_each", None) if plugin is not None else None
        )
        #: Per row of the vote's rows: not a valid gang; and the function that says
        #: its refusal, once said in the layer.
        self.invalid: list[bool] = vote.rows.invalid.tolist()
        self.says: list[Callable[[JobInfo], str] | None] = [None] * len(self.invalid)

    def __call__(self, jobs: list[JobInfo]) -> None:
        not_enqueued = self.ssn.not_enqueued
        if self.each is None:
            not_enqueued.update(zip([j.uid for j in jobs], map(self.said, jobs), strict=True))
            return
        index, invalid, says = self.vote.rows.index, self.invalid, self.says
        now: Callable[[JobInfo], str] | None = None
        for job in jobs:
            row = index[job.uid]
            if invalid[row]:
                if now is None:
                    now = self.each(self.ssn, self.head)
                says[row] = now
            else:
                not_enqueued[job.uid] = self.said(job)

    def lay(self) -> None:
        """Hand over the layer of the jobs said in it (``Session.refused_parked``)."""
        says = self.says
        keep = [s is not None for s in says]
        count = keep.count(True)
        if not count:
            return
        rows = self.vote.rows
        index = rows.index

        def say(job: JobInfo) -> str:
            return says[index[job.uid]](job)  # type: ignore[misc]

        self.ssn.refused_parked = Layer(rows.jobs, rows.uids, keep, index, say, count)


def _unpark(ssn: Session, job: JobInfo) -> bool:
    """``job`` was admitted: if it was parked, the rest of the cycle treats it as any
    active job (its status changes now), with the ``job_valid`` answer it was parked
    with."""
    p = ssn.parked.pop(job.uid, None)
    if p is None:
        return False
    ssn.active[job.uid] = job
    if p.reason is not None:
        ssn.invalid[job.uid] = (job, p.reason)
    return True


def _refuse_all(ssn: Session, jobs_of: dict[str, list[JobInfo]], vote: _ParkedVote | None) -> bool:
    """When no job can be admitted, say why each is refused and return True; False
    (nothing said) when one could be, or when that cannot be known in advance.

    What a vote depends on moves only when a job is admitted (``job_enqueued``) or a
    voting function permits it (proportion counts the job into its queue then, even if
    a later function of the tier refuses it): until then every job meets the same
    state, in whatever order it is asked. So when every voting function can also answer
    without that side effect (facet ``pure``: the same vote; the function itself changes
    what later votes see only when it permits), the jobs are asked once each, in any
    order; if each is refused before any function with a side effect permits it, the
    loop in queue and job order would refuse each for the same reason, and the orders
    need not be worked out (a backlog of refused jobs is asked this in every cycle).
    Otherwise the loop runs as usual.

    The parked jobs that the first function rejected, all at once (``vote``: see
    :func:`_parked_refused`), are not in ``jobs_of``: they are said refused by its
    plugin at the end, unless their queue is closed; those that are not valid gangs
    (most of a backlog), as one layer (see :func:`_lay_refusals`)."""
    chain: list[_PureTier] = []
    hooks = ssn.hooks
    for tier in hooks.chain("job_enqueueable"):
        pure: _PureTier = []
        for name, fn in tier:
            form = hooks.facet("job_enqueueable", fn, "pure")
            if form is None:
                return False
            pure.append((name, form, form is not fn))
        chain.append(pure)
    refused: list[tuple[JobInfo, str]] = []
    closed: list[tuple[JobInfo, QueueInfo]] = []
    for name, jobs in jobs_of.items():
        queue = ssn.queues[name]
        if not queue.is_open():
            closed.extend((job, queue) for job in jobs)
            continue
        for job in jobs:
            if job.min_resources is None:
                return False
            refuser = _vote(chain, job)
            if refuser is None:
                return False
            refused.append((job, refuser))
    queues = ssn.queues
    parked_refused: list[JobInfo] = []
    if vote is not None and vote.count:
        if all(map(QueueInfo.is_open, queues.values())):
            parked_refused = _lay_refusals(ssn, vote)
        else:
            parked_refused = vote.jobs()
            closed.extend(
                (j, queues[j.queue]) for j in parked_refused if not queues[j.queue].is_open()
            )
            parked_refused = [j for j in parked_refused if queues[j.queue].is_open()]
    not_enqueued = ssn.not_enqueued
    for job, queue in closed:
        not_enqueued[job.uid] = f"{NOT_ENQUEUED}queue {queue.name} is {queue.state}"
    text_for = refusal_texts(ssn)
    for job, refuser in refused:
        not_enqueued[job.uid] = text_for(refuser)(job)
    if parked_refused:
        text = text_for(vote.first if vote is not None else None)
        not_enqueued.update(
            zip([j.uid for j in parked_refused], map(text, parked_refused), strict=True)
        )
    return True


def _lay_refusals(ssn: Session, vote: _ParkedVote) -> list[JobInfo]:
    """Say the refusal of the parked jobs ``vote`` rejected that are not valid gangs
    as one layer (``Session.refused_parked``), with the cycle's figures captured once,
    where the refusing plugin can say them so (``explain_each(ssn, head)``: a function
    saying any job's refusal, later, on the figures as they stand now). The other jobs
    rejected (valid gangs, whose stage is worked out job by job), to be said one by
    one; all of them where the plugin cannot."""
    head = f"{NOT_ENQUEUED}{vote.first}: "
    plugin = next((p for p in ssn.plugins if p.name == vote.first), None)
    each = getattr(plugin, "explain_each", None) if plugin is not None else None
    if each is None:
        return vote.jobs()
    rows = vote.rows
    if rows.all_invalid:  # (the usual backlog: no valid gang parked)
        layered, count = vote.refused_list, vote.count
    else:
        refused_invalid = vote.refused & rows.invalid
        layered = refused_invalid.tolist()
        count = layered.count(True)
    if count:
        ssn.refused_parked = Layer(
            rows.jobs, rows.uids, layered, rows.index, each(ssn, head), count
        )
    if count == vote.count:
        return []
    return list(itertools.compress(rows.jobs, (vote.refused & ~rows.invalid).tolist()))


class _ParkedVote:
    """The parked jobs' vote by the first voting function (see :func:`_parked_refused`):
    ``refused`` per row of ``rows.jobs``, ``count`` of them; ``unrefused``: the other
    parked jobs, in parking order."""

    __slots__ = ("count", "first", "refused", "refused_list", "rows", "unrefused")

    def __init__(self, first: str, rows: Rows, refused: np.ndarray) -> None:
        self.first = first
        self.rows = rows
        self.refused = refused
        self.refused_list: list[bool] = refused.tolist()
        self.count = self.refused_list.count(True)
        if not self.count:
            self.unrefused = rows.every
        elif self.count == len(rows.every):  # (the usual backlog: every one)
            self.unrefused = []
        else:
            keep = np.ones(len(rows.every), dtype=bool)
            keep[rows.at[refused]] = False
            self.unrefused = list(itertools.compress(rows.every, keep.tolist()))

    def jobs(self) -> list[JobInfo]:
        """The jobs refused, in parking order."""
        return list(itertools.compress(self.rows.jobs, self.refused_list))


def _parked_refused(ssn: Session) -> _ParkedVote | None:
    """The plugin of the first voting function, and the parked jobs it rejects (see
    :mod:`pumice.framework.parking`), asked for all of them together; None where it
    cannot be asked so.

    The parked jobs are most of a backlog that waits. When the first function asked
    can also vote on many jobs' minResources at once (facet ``refuses``: rows of
    minResources -> whether it rejects each, as it would one by one, and a job it
    rejects it rejects for the rest of the action: admitting jobs only takes room),
    its rejection decides, whatever the other functions say: those jobs are not asked
    one by one, in this cycle's refusals or its loop in order."""
    parking = ssn.parking
    if parking is None or not ssn.parked:
        return None
    first = next((tier[0] for tier in ssn.hooks.chain("job_enqueueable") if tier), None)
    if first is None:
        return None
    name, fn = first
    refuses = ssn.hooks.facet("job_enqueueable", fn, "refuses")
    if refuses is None:
        return None
    rows = parking.rows(ssn.space)
    if not rows.jobs:
        return None
    return _ParkedVote(name, rows, np.asarray(refuses(rows.matrix), dtype=bool))


#: One tier of side-effect-free votes: (plugin, pure form, whether the function itself
#: has a side effect when it permits).
_PureTier = list[tuple[str, Callable[[JobInfo], int], bool]]


def _vote(chain: list[_PureTier], job: JobInfo) -> str | None:
    """The plugin whose function rejects ``job`` (``HookTable.vote_detail``'s walk), or
    None when it is admitted or a function with a side effect permits it."""
    for tier in chain:
        permitted = False
        for name, fn, moves in tier:
            r = fn(job)
            if r < 0:
                return name
            if r > 0:
                if moves:
                    return None
                permitted = True
        if permitted:
            return None
    return None


def _in_order(
    ssn: Session, jobs: list[JobInfo], key: Callable[[JobInfo], tuple] | None
) -> Iterator[JobInfo]:
    """``jobs`` in job order: sorted by the plugins' keys when they all offer one (the
    same order, with the same fallback), else popped from a heap as Volcano does."""
    if key is not None:
        yield from sorted(jobs, key=key)
        return
    heap: PriorityQueue[JobInfo] = PriorityQueue(ssn.job_less, jobs)
    while not heap.empty():
        yield heap.pop()
