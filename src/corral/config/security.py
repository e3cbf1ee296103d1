"""The security settings, by Kafka's names: SASL (both may be set for one listener only with
Kafka's prefix `listener.name.<listener lower-cased>.`, config/listeners.py PER_LISTENER) and the
ACL authorizer's."""

from __future__ import annotations

from typing import Any

from corral.config.types import ConfigError, ConfigType, Setting, inert, int_in, parse_bool

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


def _authorizer_class(value: Any) -> str:
    from corral.security.authorizer import AUTHORIZER_CLASSES

    text = str(value).strip()
    if text and text not in AUTHORIZER_CLASSES:
        raise ConfigError(
            f"{text!r} is not available in corral; it has Kafka's ACL authorizer: "
            f"{' or '.join(AUTHORIZER_CLASSES)}"
        )
    return text


def _principals(value: Any) -> str:
    from corral.security.acls import principal_of

    entries = [p.strip() for p in str(value).split(";") if p.strip()]
    try:
        return ";".join(principal_of(p) for p in entries)
    except ValueError as e:
        raise ConfigError(str(e)) from None


_AUTHORIZER_SETTINGS: list[Setting] = [
    Setting(
        "authorizer.class.name",
        ConfigType.STRING,
        "",
        _authorizer_class,
        "ACLs: empty (the default) allows every request, and CreateAcls, DescribeAcls and "
        "DeleteAcls answer SECURITY_DISABLED. Kafka's ACL authorizer, "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or "
        "kafka.security.authorizer.AclAuthorizer, the same to corral), checks every request "
        "against the ACLs kafka-acls manages, which corral keeps in acls.json in the data "
        "directory. Other classes are refused at startup.",
    ),
    Setting(
        "super.users",
        ConfigType.LIST,
        "",
        _principals,
        "Principals (User:NAME, separated by ;) allowed everything whatever the ACLs say.",
    ),
    Setting(
        "allow.everyone.if.no.acl.found",
        ConfigType.BOOLEAN,
        False,
        parse_bool,
        "With the authorizer on: whether a resource without any ACL is open to everyone "
        "(else only super users may use it).",
    ),
]

SECURITY_SETTINGS = SASL_SETTINGS + _AUTHORIZER_SETTINGS
