"""Command-line arguments and values that several ``pumice`` commands take alike.

``--plugins-dir`` (every mode that builds a scheduler), ``--controllers`` (``pumice run``
and ``pumice controllers``), and the durations, addresses and Lease namespace of the
long-running commands are read here once, so that the same flag means the same thing,
and is refused with the same message, wherever it is given. The command modules build
on this module; it imports none of them.
"""

from __future__ import annotations

import argparse
from typing import Any

from pumice.errors import InputError

#: Where a pod's own namespace is mounted (the default namespace of a Lease).
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def add_plugins_dir(parser: argparse.ArgumentParser) -> None:
    """``--plugins-dir DIR``, which every mode takes (the value goes to
    :meth:`Scheduler.from_file <pumice.scheduler.Scheduler.from_file>`)."""
    parser.add_argument(
        "--plugins-dir",
        metavar="DIR",
        help="also load the plugins and actions listed by the *.py modules in DIR "
        "(see docs/plugins.md)",
    )


def controllers_help() -> str:
    """Each controller's name and what it does, for ``--controllers``' help."""
    from pumice.controllers.registry import CONTROLLERS

    return "; ".join(f"{name}: {e.about}" for name, e in CONTROLLERS.items())


def add_controllers_flag(parser: argparse.ArgumentParser, *, optional: bool) -> None:
    """``--controllers NAMES`` (comma-separated, or all). In ``pumice run`` the flag
    alone means all."""
    kw: dict[str, Any] = {"nargs": "?", "const": "all", "default": None} if optional else {
        "default": "all"
    }  # fmt: skip
    parser.add_argument(
        "--controllers",
        metavar="NAMES",
        help=f"controllers to run, comma-separated, or all (default all): {controllers_help()}",
        **kw,
    )


def duration(text: str, flag: str) -> float:
    """A Go-style duration as the Kubernetes schedulers take (``1s``, ``500ms``,
    ``1m30s``) or plain seconds; it must be positive."""
    from pumice.sim.fields import parse_seconds

    seconds = parse_seconds(text, field=flag)
    if seconds <= 0:
        raise InputError(f"{text!r} is not a positive duration (e.g. 1s, 500ms, 2m)", field=flag)
    return seconds


def address(text: str, flag: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (all interfaces) or ``[IPv6]:PORT``; port 0 picks one."""
    from pumice.run.http import parse_address

    try:
        return parse_address(text)
    except ValueError as err:
        raise InputError(str(err), field=flag) from None


def lease_namespace(given: str | None) -> str:
    """The namespace of a leader-election Lease: the one given, else this pod's own,
    else ``default`` (outside a pod)."""
    if given:
        return given
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


__all__ = [
    "add_controllers_flag",
    "add_plugins_dir",
    "address",
    "controllers_help",
    "duration",
    "lease_namespace",
]
