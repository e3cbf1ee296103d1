"""Share groups' own settings (Kafka's GroupConfig for share groups: `share.*`, set per group
with IncrementalAlterConfigs on a GROUP resource; config/groups.py lists them with the consumer
ones and checks them against the broker's minimum and maximum), with Kafka's parsing of
`share.auto.offset.reset` (java.time.Duration's ISO 8601 form)."""

from __future__ import annotations

import re
from typing import Any

from corral.config.types import (
    ConfigError,
    ConfigType,
    Setting,
    java_bool,
    java_int,
    java_string_in,
)
from corral.config.types import inert as _inert

_NO_DLQ = "corral's share groups have no dead-letter queue (KIP-1191, share.version 2)"

# ------------------------------------------------------------------ share group settings ---

# share.auto.offset.reset: Kafka's AutoOffsetResetStrategy without `none`.
_RESET_MESSAGE = (
    "Invalid value `{}` for configuration share.auto.offset.reset. The value must be either "
    "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
)
# java.time.Duration.parse's pattern (case-insensitive).
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def iso_duration_nanos(text: str) -> int:
    """An ISO-8601 duration (`PnDTnHnMn.nS`) in nanoseconds, as java.time.Duration.parse reads
    it (signs on the whole and on each number, `.` or `,` before up to 9 fraction digits, any
    case); ValueError where Java throws (no part given, a bare `T`, seconds beyond a long)."""
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) is not None and m.group(3).upper() == "T":
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, _, hours, minutes, seconds, fraction = m.groups()
    if days is None and hours is None and minutes is None and seconds is None:
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    total = 0
    for amount, unit in ((days, 86400), (hours, 3600), (minutes, 60), (seconds, 1)):
        if amount is not None:
            part = int(amount) * unit
            if not _LONG_MIN <= part <= _LONG_MAX:
                raise ValueError(f"Text cannot be parsed to a Duration: {text}")
            total += part
            if not _LONG_MIN <= total <= _LONG_MAX:
                raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    nanos = int((fraction or "").ljust(9, "0") or 0)
    if seconds is not None and seconds.startswith("-"):
        nanos = -nanos
    total_nanos = total * 1_000_000_000 + nanos
    return -total_nanos if sign == "-" else total_nanos


def auto_offset_reset(value: Any) -> str:
    """share.auto.offset.reset: `latest`, `earliest` or `by_duration:<ISO-8601 duration>`, not
    negative (case-sensitive but for the duration's letters, trimmed), as Kafka's
    ShareGroupAutoOffsetResetStrategy.Validator; the text itself is kept."""
    text = str(value).strip()
    if text in ("latest", "earliest"):
        return text
    if text.startswith("by_duration:"):
        try:
            nanos = iso_duration_nanos(text[len("by_duration:") :])
        except ValueError:
            nanos = -1
        if nanos >= 0:
            return text
    raise ConfigError(_RESET_MESSAGE.format(text))


def reset_duration_ms(value: str) -> int | None:
    """The look-back of a `by_duration:` share.auto.offset.reset in milliseconds (the offset
    of the records at now minus it), None for `latest` and `earliest`."""
    if not value.startswith("by_duration:"):
        return None
    return iso_duration_nanos(value[len("by_duration:") :]) // 1_000_000


# The share group settings (Kafka's GroupConfig), in its order; config/groups.py checks them
# against the broker's minimum and maximum (_GROUP_BOUNDS).
SHARE_GROUP_SETTINGS: list[Setting] = [
    Setting(
        "share.session.timeout.ms",
        ConfigType.INT,
        45000,
        java_int(1),
        "A member of this share group is fenced when no heartbeat came for this long.",
        "group.share.session.timeout.ms",
    ),
    Setting(
        "share.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        java_int(1),
        "How often this share group's members are told to heartbeat.",
        "group.share.heartbeat.interval.ms",
    ),
    Setting(
        "share.record.lock.duration.ms",
        ConfigType.INT,
        30000,
        java_int(1000),
        "How long a member of this share group holds the records it acquired.",
        "group.share.record.lock.duration.ms",
    ),
    Setting(
        "share.delivery.count.limit",
        ConfigType.INT,
        5,
        java_int(2),
        "How many times a record is delivered to this share group before it is archived.",
        "group.share.delivery.count.limit",
    ),
    Setting(
        "share.partition.max.record.locks",
        ConfigType.INT,
        2000,
        java_int(100),
        "Most records in flight in one share partition of this group.",
        "group.share.partition.max.record.locks",
    ),
    Setting(
        "share.auto.offset.reset",
        ConfigType.STRING,
        "latest",
        auto_offset_reset,
        "Where this share group starts reading a partition it has no state for: latest, "
        "earliest, or by_duration:<ISO-8601 duration, PnDTnHnMn.nS> (the first record at or "
        "after now minus the duration).",
    ),
    Setting(
        "share.isolation.level",
        ConfigType.STRING,
        "read_uncommitted",
        java_string_in("read_committed", "read_uncommitted"),
        "read_committed: this share group is given transactional records once committed, "
        "never aborted ones; read_uncommitted: every record.",
    ),
    Setting(
        "share.renew.acknowledge.enable",
        ConfigType.BOOLEAN,
        True,
        java_bool,
        "Whether this share group's members may renew their acquisition locks (acknowledge "
        "type 4, Renew).",
    ),
    Setting(
        "share.assignment.interval.ms",
        ConfigType.INT,
        1000,
        java_int(0),
        "Least time between two target assignment computations of this share group.",
        "group.share.assignment.interval.ms",
    ),
    Setting(
        "share.assignor.offload.enable",
        ConfigType.BOOLEAN,
        True,
        java_bool,
        "Whether this share group's large target assignments run in a worker thread.",
        "group.share.assignor.offload.enable",
    ),
]

# (group setting, the broker's minimum, its maximum)
SHARE_GROUP_BOUNDS = {
    "share.heartbeat.interval.ms": (
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    "share.session.timeout.ms": (
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    "share.record.lock.duration.ms": (
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    "share.delivery.count.limit": (
        "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit",
    ),
    "share.partition.max.record.locks": (
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
    "share.assignment.interval.ms": (
        "group.share.min.assignment.interval.ms",
        "group.share.max.assignment.interval.ms",
    ),
}

# Kafka 4.4's group settings of share groups' dead-letter queues (KIP-1191), accepted and inert.
DLQ_GROUP_SETTINGS: list[Setting] = [
    _inert("errors.deadletterqueue.topic.name", ConfigType.STRING, "", _NO_DLQ),
    _inert("errors.deadletterqueue.copy.record.enable", ConfigType.BOOLEAN, False, _NO_DLQ),
]


__all__ = [
    "DLQ_GROUP_SETTINGS",
    "SHARE_GROUP_BOUNDS",
    "SHARE_GROUP_SETTINGS",
    "auto_offset_reset",
    "iso_duration_nanos",
    "reset_duration_ms",
]
