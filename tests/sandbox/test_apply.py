"""apply() against a real API server: create or update, CRDs first, errors located."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from pumice.sandbox import ApplyError, ControlPlane, apply

pytestmark = pytest.mark.k8s

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer"}},
                            }
                        },
                    }
                },
            }
        ],
    },
}


def _widget(name: str, size: object) -> dict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


def test_apply_creates_updates_and_names_what_failed(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    cp = control_plane
    path = tmp_path / "all.yaml"
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"a": "1"},
    }
    # A CRD and its first custom resource in one file: the resource waits for the CRD.
    path.write_text(yaml.safe_dump_all([CRD, _widget("w", 1), config]))
    applied = apply(cp.kubeconfig, path)
    assert [(a.kind, a.namespace, a.name) for a in applied] == [
        ("CustomResourceDefinition", None, "widgets.example.com"),
        ("Widget", "default", "w"),  # no namespace given: default, as kubectl does
        ("ConfigMap", "default", "c"),
    ]
    with cp.client() as api:
        core = k8s.CoreV1Api(api)
        core.patch_namespaced_config_map("c", "default", {"metadata": {"labels": {"mine": "x"}}})
        config["data"] = {"a": "2"}
        path.write_text(yaml.safe_dump_all([CRD, _widget("w", 2), config]))
        apply(api, path)  # an ApiClient works as well as a kubeconfig
        updated = core.read_namespaced_config_map("c", "default")
        assert updated.data == {"a": "2"}
        assert updated.metadata.labels == {"mine": "x"}  # fields the file does not set stay
        widget = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
            "example.com", "v1", "default", "widgets", "w"
        )
        assert widget["spec"] == {"size": 2}

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all([_widget("ok", 3), _widget("w2", "big")]))
    with pytest.raises(ApplyError) as err:
        apply(cp.kubeconfig, bad)
    # (server-side apply answers a wrong type with 500 "failed to create typed patch object")
    assert str(err.value).startswith(f"{bad}#2: Widget w2: ")
    assert "spec.size" in str(err.value)

    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(yaml.safe_dump({**_widget("x", 1), "apiVersion": "example.com/v9"}))
    with pytest.raises(ApplyError, match=rf"^{unknown}: Widget x: the server has no kind Widget"):
        apply(cp.kubeconfig, unknown)
