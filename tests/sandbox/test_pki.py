"""The API server's keys and certificate, made either way (no Kubernetes needed)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pumice.sandbox import pki
from pumice.sandbox.pki import Pki


def _with_openssl(p: Pki) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    pki._with_openssl(p)


def _with_cryptography(p: Pki) -> None:
    pytest.importorskip("cryptography")
    pki._with_cryptography(p)


@pytest.mark.parametrize("make", [_with_openssl, _with_cryptography])
def test_the_serving_certificate_is_a_trusted_root_for_loopback(
    tmp_path: Path, make: Callable[[Pki], None]
) -> None:
    p = Pki(*(tmp_path / n for n in ("serving.crt", "serving.key", "sa.key", "sa.pub")))
    make(p)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(p.serving_cert, p.serving_key)  # the key matches the certificate
    client = ssl.create_default_context(cafile=str(p.serving_cert))
    assert client.get_ca_certs()[0]["subjectAltName"] == (
        ("IP Address", "127.0.0.1"),
        ("DNS", "localhost"),
    )
    if shutil.which("openssl"):
        pub = subprocess.run(
            ["openssl", "pkey", "-in", p.sa_key, "-pubout"], capture_output=True, check=True
        ).stdout
        assert pub == p.sa_pub.read_bytes()


def test_make_pki_writes_every_file(tmp_path: Path) -> None:
    made = pki.make_pki(tmp_path / "pki")
    for path in (made.serving_cert, made.serving_key, made.sa_key, made.sa_pub):
        assert path.read_bytes().startswith(b"-----BEGIN ")
