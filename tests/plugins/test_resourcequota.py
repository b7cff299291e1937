"""resourcequota as a user notices it: which Pending jobs enqueue admits under their
namespace's ResourceQuotas, what a refusal says, and what bad quotas say."""

from __future__ import annotations

from typing import Any

import pytest
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.errors import InputError

CONF = conf("enqueue", ["resourcequota"])


def quota(
    name: str,
    ns: str,
    hard: dict[str, str],
    used: dict[str, str] | None = None,
    *,
    counted: bool = True,
) -> dict[str, Any]:
    """A ResourceQuota; ``counted``: the quota controller has copied ``hard`` into
    its status."""
    status: dict[str, Any] = {}
    if counted:
        status["hard"] = dict(hard)
    if used is not None:
        status["used"] = used
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"hard": hard},
        "status": status,
    }


def job(name: str, ns: str, min_resources: dict | None, created: str) -> dict[str, Any]:
    return podgroup(name, ns=ns, phase="Pending", min_resources=min_resources, created=created)


def phases(d) -> dict[str, str]:
    return {k: v.phase for k, v in d.podgroups.items()}


def test_a_job_over_its_namespace_quota_stays_pending_and_says_why() -> None:
    objs = [
        queue(),
        node("n1", cpu="64"),
        quota("compute", "team-a", {"requests.cpu": "10"}, {"requests.cpu": "8"}),
        job("big", "team-a", {"cpu": "4"}, "2026-01-01T00:00:00Z"),
        job("small", "team-a", {"cpu": "2"}, "2026-01-01T00:00:01Z"),
        job("other", "team-b", {"cpu": "40"}, "2026-01-01T00:00:02Z"),
    ]
    d = run(objs, CONF)
    got = phases(d)
    assert got["team-a/big"] == "Pending"
    assert got["team-a/small"] == "Inqueue"
    assert got["team-b/other"] == "Inqueue"  # (no quota in team-b)
    assert d.pending["team-a/big"] == (
        "not enqueued: resourcequota: ResourceQuota team-a/compute: requests.cpu would be "
        "12 of 10 "
        "(this job's minResources 4, already used 8)"
    )


def test_jobs_admitted_earlier_in_the_cycle_count() -> None:
    """Three 2-cpu jobs against 5 cpu: two are admitted, the third is told of them."""
    objs = [queue(), node("n1", cpu="64"), quota("q", "ns", {"cpu": "5"})]
    objs += [job(f"j{i}", "ns", {"cpu": "2"}, f"2026-01-01T00:00:0{i}Z") for i in range(3)]
    d = run(objs, CONF)
    assert [phases(d)[f"ns/j{i}"] for i in range(3)] == ["Inqueue", "Inqueue", "Pending"]
    assert (
        "cpu would be 6 of 5 (this job's minResources 2, already used 0, admitted this "
        in (d.pending["ns/j2"])
    )


def test_every_quota_of_the_namespace_is_checked_and_the_first_exceeded_named() -> None:
    objs = [
        queue(),
        node("n1", cpu="64", memory="256Gi"),
        quota("a-cpu", "ns", {"requests.cpu": "100"}),
        quota("b-mem", "ns", {"requests.memory": "8Gi", "pods": "10"}, {"pods": "10"}),
        job("j", "ns", {"cpu": "4", "memory": "10Gi", "pods": "1"}, "2026-01-01T00:00:00Z"),
    ]
    why = run(objs, CONF).pending["ns/j"]
    assert "ResourceQuota ns/b-mem: pods would be 11 of 10" in why
    assert "requests.memory would be 10Gi of 8Gi" in why
    assert "a-cpu" not in why


