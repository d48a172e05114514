"""A throw-away CA and a server certificate for 127.0.0.1, for the test servers' HTTPS.

Made with ``cryptography`` (locked in requirements/test.txt): an EC P-256 CA, and a
server certificate it signs with ``IP:127.0.0.1`` and ``DNS:localhost`` as subject
alternative names (what clients check; the common name is ignored). Written as PEM files,
the key readable by its owner only.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        """A server-side context with this certificate, for ``ApiServer(tls=...)`` and
        ``GitHostServer(tls=...)``."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class Authority:
    """A throw-away CA: its certificate and key, and the validity its certificates get."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    start: datetime.datetime
    end: datetime.datetime

    def issue(self, common_name: str, *, organization: str = "", server: bool = False,
              ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        """A certificate for ``common_name`` (``O=organization`` when given): a server's for
        127.0.0.1 and localhost with ``server``, else a client's (Kubernetes reads the user
        from CN and the groups from O)."""
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name(attributes)).issuer_name(self.cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.start).not_valid_after(self.end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                  else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                           critical=False)
        )
        if server:
            names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key


def make_authority() -> Authority:
    """A CA valid from five minutes ago for a day."""
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name("gitops-reloader test CA")).issuer_name(
            _name("gitops-reloader test CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Authority(ca_cert, ca_key, start, end)


def write_pem(path: Path, item: x509.Certificate | ec.EllipticCurvePrivateKey) -> Path:
    """``item`` as a PEM file (a key readable by its owner only)."""
    if isinstance(item, x509.Certificate):
        path.write_bytes(item.public_bytes(serialization.Encoding.PEM))
    else:
        path.touch(mode=0o600)
        path.write_bytes(item.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return path


def make_tls_files(directory: Path) -> TlsFiles:
    """Write ``ca.crt``, ``server.crt`` and ``server.key`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    authority = make_authority()
    cert, key = authority.issue("127.0.0.1", server=True)
    return TlsFiles(write_pem(directory / "ca.crt", authority.cert),
                    write_pem(directory / "server.crt", cert), write_pem(directory / "server.key", key))
