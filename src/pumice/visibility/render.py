"""``pumice queue pending`` and ``pumice cycle --format table``: the pending jobs as a
table for people."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from pumice.visibility.line import FROM_LOCAL_CYCLE, PendingList


def pending_table(page: PendingList, title: str | None = None) -> Table:
    """The page as a table: positions, job, queue, priority, stage, why."""
    if title is None:
        whose = f"queue {page.queue}" if page.queue is not None else "all queues"
        title = f"Pending jobs, {whose}, in the order the scheduler tries them ({page.total})"
    t = Table(title=title, title_justify="left")
    for col in ("#", "in queue", "job", "queue", "priority", "stage"):
        t.add_column(
            col, no_wrap=True, justify="right" if col in ("#", "in queue", "priority") else "left"
        )
    eta = any(j.eta is not None or j.assumption is not None for j in page.jobs)
    if eta:
        t.add_column("starts in", no_wrap=True, justify="right")
    t.add_column("why", overflow="fold", ratio=3)
    if eta:
        t.add_column("assumption", overflow="fold", ratio=3)
    for j in page.jobs:
        cells = [str(j.position_in_cluster), str(j.position_in_queue),
                 f"{j.namespace}/{j.name}" if j.namespace else j.name, j.queue,
                 str(j.priority), j.stage]  # fmt: skip
        if eta:
            cells.append("-" if j.eta is None else f"{j.eta:,.0f} s")
        cells.append(j.reason)
        if eta:
            cells.append(j.assumption or "")
        t.add_row(*cells)
    return t


def print_pending(page: PendingList, console: Console | None = None) -> None:
    """The table, then where the list came from and what the page leaves out."""
    console = console or Console(width=None if sys.stdout.isatty() else 200)
    if not page.total:
        whose = f"in queue {page.queue}" if page.queue is not None else ""
        console.print(f"No pending jobs {whose}".rstrip() + ".")
    else:
        console.print(pending_table(page))
        shown = len(page.jobs)
        if shown < page.total:
            console.print(f"showing {page.offset + 1}-{page.offset + shown} of {page.total}")
        by_stage = ", ".join(f"{n} at {s}" for s, n in sorted(page.stages.items()))
        console.print(f"stopped by stage: {by_stage}")
    f = page.forecast
    if f is not None:
        if "computedAt" in f:
            console.print(
                f"start estimates: forecast computed at {f['computedAt']} ({f['ageSeconds']:g} s "
                f"ago), step {f['step']:g} s ({f['stepChosen']}), {f['cycles']} cycles in "
                f"{f['seconds']:g} s" + (f"; it failed: {f['error']}" if f.get("error") else "")
            )
        if f.get("computing"):
            console.print("start estimates: a new forecast is being computed")
    if page.source == FROM_LOCAL_CYCLE:
        console.print(
            "(computed here by one scheduling cycle on the cluster's objects, with this "
            "command's scheduler configuration; give --server to ask the running scheduler)"
        )
    else:
        console.print("(as the running scheduler's last cycle left them)")


__all__ = ["pending_table", "print_pending"]
