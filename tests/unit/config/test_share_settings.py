"""Share groups' settings (shares/settings.py, shares/group_settings.py): the broker's group.share.* and share.coordinator.*
with Kafka 4.4's names, defaults, bounds and checks between them, and the share group settings
(share.*) checked as Kafka's GroupConfig checks them, with its messages (the messages below are
Kafka 4.4's answers to the same IncrementalAlterConfigs, tests/wire/test_share_groups_against_kafka.py
compares them live)."""

from __future__ import annotations

import re

import pytest

from corral.config.broker import BROKER_SETTINGS, PER_BROKER
from corral.config.dynamic import DynamicConfigs
from corral.config.groups import GROUP_SETTINGS, check_group_configs
from corral.config.settings import ConfigError, DynamicConfigRefused, Settings
from corral.config.shares.group_settings import (
    auto_offset_reset,
    iso_duration_nanos,
    reset_duration_ms,
)
from corral.config.types import INT32_MAX, ConfigType

INT, BOOL, STR, LIST, SHORT = (
    ConfigType.INT,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
    ConfigType.SHORT,
)


# name, Kafka 4.4's default, type, dynamic (in Kafka and corral), inert in corral
@pytest.mark.parametrize(
    "name, default, type, dynamic, inert",
    [
        ("group.share.max.size", 200, INT, False, False),
        ("group.share.session.timeout.ms", 45000, INT, False, False),
        ("group.share.min.session.timeout.ms", 45000, INT, False, False),
        ("group.share.max.session.timeout.ms", 60000, INT, False, False),
        ("group.share.heartbeat.interval.ms", 5000, INT, False, False),
        ("group.share.min.heartbeat.interval.ms", 5000, INT, False, False),
        ("group.share.max.heartbeat.interval.ms", 15000, INT, False, False),
        ("group.share.assignors", "simple", LIST, False, False),
        ("group.share.assignment.interval.ms", 1000, INT, True, False),
        ("group.share.min.assignment.interval.ms", 0, INT, False, False),
        ("group.share.max.assignment.interval.ms", 15000, INT, False, False),
        ("group.share.assignor.offload.enable", True, BOOL, True, False),
        ("group.share.initialize.retry.interval.ms", 30000, INT, False, False),
        ("group.share.delivery.count.limit", 5, INT, False, False),
        ("group.share.min.delivery.count.limit", 2, INT, False, False),
        ("group.share.max.delivery.count.limit", 10, INT, False, False),
        ("group.share.record.lock.duration.ms", 30000, INT, False, False),
        ("group.share.min.record.lock.duration.ms", 15000, INT, False, False),
        ("group.share.max.record.lock.duration.ms", 60000, INT, False, False),
        ("group.share.partition.max.record.locks", 2000, INT, False, False),
        ("group.share.min.partition.max.record.locks", 100, INT, False, False),
        ("group.share.max.partition.max.record.locks", 4000, INT, False, False),
        ("group.share.max.share.sessions", 2000, INT, False, False),
        (
            "group.share.persister.class.name",
            "org.apache.kafka.server.share.persister.DefaultStatePersister",
            STR,
            False,
            True,
        ),
        (
            "group.share.dlq.manager.class.name",
            "org.apache.kafka.server.share.dlq.DefaultShareGroupDLQManager",
            STR,
            False,
            True,
        ),
        ("share.fetch.purgatory.purge.interval.requests", 1000, INT, False, True),
        ("share.coordinator.state.topic.num.partitions", 50, INT, False, False),
        ("share.coordinator.state.topic.segment.bytes", 104857600, INT, False, False),
        ("share.coordinator.snapshot.update.records.per.snapshot", 500, INT, False, False),
        ("share.coordinator.state.topic.prune.interval.ms", 300000, INT, False, False),
        ("share.coordinator.cold.partition.snapshot.interval.ms", 300000, INT, False, False),
        ("share.coordinator.state.topic.replication.factor", 3, SHORT, False, True),
        ("share.coordinator.state.topic.min.isr", 2, SHORT, False, True),
        ("share.coordinator.threads", 1, INT, False, True),
        ("share.coordinator.write.timeout.ms", 5000, INT, False, True),
        ("share.coordinator.load.buffer.size", 5242880, INT, False, True),
        ("share.coordinator.state.topic.compression.codec", 0, INT, False, True),
        ("share.coordinator.append.linger.ms", -1, INT, False, True),
        ("share.coordinator.cached.buffer.max.bytes", 1048588, INT, True, True),
        ("errors.deadletterqueue.auto.create.topics.enable", False, BOOL, True, True),
        ("errors.deadletterqueue.topic.name.prefix", "dlq.", STR, True, True),
    ],
)
def test_share_broker_settings_have_kafkas_name_default_and_type(
    name, default, type, dynamic, inert
):
    setting = BROKER_SETTINGS[name]
    assert (setting.default, setting.type, setting.dynamic, setting.inert) == (
        default,
        type,
        dynamic,
        inert,
    )
    assert Settings.load(environ={})[name] == default
    assert name not in PER_BROKER


