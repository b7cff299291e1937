"""The Queue controller over the in-memory store: state by Commands and by status,
Closing to Closed, PodGroup counts, default and root queues, hierarchies."""

from __future__ import annotations

import copy

import pytest
import yaml

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cluster.memory import MemoryCluster
from pumice.controllers.commands import new_command
from pumice.controllers.manager import Manager
from pumice.controllers.queue import QueueController, next_state
from pumice.controllers.store import MemoryStore
from pumice.scheduler import Scheduler

QUEUES = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1, reclaimable: true}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 2}
status:
  allocated: {cpu: "4", memory: 8Gi}
"""


def podgroup(name: str, queue: str | None, phase: str | None, ns: str = "ml") -> dict:
    pg: dict = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": 1},
    }
    if queue is not None:
        pg["spec"]["queue"] = queue
    if phase is not None:
        pg["status"] = {"phase": phase}
    return pg


class Rig:
    """A store, the controller and its manager, with the clock in our hands."""

    def __init__(self, text: str = QUEUES, *, podgroups=(), **kw) -> None:
        self.t = 0.0
        self.cluster = MemoryCluster(clock=lambda: self.t)
        self.store = MemoryStore(self.cluster)
        for obj in [*yaml.safe_load_all(text), *podgroups] if text else podgroups:
            self.store.create(obj)
        self.controller = QueueController(self.store, **kw)
        self.manager = Manager(self.store, [self.controller])
        self.manager.step()

    def status(self, name: str) -> dict:
        return self.cluster.get("Queue", name).get("status") or {}

    def state(self, name: str) -> str | None:
        return self.status(name).get("state")

    def command(self, queue: str, action: str, name: str = "") -> str:
        obj = self.cluster.get("Queue", queue)
        cmd = new_command(obj, action, name=name or f"{queue}-{action.lower()}-{int(self.t)}")
        self.store.create(cmd)
        self.manager.step()
        return f"default/{cmd['metadata']['name']}"

    def events(self) -> list[tuple[str, str, str, str]]:
        """Events in the order they were made (the store lists them by name)."""
        return [
            (e["involvedObject"]["name"], e["type"], e["reason"], e["message"])
            for e in sorted(
                self.cluster.list("Event"),
                key=lambda e: int(e["metadata"]["uid"].rsplit("-", 1)[1]),
            )
        ]

    def later(self, seconds: float) -> None:
        self.t += seconds
        self.manager.step()


@pytest.mark.parametrize(
    ("state", "action", "groups", "after"),
    [
        ("", "", 0, "Open"),
        ("Open", "CloseQueue", 0, "Closed"),
        ("Open", "CloseQueue", 2, "Closing"),
        ("Closing", "", 1, "Closing"),
        ("Closing", "", 0, "Closed"),
        ("Closing", "OpenQueue", 3, "Open"),
        ("Closed", "OpenQueue", 0, "Open"),
        ("Closed", "CloseQueue", 4, "Closed"),
        ("Closed", "", 4, "Closed"),
        ("Unknown", "", 1, "Unknown"),
        ("Unknown", "CloseQueue", 1, "Closing"),
    ],
)
def test_state_machine_is_volcanos(state, action, groups, after):
    """Volcano's queue states: open, close (Closing while PodGroups are left), sync."""
    assert next_state(state, action, groups) == after


def test_a_queue_without_state_is_written_open_with_its_counts():
    """A new queue gets status.state Open and zero counts; status.allocated, the
    scheduler's field, is left as it was."""
    rig = Rig()
    assert rig.status("research") == {
        "allocated": {"cpu": "4", "memory": "8Gi"},
        "state": "Open",
        "pending": 0,
        "inqueue": 0,
        "running": 0,
        "unknown": 0,
        "completed": 0,
    }


def test_counts_follow_podgroup_phases():
    """Counts by phase; a PodGroup without phase is Pending, one without queue is the
    default queue's; a phase change and a deletion move the counts."""
    pgs = [
        podgroup("a", "research", "Running"),
        podgroup("b", "research", "Inqueue"),
        podgroup("c", "research", None),
        podgroup("d", "research", "Completed"),
        podgroup("e", None, "Unknown"),
    ]
    rig = Rig(podgroups=pgs)
    counts = ("pending", "inqueue", "running", "unknown", "completed")
    assert [rig.status("research")[k] for k in counts] == [1, 1, 1, 0, 1]
    assert [rig.status("default")[k] for k in counts] == [0, 0, 0, 1, 0]
    rig.cluster.update_podgroup_status("ml/c", "Running")
    rig.store.delete("PodGroup", "ml/d")
    rig.manager.step()
    assert [rig.status("research")[k] for k in counts] == [0, 1, 2, 0, 0]


