"""Volcano's job controller for ``batch.volcano.sh/v1alpha1`` Jobs, over a Store.

:class:`JobController` is the entry point; the modules each do one part: ``spec``
(the Job as typed records with Volcano's defaults), ``validate`` (what Volcano's
admission webhook refuses), ``policy`` and ``observe`` (events and the actions they call
for), ``state`` (the state machine), ``pods`` (PodGroup and pods), ``plugins`` (env,
svc, ssh, mpi, pytorch) and ``record`` (Kubernetes Events).
"""

from pumice.controllers.job.controller import JobController

__all__ = ["JobController"]
