"""The broker's settings: what corral acts on (Kafka's names it accepts without effect are in
`corral.config.inert`).

Each has Kafka's name, type and default unless its doc says otherwise (corral-only settings start
with `corral.`). A name in neither table is unknown: a WARNING at startup, as Kafka's "supplied
but isn't a known config".
"""

from __future__ import annotations

from dataclasses import replace

from corral.cluster.settings import CLUSTER_SETTINGS
from corral.config.cleaner import CLEANER_SETTINGS
from corral.config.inert import INERT, INERT_DYNAMIC
from corral.config.listeners import LISTENER_SETTINGS
from corral.config.security import SECURITY_SETTINGS
from corral.config.shares.broker_settings import SHARE_DYNAMIC, SHARE_SETTINGS
from corral.config.types import (
    INT32_MAX,
    INT64_MAX,
    ConfigType,
    Setting,
    assignor_list,
    cleanup_policy,
    int_in,
    minus_one_or_positive,
    one_of,
    optional_listener,
    parse_bool,
    physical_memory_tenth,
    protocol_list,
    string_value,
)
from corral.faults.settings import FAULT_SETTINGS
from corral.transactions.settings import TRANSACTION_SETTINGS

_CORRAL: list[Setting] = [
    Setting(
        "log.dirs",
        ConfigType.STRING,
        "./corral-data",
        string_value,
        "The data directory: the topic registry, the partition logs (`__consumer_offsets`, "
        "the coordinator's, among them) and the coordinator snapshot.",
    ),
    Setting("node.id", ConfigType.INT, 1, int_in(0, INT32_MAX), "This broker's id."),
    Setting(
        "socket.request.max.bytes",
        ConfigType.INT,
        104857600,
        int_in(1, INT32_MAX),
        "Largest request accepted; a larger size prefix closes the connection.",
    ),
    Setting(
        "max.connections",
        ConfigType.INT,
        INT32_MAX,
        int_in(0, INT32_MAX),
        "Most client connections at once; over it a new connection is closed at once (and "
        "counted in a WARNING at most every 10 s). corral also caps it by the descriptors "
        "it may open: RLIMIT_NOFILE minus the descriptors open at startup minus "
        "max(min(64, limit / 2), limit / 4) kept for log files opened later (logged at "
        "startup).",
    ),
    Setting(
        "max.connections.per.ip",
        ConfigType.INT,
        INT32_MAX,
        int_in(0, INT32_MAX),
        "Most client connections at once from one address; over it a new connection is "
        "closed at once (and counted in a WARNING at most every 10 s).",
    ),
    Setting(
        "connections.max.idle.ms",
        ConfigType.LONG,
        600000,
        minus_one_or_positive,
        "Close a connection that read and wrote nothing for this long (checked about "
        "every second), unless one of its requests is being handled (a JoinGroup or "
        "long-poll Fetch waiting). -1: never.",
    ),
    Setting(
        "corral.socket.partial.request.timeout.ms",
        ConfigType.LONG,
        30000,
        minus_one_or_positive,
        "corral only: close a connection (with one log line) whose request has started "
        "arriving but is not whole this long after its first bytes (slow-loris); time "
        "spent waiting for queued.max.request.bytes does not count. -1: never.",
    ),
    Setting(
        "queued.max.request.bytes",
        ConfigType.LONG,
        physical_memory_tenth(),
        minus_one_or_positive,
        "Bytes of requests being received or waiting for an answer, over all connections; "
        "beyond it corral stops reading (the bytes wait in the kernel) until answers free "
        "memory. A request already started may finish (so one request can go past it), "
        "and requests up to 64 KiB have an eighth of it of their own, so heartbeats and "
        "commits go on while large produce requests wait. corral's default is a tenth of "
        "physical RAM, logged at startup (Kafka's is -1, unlimited, which -1 still means).",
    ),
    Setting(
        "num.partitions",
        ConfigType.INT,
        4,
        int_in(1, 100_000),
        "Partitions of an auto-created or CreateTopics(-1) topic. corral's default is 4 "
        "(Kafka's is 1) because client test suites assume several partitions.",
    ),
    Setting(
        "default.replication.factor",
        ConfigType.SHORT,
        1,
        int_in(1, 1),
        "Replication factor; corral is a single node, so 1.",
    ),
    Setting(
        "auto.create.topics.enable",
        ConfigType.BOOLEAN,
        True,
        parse_bool,
        "Create a topic when Metadata asks for one that does not exist.",
    ),
    Setting(
        "log.retention.ms",
        ConfigType.LONG,
        604800000,
        int_in(-1, INT64_MAX),
        "Default retention.ms of topics; when not set, log.retention.minutes, else "
        "log.retention.hours gives it, as in Kafka.",
    ),
    Setting(
        "log.retention.minutes",
        ConfigType.INT,
        None,
        int_in(-1, INT32_MAX),
        "Default retention of topics in minutes, when log.retention.ms is not set.",
    ),
    Setting(
        "log.retention.hours",
        ConfigType.INT,
        168,
        int_in(-1, INT32_MAX),
        "Default retention of topics in hours, when neither log.retention.ms nor "
        "log.retention.minutes is set.",
    ),
    Setting(
        "log.retention.bytes",
        ConfigType.LONG,
        -1,
        int_in(-1, INT64_MAX),
        "Default retention.bytes of topics.",
    ),
    Setting(
        "log.segment.bytes",
        ConfigType.INT,
        1073741824,
        int_in(14, INT32_MAX),
        "Default segment.bytes of topics.",
    ),
    Setting(
        "message.max.bytes",
        ConfigType.INT,
        1048588,
        int_in(0, INT32_MAX),
        "Default max.message.bytes of topics.",
    ),
    Setting(
        "log.message.timestamp.type",
        ConfigType.STRING,
        "CreateTime",
        one_of("CreateTime", "LogAppendTime"),
        "Default message.timestamp.type of topics.",
    ),
    Setting(
        "log.cleanup.policy",
        ConfigType.LIST,
        "delete",
        cleanup_policy,
        "Default cleanup.policy of topics (corral implements delete; see cleanup.policy).",
    ),
    Setting(
        "log.flush.interval.messages",
        ConfigType.LONG,
        1,
        int_in(1, INT64_MAX),
        "fsync a partition once this many records await it; the produce request that "
        "reaches it is answered after the fsync, which covers every append made meanwhile "
        "(group commit). corral's default is 1 (Kafka's is 9223372036854775807, leaving "
        "durability to replicas, which a single node does not have): acknowledged records "
        "survive a power loss, not only a process crash, at ~0.3 ms per group of appends.",
    ),
    Setting(
        "log.flush.interval.ms",
        ConfigType.LONG,
        INT64_MAX,
        int_in(1, INT64_MAX),
        "Also fsync everything unflushed this often (Kafka's default: never).",
    ),
    Setting(
        "corral.log.flush.linger.ms",
        ConfigType.INT,
        0,
        int_in(0, 1000),
        "corral only: under load (appends queued while an fsync ran), how long a flush "
        "pass waits for more appends to cover, beyond letting the requests already read "
        "append first. Adds up to this much (rounded up to the event loop's millisecond) "
        "to a busy acknowledgement; saves CPU per commit but measured lower peak commit "
        "rates at 1 ms, hence 0.",
    ),
    Setting(
        "log.retention.check.interval.ms",
        ConfigType.LONG,
        300000,
        int_in(1, INT64_MAX),
        "How often segments are checked against retention.ms and retention.bytes.",
    ),
    Setting(
        "corral.log.open.files.max",
        ConfigType.INT,
        0,
        int_in(0, INT32_MAX),
        "corral only: most segment files the log store keeps open (least recently used "
        "closed first; any number of partitions works within it). 0: a quarter of the "
        "open-files limit (RLIMIT_NOFILE, which corral raises to its hard limit at start), "
        "at least 16 and at most 65536.",
    ),
    Setting(
        "group.min.session.timeout.ms",
        ConfigType.INT,
        6000,
        int_in(0, INT32_MAX),
        "Smallest session timeout a classic member may ask for (INVALID_SESSION_TIMEOUT below).",
    ),
    Setting(
        "group.max.session.timeout.ms",
        ConfigType.INT,
        1800000,
        int_in(0, INT32_MAX),
        "Largest session timeout a classic member may ask for (INVALID_SESSION_TIMEOUT above).",
    ),
    Setting(
        "corral.group.max.rebalance.timeout.ms",
        ConfigType.INT,
        1800000,
        int_in(1, INT32_MAX),
        "corral only: the longest a rebalance waits on one member, whatever rebalance "
        "timeout (max.poll.interval.ms) it asked for: classic JoinGroup and SyncGroup "
        "phases, and a consumer-group member's revocation deadline. Kafka has no bound, so "
        "one client could hold its whole group for days; a member that asked for more is "
        "removed (classic) or fenced (consumer) after this long, as when its own timeout "
        "passes.",
    ),
    Setting(
        "group.initial.rebalance.delay.ms",
        ConfigType.INT,
        3000,
        int_in(0, INT32_MAX),
        "How long a new classic group waits for more members before its first rebalance.",
    ),
    Setting(
        "group.max.size",
        ConfigType.INT,
        INT32_MAX,
        int_in(1, INT32_MAX),
        "Most members a classic group admits (GROUP_MAX_SIZE_REACHED beyond).",
    ),
    Setting(
        "group.consumer.assignors",
        ConfigType.LIST,
        "uniform,range",
        assignor_list,
        "Server-side assignors of consumer groups (KIP-848); the first is the default for "
        "a group whose members name none. Built-in: uniform, range (Kafka's class names "
        "of these work too); an assignor written in Python: `package.module:ClassName` "
        "(see corral.assignors.Assignor), imported at startup. A custom assignor that "
        "fails or returns an invalid assignment fails that one computation (logged with "
        "the group id); the group keeps its previous target.",
    ),
    Setting(
        "group.coordinator.rebalance.protocols",
        ConfigType.LIST,
        "classic,consumer,streams",
        protocol_list,
        "Group protocols the coordinator serves; without `consumer`, ConsumerGroupHeartbeat "
        "and ConsumerGroupDescribe answer UNSUPPORTED_VERSION (`streams` is accepted and "
        "not served: corral has no streams groups).",
    ),
    Setting(
        "group.consumer.session.timeout.ms",
        ConfigType.INT,
        45000,
        int_in(1, INT32_MAX),
        "A consumer-group (KIP-848) member is fenced when no heartbeat came for this long.",
    ),
    Setting(
        "group.consumer.min.session.timeout.ms",
        ConfigType.INT,
        45000,
        int_in(1, INT32_MAX),
        "Smallest `consumer.session.timeout.ms` a group may set.",
    ),
    Setting(
        "group.consumer.max.session.timeout.ms",
        ConfigType.INT,
        60000,
        int_in(1, INT32_MAX),
        "Largest `consumer.session.timeout.ms` a group may set.",
    ),
    Setting(
        "group.consumer.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        int_in(1, INT32_MAX),
        "How often consumer-group members are told to heartbeat.",
    ),
    Setting(
        "group.consumer.min.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        int_in(1, INT32_MAX),
        "Smallest `consumer.heartbeat.interval.ms` a group may set.",
    ),
    Setting(
        "group.consumer.max.heartbeat.interval.ms",
        ConfigType.INT,
        15000,
        int_in(1, INT32_MAX),
        "Largest `consumer.heartbeat.interval.ms` a group may set.",
    ),
    Setting(
        "group.consumer.max.size",
        ConfigType.INT,
        INT32_MAX,
        int_in(1, INT32_MAX),
        "Most members a consumer group admits (GROUP_MAX_SIZE_REACHED beyond).",
    ),
    Setting(
        "group.consumer.migration.policy",
        ConfigType.STRING,
        "bidirectional",
        one_of("bidirectional", "upgrade", "downgrade", "disabled"),
        "Whether groups move between the classic and consumer protocols online.",
    ),
    Setting(
        "group.consumer.regex.refresh.interval.ms",
        ConfigType.INT,
        600000,
        int_in(10000, INT32_MAX),
        "How often regex subscriptions are resolved again even without topic changes.",
    ),
    Setting(
        "group.consumer.assignment.interval.ms",
        ConfigType.INT,
        1000,
        int_in(0, INT32_MAX),
        "KIP-1263 batching: a group's next target assignment is computed at least this "
        "long after its last; the epoch bumps in between collapse into one computation. "
        "0 computes at every bump.",
    ),
    Setting(
        "group.consumer.min.assignment.interval.ms",
        ConfigType.INT,
        0,
        int_in(0, INT32_MAX),
        "Smallest `consumer.assignment.interval.ms` a group may set.",
    ),
    Setting(
        "group.consumer.max.assignment.interval.ms",
        ConfigType.INT,
        15000,
        int_in(0, INT32_MAX),
        "Largest `consumer.assignment.interval.ms` a group may set.",
    ),
    Setting(
        "group.consumer.assignor.offload.enable",
        ConfigType.BOOLEAN,
        True,
        parse_bool,
        "Whether a large group's target assignment runs in a worker thread (the GIL "
        "released in the built-in assignors) instead of on the event loop.",
    ),
    Setting(
        "corral.consumer.reconciling.heartbeat.interval.ms",
        ConfigType.INT,
        250,
        int_in(0, INT32_MAX),
        "corral only: the heartbeat interval answered to a consumer-group (KIP-848) member "
        "with work to do (partitions to revoke or to take, or an epoch below the group's), "
        "and to every member of a group whose target changed less than one "
        "`consumer.heartbeat.interval.ms` ago, so that each step of a rebalance costs a "
        "fraction of a second instead of a whole group interval; a member STABLE at the "
        "epoch of a quiet group gets the group's interval. Behind a batched target "
        "(`consumer.assignment.interval.ms`) a member is sent back just after the batch is "
        "due. Never above the group's interval; 0 (or a value not below it) answers the "
        "group's interval always, as Kafka does.",
    ),
    Setting(
        "corral.consumer.reconciling.heartbeat.max.rate",
        ConfigType.INT,
        10000,
        int_in(1, INT32_MAX),
        "corral only: the most heartbeats a second that the short interval of "
        "corral.consumer.reconciling.heartbeat.interval.ms may ask of one group: with N "
        "members concerned, the interval is at least N / this (1 s for 10,000 members), "
        "so a group of 50,000 or more is asked no more often than Kafka's 5 s asks it. "
        "Most of those heartbeats are answered by the network thread (members moved to a "
        "new target epoch, members waiting for a batched target); the bound is for the "
        "rest, which the coordinator's one event loop handles.",
    ),
    Setting(
        "offsets.topic.num.partitions",
        ConfigType.INT,
        50,
        int_in(1, 100_000),
        "Partitions of __consumer_offsets; a group lives in abs(hash(group id)) % this.",
    ),
    Setting(
        "offsets.retention.minutes",
        ConfigType.INT,
        10080,
        int_in(1, INT32_MAX),
        "How long committed offsets of an empty group (or a simple group) are kept.",
    ),
    Setting(
        "offsets.retention.check.interval.ms",
        ConfigType.LONG,
        600000,
        int_in(1, INT64_MAX),
        "How often expired offsets and empty groups without offsets are removed.",
    ),
    Setting(
        "offset.metadata.max.bytes",
        ConfigType.INT,
        4096,
        int_in(0, INT32_MAX),
        "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE above).",
    ),
    Setting(
        "corral.group.heartbeat.short.path.enable",
        ConfigType.BOOLEAN,
        True,
        parse_bool,
        "corral only, for tests and benches: the network thread answers steady-state "
        "Heartbeats (classic groups) and ConsumerGroupHeartbeats (consumer groups) by "
        "itself; false sends every one to the coordinator, which answers the same.",
    ),
    Setting(
        "corral.group.offset.commit.short.path.enable",
        ConfigType.BOOLEAN,
        True,
        parse_bool,
        "corral only, for tests and benches: the network thread writes, group-commits and "
        "answers steady-state OffsetCommits of known members by itself (with an "
        "authorizer, once the coordinator authorized their group and topics on the "
        "connection); false sends every one "
        "to the coordinator, which answers the same.",
    ),
    Setting(
        "corral.group.consumer.epoch.short.path.enable",
        ConfigType.BOOLEAN,
        True,
        parse_bool,
        "corral only, for tests and benches: the network thread moves a consumer-group "
        "member STABLE behind its group's new target epoch, whose partitions the target did "
        "not change, to that epoch by itself (writing the member's record as the "
        "coordinator would, answering after its fsync; needs both short paths above); "
        "false sends every such heartbeat to the coordinator, which answers the same.",
    ),
    Setting(
        "corral.coordinator.snapshot.interval.ms",
        ConfigType.LONG,
        60000,
        int_in(1, INT64_MAX),
        "corral only: how often the group coordinator snapshots its state (when it changed), "
        "so that a restart replays only the log written since.",
    ),
    Setting(
        "corral.metrics.listen",
        ConfigType.STRING,
        "",
        optional_listener,
        "corral only: HOST:PORT of the Prometheus /metrics endpoint (plain HTTP; port 0 picks "
        "one, logged at startup); empty (the default): no metrics port.",
    ),
    Setting(
        "corral.analytics.sample.interval.ms",
        ConfigType.LONG,
        5000,
        int_in(0, INT64_MAX),
        "corral only: how often the broker samples the partitions' log-end offsets into "
        "__corral_analytics (docs/analytics.md) and appends the buffered group events; 0 "
        "turns sampling off (group events are then appended every 5 s).",
    ),
    Setting(
        "corral.analytics.retention.ms",
        ConfigType.LONG,
        7 * 24 * 3600 * 1000,
        minus_one_or_positive,
        "corral only: retention.ms of the __corral_analytics topic (log-end samples and "
        "group events); -1 keeps them forever.",
    ),
]

