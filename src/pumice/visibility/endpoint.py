"""The pending jobs on ``pumice run``'s HTTP server, in the spirit of Kueue's
visibility API.

``GET /apis/visibility/v1/pendingjobs`` lists every waiting job of the cluster,
``GET /apis/visibility/v1/queues/{queue}/pendingjobs`` those of one queue; both take
``?limit=N&offset=M`` (a page of the line). The answer is the last cycle's line
(:func:`~pumice.visibility.line.pending_jobs`), built at most once per cycle: a cycle
that repeats the last one's decisions shares its line, and the list is built again
only when a cycle has run. A request costs the page's JSON.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from urllib.parse import parse_qs

import orjson

from pumice.framework.decisions import Decisions, Waiting
from pumice.visibility.line import PendingJob, pending_jobs, select

PREFIX = "/apis/visibility/v1/"
ALL = "pendingjobs"

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"

#: (status, content type, body), as the HTTP server answers.
Answer = tuple[int, str, bytes]


class PendingEndpoint:
    """Answers the visibility paths from the decisions ``last()`` returns (None before
    the first cycle: 503). Safe from any thread."""

    def __init__(self, last: Callable[[], Decisions | None]) -> None:
        self._last = last
        self._lock = threading.Lock()
        self._line: list[Waiting] | None = None
        self._jobs: list[PendingJob] = []
        #: queue -> its jobs in line order (made when first asked, per line)
        self._by_queue: dict[str, list[PendingJob]] = {}
        #: How many times the list was built (one per cycle that ran and was asked).
        self.builds = 0

    def jobs(self) -> list[PendingJob] | None:
        """The last cycle's pending jobs (built once per line), None before a cycle."""
        decisions = self._last()
        if decisions is None:
            return None
        with self._lock:
            if decisions.waiting is not self._line:
                self._jobs = pending_jobs(decisions)
                self._line = decisions.waiting
                self._by_queue = {}
                self.builds += 1
            return self._jobs

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
            offset, limit = _page(query)
        except ValueError as err:
            return 400, _TEXT, f"{err}\n".encode()
        jobs = self.jobs()
        if jobs is None:
            return 503, _TEXT, b"no scheduling cycle has run yet\n"
        if queue is not None:
            with self._lock:
                mine = self._by_queue.get(queue)
                if mine is None:
                    mine = self._by_queue[queue] = [j for j in jobs if j.queue == queue]
            page = select(mine, None, offset=offset, limit=limit)
            page.queue = queue
        else:
            page = select(jobs, None, offset=offset, limit=limit)
        return 200, _JSON, orjson.dumps(page.to_json())


def _page(query: str) -> tuple[int, int | None]:
    """``offset`` and ``limit`` from a query string (ValueError naming the bad one)."""
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
    return int(got["offset"] or 0), got["limit"]


__all__ = ["ALL", "PREFIX", "PendingEndpoint"]
