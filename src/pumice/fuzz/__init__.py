"""``pumice fuzz``: mutated real inputs through pumice's own commands.

Every case takes real files (snapshots, scheduler configurations, simulator clusters and
workloads shipped with pumice and its tests), mutates them, and runs one command on
them in a forked child with a time and memory limit. A case must end in decisions (exit
0) or one line of error with exit status 2; the decisions of ``pumice cycle`` must also
keep the scheduler's invariants in exact arithmetic. Anything else is a finding, saved
with its input files so that it can be replayed.

Modules, one job each: :mod:`~pumice.fuzz.corpus` (the seed inputs),
:mod:`~pumice.fuzz.mutations` (how an input is damaged), :mod:`~pumice.fuzz.cases` (a
case from a seed and an index), :mod:`~pumice.fuzz.runner` (one case in a child
process), :mod:`~pumice.fuzz.invariants` (what decisions must respect),
:mod:`~pumice.fuzz.verdict` (a run's outcome as a finding class),
:mod:`~pumice.fuzz.report` (the tally) and :mod:`~pumice.fuzz.command` (the CLI).
"""
