"""The settings loader: TOML file, CORRAL_* environment, --set flags, precedence, bad values."""

from __future__ import annotations

import pytest

from corral.cli import main
from corral.config.settings import ConfigError, ConfigSource, Settings


def write(tmp_path, text: str):
    path = tmp_path / "corral.toml"
    path.write_text(text)
    return str(path)


def test_defaults_are_kafkas_except_num_partitions():
    s = Settings.load(environ={})
    assert s["socket.request.max.bytes"] == 104857600
    assert s["auto.create.topics.enable"] is True
    assert s["num.partitions"] == 4
    assert s["log.retention.ms"] == 604800000
    assert s.explicit == set()


def test_toml_file_flat_and_nested_keys(tmp_path):
    path = write(
        tmp_path,
        '"num.partitions" = 8\n"auto.create.topics.enable" = false\n'
        '[socket]\n"request.max.bytes" = 4096\n',
    )
    s = Settings.load(path, environ={})
    assert (s["num.partitions"], s["auto.create.topics.enable"], s["socket.request.max.bytes"]) == (
        8,
        False,
        4096,
    )
    assert s.explicit == {"num.partitions", "auto.create.topics.enable", "socket.request.max.bytes"}


def test_environment_names(tmp_path):
    s = Settings.load(
        environ={
            "CORRAL_NUM_PARTITIONS": "12",
            "CORRAL_AUTO_CREATE_TOPICS_ENABLE": "FALSE",
            "CORRAL_UNRELATED": "x",
            "NUM_PARTITIONS": "99",
        }
    )
    assert (s["num.partitions"], s["auto.create.topics.enable"]) == (12, False)


def test_precedence_flags_over_environment_over_file_over_defaults(tmp_path):
    path = write(
        tmp_path, '"num.partitions" = 2\n"log.retention.ms" = 5\n"message.max.bytes" = 7\n'
    )
    env = {"CORRAL_NUM_PARTITIONS": "3", "CORRAL_LOG_RETENTION_MS": "6"}
    s = Settings.load(path, {"num.partitions": "9"}, environ=env)
    assert s["num.partitions"] == 9  # flag beats env and file
    assert s["log.retention.ms"] == 6  # env beats file
    assert s["message.max.bytes"] == 7  # file beats default
    assert s["log.segment.bytes"] == 1073741824


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("num.partitions", "many", "num.partitions: expected an integer, got 'many'"),
        ("num.partitions", "0", r"num.partitions: 0 is outside \[1, 100000\]"),
        ("auto.create.topics.enable", "yes", "auto.create.topics.enable: expected true or false"),
        ("socket.request.max.bytes", "-1", "socket.request.max.bytes: -1 is outside"),
        ("log.message.timestamp.type", "Now", "'Now' is not one of CreateTime, LogAppendTime"),
    ],
)
def test_bad_values_are_rejected_with_the_setting_named(name, value, message):
    with pytest.raises(ConfigError, match=message):
        Settings.load(overrides={name: value}, environ={})


def test_bad_toml_types_are_rejected(tmp_path):
    path = write(tmp_path, '"num.partitions" = true\n')
    with pytest.raises(ConfigError, match="num.partitions: expected an integer, got True"):
        Settings.load(path, environ={})


def test_bad_environment_value_names_the_setting():
    with pytest.raises(ConfigError, match="node.id: expected an integer"):
        Settings.load(environ={"CORRAL_NODE_ID": "one"})


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--set", "num.partitions=lots"],
            "corral: num.partitions: expected an integer, got 'lots'",
        ),
        (["--set", "num.partitions"], "corral: --set wants NAME=VALUE, got 'num.partitions'"),
        (["--config", "/nonexistent/corral.toml"], "corral: [Errno 2] No such file or directory"),
        (
            ["--listen", "nowhere"],
            "corral: listeners: listener 'PLAINTEXT://nowhere' is not NAME://HOST:PORT",
        ),
        (
            ["--set", "advertised.listeners=x:y"],
            "corral: advertised.listeners: listener 'x:y' is not NAME://HOST:PORT",
        ),
    ],
)
def test_cli_rejects_bad_settings_with_exit_code_2(capsys, tmp_path, argv, message):
    assert main(["serve", "--data-dir", str(tmp_path / "d"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert "Traceback" not in err


def test_cli_rejects_a_malformed_toml_file(capsys, tmp_path):
    path = write(tmp_path, "num.partitions = = 3\n")
    assert main(["serve", "--data-dir", str(tmp_path / "d"), "--config", path]) == 2
    assert capsys.readouterr().err.startswith(f"corral: {path}: Invalid value (at line 1")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"group.consumer.session.timeout.ms": 1000},
            "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            {"group.consumer.session.timeout.ms": 90000},
            "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        (
            {"group.consumer.min.heartbeat.interval.ms": 20000},
            "group.consumer.max.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {"group.consumer.assignment.interval.ms": 20000},
            "group.consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms",
        ),
        (
            {
                "group.consumer.session.timeout.ms": 5000,
                "group.consumer.min.session.timeout.ms": 5000,
            },
            "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms",
        ),
    ],
)
def test_consumer_group_settings_bounds(overrides, message):
    with pytest.raises(ConfigError, match=message):
        Settings.load(overrides=overrides, environ={})