def test_every_group_share_and_share_coordinator_setting_is_listed_above():
    """None is left behind as inert by mistake: the real ones are those with an effect."""
    names = {n for n in BROKER_SETTINGS if n.startswith(("group.share.", "share."))}
    assert len(names) == 39
    inert = {n for n in names if BROKER_SETTINGS[n].inert}
    assert "no effect in corral" in BROKER_SETTINGS["share.coordinator.threads"].doc
    assert not any(n.startswith("group.share.") and "class.name" not in n for n in inert)


# A value of one setting alone: [lo, hi] accepted, one beyond refused at parse time.
@pytest.mark.parametrize(
    "name, lo, hi",
    [
        # Kafka: between(1, 1000). corral allows far bigger share groups.
        ("group.share.max.size", 1, 100_000),
        ("group.share.session.timeout.ms", 1, INT32_MAX),
        ("group.share.min.session.timeout.ms", 1, INT32_MAX),
        ("group.share.max.heartbeat.interval.ms", 1, INT32_MAX),
        ("group.share.assignment.interval.ms", 0, INT32_MAX),
        ("group.share.min.assignment.interval.ms", 0, INT32_MAX),
        ("group.share.initialize.retry.interval.ms", 1, INT32_MAX),
        ("group.share.delivery.count.limit", 2, 10),
        ("group.share.min.delivery.count.limit", 2, 5),
        ("group.share.max.delivery.count.limit", 5, 25),
        ("group.share.record.lock.duration.ms", 1000, 3_600_000),
        ("group.share.min.record.lock.duration.ms", 1000, 30000),
        ("group.share.max.record.lock.duration.ms", 30000, 3_600_000),
        ("group.share.partition.max.record.locks", 100, 10000),
        ("group.share.min.partition.max.record.locks", 100, 2000),
        ("group.share.max.partition.max.record.locks", 2000, 10000),
        ("group.share.max.share.sessions", 1, INT32_MAX),
        ("share.coordinator.state.topic.num.partitions", 1, 100_000),
        ("share.coordinator.state.topic.segment.bytes", 1, INT32_MAX),
        ("share.coordinator.snapshot.update.records.per.snapshot", 0, 500),
        ("share.coordinator.state.topic.prune.interval.ms", 1, INT32_MAX),
        ("share.coordinator.cold.partition.snapshot.interval.ms", 1, INT32_MAX),
    ],
)
def test_each_share_setting_is_bounded_as_in_kafka(name, lo, hi):
    parse = BROKER_SETTINGS[name].parse
    assert parse(str(lo)) == lo and parse(str(hi)) == hi
    for outside in (lo - 1, hi + 1):
        with pytest.raises(ConfigError, match=re.escape(f"{outside} is outside [{lo}, {hi}]")):
            parse(str(outside))


