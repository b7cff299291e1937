"""The pending jobs on ``pumice run``'s HTTP server, in the spirit of Kueue's
visibility API.

``GET /apis/visibility/v1/pendingjobs`` lists every waiting job of the cluster,
``GET /apis/visibility/v1/queues/{queue}/pendingjobs`` those of one queue; both take
``?limit=N&offset=M`` (a page of the line). The answer is the last cycle's line
(:func:`~pumice.visibility.line.pending_jobs`), built at most once per cycle: a cycle
that repeats the last one's decisions shares its line, and the records are built again
only when a cycle has run. The last few answers are kept until then, so a dashboard
polling the same page costs a look-up.

``?eta=1`` adds start estimates (``eta``, ``assumption`` per job, and a ``forecast``
object saying when they were computed and on what step): the last forecast the
server's :class:`~pumice.forecast.live.BackgroundForecast` finished. The request never
computes one: it asks for a new one when the last is older than the forecaster's
``max_age``, and answers 202 with ``forecast.computing`` while there is none yet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import orjson

from pumice.framework.decisions import Decisions, Waiting
from pumice.visibility.line import PendingJob, PendingList, pending_jobs

if TYPE_CHECKING:  # (the forecast imports the scheduler: only when a server has one)
    from pumice.forecast.live import BackgroundForecast

PREFIX = "/apis/visibility/v1/"
ALL = "pendingjobs"
#: How many answers are kept per cycle (distinct queue and page).
KEPT_ANSWERS = 64

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"

#: (status, content type, body), as the HTTP server answers.
Answer = tuple[int, str, bytes]


@dataclass(slots=True)
class _Line:
    """One cycle's line, as records and as their JSON, by queue when asked."""

    jobs: list[PendingJob]
    items: list[dict[str, Any]]
    by_queue: dict[str, tuple[list[PendingJob], list[dict[str, Any]]]] = field(default_factory=dict)
    answers: dict[tuple[str | None, int, int | None], bytes] = field(default_factory=dict)

    def of(self, queue: str | None) -> tuple[list[PendingJob], list[dict[str, Any]]]:
        if queue is None:
            return self.jobs, self.items
        got = self.by_queue.get(queue)
        if got is None:
            pick = [i for i, j in enumerate(self.jobs) if j.queue == queue]
            got = self.by_queue[queue] = (
                [self.jobs[i] for i in pick],
                [self.items[i] for i in pick],
            )
        return got


class PendingEndpoint:
    """Answers the visibility paths from the decisions ``last()`` returns (None before
    the first cycle: 503). Safe from any thread."""

    def __init__(
        self,
        last: Callable[[], Decisions | None],
        forecast: BackgroundForecast | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._last = last
        self._forecast = forecast
        self._clock = clock
        self._lock = threading.Lock()
        self._waiting: list[Waiting] | None = None
        self._line: _Line | None = None
        #: How many times the records were built (once per cycle that ran and was asked).
        self.builds = 0

    def line(self) -> _Line | None:
        decisions = self._last()
        if decisions is None:
            return None
        with self._lock:
            if self._line is None or decisions.waiting is not self._waiting:
                jobs = pending_jobs(decisions)
                self._line = _Line(jobs, [j.to_json() for j in jobs])
                self._waiting = decisions.waiting
                self.builds += 1
            return self._line

    def jobs(self) -> list[PendingJob] | None:
        """The last cycle's pending jobs, None before a cycle."""
        line = self.line()
        return None if line is None else line.jobs

    def answer(self, path: str, query: str = "") -> Answer:
        """The answer for ``path`` (beneath :data:`PREFIX`) and its query string."""
        parts = path.removeprefix(PREFIX).strip("/").split("/")
        if parts == [ALL]:
            queue = None
        elif len(parts) == 3 and parts[0] == "queues" and parts[2] == ALL and parts[1]:
            queue = parts[1]
        else:
            return 404, _TEXT, b"not found\n"
        try:
            offset, limit, eta = _page(query)
        except ValueError as err:
            return 400, _TEXT, f"{err}\n".encode()
        if eta and self._forecast is None:
            return 400, _TEXT, b"eta: this server computes no start forecasts\n"
        line = self.line()
        if line is None:
            return 503, _TEXT, b"no scheduling cycle has run yet\n"
        if eta:
            return self._with_eta(line, queue, offset, limit)
        key = (queue, offset, limit)
        with self._lock:
            body = line.answers.get(key)
            if body is None:
                jobs, items = line.of(queue)
                end = None if limit is None else offset + limit
                page = PendingList([], queue, total=len(jobs), offset=offset)
                for j in jobs:
                    page.stages[j.stage] = page.stages.get(j.stage, 0) + 1
                doc = page.to_json()
                doc["items"] = items[offset:end]
                body = orjson.dumps(doc)
                if len(line.answers) >= KEPT_ANSWERS:
                    line.answers.clear()
                line.answers[key] = body
        return 200, _JSON, body

    def _with_eta(self, line: _Line, queue: str | None, offset: int, limit: int | None) -> Answer:
        """The page with the last forecast's estimates (built for each request: the
        ``eta`` counts from now)."""
        from pumice.visibility.eta import estimate_fields, forecast_info

        assert self._forecast is not None
        forecast, computing = self._forecast.latest()
        now = self._clock()
        with self._lock:
            jobs, items = line.of(queue)
            end = None if limit is None else offset + limit
            page = PendingList([], queue, total=len(jobs), offset=offset)
            for j in jobs:
                page.stages[j.stage] = page.stages.get(j.stage, 0) + 1
            doc = page.to_json()
            chosen = list(zip(jobs[offset:end], items[offset:end], strict=True))
        out = []
        estimates = {} if forecast is None else forecast.estimates
        for job, item in chosen:
            est = estimates.get(f"{job.namespace}/{job.name}")
            if est is None:
                out.append(item)
                continue
            eta, assumption = estimate_fields(est, now)
            item = dict(item)
            if eta is not None:
                item["eta"] = eta
            item["assumption"] = assumption
            out.append(item)
        doc["items"] = out
        info: dict[str, Any] = {} if forecast is None else forecast_info(forecast, now)
        info["computing"] = computing
        doc["forecast"] = info
        return (200 if forecast is not None else 202), _JSON, orjson.dumps(doc)


def _page(query: str) -> tuple[int, int | None, bool]:
    """``offset``, ``limit`` and ``eta`` from a query string (ValueError naming the bad
    one)."""
    args = parse_qs(query)
    got: dict[str, int | None] = {"offset": 0, "limit": None}
    for name in got:
        values = args.get(name)
        if not values:
            continue
        text = values[-1]
        if not text.isdigit():
            raise ValueError(f"{name}: expected a whole number, got {text!r}")
        got[name] = int(text)
    eta = (args.get("eta") or ["0"])[-1].lower()
    if eta not in ("0", "1", "true", "false", ""):
        raise ValueError(f"eta: expected 1 or 0, got {eta!r}")
    return int(got["offset"] or 0), got["limit"], eta in ("1", "true")


__all__ = ["ALL", "KEPT_ANSWERS", "PREFIX", "PendingEndpoint"]
