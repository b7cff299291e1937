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


@pytest.mark.parametrize(
    ("name", "amount", "text"),
    [
        ("memory", 5485988160 * 1024.0, "5.1Ti"),  # a node's allocatable as kubelets write it
        ("memory", 1.5 * 2**30, "1.5Gi"),
        ("memory", 1e9, "1G"),
        ("memory", 107374183.0, "102.4Mi"),  # 0.1Gi rounded up to a whole byte
        ("memory", 512.0, "512"),
        ("ephemeral-storage", 2.0**40, "1Ti"),
        ("hugepages-2Mi", 3 * 2.0**21, "6Mi"),
        ("cpu", 1234567.0, "1234.6"),  # many cores, as a queue's share is
        ("cpu", 236571.4, "236.6"),
        ("cpu", 10000.4, "10000.4m"),  # never rounded to look whole
        ("cpu", 1500.0, "1500m"),
        ("cpu", 96000.0, "96"),
        ("nvidia.com/gpu", 0.5, "0.5"),
        ("nvidia.com/gpu", 1234567.0, "1234567"),
    ],
)
def test_human_units(name, amount, text) -> None:
    assert format_amount(name, amount) == text


def test_rounded_amounts_never_look_whole() -> None:
    """A byte over 8Gi is not shown as 8Gi, which would read as equal to 8Gi."""
    assert format_amount("memory", 8 * 2.0**30 + 1) != "8Gi"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("cpu", "1180591620717411303424"),
        ("cpu", 1180591620717411303424),
        ("memory", "1e400"),
        ("memory", 1e308),
        ("memory", "1e999999999999"),
        ("nvidia.com/gpu", "99999999999999999999"),
        pytest.param("cpu", 10**5000, id="5000-digits"),  # more than str() converts
    ],
)
def test_too_large_is_an_input_error(name, value) -> None:
    with pytest.raises(InputError) as err:
        to_canonical(name, value, field="status.allocatable." + name)
    assert "too large" in str(err.value) and "status.allocatable" in str(err.value)
    assert len(str(err.value)) < 120


def test_tiny_exponent_rounds_up_to_the_smallest_unit() -> None:
    assert to_canonical("cpu", "1e-9999999") == 1.0
    assert to_canonical("memory", "0e99999999") == 0.0
