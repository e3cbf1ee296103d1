"""Settings, by Kafka's names and with Kafka's defaults unless noted.

Sources, later ones winning: built-in defaults, a file (`--config`: Kafka's server.properties
format, or TOML when the name ends in `.toml`, keys as in server.properties, e.g.
`"socket.request.max.bytes" = 1048576`), environment variables (`CORRAL_` + the name upper-cased
with dots as underscores, e.g. CORRAL_NUM_PARTITIONS=8), command-line flags, and then, while
corral runs, the dynamic broker settings (kafka-configs --alter --entity-type brokers): the
cluster-wide default (`--entity-default`), then this broker's own (`--entity-name 1`). A name
corral does not know is a WARNING naming it, as Kafka's "supplied but isn't a known config".
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

from corral.config.broker import BROKER_SETTINGS, LISTENER_PREFIX_ONLY, PER_BROKER, STARTUP_ONLY
from corral.config.listeners import PER_LISTENER
from corral.config.shares.broker_settings import check_bounds as check_share_bounds
from corral.config.topics import TOPIC_SETTINGS
from corral.config.types import (
    INT32_MAX,
    INT64_MAX,
    ConfigError,
    ConfigSource,
    ConfigType,
    Setting,
    parse_listener,
    physical_memory_tenth,
    render,
)

__all__ = [
    "BROKER_SETTINGS",
    "TOPIC_SETTINGS",
    "INT32_MAX",
    "INT64_MAX",
    "ConfigError",
    "ConfigSource",
    "ConfigType",
    "Setting",
    "Settings",
    "parse_listener",
    "physical_memory_tenth",
    "render",
]

log = logging.getLogger("corral.config")

_LISTENER_PREFIX = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(.+)$")

# log.retention.ms wins over log.retention.minutes, which wins over log.retention.hours.
_RETENTION_UNITS = (
    ("log.retention.ms", 1),
    ("log.retention.minutes", 60_000),
    ("log.retention.hours", 3_600_000),
)


class Settings:
    """Broker settings. `values` holds the effective value of every setting: the layers
    (static: file, environment, flags; dynamic: cluster default, then this broker's) over the
    defaults. `explicit` names the static ones."""

    def __init__(self, values: dict[str, Any] | None = None):
        self.static: dict[str, Any] = {}
        self.dynamic_default: dict[str, Any] = {}
        self.dynamic_broker: dict[str, Any] = {}
        # Names set that corral does not know, with their values (warned about once).
        self.unknown: dict[str, Any] = {}
        # listener name -> {setting: value} set with Kafka's `listener.name.<name>.` prefix.
        self.per_listener: dict[str, dict[str, Any]] = {}
        # Called with the names whose dynamic value changed (the log store, the coordinator).
        self.on_change: list[Callable[[set[str]], None]] = []
        self.values: dict[str, Any] = {}
        self._recompute()
        for name, value in (values or {}).items():
            self.set(name, value)

    @property
    def explicit(self) -> set[str]:
        return set(self.static)

    def set(self, name: str, value: Any) -> None:
        """A static setting (file, environment, flags); `listener.name.<name>.<setting>` sets
        a listener's own value of a per-listener setting."""
        scoped = _LISTENER_PREFIX.match(name)
        if scoped and scoped.group(2) in PER_LISTENER and scoped.group(2) in BROKER_SETTINGS:
            listener, base = scoped.group(1).upper(), scoped.group(2)
            self.per_listener.setdefault(listener, {})[base] = parse(BROKER_SETTINGS[base], value)
            return
        setting = BROKER_SETTINGS.get(name)
        if setting is None:
            if name not in self.unknown:
                log.warning(
                    "The configuration '%s' was supplied but isn't a known config (ignored)", name
                )
            self.unknown[name] = value
            return
        self.static[name] = parse(setting, value)
        self._recompute()

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def for_listener(self, listener: str, name: str) -> Any:
        """A per-listener setting's value for this listener (its prefixed value, else the
        broker-wide one)."""
        return self.per_listener.get(listener, {}).get(name, self.values[name])

    def topic_default(self, topic_setting: str) -> Any:
        setting = TOPIC_SETTINGS[topic_setting]
        value = None if setting.broker_synonym is None else self.values[setting.broker_synonym]
        return setting.default if value is None else value

    # Layers

    def _recompute(self) -> None:
        self.values = self._layered(self.dynamic_default, self.dynamic_broker)

    def _layered(
        self, dynamic_default: dict[str, Any], dynamic_broker: dict[str, Any]
    ) -> dict[str, Any]:
        set_somewhere = {**self.static, **dynamic_default, **dynamic_broker}
        values = {name: s.default for name, s in BROKER_SETTINGS.items()} | set_somewhere
        for name, unit in _RETENTION_UNITS:
            if set_somewhere.get(name) is not None:
                amount = set_somewhere[name]
                values["log.retention.ms"] = amount * unit if amount >= 0 else -1
                break
        return values

    def layers(self, name: str) -> list[tuple[Any, ConfigSource]]:
        """Where `name` is set, most significant first, ending with its default (Kafka's
        DescribeConfigs synonyms)."""
        found = [
            (layer[name], source)
            for layer, source in (
                (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.static, ConfigSource.STATIC_BROKER_CONFIG),
            )
            if name in layer
        ]
        return found + [(BROKER_SETTINGS[name].default, ConfigSource.DEFAULT_CONFIG)]

    def dynamic_layer(self, per_broker: bool) -> dict[str, Any]:
        return self.dynamic_broker if per_broker else self.dynamic_default

    def check_dynamic(self, per_broker: bool, layer: dict[str, Any]) -> dict[str, Any]:
        """Parses a whole new dynamic layer ({name: text}); returns it parsed, or raises
        ConfigError in Kafka's order and with its messages (DynamicBrokerConfig.validateConfigs):
        DynamicConfigRefused (Kafka's INVALID_REQUEST) for a static setting (one that Kafka
        changes while it runs and corral reads at startup says so), for a keystore or truststore
        setting without a listener prefix; a bad value or a name corral does not know; then
        DynamicConfigRefused for a per-broker setting as the cluster-wide default; then the
        bounds between settings."""
        scoped = [
            n for n in layer if (m := _LISTENER_PREFIX.match(n)) and m.group(2) in BROKER_SETTINGS
        ]
        static = scoped + [
            n
            for n in layer
            if n in BROKER_SETTINGS
            and not BROKER_SETTINGS[n].dynamic
            and n not in LISTENER_PREFIX_ONLY
        ]
        if static:
            why = sorted(
                {STARTUP_ONLY[n] for n in static if n in STARTUP_ONLY}
                | (
                    {"a listener's own settings (listener.name.<name>.*) are read at startup"}
                    if scoped
                    else set()
                )
            )
            raise DynamicConfigRefused(
                f"Cannot update these configs dynamically: {set_repr(static)}"
                + (f" (corral: {'; '.join(why)})" if why else "")
            )
        prefix_only = [n for n in layer if n in LISTENER_PREFIX_ONLY]
        if prefix_only:
            raise DynamicConfigRefused(
                "These security configs can be dynamically updated only "
                f"per-listener using the listener prefix: {set_repr(prefix_only)}"
            )
        parsed = {}
        for name, value in layer.items():
            setting = BROKER_SETTINGS.get(name)
            if setting is None:
                raise ConfigError(f"Unknown broker config: {name}")
            parsed[name] = parse(setting, value)
        per_broker_only = [n for n in layer if n in PER_BROKER]
        if not per_broker and per_broker_only:
            raise DynamicConfigRefused(
                "Cannot update these configs at default cluster level, "
                f"broker id must be specified: {set_repr(per_broker_only)}"
            )
        other = self.dynamic_default if per_broker else self.dynamic_broker
        candidate = self._layered(*((other, parsed) if per_broker else (parsed, other)))
        check_bounds(candidate)
        return parsed

    def apply_dynamic(self, per_broker: bool, parsed: dict[str, Any]) -> None:
        """Replaces a dynamic layer (checked by `check_dynamic`) and tells the listeners."""
        old = self.values
        if per_broker:
            self.dynamic_broker = parsed
        else:
            self.dynamic_default = parsed
        self._recompute()
        changed = {name for name, value in self.values.items() if old.get(name) != value}
        if changed:
            for listener in self.on_change:
                try:
                    listener(changed)
                except Exception:
                    log.exception("a settings change listener failed")

    # Loading

    @classmethod
    def load(
        cls,
        config_file: str | None = None,
        overrides: dict[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        settings = cls()
        if config_file:
            for name, value in read_config_file(config_file).items():
                settings.set(name, value)
        env = os.environ if environ is None else environ
        for name in BROKER_SETTINGS:
            env_name = "CORRAL_" + name.upper().replace(".", "_")
            if env_name in env:
                settings.set(name, env[env_name])
        for name, value in (overrides or {}).items():
            settings.set(name, value)
        check_bounds(settings.values)
        return settings

    def check_bounds(self) -> None:
        check_bounds(self.values)


class DynamicConfigRefused(ConfigError):
    """A dynamic change Kafka refuses with INVALID_REQUEST: a static setting, a keystore or
    truststore setting without a listener prefix, a per-broker setting as the cluster default."""


def set_repr(names: list[str]) -> str:
    """How Kafka's messages print a set of names (a Java set's toString, here sorted)."""
    return "[" + ", ".join(sorted(names)) + "]"


def parse(setting: Setting, value: Any) -> Any:
    try:
        return setting.parse(value)
    except ConfigError as e:
        raise ConfigError(f"{setting.name}: {e}") from None


def check_bounds(values: dict[str, Any]) -> None:
    """Kafka's GroupCoordinatorConfig checks between settings: each group.consumer value
    within its min and max, and the heartbeat interval below the session timeout; then the
    share groups' (config/shares/broker_settings.py)."""
    for name, lo, hi in (
        (
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
        (
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            "group.consumer.assignment.interval.ms",
            "group.consumer.min.assignment.interval.ms",
            "group.consumer.max.assignment.interval.ms",
        ),
    ):
        if values[hi] < values[lo]:
            raise ConfigError(f"{hi} must be greater than or equal to {lo}")
        if values[name] < values[lo]:
            raise ConfigError(f"{name} must be greater than or equal to {lo}")
        if values[name] > values[hi]:
            raise ConfigError(f"{name} must be less than or equal to {hi}")
    if (
        values["group.consumer.heartbeat.interval.ms"]
        >= values["group.consumer.session.timeout.ms"]
    ):
        raise ConfigError(
            "group.consumer.heartbeat.interval.ms must be less than "
            "group.consumer.session.timeout.ms"
        )
    check_share_bounds(values)


def read_config_file(path: str) -> dict[str, Any]:
    """A settings file: TOML when its name ends in `.toml`, else Java properties (Kafka's
    server.properties)."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".toml"):
        try:
            return _flatten(tomllib.loads(data.decode()))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: {e}") from None
    # java.util.Properties.load reads ISO 8859-1, with \uXXXX escapes for the rest.
    return parse_properties(data.decode("latin-1"))


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


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties.load: `#` and `!` comments, `key=value`, `key:value` or `key value`,
    a backslash at the end of a line continuing it (leading blanks of the next line dropped),
    and the escapes \\t \\n \\r \\f \\uXXXX (any other escaped character stands for itself)."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_entry(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _continues(line: str) -> bool:
    """An odd number of backslashes ends the line."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    # Blanks, then at most one `=` or `:`, then blanks, separate the key from the value.
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"Malformed \\uxxxx encoding: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)
