"""Volcano's job plugins: what a Job's ``spec.plugins`` adds to its pods and around them.

A plugin has a ``name`` and four hooks, called by the job controller:

- ``on_pod_create(pod, job)`` changes a pod before it is created (environment, volumes,
  hostname);
- ``on_job_add(job, store)`` creates what the job's pods need (once per run of the job:
  again after a restart, as Volcano does);
- ``on_job_update(job, store)`` brings it up to date (a scaled job's host lists);
- ``on_job_delete(job, store)`` removes it when the job's pods are killed (restart,
  abort, completion).

The plugins (arguments as Volcano's, Go flag style ``--name=value``):

- ``env``: ``VK_TASK_INDEX`` and ``VC_TASK_INDEX`` (the pod's index in its task) in
  every container and init container.
- ``svc``: a headless Service ``<job>`` selecting the job's pods; each pod's hostname
  (its name) and subdomain (the job's name); a ConfigMap ``<job>-svc`` with, per task,
  ``<task>.host`` (one ``<pod>.<job>`` per line), ``VC_<TASK>_HOSTS`` (comma
  separated) and ``VC_<TASK>_NUM``, mounted at ``/etc/volcano`` and, unless
  ``--inject-hosts-env=false``, offered as environment variables;
  ``--publish-not-ready-addresses``. Volcano also makes a NetworkPolicy (unless
  ``--disable-network-policy``); pumice does not.
- ``ssh``: a Secret ``<job>-ssh`` with an RSA key pair (``id_rsa``, ``id_rsa.pub``),
  ``authorized_keys`` and an ssh ``config`` naming every pod, mounted at ``/root/.ssh``
  (``--ssh-key-file-path``), mode 0600; ``--ssh-port`` (22).
- ``mpi``: ``MPI_HOST`` (the worker hosts) in the master's containers and the ssh port
  opened in every container; ``--master``, ``--worker``, ``--port``.
- ``pytorch``: ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK`` in every
  container and the port opened; ``--master``, ``--worker``, ``--port``; with
  ``--wait-master-enabled=true``, worker pods get Volcano's ``wait-for-master`` init
  container (``--wait-master-image``, default ``busybox:1.36.1``), which waits up to
  ``--wait-master-timeout`` seconds (300) for the master's port to answer.

An argument a plugin does not implement is ignored (as Volcano ignores a flag it does
not know); :attr:`JobPlugin.ignored` lists them, and the controller logs them and gives
the Job a Warning Event (reason ``PluginError``) when it first sets the plugin up.

The key pair comes from ``keygen`` (by default ``ssh-keygen``; see :func:`ssh_keygen`).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pumice.controllers.job.pods import TASK_SPEC, owner_reference, pod_index, pod_name
from pumice.controllers.job.spec import JobSpec, TaskSpec
from pumice.controllers.store import Store


class PluginError(RuntimeError):
    """A plugin could not do its part (the job gets an Event saying so, and is tried
    again later)."""


def flags(args: Sequence[str], defaults: Mapping[str, str]) -> dict[str, str]:
    """Go ``flag`` style arguments (``--port=22``, ``-port 22``, ``--flag`` for true)
    over ``defaults``; unknown flags are ignored, as Volcano logs and ignores them."""
    out = dict(defaults)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-"):
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if name not in out:
            continue
        if not eq:
            if out[name] in ("true", "false"):
                value = "true"
            elif i < len(args):
                value, i = args[i], i + 1
        out[name] = value
    return out


def unknown_flags(args: Sequence[str], defaults: Mapping[str, str]) -> list[str]:
    """The arguments of ``args`` that :func:`flags` ignores: flags it does not know
    (with their value when given as ``--name=value``), and stray words."""
    out = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        name, eq, _ = arg.lstrip("-").partition("=")
        if not arg.startswith("-") or name not in defaults:
            out.append(arg)
        elif not eq and defaults[name] not in ("true", "false") and i < len(args):
            i += 1  # (its value, the next argument)
    return out


def task_hosts(job: JobSpec, task: TaskSpec) -> list[str]:
    """``<hostname>.<subdomain>`` of each pod of ``task`` (one when the template fixes
    the hostname), as Volcano's plugins name them."""
    spec = task.pod_spec
    hosts = []
    for i in range(task.replicas):
        host = spec.get("hostname") or pod_name(job.name, task.name, i)
        hosts.append(f"{host}.{spec.get('subdomain') or job.name}")
        if spec.get("hostname"):
            break
    return hosts


def _env_key(task: str) -> str:
    return task.replace("-", "_")


def _containers(pod: dict[str, Any], *, init: bool = True) -> list[dict[str, Any]]:
    spec = pod["spec"]
    out = list(spec.get("containers") or [])
    if init:
        out += list(spec.get("initContainers") or [])
    return out


