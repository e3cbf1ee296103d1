"""Kafka 4.4's dynamic broker settings, name by name against the reference broker's own answers:
each one kafka-configs may change while Kafka runs, corral lets it change too (most without effect:
DescribeConfigs' documentation says why), with Kafka's default and type, and refuses a change where
and as Kafka refuses it (a keystore without a listener prefix, a per-broker setting as the
cluster-wide default). The differences are deliberate and named here."""

from __future__ import annotations

import pytest
from configkit import admin, described, incremental
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType
from kafka_java import kafka_reference
from rawwire import RawClient

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

# Values to try for the settings Kafka describes without one (each valid for Kafka).
SAMPLES = {
    "log.flush.interval.ms": "1000",
    "log.retention.ms": "1000",
    "log.roll.ms": "1000",
    "log.roll.jitter.ms": "0",
    "ssl.engine.factory.class": "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory",
}
# Dynamic in Kafka, read at startup only by corral (refused with a reason, README "Settings").
STARTUP_ONLY = {
    "listeners",
    "listener.security.protocol.map",
    "max.connections",
    "max.connections.per.ip",
    "sasl.enabled.mechanisms",
    "ssl.client.auth",
    "ssl.enabled.protocols",
}
# The keystore and truststore settings: Kafka changes them for one listener only (a
# `listener.name.<name>.` prefix) and refuses them without one, as corral does; read-only in
# corral's DescribeConfigs, which reads the stores at startup only.
LISTENER_PREFIX_ONLY = {
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
}
# Static in Kafka, dynamic in corral: the synonyms of log.retention.ms (corral applies them) and
# of log.roll.ms (inert).
DYNAMIC_IN_CORRAL_ONLY = {"log.retention.minutes", "log.retention.hours", "log.roll.hours"}
# Where corral's default (or how it shows one) is not Kafka's, on purpose: the README's
# "Where corral's defaults differ", its settings' documentation, the reference broker's listeners.
OTHER_DEFAULTS = {
    "log.flush.interval.messages",
    "sasl.enabled.mechanisms",
    "ssl.keystore.type",
    "ssl.truststore.type",
    "listeners",
    "listener.security.protocol.map",
    # Kafka shows null (unset: a synonym or another setting decides), corral the value in force.
    "log.retention.ms",
    "log.flush.interval.ms",
    "ssl.keystore.location",
    "ssl.truststore.location",
}
# Names Kafka does not know (it stores any name: custom settings of plugins), refused by corral.
UNKNOWN = ["no.such.config", "sasl.kerberos.min.time.before.relogins"]
# Kafka's static settings, refused dynamically by both.
STATIC = ["num.partitions", "log.dirs", "advertised.listeners", "connections.max.idle.ms"]
# A listener's own value of a setting: Kafka changes it while it runs (for one broker), corral
# reads it at startup only.
LISTENER_SCOPED = [
    "listener.name.plaintext.sasl.kerberos.min.time.before.relogin",
    "listener.name.plaintext.ssl.keystore.location",
]


def broker_configs(port: int) -> dict[str, dict]:
    with RawClient(port) as raw:
        body = {
            "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": True,
        }
        [result] = raw.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    return {c["name"]: c for c in result["configs"]}


