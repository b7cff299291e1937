"""What `pumice cycle` says of a snapshot must be true of the cluster it came from:
finished pods wait for nothing, and an object a cluster holds but pumice cannot read is
skipped (as `pumice run` skips it) rather than failing the replay."""

from __future__ import annotations

import orjson
import pytest
import yaml
from tests.kit import node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cli import main
from pumice.cluster.memory import MemoryCluster
from pumice.errors import InputError
from pumice.scheduler import Scheduler


def _build(*objects: dict):
    return build_snapshot([SourcedObject(o, "snap.yaml") for o in objects])


def _served(obj: dict) -> dict:
    """``obj`` as an API server gives it back (kubectl get -o yaml, a dump)."""
    obj["metadata"]["resourceVersion"] = "42"
    return obj


def test_finished_pods_of_a_deleted_podgroup_are_no_pending_job() -> None:
    done = [pod(f"d-{i}", group="done", node="n1", phase=p)
            for i, p in enumerate(("Succeeded", "Failed"))]  # fmt: skip
    snap = _build(queue(), node("n1"), *done, pod("w-0", group="wait"))
    assert set(snap.blocked) == {"default/wait"}
    pending = Scheduler.from_file(None).cycle(snap).pending
    assert "default/done" not in pending and "does not exist" in pending["default/wait"]


def test_bare_pods_all_finished_are_a_completed_job() -> None:
    snap = _build(queue(), node("n1"), pod("a", node="n1", phase="Succeeded"))
    assert [j.phase for j in snap.jobs.values()] == ["Completed"]


def test_an_invalid_object_from_a_cluster_is_skipped_and_said() -> None:
    bad = _served(podgroup("neg", min_member=-1))
    snap = _build(queue(), node("n1"), bad, pod("neg-0", group="neg"))
    assert "spec.minMember" in snap.skipped["PodGroup default/neg"]
    assert "is invalid" in snap.blocked["default/neg"]
    assert "does not exist" not in snap.blocked["default/neg"]
    decisions = Scheduler.from_file(None).cycle(snap)
    assert "PodGroup default/neg" in decisions.to_json()["skipped"]


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_pumice_cycle_says_a_skipped_object_once(fmt: str, tmp_path, capsys) -> None:
    """With JSON output the skipped object is a note on stderr (and a ``skipped`` key);
    the table lists it in its own section instead of repeating it as a note."""
    bad = _served(podgroup("neg", min_member=-1))
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([queue(), node("n1"), bad, pod("neg-0", group="neg")]))
    assert main(["cycle", str(path), "--format", fmt]) == 0
    out, err = capsys.readouterr()
    if fmt == "json":
        assert "PodGroup default/neg" in orjson.loads(out)["skipped"]
        assert err.count("PodGroup default/neg skipped, as pumice run skips it") == 1
    else:
        assert "Skipped: objects pumice cannot read (1)" in out
        assert "PodGroup default/neg" not in err


def test_a_queue_loop_from_a_cluster_leaves_the_queues_out() -> None:
    a, b = _served(queue("a")), _served(queue("b"))
    a["spec"]["parent"], b["spec"]["parent"] = "b", "a"
    snap = _build(queue(), a, b, node("n1"))
    assert "default" in snap.queues and not {"a", "b"} & set(snap.queues)
    assert snap.skipped


def test_the_same_object_written_by_hand_is_an_error() -> None:
    with pytest.raises(InputError) as err:
        _build(queue(), node("n1"), podgroup("neg", min_member=-1))
    assert (err.value.file, err.value.obj, err.value.field) == (
        "snap.yaml",
        "PodGroup default/neg",
        "spec.minMember",
    )


def test_the_cache_says_invalid_until_fixed_and_finished_orphans_wait_for_nothing() -> None:
    """pumice run's cache: an invalid PodGroup's pods are explained as waiting for it to
    be fixed (not created), until it is; a finished pod whose PodGroup is gone is no
    pending job."""
    store = MemoryCluster()
    done = pod("done-0", group="done", node="n1", phase="Succeeded")
    store.create_all(
        [queue(), node("n1"), podgroup("neg", min_member=-1), pod("neg-0", group="neg"), done]
    )
    seen: list[str] = []
    cache = SchedulerCache(store, on_bad=lambda kind, key, obj, err: seen.append(f"{kind} {key}"))
    snap = cache.snapshot()
    assert seen == ["PodGroup default/neg"]
    assert (
        "is invalid" in snap.blocked["default/neg"]
        and "spec.minMember" in snap.blocked["default/neg"]
    )
    assert "default/done" not in snap.blocked
    assert set(snap.skipped) == {"PodGroup default/neg"}
    store.modify("PodGroup", "default/neg", lambda o: o["spec"].update(minMember=1))
    snap = cache.snapshot()
    assert not snap.skipped and "default/neg" not in snap.blocked and "default/neg" in snap.jobs
