"""`pumice explain-config`: who decides each extension point, and the findings a person
would want before trusting a configuration."""

from __future__ import annotations

import json
import re

import pytest

from pumice.cli import main
from pumice.explain import explain
from pumice.scheduler import Scheduler


def explained(tmp_path, text: str):
    path = tmp_path / "sched.conf"
    path.write_text(text)
    return explain(Scheduler.from_file(str(path)))


def findings(exp, kind: str) -> list[str]:
    return [f.message for f in exp.findings if f.kind == kind]


def test_default_config_says_who_decides_and_has_no_findings() -> None:
    exp = explain(Scheduler.from_file(None))
    hooks = {h.hook: h for h in exp.hooks}
    assert hooks["job_order"].tiers == ((1, ("priority", "gang")), (2, ("drf",)))
    assert hooks["node_order"].tiers == ((2, ("nodeorder", "binpack")),)
    # gang and drf register preemptable, and the default turns both off
    assert hooks["preemptable"].tiers == ((1, ("priority", "conformance")),)
    assert hooks["preemptable"].disabled == ("gang (tier 1)", "drf (tier 2)")
    assert exp.findings == ()


def test_a_flag_on_a_plugin_without_that_hook_has_no_effect(tmp_path) -> None:
    exp = explained(
        tmp_path,
        'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'
        "  - name: predicates\n  - name: binpack\n    enablePreemptable: false\n"
        "    enableNodeOrder: true\n",
    )
    (message,) = findings(exp, "no-effect")
    assert "enablePreemptable: false on plugin binpack" in message
    assert "registers no preemptable function" in message


def test_a_duplicate_plugin_is_explained_tier_by_tier(tmp_path) -> None:
    exp = explained(
        tmp_path,
        'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'
        "    enableJobReady: false\n- plugins:\n  - name: predicates\n  - name: gang\n",
    )
    (message,) = findings(exp, "duplicate")
    assert "plugin gang is listed 2 times" in message
    assert "arguments of tiers[1].plugins[1]" in message
    tier1 = message.split("in tier 1", 1)[1].split(";", 1)[0]
    hooks = re.findall(r"\b[a-z_]+\b", tier1)
    assert "job_ready" not in hooks and "job_order" in hooks
    assert not [f for f in exp.findings if f.kind == "load" and "gang" in f.message]


def test_preempt_without_a_preemptable_plugin_never_evicts(tmp_path) -> None:
    exp = explained(
        tmp_path,
        'actions: "enqueue, allocate, preempt, backfill"\ntiers:\n- plugins:\n'
        "  - name: gang\n    enablePreemptable: false\n  - name: predicates\n"
        "  - name: nodeorder\n",
    )
    assert "preempt never evicts anything: no enabled plugin decides preemptable" in findings(
        exp, "missing"
    )


def test_victims_fall_through_to_a_later_tier(tmp_path) -> None:
    exp = explained(
        tmp_path,
        'actions: "enqueue, allocate, preempt"\ntiers:\n- plugins:\n  - name: priority\n'
        "  - name: gang\n- plugins:\n  - name: drf\n  - name: predicates\n",
    )
    (message,) = [m for m in findings(exp, "order") if m.startswith("preemptable")]
    assert "tier 1 (priority, gang) decides first" in message
    assert "tier 2 (drf) decides next" in message


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n',
            "nodeSelector, node affinity, taints",
        ),
        (
            'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: predicates\n',
            "every job counts as ready",
        ),
        (
            'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'
            "  - name: predicates\n",
            "every Pending job is admitted",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n',
            "best-effort pods (no resource requests) are never placed",
        ),
    ],
)
def test_actions_whose_plugins_are_missing(tmp_path, text, needle) -> None:
    assert any(needle in m for m in findings(explained(tmp_path, text), "missing"))


def test_unsupported_items_are_findings_too(tmp_path, plugin_pumice_lacks) -> None:
    exp = explained(
        tmp_path,
        'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'
        "  - name: predicates\n  - name: reservation\n",
    )
    (message,) = findings(exp, "load")
    assert message.startswith("plugin reservation") and "not supported by pumice" in message


def test_cli_json_and_text(tmp_path, capsys) -> None:
    assert main(["explain-config", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["actions"] == ["enqueue", "allocate", "backfill"]
    row = next(h for h in doc["hooks"] if h["hook"] == "predicate")
    assert row["tiers"] == [{"tier": 2, "plugins": ["predicates"]}]
    assert main(["explain-config"]) == 0
    out = capsys.readouterr().out
    assert "Who decides what" in out and "Findings: none" in out


def test_cli_exits_2_for_an_invalid_config(tmp_path, capsys) -> None:
    path = tmp_path / "sched.conf"
    path.write_text('actions: "enqueue, alocate"\ntiers: []\n')
    assert main(["explain-config", str(path)]) == 2
    assert "did you mean allocate?" in capsys.readouterr().err
