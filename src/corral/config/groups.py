"""A consumer group's settings (DescribeConfigs / IncrementalAlterConfigs with resource type GROUP,
kafka-configs --entity-type groups): Kafka's GroupConfig names for consumer groups, each
defaulting to its broker synonym and bounded by the broker's min and max (Kafka's checks and
messages)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral.config.types import INT32_MAX, ConfigError, ConfigType, Setting, int_in, parse_bool

if TYPE_CHECKING:
    from corral.config.settings import Settings

GROUP_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting(
            "consumer.session.timeout.ms",
            ConfigType.INT,
            45000,
            int_in(1, INT32_MAX),
            "A member of this consumer group is fenced when no heartbeat came for this long.",
            "group.consumer.session.timeout.ms",
        ),
        Setting(
            "consumer.heartbeat.interval.ms",
            ConfigType.INT,
            5000,
            int_in(1, INT32_MAX),
            "How often this consumer group's members are told to heartbeat.",
            "group.consumer.heartbeat.interval.ms",
        ),
        Setting(
            "consumer.assignment.interval.ms",
            ConfigType.INT,
            1000,
            int_in(0, INT32_MAX),
            "Least time between two target assignment computations of this group.",
            "group.consumer.assignment.interval.ms",
        ),
        Setting(
            "consumer.assignor.offload.enable",
            ConfigType.BOOLEAN,
            True,
            parse_bool,
            "Whether this group's large target assignments run in a worker thread.",
            "group.consumer.assignor.offload.enable",
        ),
    ]
}

# (group setting, broker minimum, broker maximum)
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
}


def broker_default(setting: Setting, broker_settings: Settings) -> Any:
    """A group setting's value for a group without an override of it: its broker synonym's
    (every group setting has one; the setting's own default otherwise)."""
    synonym = setting.broker_synonym
    return setting.default if synonym is None else broker_settings[synonym]


def check_group_config(name: str, value: str, broker_settings: Settings) -> Any:
    """The parsed value of one group setting, or ConfigError with Kafka's message."""
    setting = GROUP_SETTINGS.get(name)
    if setting is None:
        raise ConfigError(f"Unknown group config name: {name}")
    try:
        parsed = setting.parse(value)
    except ConfigError as e:
        raise ConfigError(f"Invalid value {value} for configuration {name}: {e}") from None
    if name in _BOUNDS:
        lo, hi = (broker_settings[n] for n in _BOUNDS[name])
        if not lo <= parsed <= hi:
            raise ConfigError(f"{name} must be in the range {lo} to {hi} inclusive.")
    return parsed
