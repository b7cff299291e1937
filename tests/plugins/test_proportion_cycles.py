"""proportion in a session that lives from cycle to cycle: each cycle's queue figures
are those a new session would work out, whatever the last cycle's events wrote into
them, and whatever moved in the cluster in between."""

from __future__ import annotations

import yaml
from tests.kit import conf, node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.framework.session import close_session, open_session, renew_session
from pumice.plugins import default_registry

CONFIG = parse_config(
    yaml.safe_load(conf("enqueue, allocate", ["gang"], ["predicates", "proportion"]))
)


def _objects(extra_pods: int = 0) -> list[dict]:
    objs: list[dict] = [node("n1", cpu="8", memory="32Gi"), node("n2", cpu="8", memory="32Gi")]
    for q, weight in (("a", 1), ("b", 3)):
        objs.append(queue(q, weight=weight))
        for j in range(2):
            name = f"{q}{j}"
            objs.append(podgroup(name, queue=q, min_member=1, phase="Running"))
            for i in range(2 + (extra_pods if q == "b" and j == 0 else 0)):
                bound = j == 0 and i == 0
                objs.append(
                    pod(
                        f"{name}-{i}",
                        group=name,
                        cpu="3",
                        node="n1" if bound else None,
                        phase="Running" if bound else None,
                    )
                )
    return objs


def _figures(ssn) -> dict:
    plugin = next(p for p in ssn.plugins if getattr(p, "name", "") == "proportion")
    return {
        name: [getattr(a, f).tobytes() for f in ("deserved", "allocated", "request", "inqueue")]
        + [a.share, plugin.refusal_limit(name, ssn.space)]
        for name, a in plugin.attrs.items()
    }


def _fresh(snapshot) -> dict:
    return _figures(open_session(snapshot, CONFIG, default_registry()))


def test_a_living_session_sees_each_cycle_as_a_new_session_would() -> None:
    registry = default_registry()
    first = build_snapshot([SourcedObject(o) for o in _objects()])
    ssn = open_session(first, CONFIG, registry)
    assert _figures(ssn) == _fresh(first)
    # The cycle's events write into a queue's figures (a task allocated in the session,
    # then the cycle's outcome dropped): the next cycle on the same cluster starts from
    # the cluster's figures, not the written ones.
    job = ssn.jobs["default/b1"]
    task = next(iter(job.tasks.values()))
    for handler in ssn.handlers:
        if handler.allocate is not None:
            handler.allocate(task)
    assert _figures(ssn)["b"] != _fresh(first)["b"]
    close_session(ssn, keep=True)
    ssn = renew_session(ssn, first, registry)
    assert _figures(ssn) == _fresh(first)
    # Nothing moved: the same figures again.
    close_session(ssn, keep=True)
    ssn = renew_session(ssn, first, registry)
    assert _figures(ssn) == _fresh(first)
    # One queue's jobs ask for more, then a queue has no jobs left.
    for objs in (
        _objects(extra_pods=2),
        [
            o
            for o in _objects()
            if o["kind"] == "Queue" or not o["metadata"]["name"].startswith("a")
        ],
        _objects(),
    ):
        snap = build_snapshot([SourcedObject(o) for o in objs])
        close_session(ssn, keep=True)
        ssn = renew_session(ssn, snap, registry)
        assert _figures(ssn) == _fresh(snap)
        assert list(_figures(ssn)) == sorted(_figures(ssn))


def _run_of(ssn):
    """proportion's ``allocatable_run`` (the ``run`` facet of its ``allocatable``)."""
    (run,) = [r for r in ssn.hooks.facets("allocatable", "run") if r is not None]
    return run


def _fire(ssn, kind: str, task) -> None:
    for handler in ssn.handlers:
        fn = getattr(handler, kind)
        if fn is not None:
            fn(task)


def test_allocatable_run_kept_answers_are_fresh_answers() -> None:
    """``allocatable_run`` keeps its answers while the queue's figures (deserved share
    and allocation) stand; as they move and come back (a task allocated, then given
    back; the next cycle), every answer is the one a session that never saw the
    figures before gives."""
    registry = default_registry()
    snap = build_snapshot([SourcedObject(o) for o in _objects(extra_pods=6)])
    ssn = open_session(snap, CONFIG, registry)
    job = ssn.jobs["default/b0"]
    waiting = sorted((t for t in job.tasks.values() if t.node is None), key=lambda t: t.name)
    ask = waiting[-1]

    def answers(session) -> list[int]:
        run, q = _run_of(session), session.queues["b"]
        return [run(q, ask, limit) for limit in (1, 2, 3, 5, 20, 2)]

    def fresh(allocated) -> list[int]:
        new = open_session(snap, CONFIG, registry)
        for t in allocated:
            _fire(new, "allocate", new.jobs["default/b0"].tasks[t.uid])
        return answers(new)

    seen = set()
    held: list = []
    steps = [
        ("allocate", 0), ("allocate", 1), ("deallocate", 1), ("allocate", 1),
        ("deallocate", 1), ("deallocate", 0), ("allocate", 0), ("allocate", 2),
    ]  # fmt: skip
    assert answers(ssn) == fresh(held)
    for kind, k in steps:
        task = waiting[k]
        _fire(ssn, kind, task)
        if kind == "allocate":
            held.append(task)
        else:
            held.remove(task)
        got = answers(ssn)
        assert got == fresh(held)
        seen.add(tuple(got))
    assert len(seen) > 2  # (the answers move with the allocation: a stale one shows)
    # The next cycle on the same cluster: the figures the cycle opened with, again.
    close_session(ssn, keep=True)
    ssn = renew_session(ssn, snap, registry)
    assert answers(ssn) == fresh([])
