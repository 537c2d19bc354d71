"""The metrics endpoint's TLS: a certificate given in a directory, or one made at start.

As controller-runtime's secure metrics do, a replica given no certificate signs one of its own in
memory: scrapes are encrypted (the bearer token a scraper sends is as good as its identity, so it
must not cross the network in clear), and a scraper that cannot check that certificate is told to
skip the check (the chart's ServiceMonitor does). Given a directory holding ``tls.crt`` and
``tls.key`` (a ``kubernetes.io/tls`` Secret mounted there, cert-manager's for instance), the
replica serves that certificate instead and a scraper can verify it.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CERTIFICATE = "tls.crt"
KEY = "tls.key"
SELF_SIGNED_DAYS = 365
"""How long a made certificate is valid: longer than any replica lives, since it is made anew at
every start and nobody renews it."""


def server_context(cert_dir: str) -> ssl.SSLContext:
    """The TLS context the metrics endpoint serves with.

    Args:
        cert_dir: a directory with ``tls.crt`` and ``tls.key``, or empty for a certificate
            signed by this replica, made now.

    Returns:
        A server-side context that refuses anything older than TLS 1.2.

    Raises:
        OSError: ``cert_dir`` lacks one of the files.
        ssl.SSLError: they are not a certificate and its key.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir:
        folder = Path(cert_dir)
        context.load_cert_chain(folder / CERTIFICATE, folder / KEY)
        return context
    certificate, key = _self_signed()
    # ssl loads a chain only from files: they live for the load, in a folder only we may read.
    with tempfile.TemporaryDirectory(prefix="agentrun-metrics-tls-") as private:
        (Path(private) / CERTIFICATE).write_bytes(certificate)
        (Path(private) / KEY).write_bytes(key)
        context.load_cert_chain(Path(private) / CERTIFICATE, Path(private) / KEY)
    return context


def _self_signed() -> tuple[bytes, bytes]:
    """A certificate for this host (its name, localhost and the loopback addresses) and its key,
    in PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    host = socket.gethostname()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [
        x509.DNSName(host),
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return (
        certificate.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