# Kafka's checks between settings (GroupCoordinatorConfig, ShareGroupConfig): its messages.
@pytest.mark.parametrize(
    "overrides, message",
    [
        ({}, None),
        (
            {"group.share.min.session.timeout.ms": "70000"},
            "group.share.max.session.timeout.ms must be greater than or equal to "
            "group.share.min.session.timeout.ms",
        ),
        (
            {"group.share.session.timeout.ms": "30000"},
            "group.share.session.timeout.ms must be greater than or equal to "
            "group.share.min.session.timeout.ms",
        ),
        (
            {"group.share.session.timeout.ms": "61000"},
            "group.share.session.timeout.ms must be less than or equal to "
            "group.share.max.session.timeout.ms",
        ),
        (
            {"group.share.heartbeat.interval.ms": "1000"},
            "group.share.heartbeat.interval.ms must be greater than or equal to "
            "group.share.min.heartbeat.interval.ms",
        ),
        (
            {"group.share.heartbeat.interval.ms": "16000"},
            "group.share.heartbeat.interval.ms must be less than or equal to "
            "group.share.max.heartbeat.interval.ms",
        ),
        (
            {
                "group.share.min.session.timeout.ms": "1000",
                "group.share.session.timeout.ms": "5000",
            },
            "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms",
        ),
        (
            {
                "group.share.min.session.timeout.ms": "1000",
                "group.share.session.timeout.ms": "6000",
            },
            None,
        ),
        (
            {"group.share.assignment.interval.ms": "20000"},
            "group.share.assignment.interval.ms must be less than or equal to "
            "group.share.max.assignment.interval.ms",
        ),
        (
            {"group.share.min.assignment.interval.ms": "2000"},
            "group.share.assignment.interval.ms must be greater than or equal to "
            "group.share.min.assignment.interval.ms",
        ),
        (
            {"group.share.min.assignment.interval.ms": "20000"},
            "group.share.max.assignment.interval.ms must be greater than or equal to "
            "group.share.min.assignment.interval.ms",
        ),
        (
            {"group.share.max.delivery.count.limit": "5", "group.share.delivery.count.limit": "6"},
            "group.share.max.delivery.count.limit must be greater than or equal to "
            "group.share.delivery.count.limit",
        ),
        (
            {"group.share.min.delivery.count.limit": "4", "group.share.delivery.count.limit": "3"},
            "group.share.delivery.count.limit must be greater than or equal to "
            "group.share.min.delivery.count.limit",
        ),
        (
            {"group.share.partition.max.record.locks": "5000"},
            "group.share.max.partition.max.record.locks must be greater than or equal to "
            "group.share.partition.max.record.locks",
        ),
        (
            {
                "group.share.min.partition.max.record.locks": "1000",
                "group.share.partition.max.record.locks": "500",
            },
            "group.share.partition.max.record.locks must be greater than or equal to "
            "group.share.min.partition.max.record.locks",
        ),
        (
            {"group.share.record.lock.duration.ms": "10000"},
            "group.share.record.lock.duration.ms must be greater than or equal to "
            "group.share.min.record.lock.duration.ms",
        ),
        (
            {"group.share.record.lock.duration.ms": "70000"},
            "group.share.max.record.lock.duration.ms must be greater than or equal to "
            "group.share.record.lock.duration.ms",
        ),
        (
            {"group.share.max.size": "2001"},
            "group.share.max.share.sessions must be greater than or equal to group.share.max.size",
        ),
        ({"group.share.max.size": "2000"}, None),
        (
            {"group.share.max.size": "100000", "group.share.max.share.sessions": "100000"},
            None,
        ),
        (
            {"group.share.max.share.sessions": "199"},
            "group.share.max.share.sessions must be greater than or equal to group.share.max.size",
        ),
        ({"group.share.assignors": "simple,simple"}, "without duplicates"),
        (
            {"group.share.assignors": ""},
            "group.share.assignors must contain exactly one assignor, but found 0",
        ),
        (
            {"group.share.assignors": "simple,com.example.Other"},
            "group.share.assignors must contain exactly one assignor, but found 2",
        ),
        ({"group.share.assignors": "com.example.Other"}, "not a share-group assignor"),
        (
            {"group.share.assignors": "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"},
            None,
        ),
        ({"group.share.assignors": " simple "}, None),
    ],
)
def test_checks_between_share_settings(overrides, message):
    if message is None:
        Settings.load(overrides=overrides, environ={})
    else:
        with pytest.raises(ConfigError, match=re.escape(message)):
            Settings.load(overrides=overrides, environ={})


