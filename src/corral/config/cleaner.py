"""The log cleaner's broker settings (Kafka's CleanerConfig names and defaults): when it runs, how
much memory and I/O it may take, and the defaults of the compaction settings of topics
(config/topics.py). The cleaner is partitions/cleaner.py."""

from __future__ import annotations

from corral.config.types import (
    INT32_MAX,
    INT64_MAX,
    ConfigType,
    Setting,
    float_in,
    int_in,
    parse_bool,
)

DOUBLE_MAX = 1.7976931348623157e308

CLEANER_SETTINGS: list[Setting] = [
    Setting(
        "log.cleaner.enable",
        ConfigType.BOOLEAN,
        True,
        parse_bool,
        "Whether compacted topics are cleaned (deprecated in Kafka 4.1, still honoured).",
    ),
    Setting(
        "log.cleaner.threads",
        ConfigType.INT,
        1,
        int_in(1, INT32_MAX),
        "Accepted for Kafka's sake: corral cleans one partition at a time, in a worker thread.",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.backoff.ms",
        ConfigType.LONG,
        15000,
        int_in(0, INT64_MAX),
        "How long the cleaner sleeps when no partition needs cleaning.",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.dedupe.buffer.size",
        ConfigType.LONG,
        134217728,
        int_in(1, INT64_MAX),
        "The most memory the key map of one pass takes (24 bytes an entry plus its key); a "
        "pass that fills it stops at a segment boundary and the next one goes on.",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.io.buffer.size",
        ConfigType.INT,
        524288,
        int_in(0, INT32_MAX),
        "Accepted for Kafka's sake: corral reads and writes through 256 KiB buffers.",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.io.buffer.load.factor",
        ConfigType.DOUBLE,
        0.9,
        float_in(0.0, 1.0),
        "Accepted for Kafka's sake (the key map is bounded by bytes).",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.io.max.bytes.per.second",
        ConfigType.DOUBLE,
        DOUBLE_MAX,
        float_in(0.0, DOUBLE_MAX),
        "The cleaner's read and write rate limit: after a pass it waits until its bytes fit.",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.min.cleanable.ratio",
        ConfigType.DOUBLE,
        0.5,
        float_in(0.0, 1.0),
        "Default of min.cleanable.dirty.ratio.",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.delete.retention.ms",
        ConfigType.LONG,
        86400000,
        int_in(0, INT64_MAX),
        "Default of delete.retention.ms.",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.min.compaction.lag.ms",
        ConfigType.LONG,
        0,
        int_in(0, INT64_MAX),
        "Default of min.compaction.lag.ms.",
        dynamic=True,
    ),
    Setting(
        "log.cleaner.max.compaction.lag.ms",
        ConfigType.LONG,
        INT64_MAX,
        int_in(1, INT64_MAX),
        "Default of max.compaction.lag.ms.",
        dynamic=True,
    ),
]
