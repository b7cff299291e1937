"""The configuration's ``metrics`` section: where nodes' measured load comes from."""

from __future__ import annotations

import pytest
import yaml

from pumice.actions import default_registry as default_actions
from pumice.conf.config import metrics_interval, parse_config
from pumice.errors import InputError
from pumice.plugins import default_registry
from pumice.scheduler import known

BASE = "actions: allocate\ntiers:\n- plugins:\n  - name: usage\n"


def load(metrics: str):
    names = known(default_registry(), default_actions())
    return parse_config(yaml.safe_load(BASE + metrics), known=names)


def test_a_prometheus_source_is_read_without_a_warning() -> None:
    config = load(
        "metrics:\n  type: prometheus\n  address: http://prometheus:9090\n  interval: 1m\n"
        "  tls.insecureSkipVerify: true\n"
    )
    assert config.warnings == ()
    assert config.metrics == {
        "type": "prometheus",
        "address": "http://prometheus:9090",
        "interval": "1m",
        "tls.insecureSkipVerify": "true",
    }
    assert metrics_interval(config, 30.0) == 60.0


def test_without_a_section_the_interval_is_the_default() -> None:
    assert metrics_interval(load(""), 30.0) == 30.0


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("metrics:\n  type: prometheus\n", "metrics.address"),
        (
            "metrics:\n  type: prometheus\n  address: http://p\n  interval: soon\n",
            "metrics.interval",
        ),
        ("metrics:\n  type: promethus\n  address: http://p\n", "metrics.type"),
        ("metrics:\n  adress: http://p\n", "metrics.adress"),
    ],
)
def test_a_bad_section_is_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        load(text)


def test_a_misspelt_type_gets_the_closest_name() -> None:
    with pytest.raises(InputError, match="did you mean prometheus"):
        load("metrics:\n  type: promethus\n  address: http://p\n")
