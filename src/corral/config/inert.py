"""Kafka 4.4's broker settings that corral accepts by name and does not act on: each says why
(DescribeConfigs shows them with Kafka's defaults; setting one changes nothing)."""

from __future__ import annotations

from corral.config.types import INT32_MAX, INT64_MAX, ConfigType, Setting, inert

_SINGLE_NODE = "corral is a single node, with no replicas, controllers or inter-broker traffic"
_NO_THREADS = "corral's network thread and one event loop replace Kafka's thread pools"
_NO_STREAMS = "corral has no streams groups"
_NO_TXN = "__transaction_state has one replica on a single node"
_NO_ROLL_BY_TIME = "segments roll by size only"
_NO_TIERS = "corral has no tiered storage"
_NOT_RECOMPRESSED = "batches are stored as the producer sent them, never recompressed"
_CONNECTION_LIMITS = "corral limits connections by max.connections and max.connections.per.ip only"

# Kafka 4.4's group coordinator settings (GroupCoordinatorConfig), and the other names of Kafka's
# own config/server.properties, that corral does not act on (the share groups' inert ones are in
# config/shares/).
INERT: list[Setting] = [
    inert("process.roles", ConfigType.LIST, "", _SINGLE_NODE),
    inert("controller.quorum.voters", ConfigType.LIST, "", _SINGLE_NODE),
    inert("controller.quorum.bootstrap.servers", ConfigType.LIST, "", _SINGLE_NODE),
    inert("controller.listener.names", ConfigType.LIST, "", _SINGLE_NODE),
    inert("inter.broker.listener.name", ConfigType.STRING, "", _SINGLE_NODE),
    inert("broker.id", ConfigType.INT, -1, "node.id names the broker"),
    inert("num.network.threads", ConfigType.INT, 3, _NO_THREADS, dynamic=True),
    inert("num.io.threads", ConfigType.INT, 8, _NO_THREADS, dynamic=True),
    inert("num.recovery.threads.per.data.dir", ConfigType.INT, 2, _NO_THREADS, dynamic=True),
    inert("background.threads", ConfigType.INT, 10, _NO_THREADS, dynamic=True),
    inert("socket.send.buffer.bytes", ConfigType.INT, 102400, "the kernel's buffer sizes are kept"),
    inert(
        "socket.receive.buffer.bytes", ConfigType.INT, 102400, "the kernel's buffer sizes are kept"
    ),
    inert("min.insync.replicas", ConfigType.INT, 1, _SINGLE_NODE, dynamic=True),
    inert("unclean.leader.election.enable", ConfigType.BOOLEAN, False, _SINGLE_NODE, dynamic=True),
    inert(
        "compression.type",
        ConfigType.STRING,
        "producer",
        "batches are stored as the producer sent them (Kafka's `producer`)",
        dynamic=True,
    ),
    inert("log.roll.ms", ConfigType.LONG, None, _NO_ROLL_BY_TIME, dynamic=True),
    inert("log.roll.hours", ConfigType.INT, 168, _NO_ROLL_BY_TIME, dynamic=True),
    inert(
        "log.index.size.max.bytes",
        ConfigType.INT,
        10485760,
        "corral's index is its own",
        dynamic=True,
    ),
    inert(
        "log.index.interval.bytes", ConfigType.INT, 4096, "corral's index is its own", dynamic=True
    ),
    inert("log.preallocate", ConfigType.BOOLEAN, False, "segments grow as written", dynamic=True),
    inert("transaction.state.log.replication.factor", ConfigType.SHORT, 3, _NO_TXN),
    inert("transaction.state.log.min.isr", ConfigType.INT, 2, _NO_TXN),
    inert("group.coordinator.threads", ConfigType.INT, 4, _NO_THREADS),
    inert("group.coordinator.background.threads", ConfigType.INT, 2, _NO_THREADS),
    inert(
        "group.coordinator.append.linger.ms",
        ConfigType.INT,
        -1,
        "the coordinator's writes are group-committed at each fsync",
    ),
    inert(
        "group.coordinator.cached.buffer.max.bytes",
        ConfigType.INT,
        1048588,
        "records are encoded by the compiled core",
        dynamic=True,
    ),
    inert("offsets.load.buffer.size", ConfigType.INT, 5242880, "loading reads whole segments"),
    inert(
        "offsets.commit.timeout.ms",
        ConfigType.INT,
        5000,
        "a commit waits for its own fsync only, never for replicas",
    ),
    inert(
        "offsets.topic.segment.bytes",
        ConfigType.INT,
        104857600,
        "__consumer_offsets segments follow log.segment.bytes",
    ),
    inert("offsets.topic.replication.factor", ConfigType.SHORT, 3, _SINGLE_NODE),
    inert(
        "offsets.topic.compression.codec",
        ConfigType.INT,
        0,
        "the coordinator's records are written uncompressed",
    ),
    *(
        inert(
            f"group.streams.{name}",
            type,
            default,
            _NO_STREAMS,
            dynamic=name in ("assignment.interval.ms", "assignor.offload.enable"),
        )
        for name, type, default in [
            ("session.timeout.ms", ConfigType.INT, 45000),
            ("min.session.timeout.ms", ConfigType.INT, 45000),
            ("max.session.timeout.ms", ConfigType.INT, 60000),
            ("heartbeat.interval.ms", ConfigType.INT, 5000),
            ("min.heartbeat.interval.ms", ConfigType.INT, 5000),
            ("max.heartbeat.interval.ms", ConfigType.INT, 15000),
            ("max.size", ConfigType.INT, INT32_MAX),
            ("num.standby.replicas", ConfigType.INT, 0),
            ("max.standby.replicas", ConfigType.INT, 2),
            ("initial.rebalance.delay.ms", ConfigType.INT, 3000),
            ("assignment.interval.ms", ConfigType.INT, 1000),
            ("min.assignment.interval.ms", ConfigType.INT, 0),
            ("max.assignment.interval.ms", ConfigType.INT, 15000),
            ("assignors", ConfigType.LIST, "sticky"),
            ("rack.aware.assignment.tags", ConfigType.LIST, ""),
            ("assignor.offload.enable", ConfigType.BOOLEAN, True),
            ("task.offset.interval.ms", ConfigType.INT, 60000),
            ("min.task.offset.interval.ms", ConfigType.INT, 15000),
            ("num.warmup.replicas", ConfigType.INT, 2),
            ("max.warmup.replicas", ConfigType.INT, 20),
            ("topology.description.plugin.class", ConfigType.STRING, None),
            ("acceptable.recovery.lag", ConfigType.LONG, 10000),
        ]
    ),
]

