"""Reading manifests for apply, and what deploy/ holds (no Kubernetes needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pumice.conf.config import DEFAULT_CONFIG, parse_config
from pumice.sandbox.apply import ApplyError, load_manifests

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _cm(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def test_a_directory_is_read_in_file_name_order_documents_in_file_order(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(yaml.safe_dump_all([_cm("b1"), None, _cm("b2")]))
    (tmp_path / "a.yml").write_text(yaml.safe_dump(_cm("a")))
    (tmp_path / "c.json").write_text(json.dumps({"kind": "List", "items": [_cm("c")]}))
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "z.yaml").write_text(yaml.safe_dump(_cm("nested")))
    manifests = list(load_manifests(tmp_path))
    assert [m.body["metadata"]["name"] for m in manifests] == ["a", "b1", "b2", "c"]
    assert manifests[1].source == f"{tmp_path / 'b.yaml'}#1"
    assert manifests[2].source == f"{tmp_path / 'b.yaml'}#3"
    assert manifests[3].source == f"{tmp_path / 'c.json'} item 1"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("kind: ConfigMap\nmetadata: {name: x}\n", "missing apiVersion"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "missing kind"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "ConfigMap without metadata.name"),
        ("- just a list\n", "not an object"),
        ("apiVersion: v1\nkind: [\n", "malformed YAML at line 3"),
    ],
)
def test_a_bad_document_names_its_file(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ApplyError, match=error) as err:
        list(load_manifests([path]))
    assert str(err.value).startswith(str(path))


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ApplyError, match="no such file"):
        list(load_manifests(tmp_path / "absent"))


def _deploy() -> dict[str, dict]:
    return {
        f"{m.body['kind']}/{m.body['metadata']['name']}": m.body for m in load_manifests(DEPLOY)
    }


def test_deploy_holds_what_a_cluster_needs_in_order() -> None:
    kinds = [m.body["kind"] for m in load_manifests(DEPLOY)]
    assert kinds == [
        "Namespace", *["CustomResourceDefinition"] * 7,
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding",  # the controllers'
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment",
        "Deployment",
    ]  # fmt: skip
    # no object of a kind whose CRD is applied in the same run: one `kubectl apply -f
    # deploy/` on a fresh cluster would fail on it (the CRD is not served yet)
    crd_kinds = {m.body["spec"]["names"]["kind"] for m in load_manifests(DEPLOY)
                 if m.body["kind"] == "CustomResourceDefinition"}  # fmt: skip
    assert crd_kinds.isdisjoint(kinds)


def test_the_shipped_config_is_volcanos_default() -> None:
    conf = _deploy()["ConfigMap/pumice-scheduler-config"]["data"]["volcano-scheduler.conf"]
    assert yaml.safe_load(conf) == yaml.safe_load(DEFAULT_CONFIG)
    assert (
        parse_config(yaml.safe_load(conf)).actions
        == parse_config(yaml.safe_load(DEFAULT_CONFIG)).actions
    )


def test_the_deployment_runs_pumice_with_the_mounted_config() -> None:
    objects = _deploy()
    spec = objects["Deployment/pumice-scheduler"]["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == objects["ServiceAccount/pumice"]["metadata"]["name"]
    (container,) = pod["containers"]
    argv = container["command"] + container["args"]
    assert argv == [
        "pumice", "run", "--config", "/etc/pumice/volcano-scheduler.conf", "--leader-elect",
        "--metrics-address", ":8080", "--healthz-address", ":11251",
    ]  # fmt: skip
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/pumice"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == "pumice-scheduler-config"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]
    assert container["image"] == "pumice:0.1.0"


def test_the_cluster_role_grants_nothing_wholesale() -> None:
    role = _deploy()["ClusterRole/pumice-scheduler"]
    for rule in role["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])
    binding = _deploy()["ClusterRoleBinding/pumice-scheduler"]
    assert binding["roleRef"]["name"] == "pumice-scheduler"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "pumice", "namespace": "pumice-system"}
    ]


def test_the_crds_are_volcanos_group_kinds_and_names() -> None:
    objects = _deploy()
    pg = objects["CustomResourceDefinition/podgroups.scheduling.volcano.sh"]["spec"]
    q = objects["CustomResourceDefinition/queues.scheduling.volcano.sh"]["spec"]
    assert (pg["group"], pg["scope"], pg["names"]["kind"]) == (
        "scheduling.volcano.sh", "Namespaced", "PodGroup",
    )  # fmt: skip
    assert (q["group"], q["scope"], q["names"]["kind"]) == (
        "scheduling.volcano.sh", "Cluster", "Queue",
    )  # fmt: skip
    assert pg["names"]["shortNames"] == ["pg", "podgroup-v1beta1"]
    assert q["names"]["shortNames"] == ["q", "queue-v1beta1"]
    for spec in (pg, q):
        (version,) = spec["versions"]
        assert version["name"] == "v1beta1" and version["subresources"] == {"status": {}}
        props = version["schema"]["openAPIV3Schema"]["properties"]
        assert props["spec"]["x-kubernetes-preserve-unknown-fields"] is True
        assert props["status"]["x-kubernetes-preserve-unknown-fields"] is True


def test_the_deploy_readme_names_every_file() -> None:
    readme = (DEPLOY / "README.md").read_text()
    for file in sorted(p.name for p in DEPLOY.glob("*.yaml")):
        assert f"`{file}`" in readme


def test_the_deployments_arguments_are_ones_pumice_run_takes() -> None:
    from pumice.cli import build_parser

    (container,) = _deploy()["Deployment/pumice-scheduler"]["spec"]["template"]["spec"][
        "containers"
    ]
    args = build_parser().parse_args(container["args"])
    assert args.command == "run" and args.leader_elect
    assert (args.metrics_address, args.healthz_address) == (":8080", ":11251")


def test_an_installed_pumice_carries_its_crds(tmp_path: Path) -> None:
    """The wheel a user installs holds deploy/'s manifests under pumice/deploy, where the
    sandbox (and the benchmarks) look for the CRDs they apply, byte for byte the files of
    deploy/; without them an installed sandbox would serve no PodGroups or Queues."""
    import shutil
    import subprocess
    import sys
    import zipfile

    root, src = DEPLOY.parent, tmp_path / "src"  # (a clean copy: no stale build/)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("src", "deploy"):
        shutil.copytree(root / name, src / name, symlinks=True, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, src / name)
    out = tmp_path / "wheel"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0 and "No matching distribution" in built.stderr:
        pytest.skip("building a wheel needs setuptools from PyPI, which cannot be reached")
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob("pumice-*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = {Path(n).name: z.read(n) for n in z.namelist() if n.startswith("pumice/deploy/")}
    ours = {p.name: p.read_bytes() for p in DEPLOY.glob("*.yaml")}
    assert any(n.startswith("01-crd-") for n in ours)
    assert shipped == ours
