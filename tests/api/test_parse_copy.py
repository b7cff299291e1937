"""Tests for parse's copy_tree (deepcopy for Kubernetes-shaped values) and the quantity
strings kept by ``resources``."""

from __future__ import annotations

import copy
import fractions

import pytest

from pumice.api.parse import copy_tree, resources
from pumice.errors import InputError


def test_copy_tree_copies_like_deepcopy():
    shared = {"cpu": "1"}
    value = {
        "a": [1, 2.5, True, None, "x", {"b": (1, [2])}],
        "r": shared,
        "s": shared,
        "f": fractions.Fraction(1, 3),
    }
    got = copy_tree(value)
    assert got == value == copy.deepcopy(value)
    assert got["a"] is not value["a"] and got["a"][5] is not value["a"][5]
    assert got["a"][5]["b"][1] is not value["a"][5]["b"][1]
    assert got["r"] is got["s"] and got["r"] is not shared  # (met twice: copied once)
    got["a"][5]["b"][1].append(3)
    assert value["a"][5]["b"][1] == [2]


def test_resources_kept_quantities_parse_alike():
    first = resources({"cpu": "500m", "memory": "1Gi", "requests.cpu": "2"}, "r")
    again = resources({"cpu": "500m", "memory": "1Gi", "requests.cpu": "2"}, "r")
    assert first == again == {"cpu": 500.0, "memory": float(2**30)}
    assert resources({"cpu": 2}, "r") == {"cpu": 2000.0}
    for _ in range(2):  # (an error is not kept)
        with pytest.raises(InputError):
            resources({"cpu": "lots"}, "r")
