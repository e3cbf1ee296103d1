"""Changing settings while corral runs, as operators do: kafka-configs (Kafka's own tool) and
confluent-kafka's AdminClient alter topic overrides, dynamic broker settings and consumer group
settings; each change is answered once durable, shows in DescribeConfigs with its source, takes
effect at once, and survives a restart."""

from __future__ import annotations

import time

import pytest
from configkit import admin, described, incremental
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka_java import CONFIG_COMMAND, run_tool
from rawwire import RawClient
from shortpath import Member, create_topic, settle, with_broker

from corral.network.apis import ApiKey


def test_kafka_configs_alters_topics_brokers_and_groups_durably(corral_factory):
    broker = corral_factory()
    client = admin(broker)
    # Settings Kafka users pass at creation that corral accepts without acting on them.
    inert = {"min.insync.replicas": "2", "segment.ms": "3600000", "compression.type": "zstd"}
    client.create_topics([NewTopic("orders", 2, config=inert)])["orders"].result(timeout=10)
    b = f"--bootstrap-server {broker.bootstrap}"
    commands = [
        f"{b} --entity-type topics --entity-name orders --alter --add-config retention.ms=60000,max.message.bytes=2048",
        f"{b} --entity-type topics --entity-name orders --alter --delete-config compression.type",
        f"{b} --entity-type topics --entity-name orders --describe",
        f"{b} --entity-type brokers --entity-name 1 --alter --add-config log.retention.ms=123456",
        f"{b} --entity-type brokers --entity-default --alter --add-config log.segment.bytes=2097152",
        f"{b} --entity-type brokers --entity-name 1 --alter --add-config num.partitions=3",
        f"{b} --entity-type groups --entity-name g1 --alter --add-config consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000",
        f"{b} --entity-type groups --entity-name g1 --alter --add-config consumer.session.timeout.ms=1000",
        f"{b} --entity-type groups --entity-name g1 --describe",
        f"{b} --entity-type topics --entity-name orders --alter --add-config no.such.config=1",
    ]
    out = run_tool(CONFIG_COMMAND, commands)
    code = {c: out[c][0] for c in commands}
    text = {c: out[c][1] for c in commands}
    assert [code[c] for c in commands[:5]] == [0] * 5, text
    assert "Completed updating config for topic orders." in text[commands[0]]
    assert (
        "retention.ms=60000" in text[commands[2]] and "max.message.bytes=2048" in text[commands[2]]
    )
    assert "compression.type" not in text[commands[2]].split("All configs")[0]
    assert code[commands[5]] == 1
    assert "Cannot update these configs dynamically: [num.partitions]" in text[commands[5]]
    assert code[commands[6]] == 0, text[commands[6]]
    assert code[commands[7]] == 1
    assert (
        "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        in text[commands[7]]
    )
    assert "consumer.session.timeout.ms=50000" in text[commands[8]]
    assert "consumer.heartbeat.interval.ms=6000" in text[commands[8]]
    assert (
        code[commands[9]] == 1 and "Unknown topic config name: no.such.config" in text[commands[9]]
    )

    def check(client: AdminClient) -> None:
        topic = described(client, ConfigResource(ResourceType.TOPIC, "orders"))
        assert topic["retention.ms"] == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert topic["max.message.bytes"] == ("2048", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert topic["min.insync.replicas"] == ("2", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert topic["compression.type"] == ("producer", ConfigSource.DEFAULT_CONFIG.value)
        # A topic default follows the broker's dynamic settings.
        assert topic["segment.bytes"] == (
            "2097152",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
        node = described(client, ConfigResource(ResourceType.BROKER, "1"))
        assert node["log.retention.ms"] == ("123456", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert node["log.segment.bytes"] == (
            "2097152",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
        with RawClient(broker.port) as raw:  # confluent-kafka refuses an empty broker name
            body = {
                "resources": [
                    {"resource_type": 4, "resource_name": "", "configuration_keys": None}
                ],
                "include_synonyms": False,
                "include_documentation": False,
            }
            [default] = raw.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
        assert [(c["name"], c["value"], c["config_source"]) for c in default["configs"]] == [
            ("log.segment.bytes", "2097152", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        ]

    check(client)
    # The overrides are in effect: a batch over the topic's max.message.bytes is refused.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    errors: list = []
    producer.produce("orders", b"x" * 4000, partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert errors and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    del producer

    broker.restart()
    check(admin(broker))
    with RawClient(broker.port) as raw:
        body = {
            "resources": [{"resource_type": 32, "resource_name": "g1", "configuration_keys": None}],
            "include_synonyms": True,
            "include_documentation": False,
        }
        [group] = raw.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    configs = {c["name"]: c for c in group["configs"]}
    assert configs["consumer.session.timeout.ms"]["value"] == "50000"
    assert configs["consumer.session.timeout.ms"]["config_source"] == 8  # GROUP_CONFIG
    assert [s["name"] for s in configs["consumer.session.timeout.ms"]["synonyms"]] == [
        "consumer.session.timeout.ms",
        "group.consumer.session.timeout.ms",
    ]
    assert configs["consumer.assignment.interval.ms"]["value"] == "1000"
    assert configs["consumer.assignment.interval.ms"]["config_source"] == 5  # the broker's default


def test_retention_changed_on_a_live_topic_deletes_its_old_segments(corral_factory):
    broker = corral_factory(**{"log.retention.check.interval.ms": 200})
    client = admin(broker)
    client.create_topics([NewTopic("logs", 1, config={"segment.bytes": "1024"})])["logs"].result(
        timeout=10
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(40):
        producer.produce("logs", b"%03d" % i + b"." * 200, partition=0)
        producer.flush(10)
    with RawClient(broker.port) as raw:

        def earliest() -> int:
            body = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": "logs", "partitions": [{"partition_index": 0, "timestamp": -2}]}
                ],
            }
            return raw.call(ApiKey.LIST_OFFSETS, 7, body)["topics"][0]["partitions"][0]["offset"]

        time.sleep(0.5)
        assert earliest() == 0  # a week's retention keeps everything
        incremental(client, ConfigResource(ResourceType.TOPIC, "logs"), retention_ms="1")
        deadline = time.monotonic() + 10
        while earliest() == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert earliest() > 30  # every closed segment went; the active one stays
        # compact alone: corral keeps the topic whole, whatever its retention.
        incremental(
            client,
            ConfigResource(ResourceType.TOPIC, "logs"),
            cleanup_policy="compact",
            retention_ms="604800000",
        )
        start = earliest()
        failures = []
        for _ in range(20):
            # Keyed: a compacted topic refuses records without a key, as Kafka does.
            producer.produce(
                "logs",
                b"." * 200,
                key=b"k",
                partition=0,
                on_delivery=lambda err, msg: err and failures.append(err),
            )
            producer.flush(10)
        assert not failures
        incremental(client, ConfigResource(ResourceType.TOPIC, "logs"), retention_ms="1")
        time.sleep(1)
        assert earliest() == start


@pytest.mark.parametrize(
    "resource, configs, code",
    [
        ((2, "absent"), [("retention.ms", 0, "1")], 3),  # UNKNOWN_TOPIC_OR_PARTITION
        ((2, "t"), [("retention.ms", 0, "soon")], 40),  # INVALID_CONFIG
        ((2, "t"), [("retention.ms", 0, None)], 42),  # INVALID_REQUEST: null SET
        ((2, "t"), [("retention.ms", 0, "1"), ("retention.ms", 1, None)], 42),  # duplicate keys
        ((2, "t"), [("retention.ms", 2, "1")], 40),  # APPEND to a non-list
        ((4, "7"), [("log.retention.ms", 0, "1")], 42),  # another broker
        ((4, "1"), [("listeners", 0, "PLAINTEXT://:1")], 42),  # not dynamic in corral
        ((32, ""), [("consumer.session.timeout.ms", 0, "50000")], 42),
        ((32, "g"), [("share.session.timeout.ms", 0, "1000")], 40),  # below the broker's min
        ((32, "g"), [("share.no.such.config", 0, "1")], 40),
        ((16, "m"), [("interval.ms", 0, "1")], 42),  # CLIENT_METRICS: not served
        ((8, "1"), [("no.such.logger", 0, "DEBUG")], 40),  # BROKER_LOGGER
        ((8, "1"), [("root", 2, "DEBUG")], 42),
        ((8, ""), [("root", 0, "DEBUG")], 42),
    ],
)
def test_incremental_alter_configs_refusals(shared_corral, resource, configs, code):
    with RawClient(shared_corral.port) as raw:
        create = {
            "topics": [
                {
                    "name": "t",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 5000,
        }
        raw.call(ApiKey.CREATE_TOPICS, 7, create)
        body = {
            "validate_only": False,
            "resources": [
                {
                    "resource_type": resource[0],
                    "resource_name": resource[1],
                    "configs": [
                        {"name": n, "config_operation": op, "value": v} for n, op, v in configs
                    ],
                }
            ],
        }
        [response] = raw.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    assert response["error_code"] == code, response
    assert response["error_message"]


def test_append_subtract_and_validate_only(shared_corral):
    with RawClient(shared_corral.port) as raw:
        create = {
            "topics": [
                {
                    "name": "lists",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 5000,
        }
        raw.call(ApiKey.CREATE_TOPICS, 7, create)

        def alter(validate_only: bool, *ops) -> int:
            body = {
                "validate_only": validate_only,
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": "lists",
                        "configs": [
                            {"name": n, "config_operation": op, "value": v} for n, op, v in ops
                        ],
                    }
                ],
            }
            return raw.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]["error_code"]

        def policy() -> str:
            body = {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": "lists",
                        "configuration_keys": ["cleanup.policy"],
                    }
                ],
                "include_synonyms": False,
                "include_documentation": False,
            }
            return raw.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"][0]["configs"][0]["value"]

        assert alter(True, ("cleanup.policy", 2, "compact")) == 0
        assert policy() == "delete"  # validate_only changes nothing
        assert alter(False, ("cleanup.policy", 2, "compact")) == 0
        assert policy() == "delete,compact"
        assert alter(False, ("cleanup.policy", 3, "delete")) == 0
        assert policy() == "compact"
        # AlterConfigs (the legacy API) replaces the whole set of overrides.
        body = {
            "validate_only": False,
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "lists",
                    "configs": [{"name": "retention.ms", "value": "5000"}],
                }
            ],
        }
        assert raw.call(ApiKey.ALTER_CONFIGS, 2, body)["responses"][0]["error_code"] == 0
        assert policy() == "delete"


def test_a_groups_own_session_timeout_and_interval_reach_the_short_path(tmp_path):
    """consumer.heartbeat.interval.ms and consumer.session.timeout.ms of one group: answered by
    the coordinator and by the network thread alike, and a silent member is fenced after the
    group's session timeout, not the broker's."""

    def scenario(broker) -> None:
        a = Member(broker.port, "tuned", "member-a")
        other = Member(broker.port, "plain", "member-o")
        with a.client, other.client:
            create_topic(a.client, "t", 2)
            body = {
                "validate_only": False,
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": "tuned",
                        "configs": [
                            {
                                "name": "consumer.heartbeat.interval.ms",
                                "config_operation": 0,
                                "value": "1500",
                            },
                            {
                                "name": "consumer.session.timeout.ms",
                                "config_operation": 0,
                                "value": "2500",
                            },
                        ],
                    }
                ],
            }
            [r] = a.client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
            assert r["error_code"] == 0, r
            # A join into a group whose target it just changed: corral's short interval (250
            # ms, groups/consumer/answer.py), below both groups' own.
            assert a.join(["t"])["heartbeat_interval_ms"] == 250
            assert other.join(["t"])["heartbeat_interval_ms"] == 250
            settle(broker, a)
            settle(broker, other)
            answered = broker.view.answered
            assert a.steady()["heartbeat_interval_ms"] == 1500
            assert other.steady()["heartbeat_interval_ms"] == 5000
            assert broker.view.answered == answered + 2  # both by the network thread
            last = time.monotonic()
            group = broker.groups.groups["tuned"]
            while broker.run(lambda: "member-a" in group.members):
                assert time.monotonic() - last < 6, "not fenced after the group's 2.5 s"
                time.sleep(0.1)
            assert time.monotonic() - last >= 2.4
            assert broker.run(lambda: "member-o" in broker.groups.groups["plain"].members)

    with_broker(
        tmp_path,
        scenario,
        **{
            "group.consumer.min.session.timeout.ms": 2000,
            "group.consumer.min.heartbeat.interval.ms": 1000,
        },
    )


def _broker_configs(bootstrap: str) -> dict[str, tuple[str | None, int, bool]]:
    host, port = bootstrap.rsplit(":", 1)
    with RawClient(int(port)) as raw:
        body = {
            "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        }
        [result] = raw.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    return {c["name"]: (c["value"], c["config_source"], c["read_only"]) for c in result["configs"]}


def test_every_group_and_offsets_setting_of_kafka_is_known_with_kafkas_default(corral):
    """Apache Kafka 4.4's own DescribeConfigs is the list: every group.*, offsets.* and
    offset.* setting it has, corral has, with the same default and the same read-only flag
    (corral's deliberate default differences are in the README)."""
    from kafka_java import kafka_reference

    with kafka_reference({}) as bootstrap:
        kafka = _broker_configs(bootstrap)
    ours = _broker_configs(corral.bootstrap)
    names = sorted(n for n in kafka if n.startswith(("group.", "offsets.", "offset.")))
    assert len(names) > 60
    missing = [n for n in names if n not in ours]
    assert not missing
    # What the reference broker's test settings change, and corral's deliberate differences.
    differs = {
        "group.initial.rebalance.delay.ms",
        "offsets.topic.replication.factor",
        "offsets.topic.num.partitions",
        "group.coordinator.rebalance.protocols",
    }
    wrong = {
        n: (kafka[n], ours[n])
        for n in names
        if n not in differs and (kafka[n][0], kafka[n][2]) != (ours[n][0], ours[n][2])
    }
    assert not wrong


def test_kafka_configs_changes_log_levels_at_run_time(corral):
    """broker-loggers: corral's loggers with their levels; a DEBUG level set at run time makes
    the coordinator's DEBUG lines appear; deleting it returns the logger to the root's level."""
    b = f"--bootstrap-server {corral.bootstrap} --entity-type broker-loggers --entity-name 1"
    commands = [
        f"{b} --describe",
        f"{b} --alter --add-config corral.configs=DEBUG",
        f"{b} --alter --add-config corral.configs=LOUD",
        f"{b} --alter --add-config no.such.logger=DEBUG",
        f"{b} --alter --delete-config root",
    ]
    out = run_tool(CONFIG_COMMAND, commands)
    assert out[commands[0]][0] == 0
    assert "root=INFO" in out[commands[0]][1] and "corral.server=INFO" in out[commands[0]][1]
    assert out[commands[1]][0] == 0
    assert out[commands[2]][0] == 1 and "not a supported log level" in out[commands[2]][1]
    # The tool checks the name against the loggers corral described.
    assert (
        out[commands[3]][0] == 1
        and "Invalid broker logger(s): no.such.logger" in out[commands[3]][1]
    )
    assert out[commands[4]][0] == 1 and "root logger is not allowed" in out[commands[4]][1]
    with RawClient(corral.port) as raw:
        body = {
            "resources": [
                {
                    "resource_type": 8,
                    "resource_name": "1",
                    "configuration_keys": ["corral.configs", "corral.server"],
                }
            ],
            "include_synonyms": False,
            "include_documentation": False,
        }
        [result] = raw.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
        levels = {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}
        assert levels == {"corral.configs": ("DEBUG", 6), "corral.server": ("INFO", 6)}
        body = {
            "validate_only": False,
            "resources": [
                {
                    "resource_type": 8,
                    "resource_name": "1",
                    "configs": [{"name": "corral.configs", "config_operation": 1, "value": None}],
                }
            ],
        }
        assert (
            raw.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]["error_code"] == 0
        )
        body = {
            "resources": [
                {"resource_type": 8, "resource_name": "1", "configuration_keys": ["corral.configs"]}
            ],
            "include_synonyms": False,
            "include_documentation": False,
        }
        [result] = raw.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
        assert result["configs"][0]["value"] == "INFO"
