"""Sweeps: the runs of a what-if over configurations and seeds, locally or on Dask.

Why: one what-if run tells how a configuration did on one workload; whether a
difference between configurations is real or an accident of that workload only shows
over several seeds of the generated workload. A grid of configurations × seeds is many
independent, CPU-bound simulations, so it runs where there are CPUs: a local process
pool (:mod:`pumice.sim.parallel`) or an existing Dask distributed cluster.

Contract:

- :func:`seeds` reads ``--seed`` (repeatable) and ``--seeds`` (``1,2,3`` or ``1-5``);
  several seeds make a grid. :func:`dask_address` picks the executor: ``--dask ADDRESS``,
  else ``PUMICE_DASK_ADDRESS``, else none (the local pool). ``--workers`` asks for the
  local pool, so it overrides the environment but not an explicit ``--dask``.
- :func:`run_tasks` returns ``[task(shared, i, progress) for i in range(count)]`` in
  index order whichever executor ran them and in whatever order they finished, so a
  sweep's report does not depend on where or how fast each run went. The first task
  that raises ends the sweep with its exception (the others are cancelled).
- On Dask, ``shared`` is sent to the cluster once (scattered) and each task looks it up
  there; ``task`` and its value must pickle, and workers must be able to import pumice.
  Tasks get ``progress=None`` on Dask; a display sees each run's last progress when its
  result arrives.
- :func:`aggregate` turns a grid's results into one row per metric and configuration:
  the mean, spread (sample standard deviation, min, max) and count over the seeds of the
  values the single-seed comparison (:func:`pumice.sim.whatif.comparison_rows`) shows,
  computed seed by seed over all configurations, so each cell aggregates exactly the
  figure a one-seed what-if would print. :func:`write_grid` writes them.
"""

from __future__ import annotations

import csv
import html
import math
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from pumice.errors import InputError, shown
from pumice.sim.parallel import Progress, Relay, run_parallel

if TYPE_CHECKING:
    from pumice.sim.engine import SimResult

R = TypeVar("R")
S = TypeVar("S")

#: The environment variable naming a Dask scheduler when ``--dask`` is not given.
ENV_ADDRESS = "PUMICE_DASK_ADDRESS"
#: Seconds to wait for the Dask scheduler to answer before giving up.
CONNECT_TIMEOUT = 20
#: The most seeds one ``--seeds`` range may expand to (a typo like 1-10000 is refused).
MAX_SEEDS = 1000


# -- the grid -----------------------------------------------------------------------------


def seeds(repeated: Sequence[int] | None, listed: str | None) -> list[int]:
    """The seeds of a sweep: ``--seed`` values (repeatable), or ``--seeds`` as a comma
    list of seeds and ranges (``1,2,5-8``); ``[1]`` when neither is given. A seed given
    twice is an error: it would run the same simulation twice and weigh it double."""
    if repeated and listed is not None:
        raise InputError("give --seed or --seeds, not both", field="--seeds")
    if listed is not None:
        out: list[int] = []
        for part in (p.strip() for p in listed.split(",")):
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            try:
                a, b = (int(lo), int(hi)) if sep and lo else (int(part), int(part))
            except ValueError:
                raise InputError(
                    f"expected seeds like 1,2,3 or 1-5, got {shown(part)}", field="--seeds"
                ) from None
            if b < a or b - a >= MAX_SEEDS:
                raise InputError(
                    f"bad range {shown(part)} (low-high, at most {MAX_SEEDS} seeds)",
                    field="--seeds",
                )
            out.extend(range(a, b + 1))
        if not out:
            raise InputError("expected at least one seed", field="--seeds")
        flag = "--seeds"
    else:
        out = list(repeated or [1])
        flag = "--seed"
    seen: set[int] = set()
    for s in out:
        if s in seen:
            raise InputError(f"seed {s} is given twice", field=flag)
        seen.add(s)
    return out


def dask_address(flag: str | None, workers: int | None) -> str | None:
    """The Dask scheduler to run on, or None for the local pool (see the module's
    contract for the precedence of ``--dask``, ``--workers`` and the environment)."""
    if flag is not None:
        address = flag.strip()
        if not address:
            raise InputError("expected a scheduler address, e.g. tcp://host:8786", field="--dask")
        if workers is not None:
            raise InputError(
                "--workers sizes the local process pool; the Dask cluster has its own workers",
                field="--dask",
            )
        return address
    if workers is not None:
        return None
    return os.environ.get(ENV_ADDRESS, "").strip() or None


# -- executors ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Last:
    """A task's progress callable on a Dask worker: remembers the last report, which
    travels back with the result."""

    value: tuple[int, int, float] | None = None

    def __call__(self, done: int, total: int, now: float) -> None:
        self.value = (done, total, now)


