"""Upper bounds on sizes a user writes, refused with a clear message when exceeded.

Each bound is far above any real cluster or workload, and low enough that what pumice
builds from a size (a pod per replica, a node per count, a timestamp per second of
simulated time) fits in memory and in a date. Without them a typo of a few extra digits
(``replicas: 1000000000``, ``duration: 1e20h``) is a memory blow-up, or an overflow
deep inside a run, instead of one line naming the field.
"""

from __future__ import annotations

#: Pods of one job (all its tasks' replicas together). The largest training jobs run
#: tens of thousands of pods.
MAX_JOB_PODS = 100_000

#: Nodes of one group of a compact cluster file (``count``), and of a cluster in all.
MAX_NODES = 100_000

#: Seconds of simulated time an arrival or a duration may be: 100 years (a date stays
#: within what :mod:`datetime` writes, with room for every retry and backoff after it).
MAX_SIM_SECONDS = 100 * 365 * 24 * 3600
