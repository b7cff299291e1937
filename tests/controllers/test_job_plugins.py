"""The env, svc, ssh, mpi and pytorch job plugins: the objects they make and what they
put into the pods, as Volcano's plugins do."""

from __future__ import annotations

import base64
import shutil

import pytest
from tests.controllers.test_job_world import TEST_KEY, World, manifest

from pumice.controllers.job.plugins import flags, ssh_keygen, unknown_flags


def _env(pod: dict, container: int = 0) -> dict:
    out = {}
    for e in pod["spec"]["containers"][container].get("env") or []:
        out[e["name"]] = e.get("value", e.get("valueFrom"))
    return out


def test_env_svc_and_ssh_on_volcanos_example_job():
    """Volcano's example/job.yaml (ssh, env, svc): task index env, the headless
    Service, the hosts ConfigMap and its env, hostname/subdomain, the ssh Secret
    mounted at /root/.ssh."""
    w = World()
    key = w.submit(manifest("nginx-job"))
    w.admit(key)
    pod = w.store.get("Pod", "default/test-job-default-nginx-4")
    assert pod is not None
    env = _env(pod)
    assert env["VK_TASK_INDEX"] == env["VC_TASK_INDEX"] == "4"
    assert env["VC_DEFAULT_NGINX_HOSTS"] == {
        "configMapKeyRef": {"name": "test-job-svc", "key": "VC_DEFAULT_NGINX_HOSTS"}
    }
    assert pod["spec"]["hostname"] == "test-job-default-nginx-4"
    assert pod["spec"]["subdomain"] == "test-job"

    svc = w.store.get("Service", "default/test-job")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {
        "volcano.sh/job-name": "test-job",
        "volcano.sh/job-namespace": "default",
    }
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()

    cm = w.store.get("ConfigMap", "default/test-job-svc")
    hosts = [f"test-job-default-nginx-{i}.test-job" for i in range(6)]
    assert cm["data"] == {
        "default_nginx.host": "\n".join(hosts),
        "VC_DEFAULT_NGINX_HOSTS": ",".join(hosts),
        "VC_DEFAULT_NGINX_NUM": "6",
    }
    mounts = {m["mountPath"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["/etc/volcano"]["name"] == "test-job-svc"
    assert mounts["/root/.ssh"] == {"name": "test-job-ssh", "mountPath": "/root/.ssh",
                                    "subPath": ".ssh"}  # fmt: skip

    secret = w.store.get("Secret", "default/test-job-ssh")
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["id_rsa"] == TEST_KEY[0]
    assert data["id_rsa.pub"] == data["authorized_keys"] == TEST_KEY[1]
    assert "Host test-job-default-nginx-5\n  HostName test-job-default-nginx-5.test-job\n" \
        "  Port 22\n" in data["config"]  # fmt: skip
    assert data["config"].startswith("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n")
    vol = next(v for v in pod["spec"]["volumes"] if v["name"] == "test-job-ssh")
    assert vol["secret"]["defaultMode"] == 0o600
    assert [i["path"] for i in vol["secret"]["items"]] == [
        ".ssh/id_rsa", ".ssh/id_rsa.pub", ".ssh/authorized_keys", ".ssh/config",
    ]  # fmt: skip
    for obj in (svc, cm, secret):
        assert obj["metadata"]["ownerReferences"][0]["uid"] == w.job(key)["metadata"]["uid"]
    assert w.status(key)["controlledResources"] == {
        "plugin-env": "env", "plugin-ssh": "ssh", "plugin-svc": "svc",
    }  # fmt: skip


def test_plugin_objects_are_made_again_for_each_run():
    """As in Volcano, killing a job's pods (a restart) removes the plugins' objects;
    the next run makes them again."""
    w = World()
    key = w.submit(manifest("nginx-job"))
    w.admit(key)
    w.run_all(key)
    first = w.store.get("Service", "default/test-job")["metadata"]["uid"]
    w.store.delete("Pod", "default/test-job-default-nginx-0")  # PodEvicted -> RestartJob
    w.step()
    assert w.phase(key) == "Pending"
    again = w.store.get("Service", "default/test-job")
    assert again is not None and again["metadata"]["uid"] != first


def test_mpi_example_hosts_for_the_master():
    """Volcano's MPI example reads /etc/volcano/mpiworker.host."""
    w = World()
    key = w.submit(manifest("mpi-example"))
    w.admit(key)
    cm = w.store.get("ConfigMap", "default/lm-mpi-job-svc")
    assert cm["data"]["mpiworker.host"] == (
        "lm-mpi-job-mpiworker-0.lm-mpi-job\nlm-mpi-job-mpiworker-1.lm-mpi-job"
    )


def test_mpi_plugin_sets_mpi_host_and_brings_svc_and_ssh():
    w = World()
    job = manifest("mpi-example")
    job["spec"]["plugins"] = {"mpi": ["--master=mpimaster", "--worker=mpiworker"]}
    key = w.submit(job)
    w.admit(key)
    master = w.store.get("Pod", "default/lm-mpi-job-mpimaster-0")
    worker = w.store.get("Pod", "default/lm-mpi-job-mpiworker-0")
    assert _env(master)["MPI_HOST"] == (
        "lm-mpi-job-mpiworker-0.lm-mpi-job,lm-mpi-job-mpiworker-1.lm-mpi-job"
    )
    assert "MPI_HOST" not in _env(worker)
    assert w.store.get("Secret", "default/lm-mpi-job-ssh") is not None
    assert w.store.get("Service", "default/lm-mpi-job") is not None


def test_pytorch_example_env():
    """Volcano's PyTorch plugin example: master address and port, world size, ranks."""
    w = World()
    key = w.submit(manifest("pytorch-job"))
    w.admit(key)
    master = _env(w.store.get("Pod", "default/pytorch-job-master-0"))
    worker = _env(w.store.get("Pod", "default/pytorch-job-worker-1"))
    for env in (master, worker):
        assert env["MASTER_ADDR"] == "pytorch-job-master-0.pytorch-job"
        assert env["MASTER_PORT"] == "23456" and env["WORLD_SIZE"] == "3"
    assert master["RANK"] == "0" and worker["RANK"] == "2"
    ports = w.store.get("Pod", "default/pytorch-job-master-0")["spec"]["containers"][0]["ports"]
    assert {"name": "pytorchjob-port", "containerPort": 23456} in ports
    assert w.store.get("Service", "default/pytorch-job") is not None  # svc implied


def test_svc_plugin_arguments():
    w = World()
    job = manifest("nginx-job")
    job["spec"]["plugins"] = {"svc": ["--publish-not-ready-addresses=true",
                                      "--inject-hosts-env=false"]}  # fmt: skip
    key = w.submit(job)
    w.admit(key)
    assert w.store.get("Service", "default/test-job")["spec"]["publishNotReadyAddresses"]
    pod = w.store.get("Pod", "default/test-job-default-nginx-0")
    assert not any(k.startswith("VC_") for k in _env(pod))


def test_go_style_flags():
    d = {"port": "22", "verbose": "false", "name": "x"}
    assert flags(["--port=2222", "-verbose", "--name", "y", "--nope=1"], d) == {
        "port": "2222", "verbose": "true", "name": "y",
    }  # fmt: skip


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")
def test_ssh_keygen_makes_a_real_key_pair():
    """The default key generator: a PEM RSA private key and its authorized_keys line."""
    private, public = ssh_keygen()
    assert private.startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert public.startswith("ssh-rsa AAAA") and public.endswith("\n")
    assert len(public.split()) == 2


def test_pytorch_wait_master_gives_workers_volcanos_init_container():
    """Volcano's PyTorch example with ``--wait-master-enabled=true``: each worker pod
    waits for the master's port in a ``wait-for-master`` init container; the master
    does not; and no argument is reported as ignored."""
    w = World()
    key = w.submit(manifest("pytorch-wait-master"))
    w.admit(key)
    master = w.store.get("Pod", "default/pytorch-job-master-0")
    assert not master["spec"].get("initContainers")
    for i in (0, 1):
        worker = w.store.get("Pod", f"default/pytorch-job-worker-{i}")
        (init,) = worker["spec"]["initContainers"]
        assert init["name"] == "wait-for-master"
        assert init["image"] == "busybox:1.36.1"
        sh, c, script = init["command"]
        assert (sh, c) == ("sh", "-c")
        assert "nc -z pytorch-job-master-0.pytorch-job 23456" in script
        assert "echo > /dev/tcp/pytorch-job-master-0.pytorch-job/23456" in script
        assert "TIMEOUT=600" in script and "exit 1" in script
        assert _env(worker)["MASTER_ADDR"] == "pytorch-job-master-0.pytorch-job"
    assert not [e for e in w.events(key) if e["reason"] == "PluginError"]


def test_pytorch_without_wait_master_has_no_init_container():
    w = World()
    key = w.submit(manifest("pytorch-job"))
    w.admit(key)
    worker = w.store.get("Pod", "default/pytorch-job-worker-0")
    assert not worker["spec"].get("initContainers")


def test_an_argument_pumice_does_not_implement_is_a_warning_event_once():
    job = manifest("pytorch-job")
    job["spec"]["plugins"]["pytorch"] += ["--elastic-restarts=3", "stray"]
    w = World()
    key = w.submit(job)
    w.admit(key)
    w.step()
    warned = [e for e in w.events(key) if e["reason"] == "PluginError"]
    assert len(warned) == 1
    e = warned[0]
    assert e["type"] == "Warning" and e.get("count", 1) == 1
    assert e["message"] == (
        "plugin pytorch: pumice does not implement the argument(s) --elastic-restarts=3 "
        "stray; ignored"
    )
    # what it does implement still applies
    assert _env(w.store.get("Pod", "default/pytorch-job-worker-0"))["RANK"] == "1"


@pytest.mark.parametrize(
    ("args", "ignored"),
    [
        (["--port=22", "--master", "m"], []),
        (["--wait-master-enabled", "--nope"], ["--nope"]),
        (["-bogus=1", "--port", "23", "x"], ["-bogus=1", "x"]),
    ],
)
def test_unknown_flags_are_those_flags_ignores(args, ignored):
    defaults = {"port": "1", "master": "master", "wait-master-enabled": "false"}
    assert unknown_flags(args, defaults) == ignored