def test_a_podgroup_moving_queues_is_counted_in_its_new_queue_only():
    """Changing spec.queue moves the PodGroup from one queue's counts to the other's."""
    rig = Rig(podgroups=[podgroup("a", "research", "Running")])
    rig.store.patch("PodGroup", "ml/a", {"spec": {"queue": "default"}})
    rig.manager.step()
    assert rig.status("research")["running"] == 0
    assert rig.status("default")["running"] == 1


def test_close_by_command_waits_for_the_last_podgroup():
    """CloseQueue on a queue with PodGroups: Closing (the Command consumed, an Event
    said); Closed once its last PodGroup is deleted, whatever phase it was in."""
    pgs = [podgroup("a", "research", "Running"), podgroup("b", "research", "Completed")]
    rig = Rig(podgroups=pgs)
    cmd = rig.command("research", "CloseQueue")
    assert rig.state("research") == "Closing"
    assert rig.cluster.get("Command", cmd) is None
    assert rig.events() == [("research", "Normal", "CloseQueue", "Close queue succeed")]
    rig.store.delete("PodGroup", "ml/a")
    rig.manager.step()
    assert rig.state("research") == "Closing"  # a Completed PodGroup still holds it
    rig.store.delete("PodGroup", "ml/b")
    rig.manager.step()
    assert rig.state("research") == "Closed"


def test_close_and_open_an_empty_queue():
    """CloseQueue on a queue without PodGroups closes it at once; OpenQueue opens it."""
    rig = Rig()
    rig.command("research", "CloseQueue")
    assert rig.state("research") == "Closed"
    rig.command("research", "OpenQueue")
    assert rig.state("research") == "Open"
    assert [e[2:] for e in rig.events()] == [
        ("CloseQueue", "Close queue succeed"),
        ("OpenQueue", "Open queue succeed"),
    ]
    assert rig.cluster.list("Command") == []


def test_commands_in_one_step_apply_oldest_first():
    """Close then open, created together: the queue ends Open."""
    rig = Rig()
    for i, action in enumerate(("CloseQueue", "OpenQueue")):
        obj = rig.cluster.get("Queue", "research")
        rig.store.create(new_command(obj, action, name=f"research-{i}"))
    rig.manager.step()
    assert rig.state("research") == "Open"
    assert rig.cluster.list("Command") == []


def test_commands_for_jobs_are_left_to_the_job_controller():
    """A Command whose target is a Volcano Job is not this controller's to consume."""
    rig = Rig()
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "mpi", "namespace": "ml", "uid": "j1"},
    }
    rig.store.create(new_command(job, "AbortJob", name="mpi-abortjob-x"))
    rig.manager.step()
    assert rig.cluster.get("Command", "ml/mpi-abortjob-x") is not None


def test_a_command_for_a_missing_queue_is_dropped():
    """No queue of that name: the Command is consumed, nothing else happens."""
    rig = Rig()
    ghost = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "ghost"},
    }
    rig.store.create(new_command(ghost, "CloseQueue", name="ghost-closequeue-x"))
    rig.manager.step()
    assert rig.cluster.list("Command") == []
    assert rig.cluster.get("Queue", "ghost") is None


def test_state_written_in_status_is_taken_as_it_says():
    """A snapshot's queues: Closed stays Closed, Closing with no PodGroup left is
    Closed, Closing with one is Closing."""
    text = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: shut}