def _add_env(container: dict[str, Any], *env: dict[str, Any]) -> None:
    container["env"] = [*(container.get("env") or []), *env]


def _open_port(container: dict[str, Any], port: int, name: str) -> None:
    ports = container.get("ports") or []
    if not any(p.get("containerPort") == port for p in ports):
        container["ports"] = [*ports, {"name": name, "containerPort": port}]


def _create_or_update(store: Store, obj: dict[str, Any], field: str) -> None:
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    have = store.get(obj["kind"], key)
    if have is None:
        store.create(obj)
    elif have.get(field) != obj[field]:
        store.patch(obj["kind"], key, {field: obj[field]})


class JobPlugin(Protocol):
    name: str
    #: The arguments this plugin was given and does not implement (ignored).
    ignored: list[str]

    def on_pod_create(self, pod: dict[str, Any], job: JobSpec) -> None: ...

    def on_job_add(self, job: JobSpec, store: Store) -> None: ...

    def on_job_update(self, job: JobSpec, store: Store) -> None: ...

    def on_job_delete(self, job: JobSpec, store: Store) -> None: ...


class _Plugin:
    name = ""
    defaults: ClassVar[Mapping[str, str]] = {}

    def __init__(self, args: Sequence[str] = ()) -> None:
        self.args = flags(args, self.defaults)
        self.ignored = unknown_flags(args, self.defaults)

    def on_pod_create(self, pod: dict[str, Any], job: JobSpec) -> None:
        pass

    def on_job_add(self, job: JobSpec, store: Store) -> None:
        pass

    def on_job_update(self, job: JobSpec, store: Store) -> None:
        pass

    def on_job_delete(self, job: JobSpec, store: Store) -> None:
        pass


class EnvPlugin(_Plugin):
    name = "env"

    def on_pod_create(self, pod: dict[str, Any], job: JobSpec) -> None:
        index = pod["metadata"]["name"].rsplit("-", 1)[-1]
        for c in _containers(pod):
            _add_env(
                c,
                {"name": "VK_TASK_INDEX", "value": index},
                {"name": "VC_TASK_INDEX", "value": index},
            )


class SvcPlugin(_Plugin):
    name = "svc"
    defaults: ClassVar[Mapping[str, str]] = {
        "publish-not-ready-addresses": "false",
        "disable-network-policy": "false",
        "inject-hosts-env": "true",
    }
    MOUNT = "/etc/volcano"

    @staticmethod
    def configmap_name(job: JobSpec) -> str:
        return f"{job.name}-svc"

    @staticmethod
    def hosts(job: JobSpec) -> dict[str, str]:
        """The ConfigMap's data (module docstring)."""
        data: dict[str, str] = {}
        for t in job.tasks:
            hosts = task_hosts(job, t)
            key = _env_key(t.name)
            data[f"{key}.host"] = "\n".join(hosts)
            data[f"VC_{key.upper()}_HOSTS"] = ",".join(hosts)
            data[f"VC_{key.upper()}_NUM"] = str(len(hosts))
        return data

    def on_pod_create(self, pod: dict[str, Any], job: JobSpec) -> None:
        spec = pod["spec"]
        spec.setdefault("hostname", pod["metadata"]["name"])
        spec.setdefault("subdomain", job.name)
        cm = self.configmap_name(job)
        if self.args["inject-hosts-env"] == "true":
            env = []
            for t in job.tasks:
                key = _env_key(t.name).upper()
                for name in (f"VC_{key}_HOSTS", f"VC_{key}_NUM"):
                    ref = {"configMapKeyRef": {"name": cm, "key": name}}
                    env.append({"name": name, "valueFrom": ref})
            for c in _containers(pod):
                _add_env(c, *env)
        spec["volumes"] = [*(spec.get("volumes") or []), {"name": cm, "configMap": {"name": cm}}]
        for c in _containers(pod):
            mount = {"name": cm, "mountPath": self.MOUNT}
            c["volumeMounts"] = [*(c.get("volumeMounts") or []), mount]

    def _configmap(self, job: JobSpec) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.configmap_name(job),
                "namespace": job.namespace,
                "ownerReferences": [owner_reference(job)],
            },
            "data": self.hosts(job),
        }

    def on_job_add(self, job: JobSpec, store: Store) -> None:
        _create_or_update(store, self._configmap(job), "data")
        if store.get("Service", job.key) is None:
            store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {
                        "name": job.name,
                        "namespace": job.namespace,
                        "ownerReferences": [owner_reference(job)],
                    },
                    "spec": {
                        "clusterIP": "None",
                        "selector": {
                            "volcano.sh/job-name": job.name,
                            "volcano.sh/job-namespace": job.namespace,
                        },
                        "publishNotReadyAddresses": self.args["publish-not-ready-addresses"]
                        == "true",
                    },
                }
            )

    def on_job_update(self, job: JobSpec, store: Store) -> None:
        _create_or_update(store, self._configmap(job), "data")

    def on_job_delete(self, job: JobSpec, store: Store) -> None:
        store.delete("ConfigMap", f"{job.namespace}/{self.configmap_name(job)}")
        store.delete("Service", job.key)


