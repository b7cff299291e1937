"""Create or update every object of YAML files, like ``kubectl apply -f FILE_OR_DIR``.

:func:`apply` reads files (multi-document YAML or JSON, ``kind: List`` unwrapped) and
directories (their ``.yaml``, ``.yml`` and ``.json`` files in name order, not recursing, as
``kubectl apply -f DIR`` does), and sends each object, in order, as a server-side apply
(``fieldManager=pumice``, conflicts forced): one call that creates the object or updates
the fields the file sets, leaving fields others own alone. Kinds are looked up through
discovery with the ``kubernetes`` client's :class:`~kubernetes.dynamic.DynamicClient`.

A CustomResourceDefinition applied earlier in the same call is waited for (``Established``)
before the first object of its kind, and all of them are waited for before returning, so
a caller can create custom resources at once. A namespaced object without a namespace
goes to ``default``. Any failure raises :class:`ApplyError` naming the file and the object;
objects before it stay applied.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pumice.documents import read_file
from pumice.errors import InputError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient
    from kubernetes.dynamic import DynamicClient

#: pumice's own manifests: ``deploy/`` of a source checkout, shipped inside the package
#: as ``pumice/deploy`` (a link to it in the checkout), so an installed pumice has its
#: CRDs too.
DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


SUFFIXES = (".yaml", ".yml", ".json")
FIELD_MANAGER = "pumice"
_CRD_GROUP = "apiextensions.k8s.io"


class ApplyError(RuntimeError):
    """An object could not be read or applied; the message names the file and object."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object read from a file, with where it came from."""

    source: str  # "path" or "path#N" for the N-th document (from 1)
    body: dict[str, Any]

    @property
    def label(self) -> str:
        meta = self.body.get("metadata") or {}
        ns = meta.get("namespace")
        name = f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))
        return f"{self.body.get('kind')} {name}"


@dataclass(frozen=True, slots=True)
class Applied:
    """What :func:`apply` did with one object."""

    source: str
    api_version: str
    kind: str
    namespace: str | None
    name: str


def apply(
    target: str | Path | ApiClient | DynamicClient,
    paths: str | Path | Iterable[str | Path],
    *,
    timeout: float = 60.0,
) -> list[Applied]:
    """Apply every object of ``paths`` through ``target``; return them in order.

    ``target`` is a kubeconfig file, a ``kubernetes.client.ApiClient`` or a
    ``DynamicClient``. ``timeout`` bounds each wait for a CRD to be Established.
    """
    manifests = list(load_manifests(paths))
    with _dynamic_client(target) as dyn:
        applier = _Applier(dyn, timeout)
        done = [applier.apply(m) for m in manifests]
        applier.wait_for_crds()
    return done


def load_manifests(paths: str | Path | Iterable[str | Path]) -> Iterator[Manifest]:
    """Every object of the files and directories ``paths``, in apply order."""
    if isinstance(paths, str | Path):
        paths = [paths]
    for path in map(Path, paths):
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        elif path.is_file():
            files = [path]
        else:
            raise ApplyError(f"{path}: no such file or directory")
        for file in files:
            yield from _read(file)


def _read(file: Path) -> Iterator[Manifest]:
    try:
        docs = read_file(file, keep_empty=True)
    except InputError as err:
        raise ApplyError(err.render()) from None
    for index, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        source = f"{file}#{index}" if len(docs) > 1 else str(file)
        if isinstance(doc, dict) and doc.get("kind") == "List" and "items" in doc:
            items = doc["items"] or []
            for j, item in enumerate(items, start=1):
                yield _checked(f"{source} item {j}", item)
        else:
            yield _checked(source, doc)


def _checked(source: str, doc: Any) -> Manifest:
    if not isinstance(doc, dict):
        raise ApplyError(f"{source}: not an object (a {type(doc).__name__})")
    for field in ("apiVersion", "kind"):
        if not isinstance(doc.get(field), str) or not doc[field]:
            raise ApplyError(f"{source}: missing {field}")
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise ApplyError(f"{source}: {doc['kind']} without metadata.name")
    return Manifest(source, doc)


