"""The one reader of YAML/JSON text (:mod:`pumice.documents`) and the bounded
``shown`` of messages (:mod:`pumice.errors`): their limits, where they start, and
that what is under them reads as PyYAML reads it."""

from __future__ import annotations

import gc

import pytest
import yaml

from pumice import documents
from pumice.documents import MAX_DEPTH, load_json, load_one_yaml, load_yaml
from pumice.errors import InputError, shown, shown_text


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_nesting_up_to_the_limit_reads_and_one_more_level_is_refused() -> None:
    assert load_one_yaml(nested(MAX_DEPTH), source="f") is not None
    with pytest.raises(InputError, match=f"f: nested more than {MAX_DEPTH} deep at line 1"):
        load_one_yaml(nested(MAX_DEPTH + 1), source="f")
    block = "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH)) + f"{'  ' * MAX_DEPTH}v\n"
    assert load_one_yaml(block, source="f") is not None
    with pytest.raises(InputError, match="nested more than"):
        load_one_yaml("- " + block.replace("\n", "\n  "), source="f")


def test_json_depth_counts_brackets_outside_strings_only() -> None:
    inside = '"' + "[{" * 500 + '\\"' + "]]]" * 300 + '"'
    assert load_json(f'{{"a": [{inside}]}}'.encode(), source="f.json") == {
        "a": [inside[1:-1].replace('\\"', '"')]
    }
    with pytest.raises(InputError, match=f"f.json: nested {MAX_DEPTH + 1} deep"):
        load_json(nested(MAX_DEPTH + 1).encode(), source="f.json")
    assert load_json(nested(MAX_DEPTH).encode(), source="f.json") is not None


def test_aliases_read_as_pyyaml_reads_them_until_they_stand_for_too_much(monkeypatch) -> None:
    text = "a: &x [1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + "".join(f"b{i}: *x\n" for i in range(10))
    assert load_yaml(text, source="f") == [yaml.safe_load(text)]
    monkeypatch.setattr(documents, "MAX_ALIASED", 99)  # each alias stands for 10 nodes
    with pytest.raises(InputError, match="f: aliases expand to more than 99 nodes at line 11"):
        load_yaml(text, source="f")


def test_anchors_are_counted_per_document(monkeypatch) -> None:
    monkeypatch.setattr(documents, "MAX_ALIASED", 15)
    doc = "a: &x [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: *x\n"
    assert len(load_yaml(f"{doc}---\n{doc}", source="f")) == 2


def test_the_garbage_collector_runs_again_after_a_refusal() -> None:
    assert gc.isenabled()
    with pytest.raises(InputError):
        load_yaml("&a [*a]", source="f")
    with pytest.raises(InputError):
        load_yaml("a: [", source="f")
    assert gc.isenabled()


def test_more_than_one_document_where_one_is_expected() -> None:
    with pytest.raises(InputError, match="f: expected one YAML document, found 2"):
        load_one_yaml("a: 1\n---\nb: 2\n", source="f")
    assert load_one_yaml("# nothing\n", source="f") is None


def test_every_yaml_error_is_one_line_with_a_position() -> None:
    cases = {
        "a: b: c": "line 1, column 5",
        "a: !!float x": "cannot read float 'x'",
        "a: !!binary 0": "line 1, column 4",
        "{[1]: 2}": "found unhashable key",
        "a: &x 1\nb: *y": "found undefined alias",
    }
    for text, says in cases.items():
        with pytest.raises(InputError) as err:
            load_yaml(text, source="f")
        line = err.value.render()
        assert "\n" not in line and says in line and line.startswith("f: malformed YAML"), line


def test_shown_is_short_whatever_the_value() -> None:
    loop: list = []
    loop.append(loop)
    wide = [list(range(1000))] * 1000
    deep: list = []
    for _ in range(500):
        deep = [deep]
    for value in (loop, wide, deep, "x" * 10**6, 10**5000, -(10**5000), {"k\n": "v" * 10**5}):
        text = shown(value)
        assert len(text) <= 83 and "\n" not in text, text
    assert shown(10**5000) == "<a number of about 5001 digits>"
    assert shown([1, "a", None, {"b": 2.5}]) == "[1, 'a', None, {'b': 2.5}]"
    assert shown("x" * 200).endswith("...") and shown("x" * 200).startswith("'xxx")
    assert shown_text("name\nwith a newline") == "name\\nwith a newline"


def test_an_error_message_is_one_line_whatever_its_parts_hold() -> None:
    err = InputError("bad\nvalue", file="dir\n/f.yaml", obj="Pod a\r\nb", field="x")
    assert err.render() == "dir\\n/f.yaml: Pod a\\nb: field x: bad\\nvalue"
