"""`__share_group_state`: the durable state of every share partition, in Kafka's share coordinator
format (ShareSnapshot and ShareUpdate records; reference/share-groups.md §5), so Kafka's tools can
read it. A share partition's key `(group, topic id, partition)` lives in partition
`abs("group:topicId:partition".hashCode()) % share.coordinator.state.topic.num.partitions`.

Writes are appended and group-committed with the log store's fsyncs; a write's Later resolves
once it is durable, before the acknowledgement it carries is answered. At start every partition
is read once (`load`): the latest snapshot of each key with the updates after it, merged. The
topic is made on first use, as Kafka makes it.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from corral import _core
from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.later import Later
from corral.partitions.store import StorageError, storage_warning
from corral.transactions.records import partition_for as java_string_partition

if TYPE_CHECKING:
    from corral._core import StateBatch
    from corral.broker import Broker
    from corral.topics.registry import Topic

log = logging.getLogger("corral.shares")

TOPIC = "__share_group_state"
SNAPSHOT = 0
UPDATE = 1
# (group id, topic id, partition)
StateKey = tuple[str, bytes, int]


def topic_id_string(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


@dataclass
class StoredState:
    """A share partition's state as the log holds it: the latest snapshot with later updates."""

    state_epoch: int = 0
    start_offset: int = -1
    snapshot_epoch: int = 0
    batches: list[StateBatch] = field(default_factory=list)
    # Updates written since the last snapshot (a snapshot replaces them every N).
    updates: int = 0

    def apply(self, start_offset: int, batches: list[StateBatch]) -> None:
        """An update: the start never moves back; the batches paint over what was there."""
        if start_offset >= 0:
            self.start_offset = max(self.start_offset, start_offset)
        painted: dict[int, tuple[int, int]] = {}
        for first, last, state, count in (*self.batches, *batches):
            for offset in range(first, last + 1):
                painted[offset] = (state, count)
        out: list[StateBatch] = []
        for offset in sorted(painted):
            if offset < self.start_offset:
                continue
            state, count = painted[offset]
            if out and out[-1][1] + 1 == offset and out[-1][2:] == (state, count):
                out[-1] = (out[-1][0], offset, state, count)
            else:
                out.append((offset, offset, state, count))
        self.batches = out


class ShareStateLog:
    def __init__(self, broker: Broker):
        self.broker = broker
        self.settings = broker.settings
        self.topic: Topic | None = broker.topics.get(TOPIC)
        # Where each share partition's latest snapshot is in the log (pruning keeps the records
        # from the oldest of them in each partition of the topic) and which were written since
        # the last cold pass (pruning.py).
        self.snapshot_offsets: dict[StateKey, int] = {}
        self.written: set[StateKey] = set()

    def ensure_topic(self) -> Topic:
        if self.topic is None:
            self.topic = self.broker.topics.get(TOPIC) or self.broker.topics.create_at_startup(
                TOPIC,
                self.settings["share.coordinator.state.topic.num.partitions"],
                {
                    "cleanup.policy": "delete",
                    "retention.ms": "-1",
                    "segment.bytes": str(
                        self.settings["share.coordinator.state.topic.segment.bytes"]
                    ),
                },
                internal=True,
            )
        return self.topic

    def partition_for(self, key: StateKey) -> int:
        group, topic_id, partition = key
        count = (
            self.topic.partitions
            if self.topic is not None
            else self.settings["share.coordinator.state.topic.num.partitions"]
        )
        return java_string_partition(f"{group}:{topic_id_string(topic_id)}:{partition}", count)

    # ------------------------------------------------------------------ reading

    def load(self) -> dict[StateKey, StoredState]:
        """Every key's state, reading each partition from its log start to its end."""
        found: dict[StateKey, StoredState] = {}
        if self.topic is None:
            return found
        for at, key, value in self.broker.logs.keyed_records(self.topic):
            self._replay(found, key, value, at)
        return found

    def _replay(
        self, found: dict[StateKey, StoredState], key: bytes, value: bytes | None, at: int
    ) -> None:
        kind, fields = _core.decode_share_state_key(key)
        if fields is None:
            return
        state_key: StateKey = (fields[0], fields[1], fields[2])
        if value is None:
            found.pop(state_key, None)
            self.snapshot_offsets.pop(state_key, None)
            return
        _, v = _core.decode_share_state_value(kind, value)
        if kind == SNAPSHOT:
            self.snapshot_offsets[state_key] = at
            found[state_key] = StoredState(
                state_epoch=v[1], start_offset=v[3], snapshot_epoch=v[0], batches=list(v[7])
            )
        else:
            stored = found.get(state_key)
            if stored is not None:  # an update of a key never initialized is dropped
                stored.apply(v[2], list(v[4]))
                stored.updates += 1

    # ------------------------------------------------------------------ writing

    def snapshot_record(
        self, key: StateKey, stored: StoredState, delivery_complete: int
    ) -> tuple[bytes, bytes]:
        now = wall_ms()
        return (
            _core.share_state_key(SNAPSHOT, key),
            _core.share_state_value(
                SNAPSHOT,
                (
                    stored.snapshot_epoch,
                    stored.state_epoch,
                    0,  # leader epoch: one node
                    stored.start_offset,
                    delivery_complete,
                    now,
                    now,
                    stored.batches,
                ),
            ),
        )

    def update_record(
        self,
        key: StateKey,
        snapshot_epoch: int,
        start_offset: int,
        delivery_complete: int,
        batches: list[StateBatch],
    ) -> tuple[bytes, bytes]:
        return (
            _core.share_state_key(UPDATE, key),
            _core.share_state_value(
                UPDATE, (snapshot_epoch, 0, start_offset, delivery_complete, batches)
            ),
        )

    def tombstone(self, key: StateKey) -> tuple[bytes, None]:
        return (_core.share_state_key(SNAPSHOT, key), None)

    def write(self, key: StateKey, pairs: list[tuple[bytes, bytes | None]]) -> Later:
        """Appends `pairs` to the key's partition; resolves to an ErrorCode once fsynced."""
        done = Later()
        topic = self.ensure_topic()
        logs = self.broker.logs
        try:
            result, _ = logs.append(
                topic, self.partition_for(key), _core.build_batch(pairs, wall_ms())
            )
        except StorageError as e:
            storage_warning("shares", "__share_group_state write failed: %s", e)
            return Later.of(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if result.error_code:
            return Later.of(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self.written.add(key)
        kind = _core.decode_share_state_key(pairs[-1][0])[0]
        if pairs[-1][1] is None:
            self.snapshot_offsets.pop(key, None)
        elif kind == SNAPSHOT:
            self.snapshot_offsets[key] = result.base_offset + len(pairs) - 1

        def flushed(error: BaseException | None) -> None:
            done.resolve(ErrorCode.COORDINATOR_NOT_AVAILABLE if error else ErrorCode.NONE)

        logs.after_flush(flushed)
        return done
