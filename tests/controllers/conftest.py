"""Fixtures of the controllers' real-API-server tests.

Each such module starts its own control plane as a ``plane`` fixture (with what it
needs: CRDs, a kubelet, a garbage collector); ``admin`` and ``ns`` here use whichever
``plane`` the requesting module defines.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from tests.run import kube_kit as k

from pumice.cluster.kube_client import RESOURCES, KubeClient

_names = itertools.count()


@pytest.fixture
def admin(plane: Any) -> Iterator[KubeClient]:
    """A client with the control plane's admin credentials."""
    client = KubeClient.from_config(plane.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def ns(admin: KubeClient) -> str:
    """A namespace of this test's own (a module's tests share its API server)."""
    name = f"t{next(_names)}"
    k.ok(
        admin.request(
            "POST",
            RESOURCES["Namespace"].path(),
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
    )
    return name  # fmt: skip