def answers(
    port: int, changes: list[tuple[str, str]]
) -> dict[tuple[str, str, str], tuple[int, str | None]]:
    """{(api, resource name, setting): (error code, message)} of a validate-only change of each
    setting alone, with IncrementalAlterConfigs and AlterConfigs, on this broker ("1") and on the
    cluster-wide default (""). AlterConfigs replaces the whole default layer, where Kafka keeps
    min.insync.replicas (KIP-966: it refuses its removal), so that change keeps it too."""
    found = {}
    with RawClient(port) as raw:
        for name, value in changes:
            for resource in ("1", ""):
                body = {
                    "validate_only": True,
                    "resources": [
                        {
                            "resource_type": 4,
                            "resource_name": resource,
                            "configs": [{"name": name, "config_operation": 0, "value": value}],
                        }
                    ],
                }
                [r] = raw.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
                found["incremental", resource, name] = (r["error_code"], r["error_message"])
                configs = {name: value, **({"min.insync.replicas": "1"} if resource == "" else {})}
                body = {
                    "validate_only": True,
                    "resources": [
                        {
                            "resource_type": 4,
                            "resource_name": resource,
                            "configs": [{"name": n, "value": v} for n, v in configs.items()],
                        }
                    ],
                }
                [r] = raw.call(ApiKey.ALTER_CONFIGS, 2, body)["responses"]
                found["legacy", resource, name] = (r["error_code"], r["error_message"])
    return found


@pytest.fixture(scope="module")
def kafka() -> tuple[dict[str, dict], list[tuple[str, str]], dict]:
    """The reference broker's broker settings and its answers to the changes tried here."""
    with kafka_reference({}) as bootstrap:
        port = int(bootstrap.rsplit(":", 1)[1])
        configs = broker_configs(port)
        changes = [
            (n, SAMPLES.get(n, c["value"] if c["value"] is not None else "x"))
            for n, c in sorted(configs.items())
            if not c["read_only"]
        ]
        changes += [(n, "1") for n in UNKNOWN + LISTENER_SCOPED] + [
            (n, configs[n]["value"]) for n in STATIC
        ]
        return configs, changes, answers(port, changes)


def test_kafkas_dynamic_broker_settings_are_corrals_with_kafkas_defaults(shared_corral, kafka):
    """Every setting Kafka's DescribeConfigs shows as not read-only (its dynamic ones), corral
    shows too, not read-only, with Kafka's default and type, but for the differences named above."""
    configs, _, _ = kafka
    dynamic = {n for n, c in configs.items() if not c["read_only"]}
    assert len(dynamic) > 100
    ours = broker_configs(shared_corral.port)
    assert not sorted(dynamic - set(ours)), "unknown to corral"
    assert {n for n in dynamic if ours[n]["read_only"]} == STARTUP_ONLY | LISTENER_PREFIX_ONLY
    assert {
        n for n in set(configs) & set(ours) if configs[n]["read_only"] and not ours[n]["read_only"]
    } == DYNAMIC_IN_CORRAL_ONLY
    wrong = {
        n: (
            (configs[n]["value"], configs[n]["config_type"]),
            (ours[n]["value"], ours[n]["config_type"]),
        )
        for n in dynamic - OTHER_DEFAULTS
        if (configs[n]["value"], configs[n]["config_type"])
        != (ours[n]["value"], ours[n]["config_type"])
    }
    assert not wrong, "Kafka's (value, type) != corral's"
    # Most of Kafka's dynamic settings are inert in corral (the log cleaner's are not, since
    # corral compacts).
    inert = [n for n in dynamic if "no effect in corral" in ours[n]["documentation"]]
    assert len(inert) > 60


def test_changes_are_answered_as_kafka_answers_them(shared_corral, kafka):
    """The same validate-only changes, to corral and to Kafka: the same error code and message,
    but for the differences named at the top."""
    _, changes, theirs = kafka
    ours = answers(shared_corral.port, changes)
    differ = {key: (theirs[key], ours[key]) for key in theirs if theirs[key] != ours[key]}
    for (api, resource, name), (kafkas, corrals) in list(differ.items()):
        if name in STARTUP_ONLY or name in LISTENER_SCOPED:
            # Kafka changes them while it runs (one broker's, or the cluster's connection limits).
            assert corrals[0] == ErrorCode.INVALID_REQUEST
            assert corrals[1].startswith(
                f"Cannot update these configs dynamically: [{name}] (corral: "
            )
        elif name in UNKNOWN:
            assert kafkas == (ErrorCode.NONE, None)
            assert corrals == (ErrorCode.INVALID_CONFIG, f"Unknown broker config: {name}")
        elif name == "min.insync.replicas" and resource == "1":
            # Kafka 4.4 with eligible leader replicas (KIP-966) takes it cluster-wide only; corral,
            # one replica and no ELR, takes it at both levels (inert).
            assert kafkas[0] == ErrorCode.INVALID_CONFIG and corrals == (ErrorCode.NONE, None)
        else:
            continue
        del differ[api, resource, name]
    assert not differ, "(Kafka's answer, corral's)"
    # Issue 28's example: Kafka takes it for one broker, and refuses it as the cluster default.
    assert ours["incremental", "1", "sasl.kerberos.min.time.before.relogin"] == (
        ErrorCode.NONE,
        None,
    )
    assert ours["incremental", "", "sasl.kerberos.min.time.before.relogin"] == (
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs at default cluster level, broker id "
        "must be specified: [sasl.kerberos.min.time.before.relogin]",
    )


