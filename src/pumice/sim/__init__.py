"""The simulator behind ``pumice simulate``: workloads, a simulated cluster, a virtual clock.

Workloads (what arrives and how long it runs) come from :mod:`pumice.sim.loader` (files),
:mod:`pumice.sim.synthetic` (generated, calibrated to published GPU-cluster traces) and
:mod:`pumice.sim.traces` (importers for public traces); the cluster from
:mod:`pumice.sim.cluster_spec`.
"""
