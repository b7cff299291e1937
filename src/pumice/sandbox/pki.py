"""Keys and certificates for a throwaway API server.

One self-signed serving certificate (a CA for itself, valid for ``127.0.0.1`` and
``localhost``) that clients trust directly, and one key pair that signs and checks
service-account tokens. Keys are ECDSA P-256: they take milliseconds to make, where RSA
takes a noticeable share of a start-up. Made with the ``cryptography`` package when it is
importable, else with the ``openssl`` command line tool.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the PEM files :func:`make_pki` wrote."""

    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path


def make_pki(folder: Path) -> Pki:
    """Write a serving certificate and service-account keys into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        serving_cert=folder / "serving.crt",
        serving_key=folder / "serving.key",
        sa_key=folder / "sa.key",
        sa_pub=folder / "sa.pub",
    )
    try:
        import cryptography  # noqa: F401
    except ImportError:
        _with_openssl(pki)
    else:
        _with_cryptography(pki)
    return pki


def _with_cryptography(pki: Pki) -> None:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    write_key(key, pki.serving_key)
    pki.serving_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    sa = ec.generate_private_key(ec.SECP256R1())
    write_key(sa, pki.sa_key)
    pki.sa_pub.write_bytes(
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _with_openssl(pki: Pki) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError(
            "making the API server's certificate needs the `cryptography` Python package "
            "or the `openssl` command (Debian: apt-get install openssl)"
        )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    _run(
        openssl, "req", "-x509", *ec, "-nodes", "-days", "3650",
        "-keyout", pki.serving_key, "-out", pki.serving_cert, "-subj", "/CN=kube-apiserver",
        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-addext", "basicConstraints=critical,CA:TRUE",
    )  # fmt: skip
    _run(openssl, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-out", pki.sa_key)  # fmt: skip
    _run(openssl, "pkey", "-in", pki.sa_key, "-pubout", "-out", pki.sa_pub)


def _run(*args: str | Path) -> None:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args[:3]))} failed: {done.stderr.strip()}")