def test_the_assignment_interval_changes_while_corral_runs_within_its_bounds():
    s = Settings.load(environ={})
    s.apply_dynamic(True, s.check_dynamic(True, {"group.share.assignment.interval.ms": "0"}))
    assert s["group.share.assignment.interval.ms"] == 0
    s.apply_dynamic(False, s.check_dynamic(False, {"group.share.assignor.offload.enable": "false"}))
    assert s["group.share.assignor.offload.enable"] is False
    with pytest.raises(ConfigError, match="must be less than or equal to group.share.max.assign"):
        s.check_dynamic(True, {"group.share.assignment.interval.ms": "20000"})
    for static in ("group.share.max.size", "share.coordinator.state.topic.num.partitions"):
        with pytest.raises(DynamicConfigRefused, match=re.escape(f"[{static}]")):
            s.check_dynamic(True, {static: "10"})


# ------------------------------------------------------------------- group settings ---

TIGHT = {
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
}


def test_share_group_settings_have_kafkas_defaults_and_synonyms():
    expected = {
        "share.session.timeout.ms": (45000, "group.share.session.timeout.ms"),
        "share.heartbeat.interval.ms": (5000, "group.share.heartbeat.interval.ms"),
        "share.record.lock.duration.ms": (30000, "group.share.record.lock.duration.ms"),
        "share.delivery.count.limit": (5, "group.share.delivery.count.limit"),
        "share.partition.max.record.locks": (2000, "group.share.partition.max.record.locks"),
        "share.auto.offset.reset": ("latest", None),
        "share.isolation.level": ("read_uncommitted", None),
        "share.renew.acknowledge.enable": (True, None),
        "share.assignment.interval.ms": (1000, "group.share.assignment.interval.ms"),
        "share.assignor.offload.enable": (True, "group.share.assignor.offload.enable"),
    }
    found = {
        n: (s.default, s.broker_synonym)
        for n, s in GROUP_SETTINGS.items()
        if n.startswith("share.")
    }
    assert found == expected
    settings = Settings.load(environ={})
    for default, synonym in expected.values():
        assert synonym is None or settings[synonym] == default


