"""The schedulers the end-to-end benchmark compares, and how each one is started.

Each :class:`Peer` says what a run needs to know about a scheduler: the
``schedulerName`` its pods carry, whether it needs the PodGroup CRDs (and whose), whether
it understands gangs, and whether a plain pod needs a PodGroup of its own to be
scheduled at all (Volcano 1.7 does: its job controller, not running here, would create
one per pod). :func:`start` launches it as a separate OS process writing its log to a
file, configured for a fair comparison:

- pumice: ``python -m pumice.cli run`` of this interpreter, period 1 s, Volcano's
  configuration file when one is given (else Volcano's default configuration, the same
  actions and plugins);
- kube-scheduler: client QPS and burst 5,000 (its default, 50, would make the client
  the limit), no leader election, no serving port;
- vc-scheduler: period 1 s, client QPS and burst 5,000 (default 2,000), the shipped
  ``volcano-scheduler.conf``, no leader election.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pumice.documents import read_file
from pumice.errors import InputError
from pumice.sandbox.apply import DEPLOY

#: kube-scheduler's configuration: only the client's rate is raised.
KUBE_SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
"""

QPS = "5000"
#: The source tree this module is in (its ``deploy/`` holds pumice's CRDs).


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    scheduler_name: str
    crds: str | None  # "volcano", "pumice" or None
    gangs: bool
    group_per_pod: bool
    binary: str | None = None  # the executable to find, None for pumice (this Python)
    jobs: bool = False  # has a controller for batch.volcano.sh Jobs (the vcjob workload)
    controller_binary: str | None = None  # that controller's executable (None: pumice's)


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer("pumice", "pumice", "pumice", gangs=True, group_per_pod=False, jobs=True),
        Peer(
            "kube-scheduler",
            "default-scheduler",
            None,
            gangs=False,
            group_per_pod=False,
            binary="kube-scheduler",
        ),
        Peer(
            "volcano",
            "volcano",
            "volcano",
            gangs=True,
            group_per_pod=True,
            binary="vc-scheduler",
            jobs=True,
            controller_binary="vc-controller-manager",
        ),
    )
}


def crd_files(peer: Peer, k8s_dir: Path) -> list[Path]:
    """The CRD files for ``peer``: pumice's own (the files of ``deploy/`` holding only
    CRDs) when this is a source tree that has them, else Volcano's (the same API)."""
    volcano = sorted((k8s_dir / "volcano-1.7" / "crds").glob("*.yaml"))
    if peer.crds == "pumice":
        return [p for p in sorted(DEPLOY.glob("*.y*ml")) if _only_crds(p)] or volcano
    return volcano if peer.crds == "volcano" else []


def _only_crds(path: Path) -> bool:
    try:
        docs = read_file(path)
    except InputError:
        return False
    return bool(docs) and all(
        isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition" for d in docs
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(
    peer: Peer,
    kubeconfig: Path,
    workdir: Path,
    binary: Callable[[str], Path],
    volcano_conf: Path | None,
) -> list[str]:
    """The command line that starts ``peer`` against ``kubeconfig``."""
    if peer.name == "pumice":
        cmd = [sys.executable, "-m", "pumice.cli", "run", "--kubeconfig", str(kubeconfig),
               "--scheduler-name", peer.scheduler_name, "--schedule-period", "1s"]  # fmt: skip
        if volcano_conf is not None:
            cmd += ["--config", str(volcano_conf)]
        return cmd
    if peer.name == "kube-scheduler":
        config = workdir / "kube-scheduler.yaml"
        config.write_text(KUBE_SCHEDULER_CONFIG.format(kubeconfig=kubeconfig))
        return [str(binary(str(peer.binary))), f"--config={config}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false", "--secure-port=0"]  # fmt: skip
    if peer.name == "volcano":
        if volcano_conf is None:
            raise FileNotFoundError("vc-scheduler needs volcano-scheduler.conf")
        return [str(binary(str(peer.binary))), f"--kubeconfig={kubeconfig}",
                f"--scheduler-conf={volcano_conf}", "--schedule-period=1s",
                f"--scheduler-name={peer.scheduler_name}", "--default-queue=default",
                "--leader-elect=false", f"--kube-api-qps={QPS}", f"--kube-api-burst={QPS}",
                f"--listen-address=127.0.0.1:{free_port()}",
                f"--healthz-address=127.0.0.1:{free_port()}"]  # fmt: skip
    raise KeyError(peer.name)


def start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` with stdout and stderr to ``log``."""
    out = open(log, "wb")  # noqa: SIM115 (closed with the process, by stop)
    try:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    finally:
        out.close()  # the child has its own descriptor


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    return proc.returncode


__all__ = ["PEERS", "Peer", "command", "crd_files", "free_port", "start", "stop"]
