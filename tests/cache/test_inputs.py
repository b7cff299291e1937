"""Inputs that give nothing are errors; odd objects are scheduled with a note saying how."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.kit import node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.load import load_objects
from pumice.errors import InputError


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("empty.yaml", ""),
        ("comments.yaml", "# nodes come later\n---\n# and pods\n"),
        ("separators.yml", "---\n---\n"),
        ("empty.json", "  \n"),
    ],
)
def test_a_file_without_objects_is_an_error(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_objects([str(path)])
    assert str(path) in str(err.value) and "holds no objects" in str(err.value)


def test_a_directory_of_comment_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("# nothing yet\n")
    with pytest.raises(InputError, match="holds no objects"):
        load_objects([str(tmp_path)])


def test_an_empty_file_beside_real_ones_and_an_empty_list_are_kept(tmp_path: Path) -> None:
    """What kubectl prints for an empty namespace, or a placeholder among the dump's
    files, is not a mistake."""
    (tmp_path / "a.yaml").write_text("")
    (tmp_path / "b.yaml").write_text(yaml.safe_dump_all([queue(), node("n1")]))
    assert len(load_objects([str(tmp_path)])) == 2
    lst = tmp_path / "list.json"
    lst.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    assert load_objects([str(lst)]) == []


def _notes(objects: list[dict]) -> list[str]:
    return build_snapshot([SourcedObject(o, "test") for o in objects]).notes


def test_a_pod_without_containers_gets_a_note() -> None:
    bare = pod("p", group="pg")
    bare["spec"]["containers"] = []
    notes = _notes([queue(), node("n1"), podgroup("pg"), bare])
    assert any("1 pod has no containers" in n and "default/p" in n for n in notes), notes


def test_an_unknown_priority_class_gets_a_note_naming_the_priority_given() -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
          "metadata": {"name": "low"}, "value": 10}  # fmt: skip
    pg = podgroup("pg")
    pg["spec"]["priorityClassName"] = "gold"
    objects = [queue(), node("n1"), pc, pg, pod("p", group="pg", priority_class="gold")]
    notes = _notes(objects)
    (note,) = [n for n in notes if "gold" in n]
    assert "names no PriorityClass" in note and "priority 0" in note
    assert "pod default/p" in note and "podgroup default/pg" in note
    known = _notes([*objects[:3], podgroup("pg"), pod("p", group="pg", priority_class="low")])
    assert not [n for n in known if "PriorityClass" in n]


@pytest.mark.parametrize(
    ("where", "value"),
    [("cpu", "1180591620717411303424"), ("memory", "1e400"), ("memory", 10**400)],
)
def test_a_quantity_too_large_names_object_and_field(where: str, value: object) -> None:
    n = node("n1")
    n["status"]["allocatable"][where] = value
    with pytest.raises(InputError) as err:
        build_snapshot([SourcedObject(o, "snap.yaml") for o in [queue(), n]])
    text = str(err.value)
    assert "Node n1" in text and f"status.allocatable.{where}" in text and "too large" in text


def test_pumice_cycle_exits_2_on_nothing_and_on_a_huge_quantity(tmp_path: Path, capsys) -> None:
    """As a user meets it: one line naming the file (and object and field), exit 2."""
    from pumice.cli import main

    empty = tmp_path / "snapshot.yaml"
    empty.write_text("# kubectl output goes here\n")
    assert main(["cycle", str(empty)]) == 2
    assert "snapshot.yaml: holds no objects" in capsys.readouterr().err
    n = node("n1")
    n["status"]["allocatable"]["memory"] = "1e400"
    huge = tmp_path / "huge.yaml"
    huge.write_text(yaml.safe_dump_all([queue(), n]))
    assert main(["cycle", str(huge)]) == 2
    err = capsys.readouterr().err
    assert "Node n1" in err and "status.allocatable.memory" in err and "Traceback" not in err


def test_an_item_that_is_not_an_object_is_named_by_document_and_item(tmp_path: Path) -> None:
    """Lists inside lists are read without recursing, and a scalar among them is
    refused naming where it is, instead of failing later on a missing ``.get``."""
    path = tmp_path / "dump.yaml"
    items = [node("n1"), [queue(), "oops"]]
    path.write_text(yaml.safe_dump_all([queue(), {"kind": "List", "items": items}]))
    with pytest.raises(InputError) as err:
        load_objects([str(path)])
    assert err.value.render() == (
        f"{path}: document 2 items[1][1]: expected an object (a map), got 'oops'"
    )


def test_kind_list_nested_deep_in_lists_reads_without_recursion_limits(tmp_path: Path) -> None:
    doc: object = node("n1")
    for _ in range(150):  # (the reader's depth limit is 200)
        doc = [doc]
    path = tmp_path / "deep.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert [o.obj["metadata"]["name"] for o in load_objects([str(path)])] == ["n1"]
