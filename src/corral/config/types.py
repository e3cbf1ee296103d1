"""What a setting is: its type, how a value is parsed and checked, and where a value came from.

The tables themselves are in broker.py (the broker's; inert.py: Kafka's names without effect),
topics.py (a topic's) and groups.py (a consumer group's); settings.py loads them into `Settings`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from typing import Any


class ConfigType(IntEnum):
    """DescribeConfigs v3+ config_type."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs config_source."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    GROUP_CONFIG = 8


class ConfigError(ValueError):
    pass


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"expected true or false, got {value!r}")


def int_in(lo: int, hi: int) -> Callable[[Any], int]:
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


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def java_int(lo: int | None = None, hi: int | None = None) -> Callable[[Any], int]:
    """An INT as Kafka's ConfigDef parses and checks it (Integer.parseInt of the trimmed text,
    then Range.atLeast / Range.between), with its messages: "Not a number of type INT",
    "Value must be at least N", "Value must be no more than N". The group settings use it, so
    that IncrementalAlterConfigs answers as Kafka's GroupConfig does."""

    def parse(value: Any) -> int:
        text = str(value).strip()
        if isinstance(value, bool) or not _JAVA_INT.fullmatch(text):
            raise ConfigError("Not a number of type INT")
        number = int(text)
        if not -(2**31) <= number < 2**31:
            raise ConfigError("Not a number of type INT")
        if lo is not None and number < lo:
            raise ConfigError(f"Value must be at least {lo}")
        if hi is not None and number > hi:
            raise ConfigError(f"Value must be no more than {hi}")
        return number

    return parse


def java_bool(value: Any) -> bool:
    """A BOOLEAN as Kafka's ConfigDef parses it (true or false, any case, trimmed)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError("Expected value to be either true or false")


def java_string_in(*choices: str) -> Callable[[Any], str]:
    """A STRING with Kafka's ValidString.in (trimmed, case-sensitive)."""

    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in choices:
            raise ConfigError(f"String must be one of: {', '.join(choices)}")
        return text

    return parse


def float_in(lo: float, hi: float) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        number = _double(value)
        if not lo <= number <= hi:
            raise ConfigError(f"{number} is outside [{lo}, {hi}]")
        return number

    return parse


def one_of(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in choices:
            raise ConfigError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return parse


def string_value(value: Any) -> str:
    return str(value)


def listener_value(value: Any) -> str:
    text = str(value).strip()
    parse_listener(text)  # refused at load time, not when the server binds
    return text


def optional_listener(value: Any) -> str:
    text = str(value).strip()
    return listener_value(text) if text else text


def assignor_list(value: Any) -> str:
    """group.consumer.assignors: entries checked (and custom classes imported) now, at load time;
    the value stays the comma-separated list (corral.assignors.AssignorRegistry.from_setting)."""
    from corral.assignors import AssignorConfigError, AssignorRegistry, setting_entries

    try:
        entries = setting_entries(value)
        AssignorRegistry.from_setting(entries)
    except AssignorConfigError as e:
        raise ConfigError(str(e)) from None
    return ",".join(entries)


def protocol_list(value: Any) -> str:
    items = value.split(",") if isinstance(value, str) else list(value)
    entries = [str(item).strip().lower() for item in items if str(item).strip()]
    unknown = sorted(set(entries) - {"classic", "consumer", "streams", "share"})
    if unknown or "classic" not in entries:
        raise ConfigError(
            f"expected a list holding classic and any of consumer, streams, share; got {value!r}"
        )
    return ",".join(entries)


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def minus_one_or_positive(value: Any) -> int:
    number = int_in(-1, INT64_MAX)(value)
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
    # For topic and group settings: the broker setting that gives the default (Kafka's synonym).
    broker_synonym: str | None = None
    # Broker settings: whether IncrementalAlterConfigs/AlterConfigs may change it while corral
    # runs (Kafka's dynamic broker configs: applied at once, or inert).
    dynamic: bool = False
    # Accepted with Kafka's name, type and default, and without effect in corral (the doc says
    # why): a server.properties or a topic created for Kafka works unchanged.
    inert: bool = False


def render(value: Any) -> str | None:
    """A setting's value as Kafka prints it (None for a setting without a value)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def _java_double(value: float) -> str:
    """Java's Double.toString: plain from 10^-3 to below 10^7, else `1.7976931348623157E308`."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)  # a finite value's ("n", "N", "F": NaN and infinities)
    mantissa = f"{digits[0]}." + ("".join(map(str, digits[1:])) or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(digits) - 1 + exponent}"


def _any_int(value: Any) -> int:
    return int_in(-(2**63), 2**63 - 1)(value)


def _double(value: Any) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        raise ConfigError(f"expected a number, got {value!r}") from None


_LENIENT_PARSERS: dict[ConfigType, Callable[[Any], Any]] = {
    ConfigType.BOOLEAN: parse_bool,
    ConfigType.STRING: string_value,
    ConfigType.INT: _any_int,
    ConfigType.SHORT: _any_int,
    ConfigType.LONG: _any_int,
    ConfigType.DOUBLE: _double,
    ConfigType.LIST: string_value,
    ConfigType.PASSWORD: string_value,
    ConfigType.CLASS: string_value,
}


def inert(
    name: str,
    type: ConfigType,
    default: Any,
    why: str,
    *,
    broker_synonym: str | None = None,
    dynamic: bool = False,
) -> Setting:
    """A Kafka setting corral accepts (checked for its type only) and does not act on."""
    return Setting(
        name,
        type,
        default,
        _LENIENT_PARSERS[type],
        f"Accepted for compatibility with Kafka; no effect in corral: {why}.",
        broker_synonym,
        dynamic=dynamic,
        inert=True,
    )


def parse_listener(listener: str) -> tuple[str, int]:
    """`PLAINTEXT://host:port` (or `host:port`) -> (host, port)."""
    _, _, address = listener.rpartition("://")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"listener {listener!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def cleanup_policy(value: Any) -> str:
    """cleanup.policy: a list of `delete` and `compact`, normalised (Kafka's ValidList)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    entries = [str(item).strip() for item in items if str(item).strip()]
    unknown = sorted(set(entries) - {"delete", "compact"})
    if unknown or len(set(entries)) != len(entries):
        raise ConfigError(f"expected a list of delete and compact, got {value!r}")
    return ",".join(entries)