def test_only_the_resources_the_minresources_name_are_checked() -> None:
    """limits.cpu is used up, but the job's minResources say nothing of limits; a
    job whose minResources (written by Volcano's job controller) name limits.cpu is
    refused."""
    q = quota("q", "ns", {"limits.cpu": "4", "requests.cpu": "10"}, {"limits.cpu": "4"})
    objs = [
        queue(),
        node("n1", cpu="64"),
        q,
        job("plain", "ns", {"cpu": "1"}, "2026-01-01T00:00:00Z"),
    ]
    assert phases(run(objs, CONF))["ns/plain"] == "Inqueue"
    asks = {"cpu": "1", "requests.cpu": "1", "limits.cpu": "2", "count/pods": "1"}
    objs[-1] = job("vc", "ns", asks, "2026-01-01T00:00:00Z")
    d = run(objs, CONF)
    assert "limits.cpu would be 6 of 4" in d.pending["ns/vc"]


def test_a_job_without_minresources_is_admitted() -> None:
    objs = [
        queue(),
        node("n1"),
        quota("q", "ns", {"cpu": "0"}),
        job("j", "ns", None, "2026-01-01T00:00:00Z"),
    ]
    assert phases(run(objs, CONF))["ns/j"] == "Inqueue"


def test_spec_hard_is_read_until_the_quota_controller_counts_the_quota() -> None:
    """Volcano reads status.hard; a quota not counted yet (no status.hard) is read by its
    spec.hard, and once counted by its status (the controller's copy)."""
    j = job("j", "ns", {"cpu": "4"}, "2026-01-01T00:00:00Z")
    fresh = quota("q", "ns", {"cpu": "2"}, counted=False)
    assert phases(run([queue(), node("n1"), fresh, j], CONF))["ns/j"] == "Pending"
    counted = quota("q", "ns", {"cpu": "2"})
    counted["status"]["hard"] = {"cpu": "8"}
    assert phases(run([queue(), node("n1"), counted, j], CONF))["ns/j"] == "Inqueue"


def test_a_bare_pod_counts_its_requests() -> None:
    """A pod with no PodGroup is a job of its requests (and one pod)."""
    objs = [
        queue(),
        node("n1", cpu="8"),
        quota("q", "default", {"pods": "0"}),
        pod("lone", cpu="1"),
    ]
    d = run(objs, conf("enqueue, allocate", ["resourcequota"], ["predicates"]))
    assert d.binds == {}


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        ("spec", {"cpu": "lots"}, "spec.hard.cpu"),
        ("spec", {"memory": "-1Gi"}, "spec.hard.memory"),
        ("used", {"requests.cpu": "x"}, "status.used.requests.cpu"),
        ("status", {"cpu": []}, "status.hard.cpu"),
    ],
)
def test_a_bad_quota_is_refused_naming_the_field(where: str, value: dict, field: str) -> None:
    obj = quota("q", "ns", {"cpu": "1"})
    if where == "spec":
        obj["spec"]["hard"] = value
    elif where == "used":
        obj["status"]["used"] = value
    else:
        obj["status"]["hard"] = value
    with pytest.raises(InputError) as err:
        build_snapshot([SourcedObject(queue(), "t"), SourcedObject(obj, "t")])
    assert field in str(err.value)
    assert "q" in str(err.value)


def test_a_bad_minresources_quantity_is_refused_naming_the_field() -> None:
    pg = job("j", "ns", {"requests.cpu": "many"}, "2026-01-01T00:00:00Z")
    with pytest.raises(InputError) as err:
        build_snapshot([SourcedObject(queue(), "t"), SourcedObject(pg, "t")])
    assert "spec.minResources.requests.cpu" in str(err.value)


def test_the_plugin_takes_no_arguments() -> None:
    from pumice.conf.config import parse_config
    from pumice.scheduler import Scheduler

    text = CONF.replace("- name: resourcequota", "- name: resourcequota\n    arguments: {x: 1}")
    import yaml

    with pytest.raises(InputError, match="unknown argument 'x'"):
        Scheduler.create(parse_config(yaml.safe_load(text)))
