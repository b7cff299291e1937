"""The command-line plumbing ``pumice job`` and ``pumice queue`` share.

The flags every command takes (credentials, context, ``--format``), the object's name
(as an argument or vcctl's ``-N/--name``) and namespace, creating a Command and saying
so, and the guard that turns an unavailable cluster into one line on stderr.

Contract: a command the user can fix (no name, two names) raises
:class:`~pumice.errors.InputError`, which the top-level CLI reports with exit status
2; a guarded command reports :class:`~pumice.controllers.cli_api.ClusterUnavailable`
itself and returns exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from pumice.controllers.cli_api import (
    COMMAND,
    EXIT_UNAVAILABLE,
    Api,
    ClusterUnavailable,
    default_namespace,
)
from pumice.controllers.cli_render import meta_of, print_json
from pumice.errors import InputError


def namespace_of(args: argparse.Namespace) -> str:
    """The namespace the command names (``-n``), else the kubeconfig context's."""
    return args.namespace or default_namespace(args.kubeconfig, args.context)


def name_of(args: argparse.Namespace, what: str) -> str:
    """The object's name, given as an argument or with ``-N/--name`` (both: the same)."""
    given = [n for n in (args.name, args.name_flag) if n]
    if not given:
        raise InputError(f"which {what}? give its name (as an argument or with -N/--name)")
    if len(given) == 2 and given[0] != given[1]:
        raise InputError(f"two {what} names given: {given[1]!r} and {given[0]!r}")
    return given[0]


def issue(api: Api, args: argparse.Namespace, body: dict[str, Any], what: str) -> int:
    """Create the Command ``body`` and say so."""
    made = api.create(COMMAND, body["metadata"]["namespace"], body)
    meta = meta_of(made)
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    if args.format == "json":
        print_json({"command": name, "action": made.get("action"), "target": made.get("target")})
    else:
        print(f"{what}: {made.get('action')} requested (Command {name})")
    return 0


def guarded(command: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """Report an unavailable cluster as one line and exit status 1 (an
    :class:`InputError` goes up to the CLI's own handler: exit status 2)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ClusterUnavailable as err:
            print(f"pumice: error: {err}", file=sys.stderr)
            return EXIT_UNAVAILABLE

    return run


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """The flags every command takes: credentials, context, ``--format``."""
    p.add_argument(
        "-k", "--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument("--format", choices=("table", "json"), default="table")


def add_name_arguments(p: argparse.ArgumentParser, what: str, namespaced: bool) -> None:
    """The object's name, as an argument or vcctl's ``-N/--name``."""
    p.add_argument("name", nargs="?", help=f"the {what}'s name")
    p.add_argument("-N", "--name", dest="name_flag", metavar="NAME", help=f"the {what}'s name")
    if namespaced:
        add_namespace_argument(p)


def add_namespace_argument(p: argparse.ArgumentParser) -> None:
    """``-n/--namespace``."""
    p.add_argument(
        "-n",
        "--namespace",
        help="the job's namespace (default: the kubeconfig context's, else default)",
    )


__all__ = [
    "add_common_arguments",
    "add_name_arguments",
    "add_namespace_argument",
    "guarded",
    "issue",
    "name_of",
    "namespace_of",
]
