"""A fuzz case from a seed and an index: which command, which input files, which
mutations. The same (seed, index) gives the same case, so a finding is replayed with
``pumice fuzz --seed S --case I``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import yaml

from pumice.fuzz import mutations
from pumice.fuzz.corpus import Corpus

CYCLE = "cycle"
EXPLAIN = "explain-config"
SIMULATE = "simulate"
#: Share of cases per target: a simulation costs several cycles.
WEIGHTS = {CYCLE: 0.75, EXPLAIN: 0.17, SIMULATE: 0.08}


@dataclass(frozen=True, slots=True)
class Mutation:
    """One mutation of one file: its name (in :data:`~pumice.fuzz.mutations.TREE` or
    ``TEXT``) and its own seed, so that dropping another one leaves it as it was."""

    file: str
    name: str
    seed: str


@dataclass(slots=True)
class Case:
    """The files of a case (name -> bytes, written into the case's directory), the
    command's arguments (file names relative to that directory) and what was done."""

    seed: int
    index: int
    target: str
    origin: str
    base: dict[str, bytes]
    plan: tuple[Mutation, ...]
    args: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)

    def with_plan(self, plan: tuple[Mutation, ...]) -> Case:
        """The same case with only ``plan``'s mutations (for minimizing a finding)."""
        return build(
            Case(self.seed, self.index, self.target, self.origin, self.base, plan, self.args)
        )


def _target(rng: random.Random) -> str:
    x = rng.random()
    for name, weight in WEIGHTS.items():
        if x < weight:
            return name
        x -= weight
    return CYCLE


def make_case(corpus: Corpus, seed: int, index: int) -> Case:
    """Case ``index`` of the run with ``seed``."""
    rng = random.Random(f"pumice-fuzz/{seed}/{index}")
    target = _target(rng)
    base: dict[str, bytes] = {}
    if target == CYCLE:
        snap, config = rng.choice(corpus.snapshots)
        base["snapshot.yaml"] = snap.read_bytes()
        args: tuple[str, ...] = ("cycle", "snapshot.yaml")
        if config is not None:
            base["config.yaml"] = config.read_bytes()
            args += ("--config", "config.yaml")
        origin = _shown(snap)
        files = ["snapshot.yaml"] * 4 + (["config.yaml"] if config is not None else [])
    elif target == EXPLAIN:
        config = rng.choice(corpus.configs)
        base["config.yaml"] = config.read_bytes()
        args = ("explain-config", "config.yaml", "--format", rng.choice(["text", "json"]))
        origin, files = _shown(config), ["config.yaml"]
    else:
        cluster, workload, origin = rng.choice(corpus.simulations)
        base["cluster.yaml"], base["workload.yaml"] = cluster, workload
        args = ("simulate", "--cluster", "cluster.yaml", "workload.yaml", "--out", "report")
        args += ("--no-progress",)
        files = ["cluster.yaml", "workload.yaml"]
    plan = []
    for k in range(rng.choice([1, 1, 1, 2, 2, 3])):
        text = rng.random() < 0.3
        table = mutations.TEXT if text else mutations.TREE
        name = rng.choice(sorted(table))
        plan.append(Mutation(rng.choice(files), name, f"{seed}/{index}/{k}"))
    return build(Case(seed, index, target, origin, base, tuple(plan), args))


def _shown(path: Any) -> str:
    parts = str(path).split("/")
    return "/".join(parts[-4:])


def build(case: Case) -> Case:
    """Apply the case's plan to its base files: tree mutations first (on the parsed
    documents), then text mutations (on the bytes)."""
    files = dict(case.base)
    done: list[str] = []
    tree = [m for m in case.plan if m.name in mutations.TREE]
    text = [m for m in case.plan if m.name in mutations.TEXT]
    for name in sorted({m.file for m in tree}):
        docs = list(yaml.load_all(files[name], Loader=yaml.CSafeLoader))
        for m in (m for m in tree if m.file == name):
            done.append(f"{name}: {mutations.TREE[m.name](random.Random(m.seed), docs)}")
        files[name] = mutations.dump(docs)
    for m in text:
        files[m.file], what = mutations.TEXT[m.name](random.Random(m.seed), files[m.file])
        done.append(f"{m.file}: {what}")
    case.files, case.done = files, done
    return case


def warm_cases(corpus: Corpus) -> list[Case]:
    """One unmutated case per target, run once before the fuzzing starts."""
    snap, _config = corpus.snapshots[0]
    cluster, workload, _origin = corpus.simulations[0]
    sim = ("simulate", "--cluster", "cluster.yaml", "workload.yaml", "--out", "report")
    cases = [
        Case(
            0,
            -1,
            CYCLE,
            "warm",
            {"snapshot.yaml": snap.read_bytes()},
            (),
            ("cycle", "snapshot.yaml"),
        ),
        Case(0, -1, EXPLAIN, "warm", {}, (), ("explain-config", "--format", "json")),
        Case(
            0,
            -1,
            SIMULATE,
            "warm",
            {"cluster.yaml": cluster, "workload.yaml": workload},
            (),
            (*sim, "--no-progress"),
        ),
    ]
    return [build(c) for c in cases]
