"""Faults a real cluster brings: the API server restarting, the scheduler dying in the
middle of a gang, a relist after the watch fell behind, a leader lost. Whatever
happens, no pod is lost, none is bound twice and no gang is left half bound."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from tests.run import kube_kit as k

from pumice.cluster.informer import Informer
from pumice.cluster.kube_client import KubeClient
from pumice.cluster.protocol import ADDED, DELETED, MODIFIED
from pumice.run.leader import LeaderElector
from pumice.run.runner import RunOptions

pytestmark = pytest.mark.k8s

FAST_LEASE = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.2}


class _Dead:
    """An elector that has lost everything: no lease, nothing to release."""

    def start(self) -> None: ...

    def is_leader(self) -> bool:
        return False

    def stop(self, release: bool = True) -> None: ...


def _no_half_gangs(client: KubeClient, gangs: dict[str, int]) -> None:
    placed = k.bound(client)
    for name, size in gangs.items():
        n = sum(1 for pod in placed if pod.startswith(f"{name}-"))
        assert n in (0, size), f"gang {name}: {n} of {size} bound"


def test_the_api_server_restarting_mid_run_loses_nothing(kube, shared_plane):
    client, kubeconfig = kube
    k.nodes(client, 4, cpu="4")
    k.gang(client, "before", 4, cpu="1")
    with k.running(kubeconfig) as runner:
        k.wait_for("the first gang bound", lambda: len(k.bound(client)) == 4)
        shared_plane.restart_apiserver()
        k.gang(client, "after", 4, cpu="1")
        k.wait_for("the second gang bound", lambda: len(k.bound(client)) == 8, timeout=60)
        k.wait_for("binds settled", lambda: runner.cluster.binds_in_flight() == 0)
        k.wait_for(
            "the cache to hold every pod",
            lambda: set(runner.cache.tasks) == {f"default/{n}" for n in k.pods(client)},
        )
        assert runner.cluster.stats.binds == 8
        assert runner.cluster.stats.bind_failures == {}
    _no_half_gangs(client, {"before": 4, "after": 4})


def test_a_scheduler_killed_mid_gang_finishes_it_after_a_restart(kube):
    client, kubeconfig = kube
    k.nodes(client, 4, cpu="4")
    allowed = threading.Semaphore(2)
    alive, dead = threading.Event(), threading.Event()
    alive.set()

    def two_then_die(post: Callable[[str, str, str], tuple[bool, str]]) -> Callable:
        """The process "dies" once two binds went out: the third bind it posts writes
        nothing, and from then on nothing else is written either. (Counting the binds
        alone: the admission's status writes and events may come first or in between.)"""

        def posting(pod_key: str, node: str, uid: str) -> tuple[bool, str]:
            if allowed.acquire(blocking=False):
                return post(pod_key, node, uid)
            alive.clear()
            dead.wait(30)
            return False, "dead"

        return posting

    opts = RunOptions(period=0.2, drain_seconds=0.2)
    with k.running(kubeconfig, options=opts) as runner:
        runner.cluster.may_write = alive.is_set
        runner.cluster._post_binding = two_then_die(runner.cluster._post_binding)
        k.gang(client, "g", 4, cpu="2")
        k.wait_for("two binds out", lambda: len(k.bound(client)) == 2)
    dead.set()
    assert len(k.bound(client)) == 2  # what a crash at that moment leaves
    with k.running(kubeconfig) as second:
        k.wait_for("the gang whole", lambda: len(k.bound(client)) == 4)
        k.wait_for("binds settled", lambda: second.cluster.binds_in_flight() == 0)
        assert second.cluster.stats.binds == 2  # only the two left; none bound twice
        assert second.cluster.stats.bind_failures == {}
    _no_half_gangs(client, {"g": 4})


def test_a_relist_is_diffed_into_the_store(kube):
    """After a watch fell out of the server's window, the new list is told as the
    difference: what appeared ADDED, what changed MODIFIED, what vanished DELETED."""
    client, _ = kube
    k.pod(client, "stays", scheduler="other")
    k.pod(client, "changes", scheduler="other")
    k.pod(client, "goes", scheduler="other")
    seen: list[tuple[str, str]] = []
    informer = Informer(
        client, "Pod", lambda t, kind, key, obj: seen.append((t, key)), stop=threading.Event()
    )
    informer._list()
    assert sorted(seen) == [(ADDED, f"default/{n}") for n in ("changes", "goes", "stays")]
    seen.clear()
    k.ok(client.request("DELETE", "/api/v1/namespaces/default/pods/goes",
                        body={"gracePeriodSeconds": 0}))  # fmt: skip
    k.ok(client.request("PATCH", "/api/v1/namespaces/default/pods/changes",
                        body={"metadata": {"labels": {"x": "y"}}},
                        content_type="application/merge-patch+json"))  # fmt: skip
    k.pod(client, "new", scheduler="other")
    k.ok(client.request("DELETE", "/api/v1/namespaces/default/pods/stays",
                        body={"gracePeriodSeconds": 0}))  # fmt: skip
    k.pod(client, "stays", scheduler="other")  # the same name, another pod
    informer._list()
    assert sorted(seen) == [
        (ADDED, "default/new"), (ADDED, "default/stays"), (DELETED, "default/goes"),
        (DELETED, "default/stays"), (MODIFIED, "default/changes"),
    ]  # fmt: skip
    assert seen.index((DELETED, "default/stays")) < seen.index((ADDED, "default/stays"))
    assert sorted(informer.store) == ["default/changes", "default/new", "default/stays"]


def test_two_replicas_one_schedules_and_the_other_takes_over(kube):
    client, kubeconfig = kube
    k.nodes(client, 4, cpu="4")

    def elector(name: str) -> LeaderElector:
        return LeaderElector(
            KubeClient.from_config(kubeconfig), namespace="default", name="pumice",
            identity=name, **FAST_LEASE,
        )  # fmt: skip

    a, b = elector("replica-a"), elector("replica-b")
    with k.running(kubeconfig, elector=a) as ra:
        a.wait_leading(10)
        with k.running(kubeconfig, elector=b) as rb:
            k.gang(client, "first", 2, cpu="1")
            k.wait_for("the first gang bound", lambda: len(k.bound(client)) == 2)
            k.wait_for("binds settled", lambda: ra.cluster.binds_in_flight() == 0)
            assert (ra.cluster.stats.binds, rb.cluster.stats.binds) == (2, 0)
            assert rb.cycles == 0  # a standby keeps its cache, never cycles
            a.stop(release=False)  # the leader dies without a word...
            ra.elector = _Dead()  # ...and its runner cannot release the lease either
            ra.stop.set()
            k.wait_for("the standby to lead", lambda: b.is_leader(), timeout=15)
            k.gang(client, "second", 2, cpu="1")
            k.wait_for("the second gang bound", lambda: len(k.bound(client)) == 4)
            k.wait_for("binds settled", lambda: rb.cluster.binds_in_flight() == 0)
            assert rb.cluster.stats.binds == 2
    _no_half_gangs(client, {"first": 2, "second": 2})