def _on_worker(
    task: Callable[[Any, int, Progress | None], Any], shared: Any, index: int
) -> tuple[Any, tuple[int, int, float] | None]:
    """What a Dask worker runs: the task, and the last progress it reported."""
    last = _Last()
    return task(shared, index, last), last.value


def _client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise InputError(
            "needs the distributed package: pip install 'pumice[dask]'", field="--dask"
        ) from None
    try:
        return Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as err:
        raise InputError(
            f"cannot reach the Dask scheduler at {address}: {err}", field="--dask"
        ) from None


def run_on_dask(
    task: Callable[[S, int, Progress | None], R],
    shared: S,
    count: int,
    address: str,
    display: AbstractContextManager[Relay] | None = None,
) -> list[R]:
    """Run the tasks on the Dask cluster at ``address``; values in index order."""
    if count == 0:
        return []
    from distributed import as_completed

    with _client(address) as client:
        # keys unique per sweep, so two sweeps on one cluster never share results
        tag = os.urandom(4).hex()
        data = client.scatter(shared, broadcast=False, hash=False)
        futures = [
            client.submit(_on_worker, task, data, i, key=f"pumice-run-{tag}-{i}", pure=False)
            for i in range(count)
        ]
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[Any] = [None] * count
        try:
            with display if display is not None else nullcontext(_no_relay) as relay:
                for f in as_completed(futures, loop=client.loop):
                    value, last = f.result()  # raises the task's exception
                    i = index[f.key]
                    results[i] = value
                    if last is not None:
                        relay(i, *last)
        except BaseException:
            client.cancel(futures, force=True)
            raise
        finally:
            client.cancel([data])
    return results


def _no_relay(index: int, done: int, total: int, now: float) -> None:
    return None


def run_tasks(
    task: Callable[[S, int, Progress | None], R],
    shared: S,
    count: int,
    *,
    workers: int,
    address: str | None,
    display: AbstractContextManager[Relay] | None = None,
) -> list[R]:
    """The sweep's executor: Dask at ``address`` when given, else ``workers`` local
    processes (see :func:`pumice.sim.parallel.run_parallel`)."""
    if address is not None:
        return run_on_dask(task, shared, count, address, display)
    return run_parallel(task, shared, count, workers, display)


# -- the grid's report --------------------------------------------------------------------


@dataclass(slots=True)
class Spread:
    """One metric of one configuration over the seeds: what the grid's report shows.
    ``values`` keeps each seed's figure (None where the run had none, e.g. a wait when
    no job ran); the statistics are over the numeric ones, ``n`` of them."""

    values: dict[int, Any]
    n: int = 0
    mean: float | None = None
    std: float | None = None  # sample standard deviation; 0 for one value
    min: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: dict[int, Any]) -> Spread:
        nums = [
            float(v)
            for v in values.values()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        ]
        if not nums:
            return cls(values)
        mean = sum(nums) / len(nums)
        var = sum((x - mean) ** 2 for x in nums) / (len(nums) - 1) if len(nums) > 1 else 0.0
        return cls(values, len(nums), mean, math.sqrt(var), min(nums), max(nums))

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "seeds": {str(s): v for s, v in self.values.items()},
        }


@dataclass(slots=True)
class GridRow:
    metric: str
    cells: dict[str, Spread] = field(default_factory=dict)  # by configuration name


def aggregate(
    results: Sequence[SimResult], names: Sequence[str], seed_list: Sequence[int]
) -> list[GridRow]:
    """The grid's rows. ``results`` are ordered by (configuration, seed): the run of
    ``names[c]`` with ``seed_list[s]`` at ``c * len(seed_list) + s``. A metric some seed
    lacks (a queue or tier only some workloads have) aggregates the seeds that have it."""
    from pumice.sim.whatif import comparison_rows

    k = len(seed_list)
    if len(results) != len(names) * k:
        raise ValueError("one result per configuration and seed")
    order: list[str] = []
    per: dict[str, dict[str, dict[int, Any]]] = {}
    for si, seed in enumerate(seed_list):
        column = [results[ci * k + si] for ci in range(len(names))]
        for label, values in comparison_rows(column):
            if label not in per:
                order.append(label)
                per[label] = {n: {} for n in names}
            for name, v in zip(names, values, strict=True):
                per[label][name][seed] = v
    return [
        GridRow(label, {n: Spread.of(per[label][n]) for n in names if per[label][n]})
        for label in order
    ]


def _shown(metric: str, v: float | None) -> str:
    from pumice.sim.summary_text import minutes

    if v is None:
        return "–"
    if metric.endswith("(s)"):
        return minutes(v)
    if "utilization" in metric:
        return f"{v:.1%}"
    return f"{v:,.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v):,}"