# The rest of Kafka 4.4's dynamic broker settings (DynamicBrokerConfig.AllDynamicConfigs) that
# corral has no use for: changed while corral runs as in Kafka, and without effect.
INERT_DYNAMIC: list[Setting] = [
    *(
        inert(name, type, default, _NO_TIERS, dynamic=True)
        for name, type, default in [
            ("log.local.retention.ms", ConfigType.LONG, -2),
            ("log.local.retention.bytes", ConfigType.LONG, -2),
            ("log.remote.copy.lag.ms", ConfigType.LONG, 0),
            ("log.remote.copy.lag.bytes", ConfigType.LONG, -1),
            ("follower.fetch.last.tiered.offset.enable", ConfigType.BOOLEAN, False),
            ("remote.fetch.max.wait.ms", ConfigType.INT, 500),
            ("remote.list.offsets.request.timeout.ms", ConfigType.LONG, 30000),
            ("remote.log.index.file.cache.total.size.bytes", ConfigType.LONG, 1073741824),
            ("remote.log.manager.copier.thread.pool.size", ConfigType.INT, 10),
            ("remote.log.manager.expiration.thread.pool.size", ConfigType.INT, 10),
            ("remote.log.manager.follower.thread.pool.size", ConfigType.INT, 2),
            ("remote.log.manager.copy.max.bytes.per.second", ConfigType.LONG, INT64_MAX),
            ("remote.log.manager.fetch.max.bytes.per.second", ConfigType.LONG, INT64_MAX),
            ("remote.log.reader.threads", ConfigType.INT, 10),
        ]
    ),
    *(
        inert(
            f"compression.{codec}.level", ConfigType.INT, default, _NOT_RECOMPRESSED, dynamic=True
        )
        for codec, default in [("gzip", -1), ("lz4", 9), ("zstd", 3)]
    ),
    inert(
        "max.decompressed.message.bytes",
        ConfigType.INT,
        2147483639,
        "batches are stored as sent, never decompressed",
        dynamic=True,
    ),
    inert(
        "log.message.timestamp.before.max.ms",
        ConfigType.LONG,
        INT64_MAX,
        "timestamps are not range-checked",
        dynamic=True,
    ),
    inert(
        "log.message.timestamp.after.max.ms",
        ConfigType.LONG,
        3600000,
        "timestamps are not range-checked",
        dynamic=True,
    ),
    inert("log.roll.jitter.ms", ConfigType.LONG, None, _NO_ROLL_BY_TIME, dynamic=True),
    inert(
        "log.segment.delete.delay.ms",
        ConfigType.LONG,
        60000,
        "a deleted segment goes at once",
        dynamic=True,
    ),
    inert(
        "cordoned.log.dirs",
        ConfigType.LIST,
        "",
        "corral has one data directory, log.dirs",
        dynamic=True,
    ),
    inert(
        "max.connection.creation.rate", ConfigType.INT, INT32_MAX, _CONNECTION_LIMITS, dynamic=True
    ),
    inert(
        "max.connections.per.ip.overrides", ConfigType.STRING, "", _CONNECTION_LIMITS, dynamic=True
    ),
    inert("num.replica.fetchers", ConfigType.INT, 1, _SINGLE_NODE, dynamic=True),
    inert(
        "producer.id.expiration.ms",
        ConfigType.INT,
        86400000,
        "a producer's state goes when its batches leave the log, not after a time",
        dynamic=True,
    ),
    inert(
        "metric.reporters",
        ConfigType.LIST,
        "org.apache.kafka.common.metrics.JmxReporter",
        "corral's metrics are served for Prometheus (corral.metrics.listen), not by Java reporters",
        dynamic=True,
    ),
    inert(
        "config.providers",
        ConfigType.LIST,
        "",
        "corral does not resolve ${provider:path:key} references in settings",
        dynamic=True,
    ),
]
