"""Finding the control plane's binaries (kube-apiserver, etcd, and peers to compare with).

Search order, per binary, first hit wins:

1. ``$PUMICE_K8S_BIN``: pumice's own variable, a directory;
2. ``$KUBEBUILDER_ASSETS``: the directory controller-runtime's ``setup-envtest`` fills with
   ``kube-apiserver``, ``etcd`` and ``kubectl``;
3. ``$PATH``.

In the two directories a plain executable ``NAME`` is used as it is, and ``NAME.xz`` is
unpacked (Python's ``lzma``) once into ``$XDG_CACHE_HOME/pumice/k8s-bin/<sha256 prefix>/``.
The unpacked file is written under a temporary name and renamed into place, so parallel
test workers unpacking the same archive never see a half-written binary.

A binary found nowhere raises :class:`BinaryNotFoundError`, whose message says where it
looked and how to get it.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: Environment variables naming directories of binaries, in search order.
ENV_VARS = ("PUMICE_K8S_BIN", "KUBEBUILDER_ASSETS")

HOW_TO = (
    "set PUMICE_K8S_BIN to a directory holding kube-apiserver (or kube-apiserver.xz) and "
    "optionally etcd, e.g. the one `setup-envtest use -p path` prints (controller-runtime's "
    "setup-envtest, which fills KUBEBUILDER_ASSETS the same way); etcd may instead be on "
    "PATH (Debian: `apt-get install etcd-server`)"
)

_digests: dict[tuple[str, int, int], str] = {}


class BinaryNotFoundError(FileNotFoundError):
    """A binary the control plane needs is in none of the places searched."""


def find_binary(name: str) -> Path:
    """Return an executable path for ``name``, unpacking ``NAME.xz`` if that is what exists.

    Raises :class:`BinaryNotFoundError` (with the places searched and how to get the
    binary) when there is none.
    """
    looked: list[str] = []
    for var, folder in _env_dirs():
        if not folder.is_dir():
            looked.append(f"{var}={folder} (no such directory)")
            continue
        looked.append(f"{var}={folder}")
        plain = folder / name
        if plain.is_file() and os.access(plain, os.X_OK):
            return plain
        packed = folder / f"{name}.xz"
        if packed.is_file():
            return unpack_xz(packed)
    found = shutil.which(name)
    if found:
        return Path(found)
    looked.append("PATH")
    unset = [v for v in ENV_VARS if not os.environ.get(v)]
    if unset:
        looked.append(f"unset: {', '.join(unset)}")
    raise BinaryNotFoundError(f"{name} not found (searched {'; '.join(looked)}): {HOW_TO}")


def missing_binaries(*names: str) -> str | None:
    """The error message for the first of ``names`` that cannot be found, or None."""
    for name in names or ("kube-apiserver", "etcd"):
        try:
            find_binary(name)
        except BinaryNotFoundError as err:
            return str(err)
    return None


def cache_root() -> Path:
    """Where unpacked binaries live: ``$XDG_CACHE_HOME/pumice/k8s-bin`` (or ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pumice" / "k8s-bin"


def unpack_xz(packed: Path) -> Path:
    """Unpack ``packed`` (``NAME.xz``) into the cache once and return the executable.

    The cache key is a prefix of the archive's SHA-256, so a changed archive gets a fresh
    directory. Falls back to the system temp directory if the cache is not writable.
    """
    name = packed.name.removesuffix(".xz")
    digest = _digest(packed)
    for root in (cache_root(), Path(tempfile.gettempdir()) / f"pumice-k8s-bin-{os.getuid()}"):
        target = root / digest / name
        if target.is_file():
            return target
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _unpack_atomically(packed, target)
        except OSError:
            continue
        return target
    raise BinaryNotFoundError(f"cannot unpack {packed}: no writable cache directory")


def _env_dirs() -> Iterator[tuple[str, Path]]:
    for var in ENV_VARS:
        value = os.environ.get(var)
        if value:
            yield var, Path(value).expanduser()


def _digest(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _digests[key] = h.hexdigest()[:16]
    return _digests[key]


def _unpack_atomically(packed: Path, target: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out, lzma.open(packed) as src:
            shutil.copyfileobj(src, out, 1 << 20)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)  # atomic: a racing worker's copy is identical
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
