"""Fixtures shared by every test package: a real Kubernetes control plane.

``control_plane`` gives each test its own etcd and kube-apiserver (fresh data, free
ports), so tests cannot see each other's objects and can run in parallel workers. Tests
that use it are marked ``k8s`` (deselect them with ``-m "not k8s"``) and skip, saying how
to get the binaries, when kube-apiserver or etcd cannot be found: set PUMICE_K8S_BIN to
a folder holding kube-apiserver (or kube-apiserver.xz) and etcd, such as the one
setup-envtest fills (KUBEBUILDER_ASSETS is read too); etcd may be on PATH instead
(Debian: apt-get install etcd-server).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pumice.sandbox import ControlPlane, missing_binaries, service_account
from pumice.sandbox.binaries import HOW_TO, find_binary
from pumice.sandbox.process import Child

#: The identity pumice's scheduler runs as when deployed with deploy/.
SCHEDULER_USER, SCHEDULER_GROUPS = service_account("pumice-system", "pumice")

_FIXTURES = frozenset({"control_plane", "rbac_control_plane", "make_control_plane", "kube_admin"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a control plane fixture ``k8s``."""
    for item in items:
        if _FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.k8s)


#: How to get the binaries, in a line (the skip reasons carry the whole of it).
K8S_HINT = "set PUMICE_K8S_BIN to a folder holding kube-apiserver; etcd from Debian's etcd-server"


def skip_reason(report: pytest.TestReport) -> str:
    """Why a test skipped, in a line: a missing binary's long explanation is said short."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    if HOW_TO in reason:  # "no Kubernetes control plane: kube-apiserver not found (...): HOW"
        reason = f"{reason.split(': ', 1)[0]} ({K8S_HINT})"
    return reason


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how many tests skipped and why, grouped by reason, so a run without the
    Kubernetes binaries does not look like a full one. Printed before pytest's own last
    line ("N passed, M skipped in ..."), which stays the last."""
    reasons = Counter(
        skip_reason(r) for r in terminalreporter.stats.get("skipped", ()) if r.skipped
    )
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count} test{'s' * (count != 1)} skipped: {reason}")


@pytest.fixture
def plugin_pumice_lacks(monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a Volcano plugin pumice does not implement. pumice implements every
    plugin Volcano registers today; what it does with one it lacks (a configuration
    written for another Volcano release: load, one warning, skip) is tested with
    ``reservation``, a plugin of older Volcano releases, entered in the catalog as
    Volcano's own plugins are."""
    from pumice.conf import catalog

    entry = catalog.Entry(
        "reservation",
        {},
        "no node is reserved for the job that has waited longest: it waits for room as "
        "any other job does",
    )
    monkeypatch.setitem(catalog.PLUGINS, entry.name, entry)
    return entry.name


@pytest.fixture(scope="session")
def k8s_binaries() -> None:
    """Skip (with how to get them) when kube-apiserver or etcd is missing."""
    missing = missing_binaries("kube-apiserver", "etcd")
    if missing:
        pytest.skip(f"no Kubernetes control plane: {missing}")


@pytest.fixture
def make_control_plane(k8s_binaries: None) -> Iterator[Callable[..., ControlPlane]]:
    """A factory: ``make_control_plane(**ControlPlane_kwargs)`` starts one, stopped after."""
    planes: list[ControlPlane] = []

    def make(**kwargs: Any) -> ControlPlane:
        plane = ControlPlane(**kwargs)
        planes.append(plane)
        return plane.start()

    yield make
    for plane in planes:
        plane.stop()


@pytest.fixture
def control_plane(make_control_plane: Callable[..., ControlPlane]) -> ControlPlane:
    """A fresh etcd + kube-apiserver for this test, authorizing everything."""
    return make_control_plane()


@pytest.fixture
def rbac_control_plane(make_control_plane: Callable[..., ControlPlane]) -> ControlPlane:
    """A fresh control plane enforcing RBAC, with a token for pumice's ServiceAccount
    identity (``kubeconfig_for(SCHEDULER_USER)``); nothing is bound to it until a test
    applies deploy/."""
    return make_control_plane(
        authorization_mode="RBAC", identities={SCHEDULER_USER: SCHEDULER_GROUPS}
    )


@pytest.fixture(scope="session")
def kcm_binary() -> str:
    """kube-controller-manager's path; skip (saying where it is looked for) without it."""
    missing = missing_binaries("kube-apiserver", "etcd", "kube-controller-manager")
    if missing:
        pytest.skip(f"no kube-controller-manager (needed for ownerReference cascades): {missing}")
    return str(find_binary("kube-controller-manager"))


@pytest.fixture
def controller_manager(kcm_binary: str, tmp_path: Any) -> Iterator[Callable[..., Child]]:
    """A factory: ``controller_manager(plane, "namespace,garbagecollector", *flags)`` runs
    kube-controller-manager with only those controllers against ``plane``; stopped after
    the test. Its log is in tmp_path."""
    children: list[Child] = []

    def start(plane: ControlPlane, controllers: str, *flags: str) -> Child:
        argv = [
            kcm_binary, f"--kubeconfig={plane.kubeconfig}",
            f"--authentication-kubeconfig={plane.kubeconfig}",
            f"--authorization-kubeconfig={plane.kubeconfig}",
            f"--controllers={controllers}", "--leader-elect=false", "--secure-port=0",
            "--v=1", *flags,
        ]  # fmt: skip
        child = Child("kube-controller-manager", argv, tmp_path / f"kcm-{len(children)}.log")
        child.start()
        children.append(child)
        return child

    yield start
    for child in children:
        child.stop(kill=True)


@pytest.fixture
def garbage_collector(controller_manager: Callable[..., Child]) -> Callable[[ControlPlane], Child]:
    """A factory: ``garbage_collector(plane)`` runs the namespace and garbage collector
    controllers against ``plane`` (ownerReference cascades, namespace deletion)."""
    return lambda plane: controller_manager(
        plane, "namespace,garbagecollector", "--concurrent-gc-syncs=5"
    )


@pytest.fixture
def pv_controller(controller_manager: Callable[..., Child]) -> Callable[[ControlPlane], Child]:
    """A factory: ``pv_controller(plane)`` runs the PV controller against ``plane`` (it
    binds claims to the PVs the scheduler chose, as in a cluster)."""
    return lambda plane: controller_manager(plane, "persistentvolume-binder")


@pytest.fixture
def kube_admin(control_plane: ControlPlane) -> str:
    """Path of the admin kubeconfig of this test's control plane."""
    return control_plane.kubeconfig
