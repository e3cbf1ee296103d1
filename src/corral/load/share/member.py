"""A share-group member (KIP-932): ShareGroupHeartbeat as the Java KafkaShareConsumer sends it,
and one share session (session.py) per leader of its assigned partitions.

- The member id is made by the client (a random Kafka Uuid string) and kept for the member's life,
  across fencing and rejoining.
- Joining is epoch 0 with SubscribedTopicNames; later heartbeats carry only GroupId, MemberId and
  MemberEpoch (null topics and rack: "unchanged"), every HeartbeatIntervalMs the broker returned.
  The broker assigns partitions shared between members (SimpleAssignor), sends the Assignment
  only when it changed, and needs no acknowledgement of it: there is no revocation.
- FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the assignment is dropped and the member rejoins at
  epoch 0 with the same id. INVALID_REQUEST, GROUP_MAX_SIZE_REACHED and
  GROUP_AUTHORIZATION_FAILED are fatal to the Java consumer: the member stops (`fatal`).
  Anything else (the coordinator moving or loading) is asked again at the next interval.
- Closing, as KafkaShareConsumer.close(): each session's ShareAcknowledge at epoch -1, then the
  leave heartbeat (epoch -1).
"""

from __future__ import annotations

import time
import uuid

import trio

from corral.errors import ErrorCode
from corral.load.member import BACKOFF_MAX_S, BACKOFF_S, NONE, UNKNOWN_MEMBER_ID, GroupMember
from corral.load.share.session import ShareConfig, ShareSession, partitions_by_leader
from corral.network.apis import ApiKey
from corral.uuids import random_uuid_text

API = ApiKey.SHARE_GROUP_HEARTBEAT
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
REJOIN = {ErrorCode.FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID}
FATAL = {
    ErrorCode.INVALID_REQUEST,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
}


class ShareMember(GroupMember):
    """`generation` is the member epoch; `stable` means "in the group"; `assignment` its
    partitions by topic name."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        assert self.config.share is not None, "a share member needs MemberConfig.share"
        self.share: ShareConfig = self.config.share
        self.member_id = random_uuid_text()
        self.generation = JOIN_EPOCH
        self.interval_s: float | None = None
        self.topic_names = {tid: name for name, tid in self.config.topic_ids.items()}
        self.sessions: dict[int, ShareSession] = {}
        self.assignment_changed = trio.Event()
        self.fatal: str | None = None  # the error that stopped this member, if any
        self.left = False
        self._sent_at = 0.0

    # ------------------------------------------------------------------ heartbeats

    def _body(self, epoch: int) -> dict:
        return {
            "group_id": self.config.group,
            "member_id": self.member_id,
            "member_epoch": epoch,
            "rack_id": None,
            "subscribed_topic_names": list(self.config.topics) if epoch == JOIN_EPOCH else None,
        }

    async def _heartbeat(self, epoch: int) -> dict | None:
        self._sent_at = time.monotonic()
        return await self.request(API, self._body(epoch))

    def _assignment(self, answer: dict) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for entry in answer["topic_partitions"]:
            tid = bytes(entry["topic_id"])
            name = self.topic_names.get(tid) or uuid.UUID(bytes=tid).hex
            if entry["partitions"]:
                out.setdefault(name, []).extend(entry["partitions"])
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    def _answered(self, response: dict) -> bool:
        """Takes in a heartbeat's answer; False if the member is out of the group."""
        code = response["error_code"]
        if code in REJOIN:
            self._out()
            return False
        if code in FATAL:
            self.fatal = ErrorCode(code).name
            self._out()
            return False
        if code != NONE:
            return self.stable  # retriable: asked again at the next interval
        self.last_ok_at = time.monotonic()
        self.interval_s = response["heartbeat_interval_ms"] / 1000
        epoch = response["member_epoch"]
        if epoch < self.generation and self.stable:
            self.violations.add(
                f"member {self.member_id}: epoch went from {self.generation} to {epoch}"
            )
        self.generation = epoch
        if response["assignment"] is not None:
            assignment = self._assignment(response["assignment"])
            if assignment != self.assignment:
                self.assignment = assignment
                self.regroup()
        self.stable = True
        return True

    def _out(self) -> None:
        if self.assignment:
            self.assignment = {}
            self.regroup()
        self.generation, self.stable = JOIN_EPOCH, False

    def regroup(self) -> None:
        """Wakes the member's consumer loop: its partitions (or their leaders) changed."""
        self.assignment_changed.set()
        self.assignment_changed = trio.Event()

    async def join(self) -> None:
        """Epoch 0 until answered without error, or a fatal error."""
        self._out()
        attempt = 0
        while self.fatal is None:
            attempt += 1
            response = await self._heartbeat(JOIN_EPOCH)
            if response is not None and self._answered(response):
                return
            await trio.sleep(min(BACKOFF_MAX_S, BACKOFF_S * 2 ** min(attempt, 8)))

    async def heartbeat(self) -> bool:
        response = await self._heartbeat(self.generation)
        if response is None:
            return self.stable  # a lost coordinator is found again: no rejoin for it
        return self._answered(response)

    def next_heartbeat_in(self, interval_s: float, joined: bool = False) -> float:
        interval = self.interval_s if self.interval_s is not None else interval_s
        return max(0.0, self._sent_at + interval - time.monotonic())

    # ------------------------------------------------------------------ sessions

    def session(self, node: int) -> ShareSession:
        if node not in self.sessions or self.sessions[node].closed:
            self.sessions[node] = ShareSession(self, node, self.share, self.topic_names)
        return self.sessions[node]

    def wanted(self) -> dict[int, set[tuple[str, int]]]:
        """The assigned partitions by leader node."""
        return partitions_by_leader(self.assignment, self.share.leader_of)

    async def close_sessions(self) -> None:
        async with trio.open_nursery() as nursery:
            for session in list(self.sessions.values()):
                nursery.start_soon(session.close)

    async def leave(self) -> None:
        """Closes every share session (acknowledging what is owed), then leaves the group."""
        if self.left:
            return
        self.left = True
        await self.close_sessions()
        joined = self.stable or self.generation > 0
        self._out()
        if joined:
            await self.request(API, self._body(LEAVE_EPOCH), timeout=5)
        await self.disconnect()