# Kafka's dynamic broker configs that corral applies while it runs: the topic defaults (open
# partitions take the new value at once) and the group coordinator's reconfigurable ones.
_DYNAMIC = {
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.retention.bytes",
    "log.segment.bytes",
    "message.max.bytes",
    "log.message.timestamp.type",
    "log.cleanup.policy",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "group.consumer.assignment.interval.ms",
    "group.consumer.assignor.offload.enable",
    "corral.consumer.reconciling.heartbeat.interval.ms",
    "corral.consumer.reconciling.heartbeat.max.rate",
    *SHARE_DYNAMIC,
}

BROKER_SETTINGS: dict[str, Setting] = {
    s.name: replace(s, dynamic=True) if s.name in _DYNAMIC else s
    for s in LISTENER_SETTINGS
    + SECURITY_SETTINGS
    + _CORRAL
    + FAULT_SETTINGS
    + CLUSTER_SETTINGS
    + TRANSACTION_SETTINGS
    + SHARE_SETTINGS
    + CLEANER_SETTINGS
    + INERT
    + INERT_DYNAMIC
}

# Dynamic in Kafka, read at startup only by corral (a restart applies them): a change answers
# "Cannot update these configs dynamically", with this reason.
STARTUP_ONLY = {
    "listeners": "the listeners are bound at startup",
    "listener.security.protocol.map": "the listeners are bound at startup",
    "max.connections": "the network thread takes its limits at startup",
    "max.connections.per.ip": "the network thread takes its limits at startup",
    "sasl.enabled.mechanisms": "each listener's SASL and TLS are set up at startup",
    "ssl.client.auth": "each listener's SASL and TLS are set up at startup",
    "ssl.enabled.protocols": "each listener's SASL and TLS are set up at startup",
}

# Kafka's keystore and truststore settings (SslConfigs.RECONFIGURABLE_CONFIGS), which Kafka changes
# while it runs only for one listener (`listener.name.<name>.` prefix) and refuses without one.
LISTENER_PREFIX_ONLY = {
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
}

# Dynamic settings Kafka takes for one broker only, never as the cluster-wide default (its
# PerBrokerConfigs: the listener, SSL and SASL ones, and the cordoned log directories).
PER_BROKER = {
    "principal.builder.class",
    "cordoned.log.dirs",
    *(
        name
        for name, s in BROKER_SETTINGS.items()
        if s.dynamic and name.startswith(("ssl.", "sasl."))
    ),
}
