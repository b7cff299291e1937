"""Finding and unpacking the control plane's binaries (no Kubernetes needed)."""

from __future__ import annotations

import lzma
import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from pumice.sandbox import binaries
from pumice.sandbox.binaries import BinaryNotFoundError, find_binary, missing_binaries

SCRIPT = b"#!/bin/sh\necho fake-apiserver\n"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No binary variables, an empty PATH and a private cache directory."""
    for var in binaries.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def _executable(path: Path, data: bytes = SCRIPT) -> Path:
    path.write_bytes(data)
    path.chmod(0o755)
    return path


def test_a_missing_binary_says_where_it_looked_and_how_to_get_it(clean_env: Path) -> None:
    with pytest.raises(BinaryNotFoundError) as err:
        find_binary("kube-apiserver")
    message = str(err.value)
    for needle in (
        "kube-apiserver not found",
        "PUMICE_K8S_BIN",
        "setup-envtest",
        "apt-get install etcd-server",
        "unset: PUMICE_K8S_BIN, KUBEBUILDER_ASSETS",
    ):
        assert needle in message
    assert missing_binaries("kube-apiserver", "etcd") == message


def test_a_folder_that_does_not_exist_is_named(clean_env: Path, monkeypatch) -> None:
    monkeypatch.setenv("PUMICE_K8S_BIN", str(clean_env / "nope"))
    with pytest.raises(BinaryNotFoundError, match=r"PUMICE_K8S_BIN=.*nope \(no such directory\)"):
        find_binary("etcd")


def test_search_order_is_pumice_then_kubebuilder_then_path(clean_env: Path, monkeypatch) -> None:
    ours, envtest, on_path = (clean_env / d for d in ("ours", "envtest", "empty-path"))
    ours.mkdir()
    envtest.mkdir()
    _executable(on_path / "etcd")
    assert find_binary("etcd") == on_path / "etcd"
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(envtest))
    _executable(envtest / "etcd")
    assert find_binary("etcd") == envtest / "etcd"
    monkeypatch.setenv("PUMICE_K8S_BIN", str(ours))
    assert find_binary("etcd") == envtest / "etcd"  # not in ours: the next place
    _executable(ours / "etcd")
    assert find_binary("etcd") == ours / "etcd"
    assert missing_binaries("etcd") is None


def test_an_xz_binary_is_unpacked_once_into_the_cache(clean_env: Path, monkeypatch) -> None:
    folder = clean_env / "bin"
    folder.mkdir()
    (folder / "kube-apiserver.xz").write_bytes(lzma.compress(SCRIPT))
    monkeypatch.setenv("PUMICE_K8S_BIN", str(folder))
    path = find_binary("kube-apiserver")
    assert path.is_relative_to(clean_env / "cache" / "pumice" / "k8s-bin")
    assert path.name == "kube-apiserver"
    assert path.stat().st_mode & stat.S_IXUSR
    assert subprocess.run([path], capture_output=True).stdout == b"fake-apiserver\n"
    mtime = path.stat().st_mtime_ns
    assert find_binary("kube-apiserver") == path
    assert path.stat().st_mtime_ns == mtime  # not unpacked again
    assert [p.name for p in path.parent.iterdir()] == ["kube-apiserver"]  # no temp files


def test_a_changed_archive_gets_a_new_cache_entry(clean_env: Path, monkeypatch) -> None:
    folder = clean_env / "bin"
    folder.mkdir()
    monkeypatch.setenv("PUMICE_K8S_BIN", str(folder))
    (folder / "etcd.xz").write_bytes(lzma.compress(SCRIPT))
    first = find_binary("etcd")
    (folder / "etcd.xz").write_bytes(lzma.compress(SCRIPT + b"# v2\n"))
    os.utime(folder / "etcd.xz", ns=(1, 1))
    second = find_binary("etcd")
    assert first != second and second.read_bytes().endswith(b"# v2\n")


def test_parallel_unpacking_never_shows_a_partial_file(clean_env: Path) -> None:
    payload = SCRIPT + b"#" * (8 << 20)  # big enough for the writes to interleave
    archive = clean_env / "big.xz"
    archive.write_bytes(lzma.compress(payload, preset=0))
    results: list[Path] = []
    errors: list[BaseException] = []

    def unpack() -> None:
        try:
            path = binaries.unpack_xz(archive)
            assert path.stat().st_size == len(payload)
            results.append(path)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=unpack) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(results)) == 1 and results[0].read_bytes() == payload
    assert [p.name for p in results[0].parent.iterdir()] == ["big"]
