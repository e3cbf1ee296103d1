"""The transaction coordinator's settings, with Kafka's names and defaults
(TransactionStateManagerConfig, TransactionLogConfig). config/broker.py lists them with the
broker's others."""

from __future__ import annotations

from corral.config.types import INT32_MAX, ConfigType, Setting, int_in, parse_bool

TRANSACTION_SETTINGS: list[Setting] = [
    Setting(
        "transaction.state.log.num.partitions",
        ConfigType.INT,
        50,
        int_in(1, 100_000),
        "Partitions of __transaction_state; a transactional id lives in "
        "abs(hash(transactional id)) % this.",
    ),
    Setting(
        "transaction.state.log.segment.bytes",
        ConfigType.INT,
        104857600,
        int_in(1, INT32_MAX),
        "segment.bytes of __transaction_state.",
    ),
    Setting(
        "transaction.max.timeout.ms",
        ConfigType.INT,
        900000,
        int_in(1, INT32_MAX),
        "The largest transaction.timeout.ms a producer may ask for "
        "(INVALID_TRANSACTION_TIMEOUT above).",
    ),
    Setting(
        "transactional.id.expiration.ms",
        ConfigType.INT,
        604800000,
        int_in(1, INT32_MAX),
        "How long an idle transactional id (no transaction open) is kept.",
    ),
    Setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        ConfigType.INT,
        10000,
        int_in(1, INT32_MAX),
        "How often transactions past their timeout are aborted.",
    ),
    Setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        ConfigType.INT,
        3600000,
        int_in(1, INT32_MAX),
        "How often expired transactional ids are removed.",
    ),
    Setting(
        "transaction.partition.verification.enable",
        ConfigType.BOOLEAN,
        True,
        parse_bool,
        "KIP-890: a transactional produce to a partition the transaction has not added is refused.",
        dynamic=True,
    ),
]