# (the group's settings, the broker's overrides, its parsed settings or Kafka's error message)
@pytest.mark.parametrize(
    "layer, broker, expected",
    [
        ({"share.session.timeout.ms": "50000"}, {}, {"share.session.timeout.ms": 50000}),
        (
            {"share.session.timeout.ms": "1000"},
            {},
            "share.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            {"share.session.timeout.ms": "abc"},
            {},
            "Invalid value abc for configuration share.session.timeout.ms: Not a number of type INT",
        ),
        (
            {"share.session.timeout.ms": "99999999999"},
            {},
            "Invalid value 99999999999 for configuration share.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            {"share.heartbeat.interval.ms": "0"},
            {},
            "Invalid value 0 for configuration share.heartbeat.interval.ms: Value must be at least 1",
        ),
        (
            {"share.record.lock.duration.ms": "500"},
            {},
            "Invalid value 500 for configuration share.record.lock.duration.ms: "
            "Value must be at least 1000",
        ),
        (
            {"share.record.lock.duration.ms": "10000"},
            {},
            "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
        ),
        ({"share.record.lock.duration.ms": "20000"}, {}, {"share.record.lock.duration.ms": 20000}),
        (
            {"share.record.lock.duration.ms": "5000"},
            {"group.share.min.record.lock.duration.ms": "1000"},
            {"share.record.lock.duration.ms": 5000},
        ),
        (
            {"share.delivery.count.limit": "1"},
            {},
            "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2",
        ),
        (
            {"share.delivery.count.limit": "11"},
            {},
            "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
        ),
        (
            {"share.delivery.count.limit": "20"},
            {"group.share.max.delivery.count.limit": "25"},
            {"share.delivery.count.limit": 20},
        ),
        (
            {"share.partition.max.record.locks": "50"},
            {},
            "Invalid value 50 for configuration share.partition.max.record.locks: "
            "Value must be at least 100",
        ),
        (
            {"share.partition.max.record.locks": "5000"},
            {},
            "share.partition.max.record.locks must be in the range 100 to 4000 inclusive.",
        ),
        (
            {"share.assignment.interval.ms": "-1"},
            {},
            "Invalid value -1 for configuration share.assignment.interval.ms: "
            "Value must be at least 0",
        ),
        (
            {"share.assignment.interval.ms": "20000"},
            {},
            "share.assignment.interval.ms must be in the range 0 to 15000 inclusive.",
        ),
        ({"share.assignment.interval.ms": "0"}, {}, {"share.assignment.interval.ms": 0}),
        ({"share.auto.offset.reset": " earliest "}, {}, {"share.auto.offset.reset": "earliest"}),
        (
            {"share.auto.offset.reset": "by_duration:PT1H"},
            {},
            {"share.auto.offset.reset": "by_duration:PT1H"},
        ),
        (
            {"share.auto.offset.reset": "none"},
            {},
            "Invalid value none for configuration share.auto.offset.reset: Invalid value `none` "
            "for configuration share.auto.offset.reset. The value must be either 'earliest', "
            "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        ),
        (
            {"share.isolation.level": "READ_COMMITTED"},
            {},
            "Invalid value READ_COMMITTED for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ),
        (
            {"share.isolation.level": "read_committed"},
            {},
            {"share.isolation.level": "read_committed"},
        ),
        (
            {"share.renew.acknowledge.enable": "yes"},
            {},
            "Invalid value yes for configuration share.renew.acknowledge.enable: "
            "Expected value to be either true or false",
        ),
        (
            {"share.renew.acknowledge.enable": "FALSE"},
            {},
            {"share.renew.acknowledge.enable": False},
        ),
        ({"share.assignor.offload.enable": "false"}, {}, {"share.assignor.offload.enable": False}),
        (
            {"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "45000"},
            {},
            {"share.heartbeat.interval.ms": 15000, "share.session.timeout.ms": 45000},
        ),
        # Bounds that overlap: the session timeout must stay above the interval, the broker's
        # value standing in for the one the group does not set.
        (
            {"share.heartbeat.interval.ms": "5000", "share.session.timeout.ms": "5000"},
            {
                "group.share.min.session.timeout.ms": "2000",
                "group.share.session.timeout.ms": "6000",
            },
            "share.session.timeout.ms must be greater than share.heartbeat.interval.ms",
        ),
        (
            {"share.session.timeout.ms": "3000"},
            {
                "group.share.min.session.timeout.ms": "2000",
                "group.share.session.timeout.ms": "6000",
            },
            "share.session.timeout.ms must be greater than share.heartbeat.interval.ms",
        ),
        (
            {"share.heartbeat.interval.ms": "1500"},
            {**TIGHT, "group.share.min.session.timeout.ms": "1000"},
            {"share.heartbeat.interval.ms": 1500},
        ),
        # Kafka parses in its order of settings, whatever the request's order.
        (
            {"share.heartbeat.interval.ms": "x", "share.session.timeout.ms": "abc"},
            {},
            "Invalid value abc for configuration share.session.timeout.ms: Not a number of type INT",
        ),
        # And checks every name before any value.
        (
            {"share.session.timeout.ms": "abc", "share.no.such": "1"},
            {},
            "Unknown group config name: share.no.such",
        ),
        (
            {"errors.deadletterqueue.topic.name": "__x"},
            {},
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
        ),
        (
            {"errors.deadletterqueue.topic.name": "dlq.x"},
            {},
            {"errors.deadletterqueue.topic.name": "dlq.x"},
        ),
        (
            {"consumer.session.timeout.ms": "0"},
            {},
            "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1",
        ),
    ],
)
def test_share_group_settings_are_checked_as_kafka_checks_them(layer, broker, expected):
    settings = Settings.load(overrides=broker, environ={})
    if isinstance(expected, str):
        with pytest.raises(ConfigError) as refused:
            check_group_configs(layer, settings)
        assert str(refused.value) == expected
    else:
        assert check_group_configs(layer, settings) == expected


@pytest.mark.parametrize(
    "text, nanos",
    [
        ("PT1H", 3600 * 10**9),
        ("pt1h", 3600 * 10**9),
        ("P2D", 2 * 86400 * 10**9),
        ("P1DT2H3M4.5S", (86400 + 7200 + 180 + 4) * 10**9 + 5 * 10**8),
        ("PT0.000000001S", 1),
        ("PT1,5S", 15 * 10**8),
        ("PT1.S", 10**9),
        ("PT-1S", -(10**9)),
        ("-PT1H", -3600 * 10**9),
        ("PT1H-30M", 1800 * 10**9),
        ("PT-0.5S", -5 * 10**8),
        ("PT0S", 0),
        ("+P1D", 86400 * 10**9),
        ("P", None),
        ("PT", None),
        ("P1DT", None),
        ("1H", None),
        ("PT1.0000000001S", None),
        ("P1W", None),
        ("P1Y", None),
        ("PT1H ", None),
        (f"PT{2**63}S", None),
        (f"P{2**63 // 86400 + 1}D", None),
    ],
)
def test_iso_durations_read_as_java_reads_them(text, nanos):
    if nanos is None:
        with pytest.raises(ValueError):
            iso_duration_nanos(text)
    else:
        assert iso_duration_nanos(text) == nanos


@pytest.mark.parametrize(
    "value, kept, look_back_ms",
    [
        ("latest", "latest", None),
        ("earliest", "earliest", None),
        (" latest\t", "latest", None),
        ("by_duration:PT1H", "by_duration:PT1H", 3_600_000),
        ("by_duration:P1DT0.5S", "by_duration:P1DT0.5S", 86_400_500),
        ("by_duration:PT0S", "by_duration:PT0S", 0),
        ("by_duration:-PT1H", None, None),
        ("by_duration:PT-1S", None, None),
        ("by_duration:", None, None),
        ("by_duration", None, None),
        ("BY_DURATION:PT1H", None, None),
        ("Latest", None, None),
        ("none", None, None),
        ("", None, None),
    ],
)
def test_share_auto_offset_reset(value, kept, look_back_ms):
    if kept is None:
        with pytest.raises(ConfigError, match=re.escape(f"Invalid value `{value.strip()}`")):
            auto_offset_reset(value)
    else:
        assert auto_offset_reset(value) == kept
        assert reset_duration_ms(kept) == look_back_ms


def test_a_groups_share_settings_fall_back_to_the_broker_or_their_own_default(tmp_path):
    settings = Settings.load(overrides={"group.share.delivery.count.limit": "7"}, environ={})
    configs = DynamicConfigs(tmp_path, settings)
    configs.group_values["g"] = check_group_configs(
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"},
        settings,
    )
    assert configs.group_setting("g", "share.auto.offset.reset") == "earliest"
    assert configs.group_setting("g", "share.record.lock.duration.ms") == 20000
    assert configs.group_setting("g", "share.delivery.count.limit") == 7
    assert configs.group_setting("other", "share.auto.offset.reset") == "latest"
    assert configs.group_setting("other", "share.isolation.level") == "read_uncommitted"
    assert configs.group_setting("other", "share.renew.acknowledge.enable") is True
