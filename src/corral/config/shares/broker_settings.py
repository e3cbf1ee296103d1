"""Share groups' broker settings (KIP-932), with Kafka 4.4's names, defaults and bounds: the
broker's `group.share.*` (GroupCoordinatorConfig, ShareGroupConfig) and `share.coordinator.*`
(ShareCoordinatorConfig); the per-group `share.*` settings are group_settings.py's.
config/broker.py lists these with its others; `check_bounds` holds Kafka's checks between them,
with its messages."""

from __future__ import annotations

from typing import Any

from corral.config.types import (
    INT32_MAX,
    ConfigError,
    ConfigType,
    Setting,
    int_in,
    parse_bool,
)
from corral.config.types import inert as _inert

_SINGLE_NODE = "corral is a single node, with no replicas, controllers or inter-broker traffic"
_NO_THREADS = "corral's network thread and one event loop replace Kafka's thread pools"
_NO_DLQ = "corral's share groups have no dead-letter queue (KIP-1191, share.version 2)"

SIMPLE_ASSIGNOR = "simple"
# Kafka's class name of its only share-group assignor, accepted for it as Kafka accepts it.
SIMPLE_ASSIGNOR_CLASS = "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"


def share_assignors(value: Any) -> str:
    """group.share.assignors: a list without duplicates (Kafka's ValidList), of exactly one
    assignor (GroupCoordinatorConfig), the built-in `simple` (by name or Kafka's class name)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    entries = [str(item).strip() for item in items]
    if entries == [""]:
        entries = []
    if any(not e for e in entries) or len(set(entries)) != len(entries):
        raise ConfigError(f"expected a list of assignors without duplicates, got {value!r}")
    if len(entries) != 1:
        raise ConfigError(
            f"group.share.assignors must contain exactly one assignor, but found {len(entries)}"
        )
    if entries[0] not in (SIMPLE_ASSIGNOR, SIMPLE_ASSIGNOR_CLASS):
        raise ConfigError(
            f"{entries[0]!r} is not a share-group assignor corral has: `{SIMPLE_ASSIGNOR}` "
            f"(or {SIMPLE_ASSIGNOR_CLASS})"
        )
    return entries[0]


def _share(name: str, default: int, lo: int, hi: int, doc: str) -> Setting:
    return Setting(f"group.share.{name}", ConfigType.INT, default, int_in(lo, hi), doc)


def _coordinator(name: str, default: int, lo: int, hi: int, doc: str) -> Setting:
    return Setting(f"share.coordinator.{name}", ConfigType.INT, default, int_in(lo, hi), doc)


# The broker's share-group settings. Bounds are Kafka's (its ConfigDef ranges; `atLeast(n)` is
# [n, 2147483647]) but for group.share.max.size (below) and the partitions of
# __share_group_state (at most 100000, as every internal topic's in corral).
SHARE_SETTINGS: list[Setting] = [
    # Kafka caps group.share.max.size at 1000 (ConfigDef between(1, 1000)); corral, whose
    # coordinator is built for groups of tens of thousands of members, allows up to 100000.
    _share(
        "max.size",
        200,
        1,
        100_000,
        "Most members a share group admits (GROUP_MAX_SIZE_REACHED beyond). Kafka's bound is "
        "1000; corral's is 100000. group.share.max.share.sessions must be at least this.",
    ),
    _share(
        "session.timeout.ms",
        45000,
        1,
        INT32_MAX,
        "A share-group member is fenced when no heartbeat came for this long.",
    ),
    _share(
        "min.session.timeout.ms",
        45000,
        1,
        INT32_MAX,
        "Smallest `share.session.timeout.ms` a group may set.",
    ),
    _share(
        "max.session.timeout.ms",
        60000,
        1,
        INT32_MAX,
        "Largest `share.session.timeout.ms` a group may set.",
    ),
    _share(
        "heartbeat.interval.ms",
        5000,
        1,
        INT32_MAX,
        "How often share-group members are told to heartbeat; below "
        "group.share.session.timeout.ms.",
    ),
    _share(
        "min.heartbeat.interval.ms",
        5000,
        1,
        INT32_MAX,
        "Smallest `share.heartbeat.interval.ms` a group may set.",
    ),
    _share(
        "max.heartbeat.interval.ms",
        15000,
        1,
        INT32_MAX,
        "Largest `share.heartbeat.interval.ms` a group may set.",
    ),
    Setting(
        "group.share.assignors",
        ConfigType.LIST,
        SIMPLE_ASSIGNOR,
        share_assignors,
        "The server-side assignor of share groups: exactly one, Kafka's `simple` (partitions "
        "shared by ceil(members / partitions) members each, balanced, not rack-aware).",
    ),
    _share(
        "assignment.interval.ms",
        1000,
        0,
        INT32_MAX,
        "A share group's next target assignment is computed at least this long after its "
        "last; the epoch bumps in between collapse into one computation. 0 computes at "
        "every bump.",
    ),
    _share(
        "min.assignment.interval.ms",
        0,
        0,
        INT32_MAX,
        "Smallest `share.assignment.interval.ms` a group may set.",
    ),
    _share(
        "max.assignment.interval.ms",
        15000,
        0,
        INT32_MAX,
        "Largest `share.assignment.interval.ms` a group may set.",
    ),
    Setting(
        "group.share.assignor.offload.enable",
        ConfigType.BOOLEAN,
        True,
        parse_bool,
        "Whether a large share group's target assignment runs in a worker thread instead of "
        "on the event loop (as group.consumer.assignor.offload.enable for consumer groups).",
    ),
    _share(
        "initialize.retry.interval.ms",
        30000,
        1,
        INT32_MAX,
        "How long a share partition whose state is being initialized for a group is left "
        "alone before the initialization is tried again (at least offsets.commit.timeout.ms, "
        "as in Kafka).",
    ),
    _share(
        "delivery.count.limit",
        5,
        2,
        10,
        "How many times a record is delivered to a share group before it is archived "
        "(a Release or an expired lock at the limit archives it).",
    ),
    _share(
        "min.delivery.count.limit",
        2,
        2,
        5,
        "Smallest `share.delivery.count.limit` a group may set.",
    ),
    _share(
        "max.delivery.count.limit",
        10,
        5,
        25,
        "Largest `share.delivery.count.limit` a group may set.",
    ),
    _share(
        "record.lock.duration.ms",
        30000,
        1000,
        3_600_000,
        "How long a share-group member holds the records it acquired before they are "
        "available again (AcquisitionLockTimeoutMs).",
    ),
    _share(
        "min.record.lock.duration.ms",
        15000,
        1000,
        30000,
        "Smallest `share.record.lock.duration.ms` a group may set.",
    ),
    _share(
        "max.record.lock.duration.ms",
        60000,
        30000,
        3_600_000,
        "Largest `share.record.lock.duration.ms` a group may set.",
    ),
    _share(
        "partition.max.record.locks",
        2000,
        100,
        10000,
        "Most records in flight (acquired or not yet pruned) in one share partition of a "
        "group; no more are acquired beyond it.",
    ),
    _share(
        "min.partition.max.record.locks",
        100,
        100,
        2000,
        "Smallest `share.partition.max.record.locks` a group may set.",
    ),
    _share(
        "max.partition.max.record.locks",
        4000,
        2000,
        10000,
        "Largest `share.partition.max.record.locks` a group may set.",
    ),
    _share(
        "max.share.sessions",
        2000,
        1,
        INT32_MAX,
        "Most share sessions (ShareFetch sessions, one per group member and broker) this "
        "broker keeps; beyond it a new session is refused with SHARE_SESSION_LIMIT_REACHED. "
        "At least group.share.max.size.",
    ),
    _inert(
        "group.share.persister.class.name",
        ConfigType.STRING,
        "org.apache.kafka.server.share.persister.DefaultStatePersister",
        "corral keeps share-group state in __share_group_state itself, with no plugin",
    ),
    _inert(
        "group.share.dlq.manager.class.name",
        ConfigType.STRING,
        "org.apache.kafka.server.share.dlq.DefaultShareGroupDLQManager",
        _NO_DLQ,
    ),
    _inert(
        "share.fetch.purgatory.purge.interval.requests",
        ConfigType.INT,
        1000,
        "waiting ShareFetches are tasks of corral's event loop, with no purgatory to purge",
    ),
    # The share coordinator: the share partitions' state in __share_group_state.
    _coordinator(
        "state.topic.num.partitions",
        50,
        1,
        100_000,
        "Partitions of __share_group_state; a share partition's state lives in "
        'abs(hash("group:topicId:partition")) % this (should not change after deployment).',
    ),
    _coordinator(
        "state.topic.segment.bytes",
        104857600,
        1,
        INT32_MAX,
        "segment.bytes of __share_group_state.",
    ),
    _coordinator(
        "snapshot.update.records.per.snapshot",
        500,
        0,
        500,
        "How many ShareUpdate records of a share partition are written between two of its "
        "ShareSnapshot records (the next write after them is a whole snapshot).",
    ),
    _coordinator(
        "state.topic.prune.interval.ms",
        300000,
        1,
        INT32_MAX,
        "How often records of __share_group_state that no share partition needs any more "
        "are deleted.",
    ),
    _coordinator(
        "cold.partition.snapshot.interval.ms",
        300000,
        1,
        INT32_MAX,
        "How often share partitions not written since are snapshotted again, so that "
        "pruning can pass their old records.",
    ),
    _inert("share.coordinator.state.topic.replication.factor", ConfigType.SHORT, 3, _SINGLE_NODE),
    _inert("share.coordinator.state.topic.min.isr", ConfigType.SHORT, 2, _SINGLE_NODE),
    _inert("share.coordinator.threads", ConfigType.INT, 1, _NO_THREADS),
    _inert(
        "share.coordinator.write.timeout.ms",
        ConfigType.INT,
        5000,
        "a state write waits for its own fsync only, never for replicas",
    ),
    _inert(
        "share.coordinator.load.buffer.size",
        ConfigType.INT,
        5242880,
        "loading reads whole segments",
    ),
    _inert(
        "share.coordinator.state.topic.compression.codec",
        ConfigType.INT,
        0,
        "the share coordinator's records are written uncompressed",
    ),
    _inert(
        "share.coordinator.append.linger.ms",
        ConfigType.INT,
        -1,
        "the share coordinator's writes are group-committed at each fsync",
    ),
    _inert(
        "share.coordinator.cached.buffer.max.bytes",
        ConfigType.INT,
        1048588,
        "records are encoded by the compiled core",
        dynamic=True,
    ),
    _inert(
        "errors.deadletterqueue.auto.create.topics.enable",
        ConfigType.BOOLEAN,
        False,
        _NO_DLQ,
        dynamic=True,
    ),
    _inert(
        "errors.deadletterqueue.topic.name.prefix",
        ConfigType.STRING,
        "dlq.",
        _NO_DLQ,
        dynamic=True,
    ),
]

# Kafka's dynamic ones (GroupCoordinatorConfig.RECONFIGURABLE_CONFIGS): applied while corral runs.
SHARE_DYNAMIC = {"group.share.assignment.interval.ms", "group.share.assignor.offload.enable"}

# (setting, its minimum, its maximum) of the broker's group.share settings that come in threes.
_RANGES = [
    (
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    (
        "group.share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
]


def check_bounds(values: dict[str, Any]) -> None:
    """Kafka's checks between the share settings, in its order and with its messages
    (GroupCoordinatorConfig.verifyShareGroupConfigs, then ShareGroupConfig.validate)."""
    for name, lo, hi in _RANGES:
        _require(values[hi] >= values[lo], f"{hi} must be greater than or equal to {lo}")
        _require(values[name] >= values[lo], f"{name} must be greater than or equal to {lo}")
        _require(values[name] <= values[hi], f"{name} must be less than or equal to {hi}")
    _require(
        values["group.share.heartbeat.interval.ms"] < values["group.share.session.timeout.ms"],
        "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms",
    )
    name, lo, hi = (
        "group.share.assignment.interval.ms",
        "group.share.min.assignment.interval.ms",
        "group.share.max.assignment.interval.ms",
    )
    _require(values[hi] >= values[lo], f"{hi} must be greater than or equal to {lo}")
    _require(values[name] >= values[lo], f"{name} must be greater than or equal to {lo}")
    _require(values[name] <= values[hi], f"{name} must be less than or equal to {hi}")
    # ShareGroupConfig.validate: the value against its max, then its min (not the min against
    # the max: each has its own ConfigDef range).
    for name, lo, hi in (
        (
            "group.share.delivery.count.limit",
            "group.share.min.delivery.count.limit",
            "group.share.max.delivery.count.limit",
        ),
        (
            "group.share.partition.max.record.locks",
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
        ),
    ):
        _require(values[hi] >= values[name], f"{hi} must be greater than or equal to {name}")
        _require(values[name] >= values[lo], f"{name} must be greater than or equal to {lo}")
    name, lo, hi = (
        "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    )
    _require(values[name] >= values[lo], f"{name} must be greater than or equal to {lo}")
    _require(values[hi] >= values[name], f"{hi} must be greater than or equal to {name}")
    _require(
        values["group.share.max.share.sessions"] >= values["group.share.max.size"],
        "group.share.max.share.sessions must be greater than or equal to group.share.max.size",
    )


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


__all__ = [
    "SHARE_DYNAMIC",
    "SHARE_SETTINGS",
    "check_bounds",
]
