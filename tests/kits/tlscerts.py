"""Certificates for the TLS tests: a CA, a server certificate for 127.0.0.1/localhost, client
certificates (valid, expired, signed by another CA), all PEM files in one directory."""

from __future__ import annotations

import datetime
import ipaddress
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = datetime.timedelta(days=1)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "corral"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class _Ca:
    def __init__(self, common_name: str):
        now = datetime.datetime.now(datetime.UTC)
        self.key = ec.generate_private_key(ec.SECP256R1())
        usage = x509.KeyUsage(
            digital_signature=True,
            key_cert_sign=True,
            crl_sign=True,
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            encipher_only=False,
            decipher_only=False,
        )
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY)
            .not_valid_after(now + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(usage, critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def issue(self, common_name: str, *, server: bool, expired: bool = False):
        now = datetime.datetime.now(datetime.UTC)
        start, end = (now - 10 * DAY, now - 2 * DAY) if expired else (now - DAY, now + 30 * DAY)
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(
                x509.SubjectAlternativeName(names), critical=False
            ).add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
        return key, builder.sign(self.key, hashes.SHA256())


@dataclass
class ClientCert:
    cert: Path
    key: Path
    # key and certificate in one file (Java's PEM keystore, kafka-python's certfile+keyfile).
    both: Path
    principal: str


@dataclass
class Certs:
    ca: Path
    # The server's key, certificate and the CA: ssl.keystore.location.
    server: Path
    alice: ClientCert
    bob: ClientCert
    expired: ClientCert
    # Signed by a CA the broker does not trust.
    stranger: ClientCert


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other_ca = _Ca("corral test ca"), _Ca("another ca")
    (directory / "ca.pem").write_bytes(_pem(ca.cert))
    key, cert = ca.issue("localhost", server=True)
    (directory / "server.pem").write_bytes(_key_pem(key) + _pem(cert) + _pem(ca.cert))

    def client(name: str, issuer: _Ca, expired: bool = False) -> ClientCert:
        key, cert = issuer.issue(name, server=False, expired=expired)
        paths = [directory / f"{name}.{suffix}" for suffix in ("crt", "key", "pem")]
        paths[0].write_bytes(_pem(cert))
        paths[1].write_bytes(_key_pem(key))
        paths[2].write_bytes(_key_pem(key) + _pem(cert))
        # Kafka's default principal: the subject DN as RFC 2253 writes it, most specific first.
        return ClientCert(*paths, principal=f"User:CN={name},OU=tests,O=corral,C=US")

    return Certs(
        directory / "ca.pem",
        directory / "server.pem",
        client("alice", ca),
        client("bob", ca),
        client("expired", ca, expired=True),
        client("stranger", other_ca),
    )


def tls_settings(certs: Certs, client_auth: str = "none") -> dict[str, str]:
    return {
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": client_auth,
    }


def refusal_errors(conf: dict, topic: str, on_delivery=None, seconds: float = 10) -> list:
    """What a confluent-kafka producer with `conf` reports (its error_cb) when the broker refuses
    its TLS handshake or SASL login: polled until the first error (at once: nothing to retry
    for), then whatever it still holds purged."""
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({**conf, "error_cb": errors.append, "log_level": 0})
    producer.produce(topic, b"never", on_delivery=on_delivery)
    deadline = time.monotonic() + seconds
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()
    producer.flush(1)
    return errors
