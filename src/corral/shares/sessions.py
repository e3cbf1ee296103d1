"""Share sessions (Kafka's ShareSessionCache; reference/share-groups.md §4): per (group, member) on
this broker, the share partitions a member fetches from and the epoch its next request must carry.
A session ends by epoch -1, by a new epoch-0 fetch replacing it, or when its connection closes;
then the member's acquired records in its partitions are released (by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from corral.errors import ErrorCode

# (topic id, partition)
SharePartitionKey = tuple[bytes, int]
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    connection: int
    epoch: int = 1
    # Ordered as first added (an insertion-ordered set).
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= 0x7FFFFFFF else self.epoch + 1


class ShareSessions:
    def __init__(self, max_sessions: int):
        self.max_sessions = max_sessions
        self.by_member: dict[tuple[str, str], ShareSession] = {}
        self.by_connection: dict[int, set[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self.by_member)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.by_member.get((group_id, member_id))

    def open(
        self, group_id: str, member_id: str, connection: int
    ) -> tuple[ShareSession | None, ShareSession | None]:
        """(the new session, the one it replaced); (None, None) when the cache is full."""
        key = (group_id, member_id)
        old = self.by_member.get(key)
        if old is None and len(self.by_member) >= self.max_sessions:
            return None, None
        if old is not None:
            self._unlink(old)
        session = ShareSession(group_id, member_id, connection)
        self.by_member[key] = session
        self.by_connection.setdefault(connection, set()).add(key)
        return session, old

    def check(self, group_id: str, member_id: str, epoch: int) -> ShareSession | ErrorCode:
        """The session a request at `epoch` (> 0 or -1) continues, or Kafka's error."""
        session = self.by_member.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return session

    def close(self, session: ShareSession) -> None:
        if self.by_member.get((session.group_id, session.member_id)) is session:
            del self.by_member[(session.group_id, session.member_id)]
        self._unlink(session)

    def _unlink(self, session: ShareSession) -> None:
        keys = self.by_connection.get(session.connection)
        if keys is not None:
            keys.discard((session.group_id, session.member_id))
            if not keys:
                del self.by_connection[session.connection]

    def of_connection(self, connection: int) -> list[ShareSession]:
        """The sessions a connection carries (its close ends them)."""
        return [
            self.by_member[k] for k in self.by_connection.get(connection, ()) if k in self.by_member
        ]
