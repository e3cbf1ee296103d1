"""The topic registry: names, ids, partition counts and per-topic configs, persisted in the data dir.

The registry is small and changes rarely, so it is one JSON file, replaced atomically (write a
temporary file, fsync, rename, fsync the directory) on every change.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .config import TOPIC_SETTINGS, ConfigError, Settings, render
from .errors import ErrorCode
from .files import replace_durably

# Kafka's org.apache.kafka.common.internals.Topic rules.
MAX_NAME_LENGTH = 249
LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
# Kafka sets no upper bound, but a single node cannot serve a million partitions of one topic;
# refusing absurd counts keeps a typo from filling the disk.
MAX_PARTITIONS = 100_000


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Topic:
    name: str
    id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


def validate_name(name: str | None) -> None:
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not LEGAL_NAME.fullmatch(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


def validate_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """Checks topic config overrides; returns them normalised (None values dropped)."""
    clean = {}
    for name, value in configs.items():
        setting = TOPIC_SETTINGS.get(name)
        if setting is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if value is None:
            continue
        try:
            setting.parse(value)
        except ConfigError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {value} for configuration {name}: {e}") from None
        clean[name] = str(value)
    return clean


class TopicStore:
    FILE = "topics.json"

    def __init__(self, data_dir: Path, settings: Settings):
        self.path = data_dir / self.FILE
        self.settings = settings
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        # Called after a topic is deleted (the partition logs remove their files).
        self.on_delete: list[Callable[[Topic], None]] = []
        if self.path.exists():
            for raw in json.loads(self.path.read_text())["topics"]:
                self._index(Topic(raw["name"], uuid.UUID(raw["id"]), raw["partitions"],
                                  raw.get("configs", {}), raw.get("internal", False)))

    def _index(self, topic: Topic) -> None:
        self.by_name[topic.name] = topic
        self.by_id[topic.id] = topic

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def config(self, topic: Topic, name: str) -> str:
        """The effective value of a topic setting: its override, else the broker default."""
        if name in topic.configs:
            return topic.configs[name]
        return render(self.settings.topic_default(name))

    def check_new(self, name: str, partitions: int, replication_factor: int,
                  configs: dict[str, str | None]) -> tuple[int, dict[str, str]]:
        """Validates a creation; returns (partition count, clean configs) or raises TopicError."""
        validate_name(name)
        if name in self.by_name:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions == -1:
            partitions = self.settings["num.partitions"]
        if partitions <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if partitions > MAX_PARTITIONS:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions {partitions} is above corral's limit of {MAX_PARTITIONS}.")
        if replication_factor == -1:
            replication_factor = self.settings["default.replication.factor"]
        if replication_factor <= 0:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
        if replication_factor > 1:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): The target "
                             f"replication factor of {replication_factor} cannot be reached because only "
                             "1 broker(s) are registered.")
        return partitions, validate_configs(configs)

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None,
               internal: bool = False) -> Topic:
        topic = Topic(name, uuid.uuid4(), partitions, dict(configs or {}), internal)
        self._index(topic)
        self._save()
        return topic

    def delete(self, topic: Topic) -> None:
        del self.by_name[topic.name]
        del self.by_id[topic.id]
        self._save()
        for hook in self.on_delete:
            hook(topic)

    def _save(self) -> None:
        raw = {"topics": [
            {"name": t.name, "id": str(t.id), "partitions": t.partitions, "configs": t.configs,
             "internal": t.internal}
            for t in self.by_name.values()
        ]}
        replace_durably(self.path, json.dumps(raw, indent=1))
