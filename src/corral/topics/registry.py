"""The topic registry: names, ids, partition counts and per-topic configs, persisted in the data
dir.

Persisted as `topics.json` (the registry as of its last compaction, replaced atomically) plus
`topics.log`, a journal of the creations and deletions since, one JSON line each. Changes are
written off the event loop by one writer task: every change queued since its last pass goes into
one append and one fsync in a worker thread (group commit), and each change's request is answered
once that fsync returns. A change costs O(1) whatever the topic count (rewriting the whole registry
per change cost 32 ms of event loop at 3,800 topics); the journal is folded into topics.json, in
the worker thread, once it holds more lines than there are topics.

A topic becomes visible (Metadata, Produce, ...) only once its creation is durable; a deleted
topic disappears at once, and its name is free again once its deletion is durable and its
partition directories are gone.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from corral.config.settings import TOPIC_SETTINGS, ConfigError, Settings, render
from corral.errors import ErrorCode
from corral.observability.summarised_warnings import SummarisedWarnings
from corral.partitions.files import fsync_dir, replace_durably
from corral.uuids import random_uuid

if TYPE_CHECKING:
    from corral.cluster.topics import ClusterTopics

# Kafka's org.apache.kafka.common.internals.Topic rules.
MAX_NAME_LENGTH = 249
LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
# Kafka sets no upper bound, but a single node cannot serve a million partitions of one topic;
# refusing absurd counts keeps a typo from filling the disk.
MAX_PARTITIONS = 100_000


log = logging.getLogger("corral.topics")
# A full disk fails every CreateTopics: one line per kind per 10 s and a count of the rest.
journal_warning = SummarisedWarnings(log)


class TopicError(Exception):
    """A topic change refused with Kafka's code and message (None: the code says it all)."""

    def __init__(self, code: ErrorCode, message: str | None):
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

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "id": str(self.id),
            "partitions": self.partitions,
            "configs": self.configs,
            "internal": self.internal,
        }

    @classmethod
    def from_json(cls, raw: dict) -> Topic:
        return cls(
            raw["name"],
            uuid.UUID(raw["id"]),
            raw["partitions"],
            raw.get("configs", {}),
            raw.get("internal", False),
        )


def validate_name(name: str | None) -> None:
    if not name:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
        )
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters",
        )
    if not LEGAL_NAME.fullmatch(name):
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def validate_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
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
            raise TopicError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {e}"
            ) from None
        clean[name] = str(value)
    lag = (clean.get("min.compaction.lag.ms"), clean.get("max.compaction.lag.ms"))
    if lag[0] is not None and lag[1] is not None and int(lag[0]) > int(lag[1]):
        # LogConfig.validateValues
        raise TopicError(
            ErrorCode.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({lag[0]}) > "
            f"max.compaction.lag.ms ({lag[1]})",
        )
    return clean


class _Change:
    """One queued creation or deletion: `written` once the writer's fsync returned (with `error`
    if it failed), `settled` once the registry shows the outcome and the name is free."""

    __slots__ = ("written", "settled", "error")

    def __init__(self) -> None:
        self.written = trio.Event()
        self.settled = trio.Event()
        self.error: BaseException | None = None


