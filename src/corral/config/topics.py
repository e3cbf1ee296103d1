"""A topic's settings (CreateTopics configs, kafka-configs --entity-type topics): Kafka's names,
each defaulting to its broker synonym. Those corral acts on come first; the rest are accepted
with Kafka's types and defaults and have no effect, because a single node makes them moot or
corral does not have the behaviour (README, "Topic settings")."""

from __future__ import annotations

from corral.config.types import (
    INT32_MAX,
    INT64_MAX,
    ConfigType,
    Setting,
    cleanup_policy,
    float_in,
    inert,
    int_in,
    one_of,
)

_SINGLE_NODE = "corral is a single node with one replica"
_NO_ROLL_BY_TIME = "segments roll by size only"
_NO_TIERS = "corral has no tiered storage"

TOPIC_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting(
            "cleanup.policy",
            ConfigType.LIST,
            "delete",
            cleanup_policy,
            "delete: old segments are removed by retention.ms / retention.bytes. compact: the "
            "log cleaner keeps the last record of every key (docs/compaction.md); a topic "
            "whose policy is compact alone has no time or size retention, compact,delete has "
            "both. As in Kafka, a topic whose policy "
            "includes compact refuses records without a key (Produce: INVALID_RECORD with "
            "an error per record); its compressed batches are decompressed for that check "
            "and may take at most max.message.bytes uncompressed.",
            "log.cleanup.policy",
        ),
        Setting(
            "delete.retention.ms",
            ConfigType.LONG,
            86400000,
            int_in(0, INT64_MAX),
            "How long the cleaner keeps a tombstone (a null value) of a compacted topic.",
            "log.cleaner.delete.retention.ms",
        ),
        Setting(
            "min.compaction.lag.ms",
            ConfigType.LONG,
            0,
            int_in(0, INT64_MAX),
            "The least time a record stays uncompacted.",
            "log.cleaner.min.compaction.lag.ms",
        ),
        Setting(
            "max.compaction.lag.ms",
            ConfigType.LONG,
            INT64_MAX,
            int_in(1, INT64_MAX),
            "The most time a record may stay uncompacted: past it the partition is cleaned "
            "whatever its dirty ratio.",
            "log.cleaner.max.compaction.lag.ms",
        ),
        Setting(
            "min.cleanable.dirty.ratio",
            ConfigType.DOUBLE,
            0.5,
            float_in(0.0, 1.0),
            "The share of a compacted partition's bytes (past its last clean) that makes it "
            "due for cleaning.",
            "log.cleaner.min.cleanable.ratio",
        ),
        Setting(
            "retention.ms",
            ConfigType.LONG,
            604800000,
            int_in(-1, INT64_MAX),
            "How long a segment is kept; -1 keeps forever.",
            "log.retention.ms",
        ),
        Setting(
            "retention.bytes",
            ConfigType.LONG,
            -1,
            int_in(-1, INT64_MAX),
            "Size a partition may grow to before old segments go; -1 is unlimited.",
            "log.retention.bytes",
        ),
        Setting(
            "segment.bytes",
            ConfigType.INT,
            1073741824,
            int_in(14, INT32_MAX),
            "Segment file size before a roll.",
            "log.segment.bytes",
        ),
        Setting(
            "max.message.bytes",
            ConfigType.INT,
            1048588,
            int_in(0, INT32_MAX),
            "Largest record batch accepted.",
            "message.max.bytes",
        ),
        Setting(
            "message.timestamp.type",
            ConfigType.STRING,
            "CreateTime",
            one_of("CreateTime", "LogAppendTime"),
            "Whether the batch timestamp is the producer's or the broker's.",
            "log.message.timestamp.type",
        ),
        inert(
            "min.insync.replicas",
            ConfigType.INT,
            1,
            _SINGLE_NODE,
            broker_synonym="min.insync.replicas",
        ),
        inert(
            "unclean.leader.election.enable",
            ConfigType.BOOLEAN,
            False,
            _SINGLE_NODE,
            broker_synonym="unclean.leader.election.enable",
        ),
        inert("leader.replication.throttled.replicas", ConfigType.LIST, "", _SINGLE_NODE),
        inert("follower.replication.throttled.replicas", ConfigType.LIST, "", _SINGLE_NODE),
        inert(
            "segment.ms", ConfigType.LONG, 604800000, _NO_ROLL_BY_TIME, broker_synonym="log.roll.ms"
        ),
        inert("segment.jitter.ms", ConfigType.LONG, 0, _NO_ROLL_BY_TIME),
        inert(
            "segment.index.bytes",
            ConfigType.INT,
            10485760,
            "corral's index is its own",
            broker_synonym="log.index.size.max.bytes",
        ),
        inert(
            "index.interval.bytes",
            ConfigType.INT,
            4096,
            "corral's index is its own",
            broker_synonym="log.index.interval.bytes",
        ),
        inert(
            "flush.messages",
            ConfigType.LONG,
            INT64_MAX,
            "fsync follows the broker's log.flush.interval.messages for every topic",
        ),
        inert(
            "flush.ms",
            ConfigType.LONG,
            INT64_MAX,
            "fsync follows the broker's log.flush.interval.ms for every topic",
        ),
        inert("file.delete.delay.ms", ConfigType.LONG, 60000, "a deleted segment goes at once"),
        inert(
            "preallocate",
            ConfigType.BOOLEAN,
            False,
            "segments grow as written",
            broker_synonym="log.preallocate",
        ),
        inert(
            "compression.type",
            ConfigType.STRING,
            "producer",
            "batches are stored as the producer sent them (Kafka's `producer`)",
            broker_synonym="compression.type",
        ),
        inert("compression.gzip.level", ConfigType.INT, 9, "batches are not recompressed"),
        inert("compression.lz4.level", ConfigType.INT, 9, "batches are not recompressed"),
        inert("compression.zstd.level", ConfigType.INT, 3, "batches are not recompressed"),
        inert(
            "message.timestamp.before.max.ms",
            ConfigType.LONG,
            INT64_MAX,
            "timestamps are not range-checked",
        ),
        inert(
            "message.timestamp.after.max.ms",
            ConfigType.LONG,
            3600000,
            "timestamps are not range-checked",
        ),
        inert("remote.storage.enable", ConfigType.BOOLEAN, False, _NO_TIERS),
        inert("local.retention.ms", ConfigType.LONG, -2, _NO_TIERS),
        inert("local.retention.bytes", ConfigType.LONG, -2, _NO_TIERS),
        inert("remote.log.copy.disable", ConfigType.BOOLEAN, False, _NO_TIERS),
        inert("remote.log.delete.on.disable", ConfigType.BOOLEAN, False, _NO_TIERS),
    ]
}
