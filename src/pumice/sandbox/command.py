"""``pumice sandbox``: a living cluster on a laptop, to run ``pumice run`` against.

It starts a real etcd and kube-apiserver (:class:`~pumice.sandbox.ControlPlane`), applies
pumice's CRDs (PodGroup, Queue, and Volcano's Job and Command) and the ``default``
Queue, creates fake Ready nodes (:mod:`pumice.sandbox.nodes`) and runs the fake kubelet
(:mod:`pumice.sandbox.kubelet`) that makes bound pods run, finish and leave, then waits
for Ctrl-C or SIGTERM and stops everything (exit 0).

Everything lives under ``--dir`` (default ``./pumice-sandbox``): certificates, etcd's
data, the servers' logs, the admin kubeconfig (``DIR/kubeconfig``) and the manifests it
applied. Each start begins afresh (new data, new token): the directory is kept after a
stop so the logs can be read, and reused by the next start.

Refusals come before anything starts: missing binaries (exit 2, with where to get them),
bad counts (exit 2). A server that fails to start is exit 1, with its log's last lines.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from pumice.documents import read_file
from pumice.errors import InputError
from pumice.sandbox.apply import DEPLOY

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
DEFAULT_DIR = "pumice-sandbox"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "sandbox"
CONFIGS = EXAMPLES.parent / "configs"
_KINDS = ("CustomResourceDefinition", "Queue")  # applied from deploy/, in this order
DEFAULT_QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "default"},
    "spec": {"weight": 1, "reclaimable": True},
}
KUBECTL_HOW_TO = "https://kubernetes.io/docs/tasks/tools/ (or setup-envtest's KUBEBUILDER_ASSETS)"


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "sandbox",
        help="start a local Kubernetes control plane with fake nodes to schedule",
        description="Start etcd and kube-apiserver on this machine, apply pumice's CRDs "
        "and the default Queue, create fake Ready nodes and a fake kubelet that runs the "
        "pods bound to them (Running after a startup delay, Succeeded after the "
        "sandbox.pumice.dev/duration annotation), then wait for Ctrl-C. Point "
        "`pumice run --kubeconfig DIR/kubeconfig` and kubectl at it.",
    )
    s.add_argument(
        "--nodes", type=int, default=4, metavar="N", help="CPU nodes (32 cpu, 128Gi; default 4)"
    )
    s.add_argument(
        "--gpu-nodes",
        type=int,
        default=2,
        metavar="M",
        help="GPU nodes (96 cpu, 768Gi, 8 GPUs; default 2)",
    )
    s.add_argument(
        "--shared-gpu-nodes",
        type=int,
        default=0,
        metavar="S",
        help="GPU nodes whose 8 cards of 80 GiB are shared by memory (volcano.sh/gpu-memory, "
        "for the deviceshare plugin; default 0)",
    )
    s.add_argument(
        "--dir",
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"where data, logs and the kubeconfig go (default ./{DEFAULT_DIR})",
    )
    s.add_argument(
        "--port", type=int, metavar="P", help="the API server's port (default: a free one)"
    )
    s.add_argument(
        "--no-kubelet",
        action="store_true",
        help="no fake kubelet: bound pods stay Pending, graceful deletions never finish",
    )
    s.add_argument(
        "--no-controller-manager",
        action="store_true",
        help="do not run kube-controller-manager (run by default when its binary is found: "
        "Deployments and batch Jobs get pods, deleted owners' pods are collected, the PV "
        "controller binds claims)",
    )
    s.add_argument(
        "--local-volumes",
        type=int,
        default=2,
        metavar="K",
        help="static local PersistentVolumes of 100Gi per node, of StorageClass pumice-local "
        "(default 2)",
    )
    s.add_argument(
        "--no-provisioner",
        action="store_true",
        help="no provisioner for pumice-local claims: claims are neither provisioned nor bound",
    )
    s.add_argument(
        "--startup-delay",
        type=float,
        metavar="SECONDS",
        help="seconds from bind to Running (default: the simulator's, 5)",
    )
    s.set_defaults(func=sandbox_command)


def _check(args: argparse.Namespace) -> None:
    for flag, value in (
        ("--nodes", args.nodes),
        ("--gpu-nodes", args.gpu_nodes),
        ("--shared-gpu-nodes", args.shared_gpu_nodes),
        ("--local-volumes", args.local_volumes),
    ):
        if value < 0:
            raise InputError("must be 0 or more", field=flag)
    if args.port is not None and not 0 < args.port < 65536:
        raise InputError("must be a port number (1-65535)", field="--port")
    if args.startup_delay is not None and args.startup_delay < 0:
        raise InputError("must be 0 or more", field="--startup-delay")


def sandbox_command(args: argparse.Namespace) -> int:
    from pumice.sandbox.binaries import missing_binaries

    _check(args)
    logging.basicConfig(format="pumice: sandbox: %(name)s: %(message)s", level=logging.WARNING)
    missing = missing_binaries("kube-apiserver", "etcd")
    if missing is not None:
        print(f"pumice: sandbox: {missing}", file=sys.stderr)
        return EXIT_BAD_INPUT
    stop = threading.Event()
    previous = {sig: signal.signal(sig, _setter(stop)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return Sandbox(args, stop).run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _setter(stop: threading.Event) -> Any:
    def handler(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    return handler


class Sandbox:
    """One run of ``pumice sandbox``: start, print, wait for ``stop``, stop."""

    def __init__(self, args: argparse.Namespace, stop: threading.Event) -> None:
        self.args = args
        self.stop = stop
        self.folder = Path(args.dir).expanduser().resolve()
        #: Why kube-controller-manager does not run, said in the start lines.
        self.manager_missing = ""

    def run(self) -> int:
        self.folder.mkdir(parents=True, exist_ok=True)
        with _locked(self.folder):
            return self._run()

    def _run(self) -> int:
        from pumice.cluster.kube_client import KubeClient
        from pumice.sandbox import ApplyError, ControlPlane, ControlPlaneError
        from pumice.sandbox.nodes import NodeError

        plane = ControlPlane(workdir=self.folder, port=self.args.port)
        kubelet = None
        provisioner = None
        client = None
        manager = None
        try:
            _say(f"starting etcd and kube-apiserver in {self.folder} ...")
            plane.start()
            kubeconfig = self.folder / "kubeconfig"
            shutil.copyfile(plane.kubeconfig, kubeconfig)
            kubeconfig.chmod(0o600)
            # Ctrl-C during the start-up is seen between its steps.
            if not self.stop.is_set():
                self._apply(kubeconfig)
            if not self.stop.is_set():
                manager = self._controller_manager(kubeconfig)
            client = KubeClient.from_config(str(kubeconfig))
            names = [] if self.stop.is_set() else self._nodes(client)
            if names and not self.args.no_kubelet and not self.stop.is_set():
                kubelet = self._kubelet(client, names)
            if names and not self.stop.is_set():
                provisioner = self._storage(client, names, pv_controller=manager is not None)
            if not self.stop.is_set():
                self._tell(plane.server, kubeconfig, kubelet is not None, manager is not None)
            while not self.stop.wait(1.0):
                if not plane.running:
                    log = plane.logs.get("kube-apiserver")
                    _say(f"kube-apiserver exited (its log: {log}); stopping")
                    return EXIT_FAILED
            _say("stopping ...")
            return 0
        except ControlPlaneError as err:
            print(f"pumice: sandbox: {err}", file=sys.stderr)
            return EXIT_FAILED
        except (ApplyError, NodeError) as err:
            print(f"pumice: sandbox: {err}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            if provisioner is not None:
                provisioner.stop()
            if manager is not None:
                manager.stop()
            if kubelet is not None:
                kubelet.stop()
            plane.stop()
            if client is not None:
                client.close()

    def _apply(self, kubeconfig: Path) -> None:
        count = install_pumice(kubeconfig, self.folder / "manifests.yaml")
        if count is None:
            _say(f"note: no CRDs found in {DEPLOY}: PodGroups and Queues are not served "
                 "until you apply pumice's CRDs (kubectl apply -f deploy/)")  # fmt: skip
        else:
            _say(f"applied pumice's CRDs and the default Queue ({count} objects)")

    def _controller_manager(self, kubeconfig: Path) -> Any:
        """kube-controller-manager, started when its binary is found and not turned off;
        None otherwise (the start lines say what is missing)."""
        from pumice.sandbox.binaries import BinaryNotFoundError, find_binary
        from pumice.sandbox.controller_manager import controller_manager

        self.manager_missing = ""
        if self.args.no_controller_manager:
            self.manager_missing = "turned off (--no-controller-manager)"
            return None
        try:
            binary = find_binary("kube-controller-manager")
        except BinaryNotFoundError:
            self.manager_missing = (
                "kube-controller-manager not found beside kube-apiserver (PUMICE_K8S_BIN)"
            )
            return None
        log = self.folder / "kube-controller-manager.log"
        manager = controller_manager(binary, kubeconfig, log)
        manager.start()
        return manager

    def _nodes(self, client: Any) -> list[str]:
        from pumice.sandbox.nodes import CPU_NODE, GPU_NODE, SHARED_GPU_NODE, create_mixed

        counts = [(CPU_NODE, self.args.nodes), (GPU_NODE, self.args.gpu_nodes),
                  (SHARED_GPU_NODE, self.args.shared_gpu_nodes)]  # fmt: skip
        return create_mixed(client, [(shape, n) for shape, n in counts if n > 0])

    def _kubelet(self, client: Any, names: list[str]) -> Any:
        from pumice.sandbox.kubelet import FakeKubelet

        delay = self.args.startup_delay
        kubelet = FakeKubelet(client, names, **({} if delay is None else {"startup_delay": delay}))
        kubelet.start()
        kubelet.wait_synced(30)
        return kubelet

    def _storage(self, client: Any, names: list[str], pv_controller: bool) -> Any:
        """The pumice-local class, its static PVs and its provisioner (which binds
        claims itself unless kube-controller-manager's PV controller runs)."""
        from pumice.sandbox.kubelet import owner
        from pumice.sandbox.volumes import CLASS, LocalProvisioner, create_storage

        create_storage(client, names, per_node=self.args.local_volumes)
        _say(f"StorageClass {CLASS}: {self.args.local_volumes} local PVs of 100Gi per node"
             + ("" if self.args.no_provisioner else "; its provisioner makes PVs"
                + ("" if pv_controller else " and binds claims")))  # fmt: skip
        if self.args.no_provisioner:
            return None
        provisioner = LocalProvisioner(client, owner(names), bind=not pv_controller)
        provisioner.start()
        provisioner.wait_synced(30)
        return provisioner

    def _tell(self, server: str, kubeconfig: Path, kubelet: bool, manager: bool) -> None:
        cpu, gpu, shared = self.args.nodes, self.args.gpu_nodes, self.args.shared_gpu_nodes
        what = f"{cpu} CPU and {gpu} GPU nodes"
        if shared:
            what += f", {shared} with shared GPUs"
        what += ", fake kubelet" if kubelet else ", no kubelet"
        print(f"pumice sandbox: kube-apiserver at {server}; {what}", flush=True)
        if manager:
            print("kube-controller-manager: Deployments, ReplicaSets and batch Jobs get pods, "
                  "owners' pods are garbage-collected, the PV controller binds claims",
                  flush=True)  # fmt: skip
        else:
            print(f"no kube-controller-manager: {self.manager_missing}; Deployments and "
                  "batch Jobs get no pods and deleted owners leave their pods",
                  flush=True)  # fmt: skip
        if shutil.which("kubectl") is None:
            _say(f"note: kubectl is not on PATH; get it from {KUBECTL_HOW_TO}")
        print("next, in other terminals:", flush=True)
        print(f"  pumice run --kubeconfig {kubeconfig}   # add --controllers for Volcano Jobs",
              flush=True)  # fmt: skip
        print(f"  export KUBECONFIG={kubeconfig}; kubectl get pods -w", flush=True)
        if EXAMPLES.is_dir():
            print(f"  kubectl apply -f {EXAMPLES / 'gang.yaml'}", flush=True)
            if shared:
                print(f"  (shared GPUs: pumice run --config {CONFIGS / 'deviceshare.yaml'}; "
                      f"kubectl apply -f {EXAMPLES / 'shared-gpu.yaml'})", flush=True)  # fmt: skip
        print("Ctrl-C stops the sandbox.", flush=True)


def install_pumice(kubeconfig: Path, record: Path, folder: Path = DEPLOY) -> int | None:
    """Apply the CRDs and Queues of ``folder`` (deploy/), plus a ``default`` Queue when
    none of them is one; they are written to ``record`` first, for the user to read.
    Returns how many objects were applied, or None (nothing applied) when ``folder``
    holds no CRD. Raises :class:`~pumice.sandbox.ApplyError`."""
    from pumice.sandbox import apply

    objects = list(pumice_manifests(folder))
    if not any(o["kind"] == "CustomResourceDefinition" for o in objects):
        return None
    if not any(o["kind"] == "Queue" and (o.get("metadata") or {}).get("name") == "default"
               for o in objects):  # fmt: skip
        objects.append(DEFAULT_QUEUE)
    record.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return len(apply(kubeconfig, record))


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold ``folder/.lock`` for the sandbox's lifetime: a second sandbox on the same
    directory would wipe the first one's etcd data. The lock dies with the process."""
    with (folder / ".lock").open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(
                f"another pumice sandbox is running in {folder}; stop it or pick another --dir"
            ) from None
        yield


def pumice_manifests(folder: Path = DEPLOY) -> Iterator[dict[str, Any]]:
    """The CRDs, then the Queues, of the manifests under ``folder``; other kinds and
    files that are not manifests (a kustomization) are skipped. None if ``folder`` is
    not there (pumice installed without its source tree)."""
    if not folder.is_dir():
        return
    found: list[dict[str, Any]] = []
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        try:
            docs = read_file(path)
        except InputError as err:
            _say(f"note: skipped {err.render()}")
            continue
        for doc in docs:
            listed = isinstance(doc, dict) and doc.get("kind") == "List"
            items = doc.get("items") if listed else [doc]
            found.extend(d for d in items or () if isinstance(d, dict) and d.get("kind") in _KINDS)
    for kind in _KINDS:
        yield from (b for b in found if b["kind"] == kind)


def _say(text: str) -> None:
    print(f"pumice: sandbox: {text}", file=sys.stderr, flush=True)


__all__ = ["add_parser", "install_pumice", "pumice_manifests", "sandbox_command"]
