"""Kubernetes quantities parse exactly and bad ones are refused with the field named."""

from __future__ import annotations

import pytest

from pumice.api.quantity import format_amount, to_canonical
from pumice.errors import InputError


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("cpu", "500m", 500.0),
        ("cpu", "2", 2000.0),
        ("cpu", 1.5, 1500.0),
        ("memory", "1Gi", 2.0**30),
        ("memory", "195798024Ki", 195798024 * 1024.0),
        ("memory", "1G", 1e9),
        ("memory", "1e3", 1000.0),
        ("nvidia.com/gpu", "8", 8.0),
        ("ephemeral-storage", "187136072175", 187136072175.0),
    ],
)
def test_parse(name, text, value) -> None:
    assert to_canonical(name, text) == value


@pytest.mark.parametrize("bad", ["-1", "1.5.2", "ten", "1Qi", "", True, None, [1]])
def test_refused_with_field(bad) -> None:
    with pytest.raises(InputError) as err:
        to_canonical("cpu", bad, field="spec.containers[0].resources.requests.cpu")
    assert "requests.cpu" in str(err.value)


def test_format_for_people() -> None:
    assert format_amount("cpu", 1500.0) == "1500m"
    assert format_amount("cpu", 2000.0) == "2"
    assert format_amount("memory", 4 * 2.0**30) == "4Gi"
    assert format_amount("nvidia.com/gpu", 8.0) == "8"


def test_rounded_up_like_kubernetes_so_sums_are_exact() -> None:
    """0.1Gi is 107374182.4 bytes; Kubernetes counts 107374183. 0.5m cpu counts 1m."""
    assert to_canonical("memory", "0.1Gi") == 107374183.0
    assert to_canonical("cpu", "0.5m") == 1.0
    assert to_canonical("nvidia.com/gpu", "0.5") == 0.5
