"""``pumice bench faults``: its options and entry point (registered on ``pumice bench``
by :mod:`pumice.cli`, like ``e2e``).

Runs each chosen scenario of :mod:`pumice.faults.scenarios` ``--faults-runs`` times on
one local control plane, prints :mod:`pumice.faults.report`'s table, and exits 1 when a
check found a violation or a run could not run. Options are checked first: an unknown
scenario or a count below 1 is exit code 2 with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from pumice.errors import InputError
from pumice.sandbox.apply import DEPLOY

#: Where kube-apiserver is looked for (``bin/``) when ``PUMICE_K8S_BIN`` is not set.
DEFAULT_K8S = Path(os.environ.get("PUMICE_K8S_DIR", "/work/shared/k8s"))
#: The source tree this module runs from (its deploy/ holds pumice's CRDs).


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "faults",
        "`pumice bench faults`: pumice run against a real API server while API server "
        "restarts, dropped watches, failing binds and killed or cut-off leaders strike "
        "(see docs/run.md)",
    )
    g.add_argument(
        "--faults-runs", type=int, default=1, metavar="N", help="runs of each scenario (1)"
    )
    g.add_argument(
        "--faults-scenarios",
        default=None,
        metavar="NAMES",
        help="comma-separated scenarios (default: all)",
    )
    g.add_argument(
        "--faults-workdir",
        default=None,
        metavar="DIR",
        help="keep the control plane's and schedulers' logs here",
    )


def scenario_names(text: str | None) -> list[str]:
    from pumice.faults.scenarios import SCENARIOS

    if text is None:
        return list(SCENARIOS)
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in SCENARIOS:
            raise InputError(
                f"unknown {n!r} (known: {', '.join(SCENARIOS)})", field="--faults-scenarios"
            )
    if not names:
        raise InputError("names at least one", field="--faults-scenarios")
    return names


def crd_files() -> list[Path]:
    """pumice's PodGroup and Queue CRDs (a source tree's deploy/), else Volcano's."""
    ours = [DEPLOY / f"01-crd-{n}.yaml" for n in ("podgroups", "queues")]
    if all(p.is_file() for p in ours):
        return ours
    return sorted((DEFAULT_K8S / "volcano-1.7" / "crds").glob("*.yaml"))


def run_command(args: argparse.Namespace) -> int:
    from pumice.faults.report import print_report, valid
    from pumice.faults.scenarios import Bench, run_scenario
    from pumice.sandbox import ControlPlane
    from pumice.sandbox.apply import apply
    from pumice.sandbox.binaries import missing_binaries

    if len(args.scenario) > 1:
        raise InputError("faults runs alone (the in-memory scenarios are a separate run)")
    if args.faults_runs < 1:
        raise InputError("must be at least 1", field="--faults-runs")
    names = scenario_names(args.faults_scenarios)
    if not os.environ.get("PUMICE_K8S_BIN") and (DEFAULT_K8S / "bin").is_dir():
        os.environ["PUMICE_K8S_BIN"] = str(DEFAULT_K8S / "bin")
    why = missing_binaries("kube-apiserver", "etcd")
    if why is not None:
        raise InputError(why, field="PUMICE_K8S_BIN")

    def say(line: str) -> None:
        print(f"pumice: bench faults: {line}", file=sys.stderr, flush=True)

    keep = Path(args.faults_workdir) if args.faults_workdir else None
    workdir = keep or Path(tempfile.mkdtemp(prefix="pumice-faults-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    with ControlPlane(workdir=workdir / "plane") as plane:
        apply(plane.kubeconfig, crd_files())
        bench = Bench(plane, workdir, say)
        try:
            for run in range(args.faults_runs):
                for name in names:
                    r = run_scenario(bench, name)
                    say(
                        f"{name} run {run + 1}: {dict(r.faults)}, {len(r.violations)} "
                        f"violations, {r.bound} bound, {r.seconds:.1f}s"
                        + (f", error {r.error}" if r.error else "")
                    )
                    results.append(r)
        finally:
            bench.close()
    if keep is None:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    print_report(results, sys.stdout)
    return 0 if valid(results) else 1


__all__ = ["add_arguments", "crd_files", "run_command", "scenario_names"]
