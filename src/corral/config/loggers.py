"""The BROKER_LOGGER resource: corral's log levels, read and changed at run time as Kafka's are
(kafka-configs --entity-type broker-loggers --entity-name 1 --alter --add-config
corral.groups=DEBUG). Like Kafka's, the changes last until the broker restarts."""

from __future__ import annotations

import logging
from typing import Any

from corral.config.types import ConfigSource, ConfigType, Setting

ROOT = "root"

# Kafka's (log4j's) level names and Python's levels.
_TO_PYTHON = {
    "OFF": logging.CRITICAL + 10,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": logging.DEBUG - 5,
    "ALL": logging.NOTSET + 1,
}
_TO_KAFKA = {level: name for name, level in _TO_PYTHON.items()}


class LoggerRefused(Exception):
    def __init__(self, invalid_config: bool, message: str):
        super().__init__(message)
        self.invalid_config, self.message = invalid_config, message


def _loggers() -> dict[str, logging.Logger]:
    """corral's loggers (those created so far) and the root logger."""
    found = {
        name: logger
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger) and name.split(".")[0] == "corral"
    }
    return {ROOT: logging.root, **dict(sorted(found.items()))}


def _level_name(logger: logging.Logger) -> str:
    level = logger.getEffectiveLevel()
    return _TO_KAFKA.get(level) or logging.getLevelName(level)


def describe() -> list[tuple[Setting, Any, list, bool]]:
    """(setting, value, synonyms, read-only) per logger, for DescribeConfigs."""
    out = []
    for name, logger in _loggers().items():
        level = _level_name(logger)
        setting = Setting(name, ConfigType.STRING, level, str, "The logger's level.")
        out.append(
            (setting, level, [(name, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)], False)
        )
    return out


def alter(ops: list[tuple[str, int, str | None]], validate_only: bool) -> None:
    """IncrementalAlterConfigs: SET (0) a level, DELETE (1) it (the logger follows the root's
    again); Kafka's refusals: an unknown logger or level, the root's removal, APPEND/SUBTRACT."""
    loggers = _loggers()
    changes = []
    for name, op, value in ops:
        if name not in loggers:
            raise LoggerRefused(True, f"Logger {name} does not exist!")
        if op == 0:
            level = _TO_PYTHON.get((value or "").upper())
            if level is None:
                raise LoggerRefused(
                    True,
                    f"Cannot set the log level of {name} to {value} as it is "
                    f"not a supported log level. Valid log levels are "
                    f"{', '.join(_TO_PYTHON)}",
                )
            changes.append((loggers[name], level))
        elif op == 1:
            if name == ROOT:
                raise LoggerRefused(
                    False, "Removing the log level of the root logger is not allowed"
                )
            changes.append((loggers[name], logging.NOTSET))
        else:
            raise LoggerRefused(
                False,
                f"{'APPEND' if op == 2 else 'SUBTRACT'} operation is not "
                "allowed for the BROKER_LOGGER resource",
            )
    if not validate_only:
        for logger, level in changes:
            logger.setLevel(level)
