"""The start forecast's flags: ``pumice run``'s (for the endpoint's ``?eta=1``) and
``pumice queue pending --eta``'s. Kept apart from :mod:`pumice.visibility.eta` so that
building the command line does not import the scheduler."""

from __future__ import annotations

from typing import Any

from pumice.errors import InputError

#: How old (seconds) the server's last forecast may be before a request asks for a new one.
DEFAULT_MAX_AGE = 60.0
#: How far ahead a forecast looks by default (seconds): 7 days.
DEFAULT_HORIZON = 7 * 24 * 3600.0

STEP_HELP = (
    "take running pods' ends in at multiples of S seconds (default: by cluster size: "
    "the schedule period below 100 nodes, 60 from 100, 300 from 1,000; each estimate "
    "up to S late)"
)


def positive(value: float | None, flag: str) -> None:
    """Refuse a flag's value that is not a positive number (exit 2)."""
    if value is not None and not value > 0:
        raise InputError(f"must be positive, got {value:g}", field=flag)


def add_step_horizon(parser: Any, prefix: str) -> None:
    parser.add_argument(
        "--eta-step", type=float, default=None, metavar="S", help=f"{prefix}{STEP_HELP}"
    )
    parser.add_argument(
        "--eta-horizon", type=float, default=DEFAULT_HORIZON, metavar="S",
        help=f"{prefix}how far ahead the forecast looks, in seconds (default 7 days)",
    )  # fmt: skip


def add_run_flags(parser: Any) -> None:
    """``pumice run``'s forecast flags (the endpoint's ``?eta=1``)."""
    parser.add_argument(
        "--eta-max-age", type=float, default=DEFAULT_MAX_AGE, metavar="S",
        help="the pending-jobs endpoint's ?eta=1 answers with the last start forecast; "
        "a request starts a new one (in the background) when it is older than S "
        f"seconds (default {DEFAULT_MAX_AGE:g})",
    )  # fmt: skip
    add_step_horizon(parser, "for ?eta=1: ")


def check(args: Any) -> None:
    """Refuse bad forecast flags (InputError naming the flag)."""
    for flag in ("eta_max_age", "eta_step", "eta_horizon"):
        if hasattr(args, flag):
            positive(getattr(args, flag), "--" + flag.replace("_", "-"))


__all__ = [
    "DEFAULT_HORIZON",
    "DEFAULT_MAX_AGE",
    "add_run_flags",
    "add_step_horizon",
    "check",
    "positive",
]