class _dynamic_client:
    """Context manager giving a DynamicClient whose discovery cache is private.

    The client's default cache file is keyed by server URL only; a fresh API server on a
    port an earlier one used would be described by the earlier server's resources.
    """

    def __init__(self, target: str | Path | ApiClient | DynamicClient) -> None:
        self.target = target
        self.folder: str | None = None
        self.owned: ApiClient | None = None

    def __enter__(self) -> DynamicClient:
        from kubernetes import config
        from kubernetes.client import ApiClient
        from kubernetes.dynamic import DynamicClient

        if isinstance(self.target, DynamicClient):
            return self.target
        if isinstance(self.target, ApiClient):
            api = self.target
        else:
            api = self.owned = config.new_client_from_config(config_file=str(self.target))
        self.folder = tempfile.mkdtemp(prefix="pumice-discovery-")
        return DynamicClient(api, cache_file=str(Path(self.folder) / "discovery.json"))

    def __exit__(self, *exc: object) -> None:
        if self.owned is not None:
            self.owned.close()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


class _Applier:
    def __init__(self, dyn: DynamicClient, timeout: float) -> None:
        self.dyn = dyn
        self.timeout = timeout
        self.crds: dict[tuple[str, str], str] = {}  # (group, kind) -> CRD name, not yet seen

    def apply(self, m: Manifest) -> Applied:
        from kubernetes.client.exceptions import ApiException

        api_version, kind = m.body["apiVersion"], m.body["kind"]
        group = api_version.rpartition("/")[0]
        if (group, kind) in self.crds:
            self._wait_established(self.crds.pop((group, kind)), m)
        resource = self._resource(m, api_version, kind)
        meta = m.body["metadata"]
        namespace = (meta.get("namespace") or "default") if resource.namespaced else None
        try:
            self.dyn.server_side_apply(
                resource,
                body=m.body,
                name=meta["name"],
                namespace=namespace,
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )
        except ApiException as err:
            raise ApplyError(f"{m.source}: {m.label}: {_reason(err)}") from err
        if group == _CRD_GROUP and kind == "CustomResourceDefinition":
            spec = m.body.get("spec") or {}
            names = spec.get("names") or {}
            self.crds[(str(spec.get("group")), str(names.get("kind")))] = meta["name"]
        return Applied(m.source, api_version, kind, namespace, meta["name"])

    def wait_for_crds(self) -> None:
        for name in self.crds.values():
            self._wait_established(name, None)
        self.crds.clear()

    def _resource(self, m: Manifest, api_version: str, kind: str) -> Any:
        from kubernetes.client.exceptions import ApiException
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self.dyn.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError as err:
                # Discovery can trail a CRD that just became Established.
                if not self._crd_known(api_version, kind) or time.monotonic() > deadline:
                    raise ApplyError(
                        f"{m.source}: {m.label}: the server has no kind {kind} in "
                        f"{api_version} (is its CustomResourceDefinition applied?)"
                    ) from err
                time.sleep(0.2)
            except ApiException as err:
                raise ApplyError(f"{m.source}: {m.label}: discovery: {_reason(err)}") from err

    def _crd_known(self, api_version: str, kind: str) -> bool:
        """Whether a CRD serves ``kind`` in ``api_version`` (so discovery will catch up)."""
        group, _, version = api_version.rpartition("/")
        for crd in self._crd_resource().get().items:
            spec = crd.spec
            if spec.group == group and spec.names.kind == kind:
                return any(v.name == version and v.served for v in spec.versions)
        return False

    def _crd_resource(self) -> Any:
        return self.dyn.resources.get(
            api_version=f"{_CRD_GROUP}/v1", kind="CustomResourceDefinition"
        )

    def _wait_established(self, name: str, before: Manifest | None) -> None:
        crds = self._crd_resource()
        deadline = time.monotonic() + self.timeout
        while True:
            status = crds.get(name=name).to_dict().get("status") or {}
            conditions = {c.get("type"): c for c in status.get("conditions") or []}
            if conditions.get("Established", {}).get("status") == "True":
                return
            names = conditions.get("NamesAccepted", {})
            if names.get("status") == "False":
                raise ApplyError(f"CustomResourceDefinition {name}: {names.get('message')}")
            if time.monotonic() > deadline:
                where = f" (needed by {before.source}: {before.label})" if before else ""
                raise ApplyError(
                    f"CustomResourceDefinition {name} not Established after "
                    f"{self.timeout:.0f} s{where}"
                )
            time.sleep(0.05)


def _reason(err: Any) -> str:
    """The API server's message from an ApiException (its Status body), else the error."""
    try:
        body = json.loads(err.body)
        return f"{body.get('reason') or err.status}: {body.get('message')}"
    except (TypeError, ValueError, AttributeError):
        return f"{getattr(err, 'status', '')} {getattr(err, 'reason', '')}".strip() or str(err)