class TopicStore:
    FILE = "topics.json"
    JOURNAL = "topics.log"

    def __init__(self, data_dir: Path, settings: Settings):
        self.path = data_dir / self.FILE
        self.journal_path = data_dir / self.JOURNAL
        self.settings = settings
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        # Names with a creation or deletion under way (not yet durable, or its hooks running).
        self._changing: dict[str, _Change] = {}
        # Awaited after a topic's deletion is durable (the partition logs remove their files).
        self.on_delete: list[Callable[[Topic], Awaitable[None]]] = []
        # Called with the names of topics created or deleted (visible to requests from now on):
        # consumer groups resolve their regexes again and recompute their metadata hash.
        self.on_change: list[Callable[[set[str]], None]] = []
        # Called with a topic whose overrides changed (the partition logs take them up).
        self.on_configs: list[Callable[[Topic], None]] = []
        # Cluster mode: the cluster's registry (cluster/topics.py), where a change is made first;
        # it mirrors changes back here (`mirrored=True`). None: this registry is the truth.
        self.shared: ClusterTopics | None = None
        # Journal entries waiting for the writer, with the changes their requests wait on.
        self._queue: list[tuple[dict, _Change]] = []
        self._wanted = trio.Event()
        self._journal_lines = self._load()

    # Loading

    def _load(self) -> int:
        """Reads topics.json, then replays the journal; returns the journal's line count. A torn
        last line (a crash mid-append, never acknowledged) is cut off."""
        if self.path.exists():
            for raw in json.loads(self.path.read_text())["topics"]:
                self._index(Topic.from_json(raw))
        if not self.journal_path.exists():
            return 0
        data = self.journal_path.read_bytes()
        lines, good = 0, 0
        for line in data.splitlines(keepends=True):
            try:
                entry = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                entry = None
            if entry is None:
                break
            self._replay(entry)
            lines, good = lines + 1, good + len(line)
        if good < len(data):
            log.warning("%s: cut a torn last entry (%d bytes)", self.journal_path, len(data) - good)
            with open(self.journal_path, "r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())
        return lines

    def _replay(self, entry: dict) -> None:
        if entry["op"] == "create":
            self._index(Topic.from_json(entry["topic"]))
        elif entry["op"] == "partitions":
            topic = self.by_name.get(entry["name"])
            if topic is not None and str(topic.id) == entry["id"]:
                topic.partitions = max(topic.partitions, entry["partitions"])
        elif entry["op"] == "configs":
            topic = self.by_name.get(entry["name"])
            if topic is not None and str(topic.id) == entry["id"]:
                topic.configs = entry["configs"]
        elif entry["op"] == "delete":
            topic = self.by_name.get(entry["name"])
            if topic is not None and str(topic.id) == entry["id"]:
                self._unindex(topic)

    def _index(self, topic: Topic) -> None:
        self.by_name[topic.name] = topic
        self.by_id[topic.id] = topic

    def _unindex(self, topic: Topic) -> None:
        del self.by_name[topic.name]
        del self.by_id[topic.id]

    # Reading

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def changing(self, name: str) -> trio.Event | None:
        """Set once the creation or deletion of `name` under way is settled, if one is."""
        change = self._changing.get(name)
        return None if change is None else change.settled

    def config(self, topic: Topic, name: str) -> str:
        """The effective value of a topic setting: its override, else the broker default."""
        if name in topic.configs:
            return topic.configs[name]
        value = render(self.settings.topic_default(name))
        assert value is not None  # every topic setting has a default
        return value

    def check_new(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str | None]
    ) -> tuple[int, dict[str, str]]:
        """Validates a creation; returns (partition count, clean configs) or raises TopicError."""
        validate_name(name)
        if name in self.by_name or name in self._changing:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions == -1:
            partitions = self.settings["num.partitions"]
        if partitions <= 0:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            )
        if partitions > MAX_PARTITIONS:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Number of partitions {partitions} is above corral's limit of {MAX_PARTITIONS}.",
            )
        if replication_factor == -1:
            replication_factor = self.settings["default.replication.factor"]
        if replication_factor <= 0:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if replication_factor > 1:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                "1 broker(s) are registered.",
            )
        return partitions, validate_configs(configs)

    # Changing

    def create_at_startup(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        internal: bool = False,
    ) -> Topic:
        """Creates a topic before the event loop runs (the broker's own `__consumer_offsets`),
        written and fsynced on the spot."""
        topic = Topic(name, random_uuid(), partitions, dict(configs or {}), internal)
        self._write([{"op": "create", "topic": topic.as_json()}])
        self._index(topic)
        return topic

    def reconfigure_at_startup(self, topic: Topic, configs: dict[str, str]) -> None:
        """Replaces a topic's overrides before the event loop runs (the broker's own topics
        follow their settings), written and fsynced on the spot."""
        self._write(
            [{"op": "configs", "name": topic.name, "id": str(topic.id), "configs": configs}]
        )
        topic.configs = configs

    def create(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        internal: bool = False,
        topic_id: str | None = None,
        mirrored: bool = False,
    ) -> Awaitable[Topic]:
        """Creates a topic (checked with `check_new` first). The name is taken and the creation
        queued at once; awaiting the result returns the topic once it is durable, or raises
        OSError if it could not be written (in cluster mode, TopicError if another node created
        the name first). `topic_id`, `mirrored`: the cluster's registry made it (cluster mode)."""
        if self.shared is not None and not internal and not mirrored:
            return self.shared.create(name, partitions, dict(configs or {}))
        made_id = random_uuid() if topic_id is None else uuid.UUID(topic_id)
        topic = Topic(name, made_id, partitions, dict(configs or {}), internal)
        change = self._queue_change(name, {"op": "create", "topic": topic.as_json()})
        return self._created(topic, change)

    async def _created(self, topic: Topic, change: _Change) -> Topic:
        try:
            await change.written.wait()
            if change.error is not None:
                raise change.error
            self._index(topic)
            self._changed(topic.name)
            return topic
        finally:
            self._settle(topic.name, change)

    def add_partitions(self, topic: Topic, count: int, mirrored: bool = False) -> Awaitable[None]:
        """Grows `topic` to `count` partitions (CreatePartitions). Awaiting the result returns
        once it is durable and visible (the new partitions' logs open on first use), or raises
        OSError if it could not be written."""
        if self.shared is not None and not mirrored:
            return self.shared.grow(topic, count)
        change = self._queue_change(
            topic.name,
            {"op": "partitions", "name": topic.name, "id": str(topic.id), "partitions": count},
        )
        return self._grown(topic, count, change)

    async def _grown(self, topic: Topic, count: int, change: _Change) -> None:
        try:
            await change.written.wait()
            if change.error is not None:
                raise change.error
            topic.partitions = max(topic.partitions, count)
            self._changed(topic.name)
        finally:
            self._settle(topic.name, change)

    def set_configs(
        self, topic: Topic, configs: dict[str, str], mirrored: bool = False
    ) -> Awaitable[None]:
        """Replaces `topic`'s overrides (checked with `validate_configs` first; AlterConfigs).
        Awaiting the result returns once they are durable and in effect (the `on_configs`
        hooks ran), or raises OSError if they could not be written."""
        if self.shared is not None and not mirrored and not topic.internal:
            return self.shared.reconfigure(topic, configs)
        change = self._queue_change(
            topic.name,
            {"op": "configs", "name": topic.name, "id": str(topic.id), "configs": configs},
        )
        return self._reconfigured(topic, configs, change)

    async def _reconfigured(self, topic: Topic, configs: dict[str, str], change: _Change) -> None:
        try:
            await change.written.wait()
            if change.error is not None:
                raise change.error
            topic.configs = configs
            for hook in self.on_configs:
                hook(topic)
        finally:
            self._settle(topic.name, change)

    def delete(self, topic: Topic, mirrored: bool = False) -> Awaitable[None]:
        """Deletes a topic: gone at once for every request; awaiting the result returns once the
        deletion is durable and the `on_delete` hooks (file removal) ran, or raises OSError if it
        could not be written (the topic is back)."""
        if self.shared is not None and not mirrored:
            return self.shared.delete(topic)
        self._unindex(topic)
        self._changed(topic.name)
        change = self._queue_change(
            topic.name, {"op": "delete", "name": topic.name, "id": str(topic.id)}
        )
        return self._deleted(topic, change)

    async def _deleted(self, topic: Topic, change: _Change) -> None:
        try:
            await change.written.wait()
            if change.error is not None:
                self._index(topic)
                self._changed(topic.name)
                raise change.error
            for hook in self.on_delete:
                await hook(topic)
        finally:
            self._settle(topic.name, change)

    def _changed(self, name: str) -> None:
        for listener in self.on_change:
            try:
                listener({name})
            except Exception:
                log.exception("a topic change listener failed")

    def _queue_change(self, name: str, entry: dict) -> _Change:
        change = self._changing[name] = _Change()
        self._queue.append((entry, change))
        self._wanted.set()
        return change

    def _settle(self, name: str, change: _Change) -> None:
        if self._changing.get(name) is change:
            del self._changing[name]
        change.settled.set()

    async def run(self) -> None:
        """The writer: one append and fsync (in a worker thread) per pass for every change
        queued since the last one; folds the journal into topics.json when it grew long."""
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            batch, self._queue = self._queue, []
            entries = [entry for entry, _ in batch]
            # The registry as of after this batch, for a compaction: taken here, on the loop.
            snapshot = None
            if self._journal_lines + len(entries) > max(COMPACT_AFTER, len(self.by_name)):
                snapshot = self._snapshot_after(entries)
            error: BaseException | None = None
            try:
                await trio.to_thread.run_sync(self._write, entries, snapshot)
            except OSError as e:
                journal_warning("write", "could not write topic changes (%d): %s", len(entries), e)
                error = e
            for _, change in batch:
                change.error = error
                change.written.set()

    def _snapshot_after(self, entries: list[dict]) -> list[dict]:
        topics = {t.name: t.as_json() for t in self.by_name.values()}
        for entry in entries:
            if entry["op"] == "create":
                topics[entry["topic"]["name"]] = entry["topic"]
            elif entry["op"] == "partitions":
                if entry["name"] in topics:
                    topics[entry["name"]] = {
                        **topics[entry["name"]],
                        "partitions": entry["partitions"],
                    }
            elif entry["op"] == "configs":
                if entry["name"] in topics:
                    topics[entry["name"]] = {**topics[entry["name"]], "configs": entry["configs"]}
            else:
                topics.pop(entry["name"], None)
        return list(topics.values())

    def _write(self, entries: list[dict], snapshot: list[dict] | None = None) -> None:
        """Appends `entries` to the journal and fsyncs it; with `snapshot`, then replaces
        topics.json with it and empties the journal (a crash in between replays entries the
        snapshot already has, which is harmless)."""
        data = "".join(
            json.dumps(entry, separators=(",", ":")) + "\n" for entry in entries
        ).encode()
        fd = os.open(
            self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644
        )
        try:
            size = os.fstat(fd).st_size
            try:
                if os.write(fd, data) != len(data):  # a short write to a file: the disk is full
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.fsync(fd)
            except OSError:
                try:
                    os.ftruncate(fd, size)  # no half entry before the next one
                except OSError:
                    pass  # cut off at the next start (a torn last line)
                raise
        finally:
            os.close(fd)
        if size == 0:
            fsync_dir(self.path.parent)  # a new journal's directory entry
        self._journal_lines += len(entries)
        if snapshot is not None:
            # The entries are durable now: a failed fold leaves the journal as it is, for later.
            try:
                replace_durably(self.path, json.dumps({"topics": snapshot}, indent=1))
                with open(self.journal_path, "r+b") as f:
                    f.truncate(0)
                    os.fsync(f.fileno())
                self._journal_lines = 0
            except OSError as e:
                log.warning(
                    "could not fold %s into %s (tried again later): %s",
                    self.journal_path.name,
                    self.path.name,
                    e,
                )


# The journal is folded into topics.json once it has more lines than this and than there are topics.
COMPACT_AFTER = 1000
