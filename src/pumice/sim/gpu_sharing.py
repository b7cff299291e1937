"""GPU sharing what-if: the same jobs with shared GPU cards and with whole ones.

Jobs that ask a share of a card (``volcano.sh/gpu-memory``, Volcano's GPU share by
memory, see :mod:`pumice.api.gpus`) are compared with the same jobs each given a whole
card. Sharing is a property of the pods as much as of the scheduler (a pod asks a
card's memory, or a card), so the comparison needs two workloads, not two
configurations: ``pumice simulate --gpu-sharing shared,whole`` runs the workload as
written (``shared``) and with every such pod's memory raised to a whole card's
(``whole``), under the same configuration (deviceshare with ``GPUSharingEnable``). A
pod asking a whole card's memory gets a card no other pod uses, which is what
whole-GPU scheduling gives it; the cards, the device plugin and everything else stay
the same, so the runs differ only in sharing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pumice.api.gpus import GPU_MEMORY, GPU_NUMBER
from pumice.errors import InputError, shown
from pumice.sim.workload import Workload

#: The runs of the what-if: the workload as written, and with whole cards.
MODES = ("shared", "whole")
FIELD = "--gpu-sharing"


def card_memory(allocatable: Sequence[Mapping[str, float]]) -> float:
    """The memory of one card of the nodes that share their cards by memory (their
    ``volcano.sh/gpu-memory`` over their ``volcano.sh/gpu-number``, as the device plugin
    splits it); an InputError when no node shares cards, or when their cards differ."""
    sizes = {
        a[GPU_MEMORY] // a[GPU_NUMBER]
        for a in allocatable
        if a.get(GPU_MEMORY, 0) > 0 and a.get(GPU_NUMBER, 0) > 0
    }
    if not sizes:
        raise InputError(
            f"needs nodes that share their GPU cards by memory ({GPU_MEMORY} and "
            f"{GPU_NUMBER} in their allocatable)",
            field=FIELD,
        )
    if len(sizes) > 1:
        listed = ", ".join(f"{s:g}" for s in sorted(sizes))
        raise InputError(
            f"the cluster's shared cards differ in memory ({listed}): a whole card is not one size",
            field=FIELD,
        )
    return sizes.pop()


def with_whole_cards(workload: Workload, card: float) -> Workload:
    """``workload`` with every pod that asks part of a card's memory asking all of it
    (``card``). A Volcano Job read from a manifest makes its pods from the manifest, so
    it cannot be changed here: an InputError names it."""
    jobs = []
    for job in workload.jobs:
        if not any(0 < t.requests.get(GPU_MEMORY, 0) < card for t in job.tasks):
            jobs.append(job)
            continue
        if job.manifest is not None:
            raise InputError(
                f"asks a share of a GPU card in a Volcano Job manifest, whose pods "
                f"{FIELD} whole cannot change (write it as a compact job or PodGroup)",
                file=job.origin.file if job.origin is not None else None,
                obj=job.origin.obj if job.origin is not None else f"job {job.uid}",
                field=FIELD,
            )
        tasks = tuple(dataclasses.replace(t, requests=_whole(t.requests, card)) for t in job.tasks)
        jobs.append(dataclasses.replace(job, tasks=tasks))
    return dataclasses.replace(workload, jobs=tuple(jobs))


def _whole(requests: Mapping[str, float], card: float) -> dict[str, float]:
    out = dict(requests)
    if 0 < out.get(GPU_MEMORY, 0) < card:
        out[GPU_MEMORY] = card
    return out


def parse_modes(text: str | None) -> list[str]:
    """The ``--gpu-sharing`` runs, checked (none: the option not given)."""
    if text is None:
        return []
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise InputError(f"expected one of {', '.join(MODES)}, got {shown(m)}", field=FIELD)
    if not modes or len(set(modes)) != len(modes):
        raise InputError("expected shared, whole or both, each once", field=FIELD)
    return modes


def variants(
    modes: list[str], workload: Workload, allocatable: Sequence[Mapping[str, float]]
) -> list[tuple[str, Workload]]:
    """The workload of each run of the what-if, by mode."""
    card = card_memory(allocatable)
    return [(m, workload if m == "shared" else with_whole_cards(workload, card)) for m in modes]


__all__ = ["MODES", "card_memory", "parse_modes", "variants", "with_whole_cards"]


def what_sharing_bought(names: Sequence[str], summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """For each configuration run ``shared`` and ``whole`` (names ``shared``/``whole``,
    or ``<config>-shared``/``<config>-whole``), one sentence comparing the two: the
    mean wait, and how much of the shared cards' memory the pods held."""
    runs = dict(zip(names, summaries, strict=True))
    out = []
    for name in names:
        if not name.endswith(MODES[0]):
            continue
        prefix = name[: -len(MODES[0])]
        shared, whole = runs[name], runs.get(prefix + MODES[1])
        if whole is None:
            continue
        held = [r["utilization"].get(GPU_MEMORY) for r in (shared, whole)]
        label = f" ({prefix.rstrip('-')})" if prefix else ""
        text = (
            f"What sharing GPU cards bought{label}: jobs waited {_minutes(shared['wait']['mean'])} "
            f"on average, against {_minutes(whole['wait']['mean'])} with a card each"
        )
        if None not in held:
            text += (
                f"; the pods held {held[0]:.1%} of the shared cards' memory, against "
                f"{held[1]:.1%} with whole cards"
            )
        out.append(text + ".")
    return out


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"