def ssh_keygen() -> tuple[str, str]:
    """A fresh 2048-bit RSA key pair from ``ssh-keygen``: the private key in PEM
    (``BEGIN RSA PRIVATE KEY``, as Volcano writes it) and the public key in
    authorized_keys form. PluginError when ``ssh-keygen`` is not installed."""
    exe = shutil.which("ssh-keygen")
    if exe is None:
        raise PluginError("the ssh plugin needs ssh-keygen (OpenSSH) to make a key pair")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "id_rsa"
        run = subprocess.run(
            [
                exe,
                "-q",
                "-t",
                "rsa",
                "-b",
                "2048",
                "-m",
                "PEM",
                "-N",
                "",
                "-C",
                "",
                "-f",
                str(path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise PluginError(f"ssh-keygen failed: {run.stderr.strip() or run.returncode}")
        private = path.read_text()
        public = Path(f"{path}.pub").read_text().split()
    return private, f"{public[0]} {public[1]}\n"


class SshPlugin(_Plugin):
    name = "ssh"
    defaults: ClassVar[Mapping[str, str]] = {
        "ssh-key-file-path": "/root/.ssh",
        "ssh-private-key": "",
        "ssh-public-key": "",
        "ssh-port": "22",
    }
    FILES = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")

    def __init__(
        self, args: Sequence[str] = (), keygen: Callable[[], tuple[str, str]] = ssh_keygen
    ) -> None:
        super().__init__(args)
        self.keygen = keygen
        try:
            self.port = int(self.args["ssh-port"])
        except ValueError:
            self.port = 22
        if not 0 < self.port <= 65535:
            self.port = 22

    @staticmethod
    def secret_name(job: JobSpec) -> str:
        return f"{job.name}-ssh"

    def config(self, job: JobSpec) -> str:
        """The ssh client ``config``: every pod by its short name."""
        out = "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        for t in job.tasks:
            for host in task_hosts(job, t):
                short = host.split(".", 1)[0]
                out += f"Host {short}\n  HostName {host}\n  Port {self.port}\n"
        return out

    def on_pod_create(self, pod: dict[str, Any], job: JobSpec) -> None:
        name = self.secret_name(job)
        path = self.args["ssh-key-file-path"]
        volume = {
            "name": name,
            "secret": {
                "secretName": name,
                "items": [{"key": f, "path": f".ssh/{f}"} for f in self.FILES],
                "defaultMode": 0o600 if path == "/root/.ssh" else 0o644,
            },
        }
        spec = pod["spec"]
        spec["volumes"] = [*(spec.get("volumes") or []), volume]
        for c in _containers(pod):
            mount = {"name": name, "mountPath": path, "subPath": ".ssh"}
            c["volumeMounts"] = [*(c.get("volumeMounts") or []), mount]

    def on_job_add(self, job: JobSpec, store: Store) -> None:
        key = f"{job.namespace}/{self.secret_name(job)}"
        if store.get("Secret", key) is not None:
            return
        if self.args["ssh-private-key"]:
            private, public = self.args["ssh-private-key"], self.args["ssh-public-key"]
        else:
            private, public = self.keygen()
        data = {
            "id_rsa": private,
            "id_rsa.pub": public,
            "authorized_keys": public,
            "config": self.config(job),
        }
        store.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": self.secret_name(job),
                    "namespace": job.namespace,
                    "ownerReferences": [owner_reference(job)],
                },
                "type": "Opaque",
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
            }
        )

    def on_job_delete(self, job: JobSpec, store: Store) -> None:
        store.delete("Secret", f"{job.namespace}/{self.secret_name(job)}")


class MpiPlugin(_Plugin):
    name = "mpi"
    defaults: ClassVar[Mapping[str, str]] = {"master": "master", "worker": "worker", "port": "22"}

    def on_pod_create(self, pod: dict[str, Any], job: JobSpec) -> None:
        port = int(self.args["port"]) if self.args["port"].isdigit() else 22
        env = None
        worker = job.task(self.args["worker"])
        if pod["metadata"]["annotations"].get(TASK_SPEC) == self.args["master"] and worker:
            env = {"name": "MPI_HOST", "value": ",".join(task_hosts(job, worker))}
        for c in _containers(pod):
            _open_port(c, port, "mpijob-port")
            if env:
                _add_env(c, dict(env))


