"""The settings of listeners and TLS, by Kafka's names (see listeners.py for how they are read).

The `ssl.*` ones may be given for one listener only with Kafka's prefix
`listener.name.<listener lower-cased>.` (`Settings.for_listener`).
"""

from __future__ import annotations

from typing import Any

from corral.config.types import ConfigError, ConfigType, Setting, inert, one_of, string_value

_PEM_ONLY = "corral reads PEM keystores and truststores only: PEM files need no password"
_RUSTLS = "TLS is rustls's, set up from PEM stores, not a Java security provider's"


def _listeners(value: Any) -> str:
    from corral.network.listeners import parse_endpoints

    text = str(value).strip()
    if not parse_endpoints(text):
        raise ConfigError("listeners names no listener")
    return text


def _advertised(value: Any) -> str:
    from corral.network.listeners import parse_endpoints

    text = str(value).strip()
    parse_endpoints(text)
    return text


def _protocol_map(value: Any) -> str:
    from corral.network.listeners import parse_protocol_map

    text = str(value).strip()
    parse_protocol_map(text)
    return text


def _pem_type(value: Any) -> str:
    text = str(value).strip().upper()
    if text != "PEM":
        raise ConfigError(
            f"{value!r}: corral reads PEM only (JKS and PKCS12 stores can be "
            "converted with keytool and openssl)"
        )
    return text


def _tls_protocols(value: Any) -> str:
    items = value.split(",") if isinstance(value, str) else list(value)
    entries = [str(item).strip() for item in items if str(item).strip()]
    unknown = sorted(set(entries) - {"TLSv1.2", "TLSv1.3"})
    if unknown or not entries:
        raise ConfigError(f"expected a list of TLSv1.2 and TLSv1.3, got {value!r}")
    return ",".join(entries)


def _principal_mapping_rules(value: Any) -> str:
    from corral import _core

    text = str(value)
    try:
        _core.SslPrincipalMapper(text)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return text


LISTENER_SETTINGS: list[Setting] = [
    Setting(
        "listeners",
        ConfigType.STRING,
        "PLAINTEXT://127.0.0.1:9092",
        _listeners,
        "Where corral listens: NAME://HOST:PORT, comma-separated, each name once; a name's "
        "security protocol comes from listener.security.protocol.map. Port 0 picks a free "
        "port (logged).",
    ),
    Setting(
        "advertised.listeners",
        ConfigType.STRING,
        "",
        _advertised,
        "What Metadata and FindCoordinator tell clients to connect to, per listener name; "
        "a listener not named here is advertised as bound (0.0.0.0 as localhost).",
    ),
    Setting(
        "listener.security.protocol.map",
        ConfigType.STRING,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        _protocol_map,
        "Listener name -> security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).",
    ),
    Setting(
        "ssl.keystore.type",
        ConfigType.STRING,
        "PEM",
        _pem_type,
        "The keystore's format: PEM only (Kafka's default is JKS).",
    ),
    Setting(
        "ssl.keystore.location",
        ConfigType.STRING,
        "",
        string_value,
        "A PEM file holding the listener's unencrypted private key and its certificate chain.",
    ),
    Setting(
        "ssl.keystore.key",
        ConfigType.PASSWORD,
        "",
        string_value,
        "The private key as PEM text (instead of ssl.keystore.location).",
    ),
    Setting(
        "ssl.keystore.certificate.chain",
        ConfigType.PASSWORD,
        "",
        string_value,
        "The certificate chain as PEM text (instead of ssl.keystore.location).",
    ),
    Setting(
        "ssl.truststore.type",
        ConfigType.STRING,
        "PEM",
        _pem_type,
        "The truststore's format: PEM only (Kafka's default is JKS).",
    ),
    Setting(
        "ssl.truststore.location",
        ConfigType.STRING,
        "",
        string_value,
        "A PEM file of the certificates that sign client certificates.",
    ),
    Setting(
        "ssl.truststore.certificates",
        ConfigType.PASSWORD,
        "",
        string_value,
        "The trusted certificates as PEM text (instead of ssl.truststore.location).",
    ),
    Setting(
        "ssl.client.auth",
        ConfigType.STRING,
        "none",
        one_of("none", "requested", "required"),
        "Client certificates: none, requested (verified when sent) or required. On an SSL "
        "listener a verified certificate's subject is the principal (User:CN=...,O=...); "
        "on SASL_SSL the principal is SASL's.",
    ),
    Setting(
        "ssl.enabled.protocols",
        ConfigType.LIST,
        "TLSv1.2,TLSv1.3",
        _tls_protocols,
        "TLS versions accepted.",
    ),
    Setting(
        "ssl.principal.mapping.rules",
        ConfigType.STRING,
        "DEFAULT",
        _principal_mapping_rules,
        "How a client certificate's subject DN becomes the principal's name, as in Kafka: "
        "comma-separated rules tried in order, DEFAULT (the whole DN) or "
        "RULE:pattern/replacement/ with L or U to lower or upper case it "
        "(RULE:^CN=(.*?),OU=.*$/$1/L). A certificate no rule maps is refused. Patterns are "
        "RE2-style (no backreferences or lookaround).",
    ),
    inert("ssl.keystore.password", ConfigType.PASSWORD, None, _PEM_ONLY),
    inert("ssl.truststore.password", ConfigType.PASSWORD, None, _PEM_ONLY),
    inert(
        "ssl.key.password",
        ConfigType.PASSWORD,
        None,
        "keys are read unencrypted (PKCS#8, PKCS#1 or SEC1 PEM)",
    ),
    inert(
        "ssl.protocol", ConfigType.STRING, "TLSv1.3", "ssl.enabled.protocols decides", dynamic=True
    ),
    inert(
        "ssl.cipher.suites",
        ConfigType.LIST,
        "",
        "rustls's safe default suites are used",
        dynamic=True,
    ),
    inert(
        "ssl.endpoint.identification.algorithm",
        ConfigType.STRING,
        "https",
        "a client setting",
        dynamic=True,
    ),
    inert("ssl.keymanager.algorithm", ConfigType.STRING, "SunX509", _RUSTLS, dynamic=True),
    inert("ssl.trustmanager.algorithm", ConfigType.STRING, "PKIX", _RUSTLS, dynamic=True),
    inert("ssl.provider", ConfigType.STRING, None, _RUSTLS, dynamic=True),
    inert("ssl.secure.random.implementation", ConfigType.STRING, None, _RUSTLS, dynamic=True),
    inert("ssl.engine.factory.class", ConfigType.CLASS, None, _RUSTLS, dynamic=True),
    inert(
        "principal.builder.class",
        ConfigType.CLASS,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        "principals are built as by Kafka's default builder: the SASL user, or the client "
        "certificate's subject through ssl.principal.mapping.rules",
        dynamic=True,
    ),
]

# The ones a `listener.name.<name>.` prefix may set for one listener.
PER_LISTENER = {s.name for s in LISTENER_SETTINGS if s.name.startswith("ssl.")} | {
    "sasl.enabled.mechanisms",
    "connections.max.reauth.ms",
}
