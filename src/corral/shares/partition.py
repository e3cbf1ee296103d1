"""One share partition (Kafka's SharePartition): a group's view of one topic partition, its
in-flight window in the compiled core (`_core.ShareInFlight`: each record's state, delivery
count, owner and lock) and how its changes reach `__share_group_state`.

Members are numbered per share partition (the window's owners are small ints). Every change
(acknowledgement, release, lock expiry) is written as a ShareUpdate before it is answered; every
`share.coordinator.snapshot.update.records.per.snapshot` updates a whole ShareSnapshot replaces
them, so a restart reads a bounded tail per key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral import _core
from corral.errors import ErrorCode
from corral.later import Later
from corral.shares.state_log import ShareStateLog, StateKey, StoredState

if TYPE_CHECKING:
    from corral._core import StateBatch


class SharePartition:
    def __init__(self, key: StateKey, stored: StoredState, start: int, log: ShareStateLog):
        self.key = key
        self.log = log
        self.state_epoch = stored.state_epoch
        self.snapshot_epoch = stored.snapshot_epoch
        self.updates = stored.updates
        self.window = _core.ShareInFlight(
            start, stored.batches if start == stored.start_offset else []
        )
        # Whether the start offset was chosen here (share.auto.offset.reset): written at once.
        self.unresolved = stored.start_offset < 0
        self._owners: dict[str, int] = {}
        # Log bytes per record read so far (sizes the next read to the records it may take).
        self.bytes_per_record = 1024.0
        # (start offset, records finished from it) as last written: what
        # DescribeShareGroupOffsets reports (Kafka reads its share coordinator's summary).
        self.summary = (stored.start_offset, -1) if stored.start_offset >= 0 else (-1, -1)

    def owner(self, member_id: str) -> int:
        number = self._owners.get(member_id)
        if number is None:
            number = self._owners[member_id] = len(self._owners) + 1
        return number

    def known_owner(self, member_id: str) -> int | None:
        return self._owners.get(member_id)

    def stored(self) -> StoredState:
        return StoredState(
            state_epoch=self.state_epoch,
            start_offset=self.window.start,
            snapshot_epoch=self.snapshot_epoch,
            batches=self.window.snapshot(),
        )

    def persist(
        self,
        changed: list[StateBatch],
        snapshot_every: int,
        force: bool = False,
        start: int | None = None,
        done: int | None = None,
    ) -> Later:
        """Writes `changed` (an update, with `start` and the records `done` from it: the
        window's own by default), or the whole state once enough updates piled up; resolves to
        an ErrorCode once durable. Nothing to write: resolved at once."""
        if not changed and not force:
            return Later.of(ErrorCode.NONE)
        window = self.window
        if force or self.updates >= snapshot_every:
            self.snapshot_epoch += 1
            self.updates = 0
            self.summary = (window.start, window.delivery_complete_count)
            pair = self.log.snapshot_record(self.key, self.stored(), window.delivery_complete_count)
        else:
            self.updates += 1
            start = window.start if start is None else start
            done = window.delivery_complete_count if done is None else done
            self.summary = (start, done)
            pair = self.log.update_record(self.key, self.snapshot_epoch, start, done, changed)
        return self.log.write(self.key, [pair])