def cell_text(metric: str, cell: Spread | None) -> str:
    """A cell as people read it: ``mean ± std`` in the metric's unit (minutes for
    times, percent for utilization); ``–`` without a figure."""
    if cell is None or cell.mean is None:
        return "–"
    if cell.n == 1:
        return _shown(metric, cell.mean)
    return f"{_shown(metric, cell.mean)} ± {_shown(metric, cell.std)}"


#: The metrics of the terminal table (the page and the files have every metric).
HEADLINE = (
    "wait mean (s)",
    "wait p95 (s)",
    "completion mean (s)",
    "completion p95 (s)",
    "fairness gap (mean over queues)",
    "evictions",
    "jobs never ran",
    "gang violations",
)


def headline(rows: Sequence[GridRow]) -> list[GridRow]:
    """The rows of the terminal table: the headline metrics and every utilization."""
    return [r for r in rows if r.metric in HEADLINE or r.metric.startswith("utilization ")]


def write_grid(
    rows: Sequence[GridRow],
    names: Sequence[str],
    seed_list: Sequence[int],
    out: str | Path,
    run: dict[str, Any],
    jobs: dict[int, int],
) -> Path:
    """Write ``grid.json``, ``grid.csv``, ``run.json`` and ``index.html`` into ``out``
    (each run's own report is in ``out/<configuration>/seed-<seed>/``); return the
    page's path. ``jobs`` is the workload's job count per seed."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "configs": list(names),
        "seeds": list(seed_list),
        "rows": [
            {"metric": r.metric, "values": {n: c.to_dict() for n, c in r.cells.items()}}
            for r in rows
        ],
    }
    (out / "grid.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    with (out / "grid.csv").open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        head = ["metric", "config", "n", "mean", "std", "min", "max"]
        w.writerow([*head, *(f"seed {s}" for s in seed_list)])
        for r in rows:
            for n, c in r.cells.items():
                stats = (c.mean, c.std, c.min, c.max)
                w.writerow(
                    [
                        r.metric,
                        n,
                        c.n,
                        *("" if v is None else v for v in stats),
                        *("" if c.values.get(s) is None else c.values[s] for s in seed_list),
                    ]
                )
    (out / "run.json").write_bytes(orjson.dumps(run, option=orjson.OPT_INDENT_2) + b"\n")
    return _write_page(rows, names, seed_list, out, jobs)


def _write_page(
    rows: Sequence[GridRow],
    names: Sequence[str],
    seed_list: Sequence[int],
    out: Path,
    jobs: dict[int, int],
) -> Path:
    from pumice.sim.report_html import PAGE_CSS, html_table

    def text(metric: str, c: Spread | None) -> str:
        if c is None or c.mean is None:
            return "–"
        if c.n == 1:
            return _shown(metric, c.mean)
        return f"{cell_text(metric, c)} ({_shown(metric, c.min)} – {_shown(metric, c.max)})"

    table_rows = [
        [r.metric.removesuffix(" (s)"), *(text(r.metric, r.cells.get(n)) for n in names)]
        for r in rows
    ]
    links = []
    for n in names:
        runs = ", ".join(
            f"<a href='{html.escape(n)}/seed-{s}/index.html'>seed {s}</a>" for s in seed_list
        )
        links.append(f"<li>{html.escape(n)}: {runs}</li>")
    sizes = sorted(set(jobs.values()))
    size = f"{sizes[0]:,} jobs" if len(sizes) == 1 else f"{sizes[0]:,}–{sizes[-1]:,} jobs"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>pumice simulate: what-if grid</title>",
        f"<style>{PAGE_CSS}</style></head><body>",
        "<h1>pumice simulate — what-if grid: " + html.escape(" vs ".join(names)) + "</h1>",
        f"<p class='note'>{len(names)} configuration(s) × {len(seed_list)} seeds "
        f"({', '.join(map(str, seed_list))}) of the generated workload ({size} each). "
        "Each cell: the mean over the seeds ± the sample standard deviation, "
        "(min – max); per-seed values in grid.csv and grid.json.</p>",
        "<h2>Over the seeds</h2>",
        html_table(["metric", *names], table_rows),
        "<h2>Each run's report</h2>",
        "<ul>" + "".join(links) + "</ul>",
        "</body></html>",
    ]
    path = out / "index.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


__all__ = [
    "ENV_ADDRESS",
    "GridRow",
    "Spread",
    "aggregate",
    "cell_text",
    "dask_address",
    "headline",
    "run_on_dask",
    "run_tasks",
    "seeds",
    "write_grid",
]
