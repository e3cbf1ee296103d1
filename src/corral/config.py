"""Settings, by Kafka's names and with Kafka's defaults unless noted.

Sources, later ones winning: built-in defaults, a TOML file (`--config corral.toml`, keys as in
Kafka's server.properties, e.g. `"socket.request.max.bytes" = 1048576`), environment variables
(`CORRAL_` + the name upper-cased with dots as underscores, e.g. CORRAL_NUM_PARTITIONS=8), and
command-line flags.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable


class ConfigType(IntEnum):
    """DescribeConfigs v3+ config_type."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigSource(IntEnum):
    """DescribeConfigs config_source."""

    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigError(ValueError):
    pass


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"expected true or false, got {value!r}")


def _int_in(lo: int, hi: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ConfigError(f"expected an integer, got {value!r}")
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ConfigError(f"expected an integer, got {value!r}") from None
        if not lo <= number <= hi:
            raise ConfigError(f"{number} is outside [{lo}, {hi}]")
        return number

    return parse


def _one_of(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in choices:
            raise ConfigError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _string(value: Any) -> str:
    return str(value)


def _listener(value: Any) -> str:
    text = str(value).strip()
    parse_listener(text)  # refused at load time, not when the server binds
    return text


def _optional_listener(value: Any) -> str:
    text = str(value).strip()
    return _listener(text) if text else text


def _assignor_list(value: Any) -> str:
    """group.consumer.assignors: entries checked (and custom classes imported) now, at load time;
    the value stays the comma-separated list (corral.assignors.AssignorRegistry.from_setting)."""
    from .assignors import AssignorConfigError, AssignorRegistry, setting_entries

    try:
        entries = setting_entries(value)
        AssignorRegistry.from_setting(entries)
    except AssignorConfigError as e:
        raise ConfigError(str(e)) from None
    return ",".join(entries)


def _protocol_list(value: Any) -> str:
    items = value.split(",") if isinstance(value, str) else list(value)
    entries = [str(item).strip().lower() for item in items if str(item).strip()]
    unknown = sorted(set(entries) - {"classic", "consumer", "streams", "share"})
    if unknown or "classic" not in entries:
        raise ConfigError(f"expected a list holding classic and any of consumer, streams, share; "
                          f"got {value!r}")
    return ",".join(entries)


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def _minus_one_or_positive(value: Any) -> int:
    number = _int_in(-1, INT64_MAX)(value)
    if number == 0:
        raise ConfigError("0 is not allowed: -1 (no limit) or a positive number")
    return number


def physical_memory_tenth() -> int:
    """queued.max.request.bytes by default: a tenth of physical RAM."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 10
    except (ValueError, OSError):
        return 1 << 30


@dataclass(frozen=True)
class Setting:
    name: str
    type: ConfigType
    default: Any
    parse: Callable[[Any], Any]
    doc: str
    # For topic-level settings: the broker setting that gives the default (Kafka's synonym).
    broker_synonym: str | None = None


BROKER_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("listeners", ConfigType.STRING, "PLAINTEXT://127.0.0.1:9092", _listener,
                "Where corral listens (corral serves one PLAINTEXT listener). Port 0 picks a free port."),
        Setting("advertised.listeners", ConfigType.STRING, "", _optional_listener,
                "What Metadata tells clients to connect to; empty means the bound listener."),
        Setting("log.dirs", ConfigType.STRING, "./corral-data", _string,
                "The data directory: the topic registry, the partition logs (`__consumer_offsets`, "
                "the coordinator's, among them) and the coordinator snapshot."),
        Setting("node.id", ConfigType.INT, 1, _int_in(0, INT32_MAX), "This broker's id."),
        Setting("socket.request.max.bytes", ConfigType.INT, 104857600, _int_in(1, INT32_MAX),
                "Largest request accepted; a larger size prefix closes the connection."),
        Setting("max.connections", ConfigType.INT, INT32_MAX, _int_in(0, INT32_MAX),
                "Most client connections at once; over it a new connection is closed at once (and "
                "counted in a WARNING at most every 10 s). corral also caps it by the descriptors "
                "it may open: RLIMIT_NOFILE minus the descriptors open at startup minus "
                "max(min(64, limit / 2), limit / 4) kept for log files opened later (logged at "
                "startup)."),
        Setting("max.connections.per.ip", ConfigType.INT, INT32_MAX, _int_in(0, INT32_MAX),
                "Most client connections at once from one address; over it a new connection is "
                "closed at once (and counted in a WARNING at most every 10 s)."),
        Setting("connections.max.idle.ms", ConfigType.LONG, 600000, _minus_one_or_positive,
                "Close a connection that read and wrote nothing for this long (checked about "
                "every second), unless one of its requests is being handled (a JoinGroup or "
                "long-poll Fetch waiting). -1: never."),
        Setting("corral.socket.partial.request.timeout.ms", ConfigType.LONG, 30000,
                _minus_one_or_positive,
                "corral only: close a connection (with one log line) whose request has started "
                "arriving but is not whole this long after its first bytes (slow-loris); time "
                "spent waiting for queued.max.request.bytes does not count. -1: never."),
        Setting("queued.max.request.bytes", ConfigType.LONG, physical_memory_tenth(),
                _minus_one_or_positive,
                "Bytes of requests being received or waiting for an answer, over all connections; "
                "beyond it corral stops reading (the bytes wait in the kernel) until answers free "
                "memory. A request already started may finish (so one request can go past it), "
                "and requests up to 64 KiB have an eighth of it of their own, so heartbeats and "
                "commits go on while large produce requests wait. corral's default is a tenth of "
                "physical RAM, logged at startup (Kafka's is -1, unlimited, which -1 still means)."),
        Setting("num.partitions", ConfigType.INT, 4, _int_in(1, 100_000),
                "Partitions of an auto-created or CreateTopics(-1) topic. corral's default is 4 "
                "(Kafka's is 1) because client test suites assume several partitions."),
        Setting("default.replication.factor", ConfigType.SHORT, 1, _int_in(1, 1),
                "Replication factor; corral is a single node, so 1."),
        Setting("auto.create.topics.enable", ConfigType.BOOLEAN, True, _parse_bool,
                "Create a topic when Metadata asks for one that does not exist."),
        Setting("log.retention.ms", ConfigType.LONG, 604800000, _int_in(-1, INT64_MAX),
                "Default retention.ms of topics (Kafka: log.retention.hours=168)."),
        Setting("log.retention.bytes", ConfigType.LONG, -1, _int_in(-1, INT64_MAX),
                "Default retention.bytes of topics."),
        Setting("log.segment.bytes", ConfigType.INT, 1073741824, _int_in(14, INT32_MAX),
                "Default segment.bytes of topics."),
        Setting("message.max.bytes", ConfigType.INT, 1048588, _int_in(0, INT32_MAX),
                "Default max.message.bytes of topics."),
        Setting("log.message.timestamp.type", ConfigType.STRING, "CreateTime",
                _one_of("CreateTime", "LogAppendTime"), "Default message.timestamp.type of topics."),
        Setting("log.cleanup.policy", ConfigType.LIST, "delete", _one_of("delete"),
                "Default cleanup.policy of topics (corral implements delete)."),
        Setting("log.flush.interval.messages", ConfigType.LONG, 1, _int_in(1, INT64_MAX),
                "fsync a partition once this many records await it; the produce request that "
                "reaches it is answered after the fsync, which covers every append made meanwhile "
                "(group commit). corral's default is 1 (Kafka's is 9223372036854775807, leaving "
                "durability to replicas, which a single node does not have): acknowledged records "
                "survive a power loss, not only a process crash, at ~0.3 ms per group of appends."),
        Setting("log.flush.interval.ms", ConfigType.LONG, INT64_MAX, _int_in(1, INT64_MAX),
                "Also fsync everything unflushed this often (Kafka's default: never)."),
        Setting("corral.log.flush.linger.ms", ConfigType.INT, 0, _int_in(0, 1000),
                "corral only: under load (appends queued while an fsync ran), how long a flush "
                "pass waits for more appends to cover, beyond letting the requests already read "
                "append first. Adds up to this much (rounded up to the event loop's millisecond) "
                "to a busy acknowledgement; saves CPU per commit but measured lower peak commit "
                "rates at 1 ms, hence 0."),
        Setting("log.retention.check.interval.ms", ConfigType.LONG, 300000, _int_in(1, INT64_MAX),
                "How often segments are checked against retention.ms and retention.bytes."),
        Setting("corral.log.open.files.max", ConfigType.INT, 0, _int_in(0, INT32_MAX),
                "corral only: most segment files the log store keeps open (least recently used "
                "closed first; any number of partitions works within it). 0: a quarter of the "
                "open-files limit (RLIMIT_NOFILE, which corral raises to its hard limit at start), "
                "at least 16 and at most 65536."),
        Setting("group.min.session.timeout.ms", ConfigType.INT, 6000, _int_in(0, INT32_MAX),
                "Smallest session timeout a classic member may ask for (INVALID_SESSION_TIMEOUT below)."),
        Setting("group.max.session.timeout.ms", ConfigType.INT, 1800000, _int_in(0, INT32_MAX),
                "Largest session timeout a classic member may ask for (INVALID_SESSION_TIMEOUT above)."),
        Setting("group.initial.rebalance.delay.ms", ConfigType.INT, 3000, _int_in(0, INT32_MAX),
                "How long a new classic group waits for more members before its first rebalance."),
        Setting("group.max.size", ConfigType.INT, INT32_MAX, _int_in(1, INT32_MAX),
                "Most members a classic group admits (GROUP_MAX_SIZE_REACHED beyond)."),
        Setting("group.consumer.assignors", ConfigType.LIST, "uniform,range", _assignor_list,
                "Server-side assignors of consumer groups (KIP-848); the first is the default for "
                "a group whose members name none. Built-in: uniform, range (Kafka's class names "
                "of these work too); an assignor written in Python: `package.module:ClassName` "
                "(see corral.assignors.Assignor), imported at startup. A custom assignor that "
                "fails or returns an invalid assignment fails that one computation (logged with "
                "the group id); the group keeps its previous target."),
        Setting("group.coordinator.rebalance.protocols", ConfigType.LIST, "classic,consumer,streams",
                _protocol_list,
                "Group protocols the coordinator serves; without `consumer`, ConsumerGroupHeartbeat "
                "and ConsumerGroupDescribe answer UNSUPPORTED_VERSION (`streams` is accepted and "
                "not served: corral has no streams groups)."),
        Setting("group.consumer.session.timeout.ms", ConfigType.INT, 45000, _int_in(1, INT32_MAX),
                "A consumer-group (KIP-848) member is fenced when no heartbeat came for this long."),
        Setting("group.consumer.min.session.timeout.ms", ConfigType.INT, 45000, _int_in(1, INT32_MAX),
                "Smallest `consumer.session.timeout.ms` a group may set."),
        Setting("group.consumer.max.session.timeout.ms", ConfigType.INT, 60000, _int_in(1, INT32_MAX),
                "Largest `consumer.session.timeout.ms` a group may set."),
        Setting("group.consumer.heartbeat.interval.ms", ConfigType.INT, 5000, _int_in(1, INT32_MAX),
                "How often consumer-group members are told to heartbeat."),
        Setting("group.consumer.min.heartbeat.interval.ms", ConfigType.INT, 5000, _int_in(1, INT32_MAX),
                "Smallest `consumer.heartbeat.interval.ms` a group may set."),
        Setting("group.consumer.max.heartbeat.interval.ms", ConfigType.INT, 15000, _int_in(1, INT32_MAX),
                "Largest `consumer.heartbeat.interval.ms` a group may set."),
        Setting("group.consumer.max.size", ConfigType.INT, INT32_MAX, _int_in(1, INT32_MAX),
                "Most members a consumer group admits (GROUP_MAX_SIZE_REACHED beyond)."),
        Setting("group.consumer.migration.policy", ConfigType.STRING, "bidirectional",
                _one_of("bidirectional", "upgrade", "downgrade", "disabled"),
                "Whether groups move between the classic and consumer protocols online."),
        Setting("group.consumer.regex.refresh.interval.ms", ConfigType.INT, 600000,
                _int_in(10000, INT32_MAX),
                "How often regex subscriptions are resolved again even without topic changes."),
        Setting("group.consumer.assignment.interval.ms", ConfigType.INT, 1000, _int_in(0, INT32_MAX),
                "KIP-1263 batching: a group's next target assignment is computed at least this "
                "long after its last; the epoch bumps in between collapse into one computation. "
                "0 computes at every bump."),
        Setting("group.consumer.min.assignment.interval.ms", ConfigType.INT, 0, _int_in(0, INT32_MAX),
                "Smallest `consumer.assignment.interval.ms` a group may set."),
        Setting("group.consumer.max.assignment.interval.ms", ConfigType.INT, 15000, _int_in(0, INT32_MAX),
                "Largest `consumer.assignment.interval.ms` a group may set."),
        Setting("group.consumer.assignor.offload.enable", ConfigType.BOOLEAN, True, _parse_bool,
                "Whether a large group's target assignment runs in a worker thread (the GIL "
                "released in the built-in assignors) instead of on the event loop."),
        Setting("offsets.topic.num.partitions", ConfigType.INT, 50, _int_in(1, 100_000),
                "Partitions of __consumer_offsets; a group lives in abs(hash(group id)) % this."),
        Setting("offsets.retention.minutes", ConfigType.INT, 10080, _int_in(1, INT32_MAX),
                "How long committed offsets of an empty group (or a simple group) are kept."),
        Setting("offsets.retention.check.interval.ms", ConfigType.LONG, 600000, _int_in(1, INT64_MAX),
                "How often expired offsets and empty groups without offsets are removed."),
        Setting("offset.metadata.max.bytes", ConfigType.INT, 4096, _int_in(0, INT32_MAX),
                "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE above)."),
        Setting("corral.coordinator.write.delay.ms", ConfigType.INT, 0, _int_in(0, 60_000),
                "corral only, for fault-injection tests: the coordinator's writer waits this long "
                "before each pass, widening the window between a change and its durability (what "
                "a kill -9 in that window must not lose is what was acknowledged)."),
        Setting("corral.group.heartbeat.short.path.enable", ConfigType.BOOLEAN, True, _parse_bool,
                "corral only, for tests and benches: the network thread answers steady-state "
                "Heartbeats (classic groups) and ConsumerGroupHeartbeats (consumer groups) by "
                "itself; false sends every one to the coordinator, which answers the same."),
        Setting("corral.coordinator.snapshot.interval.ms", ConfigType.LONG, 60000,
                _int_in(1, INT64_MAX),
                "corral only: how often the group coordinator snapshots its state (when it changed), "
                "so that a restart replays only the log written since."),
        Setting("corral.metrics.listen", ConfigType.STRING, "", _optional_listener,
                "corral only: HOST:PORT of the Prometheus /metrics endpoint (plain HTTP; port 0 "
                "picks one, logged at startup); empty (the default): no metrics port."),
    ]
}

TOPIC_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("cleanup.policy", ConfigType.LIST, "delete", _one_of("delete"),
                "delete: old segments are removed by retention.ms / retention.bytes.",
                "log.cleanup.policy"),
        Setting("retention.ms", ConfigType.LONG, 604800000, _int_in(-1, INT64_MAX),
                "How long a segment is kept; -1 keeps forever.", "log.retention.ms"),
        Setting("retention.bytes", ConfigType.LONG, -1, _int_in(-1, INT64_MAX),
                "Size a partition may grow to before old segments go; -1 is unlimited.",
                "log.retention.bytes"),
        Setting("segment.bytes", ConfigType.INT, 1073741824, _int_in(14, INT32_MAX),
                "Segment file size before a roll.", "log.segment.bytes"),
        Setting("max.message.bytes", ConfigType.INT, 1048588, _int_in(0, INT32_MAX),
                "Largest record batch accepted.", "message.max.bytes"),
        Setting("message.timestamp.type", ConfigType.STRING, "CreateTime",
                _one_of("CreateTime", "LogAppendTime"),
                "Whether the batch timestamp is the producer's or the broker's.",
                "log.message.timestamp.type"),
    ]
}


def render(value: Any) -> str:
    """A setting's value as Kafka prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Settings:
    """Broker settings; `explicit` names the ones that came from a file, env or flags."""

    def __init__(self, values: dict[str, Any] | None = None):
        self.values = {name: s.default for name, s in BROKER_SETTINGS.items()}
        self.explicit: set[str] = set()
        for name, value in (values or {}).items():
            self.set(name, value)

    def set(self, name: str, value: Any) -> None:
        setting = BROKER_SETTINGS.get(name)
        if setting is None:
            raise ConfigError(f"unknown setting {name!r}")
        try:
            self.values[name] = setting.parse(value)
        except ConfigError as e:
            raise ConfigError(f"{name}: {e}") from None
        self.explicit.add(name)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def topic_default(self, topic_setting: str) -> Any:
        return self.values[TOPIC_SETTINGS[topic_setting].broker_synonym]

    @classmethod
    def load(cls, config_file: str | None = None, overrides: dict[str, Any] | None = None,
             environ: dict[str, str] | None = None) -> "Settings":
        settings = cls()
        if config_file:
            with open(config_file, "rb") as f:
                try:
                    table = tomllib.load(f)
                except tomllib.TOMLDecodeError as e:
                    raise ConfigError(f"{config_file}: {e}") from None
            for name, value in _flatten(table).items():
                settings.set(name, value)
        environ = os.environ if environ is None else environ
        for name in BROKER_SETTINGS:
            env_name = "CORRAL_" + name.upper().replace(".", "_")
            if env_name in environ:
                settings.set(name, environ[env_name])
        for name, value in (overrides or {}).items():
            settings.set(name, value)
        settings.check_bounds()
        return settings

    def check_bounds(self) -> None:
        """Kafka's GroupCoordinatorConfig checks between settings: each group.consumer value
        within its min and max, and the heartbeat interval below the session timeout."""
        for name, lo, hi in (
                ("group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
                 "group.consumer.max.session.timeout.ms"),
                ("group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
                 "group.consumer.max.heartbeat.interval.ms"),
                ("group.consumer.assignment.interval.ms", "group.consumer.min.assignment.interval.ms",
                 "group.consumer.max.assignment.interval.ms")):
            if self[hi] < self[lo]:
                raise ConfigError(f"{hi} must be greater than or equal to {lo}")
            if self[name] < self[lo]:
                raise ConfigError(f"{name} must be greater than or equal to {lo}")
            if self[name] > self[hi]:
                raise ConfigError(f"{name} must be less than or equal to {hi}")
        if self["group.consumer.heartbeat.interval.ms"] >= self["group.consumer.session.timeout.ms"]:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be less than "
                              "group.consumer.session.timeout.ms")


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML lets `[socket] "request.max.bytes" = 1` stand for `socket.request.max.bytes`."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def parse_listener(listener: str) -> tuple[str, int]:
    """`PLAINTEXT://host:port` (or `host:port`) -> (host, port)."""
    _, _, address = listener.rpartition("://")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"listener {listener!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)
