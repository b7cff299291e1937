"""``pumice bench faults`` refuses bad options with one line and exit code 2, before
anything starts."""

from __future__ import annotations

import pytest

from pumice.cli import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--faults-scenarios", "bind-409,nope"], "--faults-scenarios: unknown 'nope'"),
        (["--faults-scenarios", ","], "--faults-scenarios: names at least one"),
        (["--faults-runs", "0"], "--faults-runs: must be at least 1"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(capsys, argv, said):
    assert main(["bench", "faults", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err
    assert len(err.splitlines()) == 1


def test_faults_runs_alone():
    assert main(["bench", "faults", "basic"]) == 2