class PytorchPlugin(_Plugin):
    name = "pytorch"
    defaults: ClassVar[Mapping[str, str]] = {
        "master": "master",
        "worker": "worker",
        "port": "23456",
        "wait-master-enabled": "false",
        "wait-master-timeout": "300",
        "wait-master-image": "busybox:1.36.1",
    }
    #: The init container's name, as Volcano's (a pod that has one keeps its own).
    WAIT_FOR_MASTER = "wait-for-master"

    def on_pod_create(self, pod: dict[str, Any], job: JobSpec) -> None:
        master = job.task(self.args["master"])
        if master is None:
            return
        port = int(self.args["port"]) if self.args["port"].isdigit() else 23456
        role = pod["metadata"]["annotations"].get(TASK_SPEC)
        world = sum(
            t.replicas for t in job.tasks if t.name in (self.args["master"], self.args["worker"])
        )
        env = [
            {"name": "MASTER_ADDR", "value": task_hosts(job, master)[0] if master.replicas else ""},
            {"name": "MASTER_PORT", "value": str(port)},
            {"name": "WORLD_SIZE", "value": str(world)},
        ]
        if role == self.args["worker"]:
            env.append(
                {"name": "RANK", "value": str((pod_index(pod["metadata"]["name"]) or 0) + 1)}
            )
        elif role == self.args["master"]:
            env.append({"name": "RANK", "value": "0"})
        for c in _containers(pod, init=False):
            _open_port(c, port, "pytorchjob-port")
            _add_env(c, *[dict(e) for e in env])
        if role == self.args["worker"] and _true(self.args["wait-master-enabled"]):
            self._wait_for_master(pod, task_hosts(job, master)[0] if master.replicas else "", port)

    def _wait_for_master(self, pod: dict[str, Any], master: str, port: int) -> None:
        """Give a worker pod the init container that holds it until ``master:port``
        accepts connections (``nc``, or bash's ``/dev/tcp``), failing the pod after the
        timeout, as Volcano's plugin does."""
        spec = pod.setdefault("spec", {})
        inits = spec.setdefault("initContainers", [])
        if any(c.get("name") == self.WAIT_FOR_MASTER for c in inits):
            return
        timeout = self.args["wait-master-timeout"]
        timeout = timeout if timeout.isdigit() else self.defaults["wait-master-timeout"]
        script = "\n".join(
            [
                f'echo "Waiting for master node {master}:{port} to be ready..."',
                f"TIMEOUT={timeout}",
                "ELAPSED=0",
                f"until {{ nc -z {master} {port} || echo > /dev/tcp/{master}/{port}; }}"
                " 2>/dev/null; do",
                "  if [ $ELAPSED -ge $TIMEOUT ]; then",
                '    echo "Timeout waiting for master after ${TIMEOUT} seconds"',
                "    exit 1",
                "  fi",
                '  echo "Master not ready yet, retrying in 2 seconds... (elapsed: ${ELAPSED}s)"',
                "  sleep 2",
                "  ELAPSED=$((ELAPSED + 2))",
                "done",
                'echo "Master node is ready!"',
            ]
        )
        inits.append(
            {
                "name": self.WAIT_FOR_MASTER,
                "image": self.args["wait-master-image"],
                "command": ["sh", "-c", script],
            }
        )


def _true(value: str) -> bool:
    """A Go boolean flag's value (``strconv.ParseBool``'s true spellings)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def build_plugins(
    job: JobSpec, *, keygen: Callable[[], tuple[str, str]] = ssh_keygen
) -> list[JobPlugin]:
    """The plugins ``job`` names (with the implied ones), in name order; names pumice
    does not know are left out (validation refuses them first)."""
    if not job.plugins:
        return []  # (most Jobs, on every reconcile)
    kinds: dict[str, Callable[[Sequence[str]], JobPlugin]] = {
        "env": EnvPlugin,
        "svc": SvcPlugin,
        "ssh": lambda args: SshPlugin(args, keygen),
        "mpi": MpiPlugin,
        "pytorch": PytorchPlugin,
    }
    return [kinds[n](job.plugins[n]) for n in sorted(job.plugins) if n in kinds]


__all__ = [
    "EnvPlugin",
    "JobPlugin",
    "MpiPlugin",
    "PluginError",
    "PytorchPlugin",
    "SshPlugin",
    "SvcPlugin",
    "build_plugins",
    "flags",
    "ssh_keygen",
    "task_hosts",
    "unknown_flags",
]
