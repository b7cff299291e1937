"""The requests ``pumice job`` and ``pumice queue`` make of the API server.

:class:`Api` turns the API's answers into the two kinds of failure the commands
report: :class:`~pumice.errors.InputError` for an object that does not exist (exit
status 2, the user can fix the command line), :class:`ClusterUnavailable` for
everything the command line cannot fix (unreachable, refused, the CRDs not installed:
exit status 1). Also the credentials and default namespace as kubectl takes them, and
the ``bus.volcano.sh/v1alpha1`` Command vcctl creates to steer a Job or Queue.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from pumice.cluster.kube_client import (
    RESOURCES,
    ApiUnavailable,
    KubeClient,
    Resource,
    status_message,
)
from pumice.controllers.cli_render import meta_of
from pumice.errors import InputError

EXIT_UNAVAILABLE = 1

COMMAND = RESOURCES["Command"]
PODGROUP = RESOURCES["PodGroup"]

COMMAND_API = "bus.volcano.sh/v1alpha1"


class ClusterUnavailable(Exception):
    """The cluster could not answer the request (exit status 1)."""


def _kind_name(res: Resource) -> str:
    group = res.prefix.rsplit("/", 2)[-2] if res.prefix.startswith("/apis/") else ""
    return f"{res.plural}.{group}" if group else res.plural


class Api:
    """The few requests the commands make, with the API's answers turned into the two
    kinds of failure the commands report: :class:`InputError` for an object that does
    not exist, :class:`ClusterUnavailable` for everything the user's command line cannot
    fix."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def _call(self, method: str, path: str, res: Resource, **kw: Any) -> tuple[int, Any]:
        try:
            status, body = self.client.request(method, path, **kw)
        except ApiUnavailable as err:
            raise ClusterUnavailable(
                f"cannot reach the API server at {self.client.host}: {err}"
            ) from None
        if status == 404 and not _names_an_object(body):
            raise ClusterUnavailable(
                f"the API server does not serve {_kind_name(res)} "
                f"({res.prefix.removeprefix('/apis/')}): install the CRDs (deploy/)"
            )
        if status in (401, 403):
            raise ClusterUnavailable(
                f"the API server refused {method} {path}: {status_message(body) or status}"
            )
        return status, body

    def _fail(self, method: str, path: str, status: int, body: Any) -> ClusterUnavailable:
        return ClusterUnavailable(
            f"{method} {path}: HTTP {status}: {status_message(body) or 'no message'}"
        )

    def get(self, res: Resource, namespace: str, name: str) -> dict[str, Any]:
        """The object; :class:`InputError` naming it when it does not exist."""
        path = res.path(namespace, name)
        status, body = self._call("GET", path, res)
        if status == 404:
            where = f" in namespace {namespace!r}" if res.namespaced else ""
            raise InputError(f"no {res.kind} {name!r}{where}")
        if status != 200:
            raise self._fail("GET", path, status, body)
        return body

    def list(self, res: Resource, namespace: str = "", **query: Any) -> list[dict[str, Any]]:
        """Every object of ``res`` (in ``namespace``; all namespaces when empty)."""
        path = res.path(namespace)
        status, body = self._call("GET", path, res, query=query or None)
        if status != 200:
            raise self._fail("GET", path, status, body)
        return list(body.get("items") or ())

    def create(self, res: Resource, namespace: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        path = res.path(namespace)
        status, body = self._call("POST", path, res, body=obj)
        if status not in (200, 201):
            raise self._fail("POST", path, status, body)
        return body

    def delete(self, res: Resource, namespace: str, name: str) -> None:
        path = res.path(namespace, name)
        status, body = self._call("DELETE", path, res)
        if status == 404:
            raise InputError(f"no {res.kind} {name!r} in namespace {namespace!r}")
        if status not in (200, 202):
            raise self._fail("DELETE", path, status, body)


def _names_an_object(body: Any) -> bool:
    """A 404 about a missing object (a Status naming it), not about a missing resource
    type (the server's plain "404 page not found")."""
    return isinstance(body, Mapping) and bool((body.get("details") or {}).get("name"))


def connect(args: argparse.Namespace) -> Api:
    try:
        client = KubeClient.from_config(args.kubeconfig, args.context, pool_size=4)
    except Exception as err:  # the client's loaders raise their own types
        raise InputError(f"cannot load cluster credentials: {err}", field="--kubeconfig") from None
    return Api(client)


def default_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig's context, as kubectl takes it; else the service
    account's in a pod; else ``default``."""
    try:
        from kubernetes import config as k8s_config

        contexts, active = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = active
        if context:
            chosen = next((c for c in contexts if c.get("name") == context), None)
        namespace = ((chosen or {}).get("context") or {}).get("namespace")
        if namespace:
            return str(namespace)
    except Exception:  # no kubeconfig: in a pod, or the loader will say what is wrong
        try:
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                return f.read().strip() or "default"
        except OSError:
            pass
    return "default"


def command_for(
    target: Mapping[str, Any], api_version: str, kind: str, action: str, namespace: str
) -> dict[str, Any]:
    """The Command vcctl creates for ``action`` on ``target`` (a Job or Queue)."""
    meta = meta_of(target)
    ref = {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": COMMAND_API,
        "kind": "Command",
        "metadata": {
            "generateName": f"{meta['name']}-{action.lower()}-",
            "namespace": namespace,
            "ownerReferences": [ref],
        },
        "action": action,
        "target": dict(ref),
    }


__all__ = [
    "COMMAND",
    "COMMAND_API",
    "EXIT_UNAVAILABLE",
    "PODGROUP",
    "Api",
    "ClusterUnavailable",
    "command_for",
    "connect",
    "default_namespace",
]