def test_an_unknown_setting_is_a_warning_naming_it(caplog):
    """Kafka's "supplied but isn't a known config": logged once, the rest loads."""
    with caplog.at_level("WARNING", logger="corral.config"):
        s = Settings.load(overrides={"no.such.setting": "1", "num.partitions": "6"}, environ={})
    assert s["num.partitions"] == 6 and s.unknown == {"no.such.setting": "1"}
    assert [r.getMessage() for r in caplog.records] == [
        "The configuration 'no.such.setting' was supplied but isn't a known config (ignored)"
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a=1\nb = 2\nc:3\nd 4\n", {"a": "1", "b": "2", "c": "3", "d": "4"}),
        ("# comment\n! also\n   \n\tkey=value  \n", {"key": "value  "}),
        ("long=first, \\\n    second\n", {"long": "first, second"}),
        ("e==x\nf\\ g=h\\u0041\\t\\=\n", {"e": "=x", "f g": "hA\t="}),
        ("only.key\nempty=\n", {"only.key": "", "empty": ""}),
        ("odd=ends\\\\\nnext=1\n", {"odd": "ends\\", "next": "1"}),
        ("last=cut\\", {"last": "cut"}),
    ],
)
def test_java_properties_are_read_as_java_reads_them(text, expected):
    from corral.config.settings import parse_properties

    assert parse_properties(text) == expected


def test_kafka_server_properties_load_with_warnings_for_what_corral_does_not_know(tmp_path, caplog):
    """Kafka's own config/server.properties (KRaft, 4.x) runs corral unchanged, without a warning;
    its Kafka-only names are known and inert, log.retention.hours gives log.retention.ms."""
    path = tmp_path / "server.properties"
    path.write_text(KAFKA_SERVER_PROPERTIES)
    with caplog.at_level("WARNING", logger="corral.config"):
        s = Settings.load(str(path), environ={})
    assert s["log.retention.ms"] == 72 * 3_600_000
    assert s["num.partitions"] == 1 and s["log.segment.bytes"] == 1073741824
    assert s["listeners"] == "PLAINTEXT://localhost:9092"
    assert [r.getMessage() for r in caplog.records] == []


def test_retention_synonyms_take_kafkas_precedence():
    hours = Settings.load(overrides={"log.retention.hours": "2"}, environ={})
    assert hours["log.retention.ms"] == 7_200_000
    minutes = Settings.load(
        overrides={"log.retention.hours": "2", "log.retention.minutes": "3"}, environ={}
    )
    assert minutes["log.retention.ms"] == 180_000
    ms = Settings.load(
        overrides={"log.retention.minutes": "3", "log.retention.ms": "5"}, environ={}
    )
    assert ms["log.retention.ms"] == 5
    assert (
        Settings.load(overrides={"log.retention.hours": "-1"}, environ={})["log.retention.ms"] == -1
    )


def test_dynamic_layers_win_over_static_and_refuse_static_settings():
    from corral.config.settings import DynamicConfigRefused

    s = Settings.load(overrides={"log.retention.ms": "1000"}, environ={})
    changed: list[set[str]] = []
    s.on_change.append(changed.append)
    s.apply_dynamic(False, s.check_dynamic(False, {"log.retention.ms": "2000"}))
    assert s["log.retention.ms"] == 2000 and changed == [{"log.retention.ms"}]
    s.apply_dynamic(True, s.check_dynamic(True, {"log.retention.ms": "3000"}))
    assert s["log.retention.ms"] == 3000
    assert [src for _, src in s.layers("log.retention.ms")] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    s.apply_dynamic(True, s.check_dynamic(True, {}))
    assert s["log.retention.ms"] == 2000
    with pytest.raises(
        DynamicConfigRefused, match=r"Cannot update these configs dynamically: \[num.partitions\]"
    ):
        s.check_dynamic(True, {"num.partitions": "3"})
    with pytest.raises(
        ConfigError, match="must be less than or equal to group.consumer.max.assignment"
    ):
        s.check_dynamic(True, {"group.consumer.assignment.interval.ms": "20000"})
    with pytest.raises(ConfigError, match="Unknown broker config: nope"):
        s.check_dynamic(False, {"nope": "1"})


# Kafka 4.x config/server.properties (comments trimmed), with log.retention.hours changed.
KAFKA_SERVER_PROPERTIES = """\
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
############################# Socket Server Settings #############################
listeners=PLAINTEXT://localhost:9092
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
############################# Log Basics #############################
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
############################# Log Retention Policy #############################
log.retention.hours=72
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""