status: {state: Closed}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: draining}
status: {state: Closing}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: drained}
status: {state: Closing}
"""
    rig = Rig(
        text, podgroups=[podgroup("a", "draining", "Running"), podgroup("b", "shut", "Running")]
    )
    assert rig.state("shut") == "Closed"
    assert rig.state("draining") == "Closing"
    assert rig.state("drained") == "Closed"


def test_default_queue_created_when_missing_and_root_with_hierarchy():
    """No queues at all: the default queue appears (weight 1, reclaimable); root only
    with hierarchy; deleting the default queue brings it back."""
    rig = Rig("")
    assert [q["metadata"]["name"] for q in rig.cluster.list("Queue")] == ["default"]
    assert rig.cluster.get("Queue", "default")["spec"] == {"weight": 1, "reclaimable": True}
    assert rig.state("default") == "Open"
    rig.store.delete("Queue", "default")
    rig.manager.step()
    assert rig.cluster.get("Queue", "default") is not None

    tree = Rig("", hierarchy=True, default_queue="batch")
    assert [q["metadata"]["name"] for q in tree.cluster.list("Queue")] == ["batch", "root"]
    assert tree.cluster.get("Queue", "root")["spec"] == {"weight": 1, "reclaimable": False}


TREE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: root}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: eng}
spec: {parent: root}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: eng-ml}
spec: {parent: eng}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: eng-web}
spec: {parent: eng}
status: {state: Closed}
"""


def test_closing_a_parent_closes_its_children_and_opening_reopens_them():
    """Close eng: eng-ml closes too, marked closed by its parent; eng-web was closed by
    itself and stays so when eng opens again, while eng-ml reopens."""
    rig = Rig(TREE, podgroups=[podgroup("a", "eng-ml", "Running")], hierarchy=True)
    rig.command("eng", "CloseQueue")
    assert rig.state("eng") == "Closed"
    assert rig.state("eng-ml") == "Closing"
    annotations = rig.cluster.get("Queue", "eng-ml")["metadata"]["annotations"]
    assert annotations == {"volcano.sh/closed-by-parent": "true"}
    rig.command("eng", "OpenQueue")
    assert rig.state("eng") == "Open"
    assert rig.state("eng-ml") == "Open"
    assert rig.cluster.get("Queue", "eng-ml")["metadata"]["annotations"] == {
        "volcano.sh/closed-by-parent": "false"
    }
    assert rig.state("eng-web") == "Closed"


def test_a_child_of_a_closed_parent_cannot_open():
    """OpenQueue on eng-ml while eng is closed waits (the parent may be opening), then
    is dropped with a Warning saying to open the parent first."""
    rig = Rig(TREE, hierarchy=True)
    rig.command("eng", "CloseQueue")
    cmd = rig.command("eng-ml", "OpenQueue")
    assert rig.cluster.get("Command", cmd) is not None
    for _ in range(12):
        rig.later(1.0)
    assert rig.cluster.get("Command", cmd) is None
    assert rig.state("eng-ml") == "Closed"
    name, kind, reason, message = rig.events()[-1]
    assert (name, kind, reason) == ("eng-ml", "Warning", "OpenQueue")
    assert "parent queue eng is Closed; open the parent first" in message


def test_a_child_opens_when_its_parent_opens_in_time():
    """The waiting OpenQueue applies once the parent is open."""
    rig = Rig(TREE, hierarchy=True)
    rig.command("eng", "CloseQueue")
    rig.store.patch(
        "Queue", "eng-ml", {"metadata": {"annotations": {"volcano.sh/closed-by-parent": None}}}
    )
    cmd = rig.command("eng-ml", "OpenQueue")
    rig.command("eng", "OpenQueue")
    rig.later(1.0)
    assert rig.cluster.get("Command", cmd) is None
    assert rig.state("eng-ml") == "Open"


def test_root_cannot_be_closed():
    """CloseQueue on root is refused with a Warning; root stays Open."""
    rig = Rig(TREE, hierarchy=True)
    rig.command("root", "CloseQueue")
    assert rig.state("root") == "Open"
    assert rig.events()[-1][:3] == ("root", "Warning", "CloseQueue")


def test_a_closed_queue_admits_nothing_new():
    """After CloseQueue, pumice's scheduler enqueues no new PodGroup of the queue and
    binds none of its pods, and says why."""
    pgs = [podgroup("a", "research", "Running")]
    rig = Rig(podgroups=pgs)
    rig.command("research", "CloseQueue")
    assert rig.state("research") == "Closing"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}},
    }
    late = podgroup("late", "research", "Pending")
    late["spec"]["minResources"] = {"cpu": "1"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "late-0",
            "namespace": "ml",
            "annotations": {"scheduling.k8s.io/group-name": "late"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }
    objects = [node, *(copy.deepcopy(q) for q in rig.cluster.list("Queue")), late, pod]
    decisions = Scheduler.from_file(None).cycle(build_snapshot([SourcedObject(o) for o in objects]))
    assert decisions.binds == {}
    assert "queue research is Closing" in decisions.pending["ml/late"]
