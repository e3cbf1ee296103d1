"""The SASL settings, by Kafka's names. Both may be set for one listener only with Kafka's prefix
`listener.name.<listener lower-cased>.` (listener_settings.PER_LISTENER)."""

from __future__ import annotations

from typing import Any

from ..config_types import ConfigError, ConfigType, Setting, inert, int_in

SUPPORTED = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
_NOT_SUPPORTED = {"GSSAPI": "Kerberos", "OAUTHBEARER": "OAuth bearer tokens"}
_NO_LOGIN = (
    "corral's SASL mechanisms are PLAIN and SCRAM, checked against its SCRAM credentials: "
    "no Kerberos, JAAS login module or token refresh"
)


def _mechanisms(value: Any) -> str:
    items = value.split(",") if isinstance(value, str) else list(value)
    entries = [str(item).strip() for item in items if str(item).strip()]
    for entry in entries:
        if entry in _NOT_SUPPORTED:
            raise ConfigError(
                f"{entry} is not supported: corral does not do "
                f"{_NOT_SUPPORTED[entry]}; use {', '.join(SUPPORTED)}"
            )
        if entry not in SUPPORTED:
            raise ConfigError(
                f"unknown SASL mechanism {entry!r}; corral has {', '.join(SUPPORTED)}"
            )
    if not entries:
        raise ConfigError(f"names no mechanism; corral has {', '.join(SUPPORTED)}")
    return ",".join(dict.fromkeys(entries))


SASL_SETTINGS: list[Setting] = [
    Setting(
        "sasl.enabled.mechanisms",
        ConfigType.LIST,
        "SCRAM-SHA-256,SCRAM-SHA-512",
        _mechanisms,
        "SASL mechanisms of SASL_PLAINTEXT and SASL_SSL listeners: SCRAM-SHA-256, "
        "SCRAM-SHA-512 and PLAIN. Users and their credentials are the SCRAM ones managed "
        "with AlterUserScramCredentials (kafka-configs --entity-type users --alter "
        "--add-config 'SCRAM-SHA-256=[password=...]') and kept in the data dir; PLAIN checks "
        "the password against the user's SCRAM credential (any mechanism it has), where "
        "Kafka reads user_<name> entries of the JAAS configuration. corral's default is "
        "SCRAM only (Kafka's, GSSAPI, is Kerberos, which corral does not do): PLAIN sends "
        "the password itself, so enable it on SASL_SSL listeners.",
    ),
    Setting(
        "connections.max.reauth.ms",
        ConfigType.LONG,
        0,
        int_in(-(2**63), 2**63 - 1),
        "The longest a SASL session lasts: told to clients in SaslAuthenticate (v1+), which "
        "re-authenticate before it ends (same user and mechanism); a connection that did "
        "not is closed at its next request. 0 (or less): sessions never end.",
    ),
    Setting(
        "sasl.server.max.receive.size",
        ConfigType.INT,
        524288,
        int_in(1, 2**31 - 1),
        "The largest request a SASL connection may send before it is authenticated (a "
        "larger size closes it); socket.request.max.bytes applies after.",
    ),
    Setting(
        "connection.failed.authentication.delay.ms",
        ConfigType.INT,
        100,
        int_in(0, 2**31 - 1),
        "A connection whose authentication failed is closed this long after the answer "
        "saying so is written: clients read the error, and guessing passwords is slower.",
    ),
    inert(
        "sasl.mechanism.inter.broker.protocol",
        ConfigType.STRING,
        "GSSAPI",
        "corral is a single node, with no inter-broker traffic",
        dynamic=True,
    ),
    inert("sasl.jaas.config", ConfigType.PASSWORD, None, _NO_LOGIN, dynamic=True),
    *(
        inert(f"sasl.{name}", type, default, _NO_LOGIN, dynamic=True)
        for name, type, default in [
            ("kerberos.service.name", ConfigType.STRING, None),
            ("kerberos.kinit.cmd", ConfigType.STRING, "/usr/bin/kinit"),
            ("kerberos.ticket.renew.window.factor", ConfigType.DOUBLE, 0.8),
            ("kerberos.ticket.renew.jitter", ConfigType.DOUBLE, 0.05),
            ("kerberos.min.time.before.relogin", ConfigType.LONG, 60000),
            ("kerberos.principal.to.local.rules", ConfigType.LIST, "DEFAULT"),
            ("login.refresh.window.factor", ConfigType.DOUBLE, 0.8),
            ("login.refresh.window.jitter", ConfigType.DOUBLE, 0.05),
            ("login.refresh.min.period.seconds", ConfigType.SHORT, 60),
            ("login.refresh.buffer.seconds", ConfigType.SHORT, 300),
        ]
    ),
]
