"""Committed offsets as the handlers ask for them, over every shard of the coordinator: each
call goes to the group's shard (offsets.py), answering the shard's availability error while it
is not loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import _core
from corral.errors import ErrorCode
from corral.groups.offsets import TopicCommits
from corral.groups.storage.records import PartitionCommit
from corral.later import Later, first_error

if TYPE_CHECKING:
    from corral.config.settings import Settings
    from corral.groups.coordinator import GroupCoordinator
    from corral.groups.shard import CoordinatorShard


class OffsetsView:
    """Committed offsets as the handlers ask for them: each call goes to the group's shard, and
    answers the shard's availability error while it is not loaded."""

    def __init__(
        self, coordinator: GroupCoordinator, offset_map: _core.OffsetMap, settings: Settings
    ):
        self._coordinator = coordinator
        self.map = offset_map
        self.groups = coordinator.groups
        self.metadata_max_bytes = settings["offset.metadata.max.bytes"]

    def _of(self, group_id: str) -> CoordinatorShard:
        return self._coordinator.shard_of(group_id)

    def commit_error(self, group_id: str, *args: Any, **kwargs: Any) -> ErrorCode:
        shard = self._of(group_id)
        return shard.availability() or shard.offsets.commit_error(group_id, *args, **kwargs)

    def commit(self, group_id: str, topics: TopicCommits, commit_ms: int, expire_ms: int) -> Later:
        return self._of(group_id).offsets.commit(group_id, topics, commit_ms, expire_ms)

    def fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        shard = self._of(group_id)
        return shard.availability() or shard.offsets.fetch_error(group_id, member_id, member_epoch)

    def fetch(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        require_stable: bool = False,
    ) -> list[tuple[str, list[PartitionCommit]]]:
        return self._of(group_id).offsets.fetch(group_id, topics, require_stable)

    def txn_commit_error(self, group_id: str, *args: Any, **kwargs: Any) -> ErrorCode:
        shard = self._of(group_id)
        return shard.availability() or shard.offsets.txn_commit_error(group_id, *args, **kwargs)

    def txn_commit(self, group_id: str, *args: Any) -> Later:
        return self._of(group_id).offsets.txn_commit(group_id, *args)

    def delete(
        self, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]], Later]:
        shard = self._of(group_id)
        error = shard.availability()
        if error:
            return error, [], Later.of(error)
        return shard.offsets.delete(group_id, topics)

    def all_partitions(self, group_id: str) -> list[tuple[str, int]]:
        return self._of(group_id).offsets.all_partitions(group_id)

    def expire(self, now_ms: int) -> Later:
        return first_error([s.offsets.expire(now_ms) for s in self._coordinator.loaded_shards()])
