"""Listeners by Kafka's settings: `listeners`, `advertised.listeners`,
`listener.security.protocol.map`, and each TLS listener's `ssl.*` settings.

`listeners` names one or more endpoints, `NAME://host:port` each; a name's security protocol comes
from the map (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL). A setting prefixed
`listener.name.<name lower-cased>.` applies to that listener only, as in Kafka
(`listener.name.sasl_ssl.ssl.client.auth=required`). Metadata and FindCoordinator answer with the
advertised address of the listener the request came on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from corral import _core
from corral.config.types import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: str

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")


def parse_endpoints(text: str) -> list[tuple[str, str, int]]:
    """`NAME://host:port,...` -> [(NAME, host, port)]; a bare `host:port` is PLAINTEXT."""
    endpoints = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        if not sep:
            name, address = "PLAINTEXT", item
        host, colon, port = address.rpartition(":")
        if not _NAME.match(name) or not colon or not port.isdigit() or int(port) > 65535:
            raise ConfigError(f"listener {item!r} is not NAME://HOST:PORT")
        endpoints.append((name.upper(), host.strip("[]"), int(port)))
    names = [name for name, _, _ in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"each listener name must appear only once: {text!r}")
    return endpoints


def parse_protocol_map(text: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...` (listener.security.protocol.map)."""
    mapping = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in PROTOCOLS:
            raise ConfigError(
                f"{item!r} is not NAME:PROTOCOL with PROTOCOL one of {', '.join(PROTOCOLS)}"
            )
        mapping[name.strip().upper()] = protocol
    return mapping


def configured(settings) -> list[Listener]:
    """The listeners to bind, in the order given."""
    protocols = parse_protocol_map(settings["listener.security.protocol.map"])
    listeners = []
    for name, host, port in parse_endpoints(settings["listeners"]):
        if name not in protocols:
            raise ConfigError(
                f"No security protocol defined for listener {name} (listener.security.protocol.map)"
            )
        listeners.append(Listener(name, host or "0.0.0.0", port, protocols[name]))
    if not listeners:
        raise ConfigError("listeners names no listener")
    return listeners


def advertised(settings, bound: list[Listener]) -> dict[str, tuple[str, int]]:
    """Listener name -> (host, port) clients are told; a listener not in advertised.listeners is
    advertised as bound (0.0.0.0 as localhost)."""
    given = {
        name: (host, port) for name, host, port in parse_endpoints(settings["advertised.listeners"])
    }
    unknown = sorted(set(given) - {listener.name for listener in bound})
    if unknown:
        raise ConfigError(
            f"advertised.listeners names listeners not in listeners: {', '.join(unknown)}"
        )
    out = {}
    for listener in bound:
        host, port = given.get(listener.name, (listener.host, listener.port))
        out[listener.name] = (host if host not in ("", "0.0.0.0", "::") else "localhost", port)
    return out


def _pem(settings, listener: Listener, inline: str, location: str, what: str) -> bytes | None:
    text = settings.for_listener(listener.name, inline)
    path = settings.for_listener(listener.name, location)
    if text and path:
        raise ConfigError(f"listener {listener.name}: set {inline} or {location}, not both")
    if text:
        return text.encode()
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(
            f"listener {listener.name}: cannot read the {what} {path}: {e.strerror or e}"
        ) from None


def tls_config(settings, listener: Listener) -> _core.TlsServerConfig | None:
    """The TLS server configuration of an SSL or SASL_SSL listener, checked now (startup)."""
    if not listener.tls:
        return None
    for kind in ("keystore", "truststore"):
        if settings.for_listener(listener.name, f"ssl.{kind}.type") != "PEM":
            raise ConfigError(
                f"listener {listener.name}: corral reads PEM only (ssl.{kind}.type=PEM)"
            )
    keystore = _pem(
        settings, listener, "ssl.keystore.certificate.chain", "ssl.keystore.location", "keystore"
    )
    key = _pem(settings, listener, "ssl.keystore.key", "ssl.keystore.location", "keystore")
    if keystore is None or key is None:
        raise ConfigError(
            f"listener {listener.name} ({listener.protocol}) needs a keystore: "
            "ssl.keystore.location (PEM: private key and certificate chain) or "
            "ssl.keystore.key and ssl.keystore.certificate.chain"
        )
    trusted = _pem(
        settings, listener, "ssl.truststore.certificates", "ssl.truststore.location", "truststore"
    )
    client_auth = settings.for_listener(listener.name, "ssl.client.auth")
    try:
        return _core.TlsServerConfig(
            keystore,
            key,
            trusted,
            client_auth,
            settings.for_listener(listener.name, "ssl.enabled.protocols").split(","),
            settings.for_listener(listener.name, "ssl.principal.mapping.rules"),
        )
    except ValueError as e:
        raise ConfigError(f"listener {listener.name}: {e}") from None