def test_admin_client_changes_them_durably_and_describes_them(corral_factory):
    """confluent-kafka's AdminClient against a real corral: a per-broker and a cluster-wide
    setting of Kafka's that corral does not act on are changed, described with their sources,
    refused where Kafka refuses them, and kept across a restart."""
    broker = corral_factory()
    client = admin(broker)
    node = ConfigResource(ResourceType.BROKER, "1")
    incremental(
        client,
        node,
        sasl_kerberos_min_time_before_relogin="120000",
        num_io_threads="16",
        ssl_protocol="TLSv1.2",
    )
    with RawClient(broker.port) as raw:  # confluent-kafka refuses an empty broker name
        body = {
            "validate_only": False,
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [
                        {"name": "log.cleaner.threads", "config_operation": 0, "value": "2"},
                        {
                            "name": "producer.id.expiration.ms",
                            "config_operation": 0,
                            "value": "3600000",
                        },
                    ],
                }
            ],
        }
        [r] = raw.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
        assert (r["error_code"], r["error_message"]) == (0, None)
        body["resources"][0]["configs"] = [
            {"name": "sasl.kerberos.kinit.cmd", "config_operation": 0, "value": "/bin/kinit"}
        ]
        [r] = raw.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
        assert r["error_code"] == ErrorCode.INVALID_REQUEST
        assert "at default cluster level, broker id must be specified" in r["error_message"]
    for name, value, code in [
        ("ssl.keystore.location", "/x.pem", ErrorCode.INVALID_REQUEST),
        ("listeners", "PLAINTEXT://:1", ErrorCode.INVALID_REQUEST),
        ("no.such.config", "1", ErrorCode.INVALID_CONFIG),
        ("sasl.kerberos.min.time.before.relogin", "soon", ErrorCode.INVALID_CONFIG),
    ]:
        with pytest.raises(KafkaException) as refused:
            incremental(client, node, **{name.replace(".", "_"): value})
        assert refused.value.args[0].code() == code, (name, refused.value)

    def check() -> None:
        configs = described(admin(broker), node)
        assert configs["sasl.kerberos.min.time.before.relogin"] == (
            "120000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        assert configs["num.io.threads"] == ("16", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert configs["ssl.protocol"] == ("TLSv1.2", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert configs["log.cleaner.threads"] == (
            "2",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
        assert configs["producer.id.expiration.ms"] == (
            "3600000",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
        assert configs["sasl.kerberos.kinit.cmd"] == (
            "/usr/bin/kinit",
            ConfigSource.DEFAULT_CONFIG.value,
        )
        assert configs["log.cleaner.backoff.ms"] == ("15000", ConfigSource.DEFAULT_CONFIG.value)

    check()
    broker.restart()
    check()
    # Deleting returns a setting to its default.
    incremental(admin(broker), node, sasl_kerberos_min_time_before_relogin=None)
    assert described(admin(broker), node)["sasl.kerberos.min.time.before.relogin"] == (
        "60000",
        ConfigSource.DEFAULT_CONFIG.value,
    )
