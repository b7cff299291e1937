"""The one boundary between pumice and a cluster.

:mod:`pumice.cluster.protocol` states what the scheduler needs from a cluster (list and
watch objects, bind, evict, write podgroup status); :mod:`pumice.cluster.memory` is the
in-memory implementation used by ``pumice simulate`` and the tests. A Kubernetes API
client (``pumice run``) will be the second implementation.
"""
