"""What a start forecast costs as ``pumice run``'s pending-jobs endpoint serves it:
``python -m pumice.bench.forecast_endpoint``.

Why: ``?eta=1`` must not make a request wait seconds for a forecast, nor make the server
compute one per request. This builds the cluster of :mod:`pumice.forecast.bench`
(``--nodes`` full 8-GPU nodes, ``--waiting`` gangs), runs one cycle for the line, and
serves it over HTTP on this machine with a
:class:`~pumice.forecast.live.BackgroundForecast`, as ``pumice run`` does. It asks
``?eta=1`` (a page of 100) in a loop from the first request (202: the forecast starts in
its child process, as the scheduler's loop would start it) until the estimates come
(200), and prints how long that took, what the forecast cost, how long the requests
answered meanwhile took (they share the machine's cores with the forecast), how long a
page with estimates takes once there is a forecast, and what the forecast does to the
scheduler's own cycles: a cycle on the same cluster (through the scheduler cache, as
``pumice run`` runs it) timed before, and while the forecast computes (between the
requests). The step is ``--step`` or, as ``pumice run`` chooses it, by the cluster's
size."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import time
import urllib.request
from typing import Any

from pumice.bench.measure import percentile
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.forecast.bench import NOW, cluster, learned
from pumice.forecast.durations import QueueDurations
from pumice.forecast.live import BackgroundForecast, Forecast
from pumice.run.http import VISIBILITY, HealthServer
from pumice.scheduler import Scheduler
from pumice.visibility.endpoint import PendingEndpoint
from pumice.visibility.eta import choose_step, run_forecast


def endpoint_figures(
    objects: list[dict[str, Any]],
    scheduler: Scheduler,
    durations: QueueDurations,
    step: float,
    why: str,
) -> str:
    """The endpoint's figures (see the module docstring), as one line."""
    snapshot = build_snapshot([SourcedObject(o, "bench") for o in objects], now=NOW)
    decisions = scheduler.cycle(snapshot)
    store = MemoryCluster()
    store.create_all(copy.deepcopy(objects))
    cache = SchedulerCache(store)
    fresh = dataclasses.replace(scheduler, repeat=False, living=False)

    def cycle_ms() -> float:
        snap = cache.snapshot()
        t = time.perf_counter()
        fresh.cycle(snap)
        return (time.perf_counter() - t) * 1e3

    alone = [cycle_ms() for _ in range(3)]
    began = time.perf_counter()

    def clock() -> float:
        return NOW + time.perf_counter() - began

    bg = BackgroundForecast(max_age=3600.0, clock=clock)
    endpoint = PendingEndpoint(lambda: decisions, bg, clock=clock)
    server = HealthServer(("127.0.0.1", 0), paths=(VISIBILITY,), visibility=endpoint.answer)
    server.start()
    url = f"{server.url}{VISIBILITY}pendingjobs?eta=1&limit=100"

    def ask() -> tuple[int, float]:
        t = time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as resp:
            resp.read()
            return resp.status, (time.perf_counter() - t) * 1e3

    def work() -> Forecast:
        return run_forecast(
            objects, scheduler, NOW, durations=durations, horizon=7 * 86400.0, step=step,
            step_reason=why, period=1.0, scheduler_name="volcano",
        )  # fmt: skip

    try:
        t0 = time.perf_counter()
        waiting: list[float] = []
        beside: list[float] = []
        status, ms = ask()
        while status == 202:
            waiting.append(ms)
            bg.between_cycles(lambda: work)  # (what the scheduler's loop does)
            beside.append(cycle_ms())
            time.sleep(0.2)
            status, ms = ask()
        served = time.perf_counter() - t0
        after = [ask()[1] for _ in range(20)]
    finally:
        server.close()
    last = bg.latest()[0]
    assert last is not None
    return (
        f"estimates served {served:.1f} s after the first ?eta=1 (the forecast: "
        f"{last.seconds:.1f} s, {last.stats.cycles:,} cycles, step {step:g} s, {why}); "
        f"{len(waiting)} requests answered 202 meanwhile, p50 {percentile(waiting, 50):.0f} ms, "
        f"max {max(waiting):.0f} ms; then a page of 100 with estimates: p50 "
        f"{percentile(after, 50):.1f} ms; a scheduling cycle: p50 {percentile(alone, 50):.0f} ms "
        f"alone, {percentile(beside, 50):.0f} ms while the forecast computes "
        f"({len(beside)} cycles)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m pumice.bench.forecast_endpoint", description=__doc__
    )
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--waiting", type=int, default=300)
    p.add_argument("--queues", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--step", type=float, default=None, help="replay step in seconds")
    args = p.parse_args(argv)
    objects = cluster(args.nodes, args.waiting, args.queues, args.seed)
    pods = sum(1 for o in objects if o["kind"] == "Pod")
    step, why = choose_step(args.step, args.nodes, 1.0)
    figures = endpoint_figures(objects, Scheduler.from_file(None), learned(args.queues), step, why)
    print(f"{args.nodes} nodes, {pods:,} pods, {args.waiting:,} waiting jobs: {figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
