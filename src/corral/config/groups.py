"""A group's settings (DescribeConfigs / IncrementalAlterConfigs with resource type GROUP,
kafka-configs --entity-type groups): Kafka's GroupConfig names for consumer groups and share
groups (config/shares/group_settings.py), each defaulting to its broker synonym (the share group settings
without one to their own default) and bounded by the broker's min and max (Kafka's checks, in
its order and with its messages)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.config.shares.group_settings import (
    DLQ_GROUP_SETTINGS,
    SHARE_GROUP_BOUNDS,
    SHARE_GROUP_SETTINGS,
)
from corral.config.types import ConfigError, ConfigType, Setting, java_bool, java_int

if TYPE_CHECKING:
    from corral.config.settings import Settings

# In the order of Kafka's GroupConfig.CONFIG_DEF, which is the order its parse reports errors in.
GROUP_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting(
            "consumer.session.timeout.ms",
            ConfigType.INT,
            45000,
            java_int(1),
            "A member of this consumer group is fenced when no heartbeat came for this long.",
            "group.consumer.session.timeout.ms",
        ),
        Setting(
            "consumer.heartbeat.interval.ms",
            ConfigType.INT,
            5000,
            java_int(1),
            "How often this consumer group's members are told to heartbeat.",
            "group.consumer.heartbeat.interval.ms",
        ),
        Setting(
            "consumer.assignment.interval.ms",
            ConfigType.INT,
            1000,
            java_int(0),
            "Least time between two target assignment computations of this group.",
            "group.consumer.assignment.interval.ms",
        ),
        Setting(
            "consumer.assignor.offload.enable",
            ConfigType.BOOLEAN,
            True,
            java_bool,
            "Whether this group's large target assignments run in a worker thread.",
            "group.consumer.assignor.offload.enable",
        ),
        *SHARE_GROUP_SETTINGS,
        *DLQ_GROUP_SETTINGS,
    ]
}

# (group setting, broker minimum, broker maximum), in the order Kafka checks them
# (GroupConfig.validateValues).
_BOUNDS = {
    "consumer.heartbeat.interval.ms": (
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    "consumer.session.timeout.ms": (
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    "consumer.assignment.interval.ms": (
        "group.consumer.min.assignment.interval.ms",
        "group.consumer.max.assignment.interval.ms",
    ),
    **SHARE_GROUP_BOUNDS,
}

# (session timeout, heartbeat interval): a group's session timeout must be above its interval,
# the broker's value standing in for the one the group does not set.
_SESSION_OVER_HEARTBEAT = [
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
]


def broker_default(setting: Setting, broker_settings: Settings) -> Any:
    """A group setting's value for a group without an override of it: its broker synonym's
    (its own default for a setting without one)."""
    synonym = setting.broker_synonym
    return setting.default if synonym is None else broker_settings[synonym]


def check_group_config(name: str, value: str, broker_settings: Settings) -> Any:
    """The parsed value of one group setting, or ConfigError with Kafka's message."""
    return check_group_configs({name: value}, broker_settings)[name]


def check_group_configs(layer: dict[str, str], broker_settings: Settings) -> dict[str, Any]:
    """A group's whole set of settings ({name: text}) parsed, or ConfigError with Kafka's
    message (GroupConfig.validate): an unknown name; a value that does not parse (in Kafka's
    order of settings); a value outside the broker's min and max; a session timeout not above
    the heartbeat interval; a dead-letter topic named like an internal one."""
    for name in layer:
        if name not in GROUP_SETTINGS:
            raise ConfigError(f"Unknown group config name: {name}")
    parsed: dict[str, Any] = {}
    for name, setting in GROUP_SETTINGS.items():
        if name not in layer:
            continue
        value = layer[name]
        try:
            parsed[name] = setting.parse(value)
        except ConfigError as e:
            raise ConfigError(f"Invalid value {value} for configuration {name}: {e}") from None
    for name, (lo_name, hi_name) in _BOUNDS.items():
        if name in parsed:
            lo, hi = broker_settings[lo_name], broker_settings[hi_name]
            if not lo <= parsed[name] <= hi:
                raise ConfigError(f"{name} must be in the range {lo} to {hi} inclusive.")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if session in parsed or heartbeat in parsed:
            effective = {
                n: parsed[n] if n in parsed else broker_default(GROUP_SETTINGS[n], broker_settings)
                for n in (session, heartbeat)
            }
            if effective[session] <= effective[heartbeat]:
                raise ConfigError(f"{session} must be greater than {heartbeat}")
    dlq = parsed.get("errors.deadletterqueue.topic.name")
    if dlq and dlq.strip().startswith("__"):
        raise ConfigError(
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
        )
    return parsed
