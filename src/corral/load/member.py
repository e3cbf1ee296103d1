"""Simulated group members.

`GroupMember` is what scenarios talk to; it says nothing about the group protocol. `ClassicMember`
speaks the classic protocol (JoinGroup with KIP-394's two-step member id, SyncGroup with the leader
computing the assignment itself, Heartbeat, OffsetCommit/OffsetFetch, LeaveGroup) the way a Java
consumer does. `ConsumerMember` (consumer_member.py) speaks KIP-848's ConsumerGroupHeartbeat.
"""

from __future__ import annotations

import abc
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import trio

from corral import _core
from corral.errors import ErrorCode
from corral.load import consumer_protocol as cp
from corral.load.checks import Violations
from corral.load.stats import Recorder
from corral.load.wire import CLIENT_ID, BrokerError, Connection
from corral.network.apis import ApiKey

if TYPE_CHECKING:
    from corral.load.share.session import ShareConfig

T = TypeVar("T")

# Error codes the member reacts to.
NONE = ErrorCode.NONE
ILLEGAL_GENERATION = ErrorCode.ILLEGAL_GENERATION
UNKNOWN_MEMBER_ID = ErrorCode.UNKNOWN_MEMBER_ID
REBALANCE_IN_PROGRESS = ErrorCode.REBALANCE_IN_PROGRESS
MEMBER_ID_REQUIRED = ErrorCode.MEMBER_ID_REQUIRED
# A SyncGroup or Heartbeat of a generation the coordinator has begun to replace is answered
# REBALANCE_IN_PROGRESS: the way a member learns to rejoin (the Java consumer rejoins and logs it
# at INFO), as much the protocol's normal answer as KIP-394's MEMBER_ID_REQUIRED. Counted, not an
# error: a join storm spread out by a slow generator gets one whenever a member joins after the
# coordinator closed the first generation (group.initial.rebalance.delay.ms 0 closes it at once).
REJOIN_STEPS = (REBALANCE_IN_PROGRESS,)

REQUEST_TIMEOUT_S = 30.0
BACKOFF_S = 0.1
BACKOFF_MAX_S = 1.0


@dataclass
class MemberConfig:
    group: str
    host: str  # the group's coordinator
    port: int
    versions: dict[int, int]
    topics: list[str]
    partitions: dict[str, int]  # partition count of each subscribed topic
    session_timeout_ms: int = 45000
    rebalance_timeout_ms: int = 300000
    assignor: str = "range"
    handshake: bool = True  # ApiVersions on each new connection, as clients do
    topic_ids: dict[str, bytes] = field(default_factory=dict)  # Metadata v10+ (KIP-848 members)
    server_assignor: str | None = None  # KIP-848 ServerAssignor (None: the broker's default)
    share: ShareConfig | None = None  # share consumers (KIP-932): leaders and fetch settings


class Events:
    """What members report to the run: assignments received, group sizes seen by leaders."""

    def __init__(self):
        self.pending: list[tuple] = []
        self.first_sent: set[str] = set()

    def synced(self, generation: int, member_id: str, assignment: cp.TopicPartitions) -> None:
        self.pending.append(("synced", generation, member_id, assignment, time.monotonic()))

    def leader(self, generation: int, member_count: int) -> None:
        self.pending.append(("leader", generation, member_count))

    def owned(self, member_id: str, epoch: int, assignment: cp.TopicPartitions, at: float) -> None:
        """A KIP-848 member's epoch or partitions changed at `at` (epoch -1: out of the group).
        A release is stamped before the request that acknowledges it is sent, an acquisition
        when its answer arrived: in time order, no partition ever has two owners."""
        self.pending.append(("owned", member_id, epoch, assignment, at))

    # Share consumers (share/session.py) report what happens to records; checks.ShareLedger
    # reads these tuples.

    def acquired(
        self,
        member_id: str,
        tp: tuple[str, int],
        first: int,
        last: int,
        delivery_count: int,
        sent_at: float,
        at: float,
        lock_ms: int,
    ) -> None:
        """Records acquired by a ShareFetch sent at `sent_at`, answered at `at`."""
        self.pending.append(
            ("acquired", member_id, tp, first, last, delivery_count, sent_at, at, lock_ms)
        )

    def acknowledged(
        self,
        member_id: str,
        tp: tuple[str, int],
        first: int,
        last: int,
        sent_at: float,
        late: bool = False,
    ) -> None:
        """Records the broker answered acknowledged (ACCEPT), by a request sent at `sent_at`;
        `late`: answered after their lock could have expired (taken, or archived and skipped)."""
        self.pending.append(("acknowledged", member_id, tp, first, last, sent_at, late))

    def unconfirmed(
        self, member_id: str, tp: tuple[str, int], first: int, last: int, sent_at: float
    ) -> None:
        """Acknowledgements sent at `sent_at` that got no answer (the connection failed)."""
        self.pending.append(("unconfirmed", member_id, tp, first, last, sent_at))

    def released(self, member_id: str, tps: list[tuple[str, int]], at: float) -> None:
        """The member's share session on these partitions ended at `at` (closed, or its
        connection lost): the broker releases the records it still held there."""
        self.pending.append(("released", member_id, tps, at))

    def produced(self, tp: tuple[str, int], base: int, count: int) -> None:
        self.pending.append(("produced", tp, base, count))

    def mark(self, name: str) -> None:
        """A moment of the run (the parent keeps the earliest of each name)."""
        self.pending.append(("mark", name, time.monotonic()))

    def sent(self, api: str) -> None:
        """A request of `api` is being sent: marks "first_<api>" the first time in this worker."""
        if api not in self.first_sent:
            self.first_sent.add(api)
            self.mark(f"first_{api}")

    def drain(self) -> list[tuple]:
        out, self.pending = self.pending, []
        return out


class GroupMember(abc.ABC):
    """One simulated consumer, independent of the group protocol it speaks."""

    def __init__(
        self,
        config: MemberConfig,
        recorder: Recorder,
        violations: Violations,
        events: Events,
        connect_slots: trio.Semaphore | None = None,
    ):
        self.config = config
        self.recorder = recorder
        self.violations = violations
        self.events = events
        # Connections being opened at once are capped: thousands of SYNs at once overflow the
        # broker's listen backlog, and the dropped ones retry only after 1-3 s.
        self.connect_slots = connect_slots
        self.conn: Connection | None = None
        self.member_id = ""
        self.generation = -1
        self.assignment: cp.TopicPartitions = {}
        self.stable = False
        self.last_ok_at = 0.0  # last heartbeat or sync answered without error
        self._one_at_a_time = (
            trio.Lock()
        )  # heartbeats and commits of one member share its connection

    async def _connection(self) -> Connection:
        if self.conn is None:
            if self.connect_slots is None:
                self.conn = await self._open()
            else:
                async with self.connect_slots:
                    self.conn = await self._open()
        return self.conn

    async def _open(self) -> Connection:
        return await Connection.open(
            self.config.host, self.config.port, self.config.versions, self.config.handshake
        )

    async def request(
        self,
        api: ApiKey,
        body: dict,
        timeout: float = REQUEST_TIMEOUT_S,
        urgent: bool = False,
        steps: tuple[int, ...] = (),
    ) -> dict | None:
        """One request with latency and error code recorded; None (and the connection dropped)
        on failure. See `_roundtrip` for `urgent`. `steps`: codes that are the protocol's normal
        answer at this point (KIP-394's MEMBER_ID_REQUIRED, REJOIN_STEPS), counted, not errors."""
        response = await self._roundtrip(api, lambda conn: conn.call(api, body), timeout, urgent)
        if response is not None and response.get("error_code", NONE) != NONE:
            self.recorder.answer(api.name, response["error_code"], steps)
        return response

    async def _roundtrip(
        self,
        api: ApiKey,
        exchange: Callable[[Connection], Awaitable[T]],
        timeout: float = REQUEST_TIMEOUT_S,
        urgent: bool = False,
    ) -> T | None:
        """`exchange` on the member's connection with its latency recorded; None (and the
        connection dropped) on failure.

        `urgent` sends without first yielding to the worker's other tasks when the connection is
        free and open: a leader's SyncGroup would otherwise wait behind thousands of members
        whose JoinGroup answers arrived with it, and the whole group waits for the leader.
        """
        answered = False
        lock = self._one_at_a_time
        try:
            if urgent:
                try:
                    lock.acquire_nowait()
                except trio.WouldBlock:
                    await lock.acquire()
            else:
                await lock.acquire()
            try:
                with trio.fail_after(timeout):
                    conn = await self._connection()
                    self.events.sent(api.name)
                    start = time.perf_counter()
                    result = await exchange(conn)
                    seconds = time.perf_counter() - start
                    answered = True
            finally:
                lock.release()
        except (BrokerError, trio.TooSlowError) as e:
            self.recorder.error(
                api.name, "TIMEOUT" if isinstance(e, trio.TooSlowError) else "CONNECTION"
            )
            return None
        finally:
            if not answered:  # failed or cancelled mid-request: its answer must not be read later
                await self.disconnect()
        self.recorder.latency(api.name, seconds)
        return result

    async def disconnect(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            with trio.CancelScope(shield=True):
                await conn.aclose()

    async def _pumped(
        self, pump, api: ApiKey, frame: bytearray, read: Callable[[Connection, bytes], object]
    ) -> object:
        """Heartbeats `frame` through a HeartbeatPump (heartbeat_pump.py) until `read` makes of
        an answer something other than None, returned; None when the connection failed or an
        answer was late (the error is recorded and the connection dropped)."""
        outcome = None
        async with self._one_at_a_time:
            try:
                with trio.fail_after(REQUEST_TIMEOUT_S):
                    conn = await self._connection()
                outcome = await pump.beat(
                    self, conn, frame, api.name, lambda response: read(conn, response)
                )
            except (BrokerError, trio.TooSlowError) as e:
                self.recorder.error(
                    api.name, "TIMEOUT" if isinstance(e, trio.TooSlowError) else "CONNECTION"
                )
            finally:
                if outcome is None:  # an answer may be in flight: it must not be read later
                    await self.disconnect()
        return outcome

    def _saw_generation(self, generation: int) -> None:
        if generation < self.generation:
            self.violations.add(
                f"member {self.member_id}: generation went from {self.generation} to {generation}"
            )
        self.generation = generation

    @abc.abstractmethod
    async def join(self) -> None:
        """Returns once the member holds an assignment of a stable generation."""

    @abc.abstractmethod
    async def heartbeat(self) -> bool:
        """One heartbeat; False if the member must rejoin."""

    def _commit_failed(self, code: int) -> None:
        """A partition's OffsetCommit error: the classic member rejoins on these."""
        if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
            self.stable = False

    def _fetch_member(self) -> dict:
        """The member fields of an OffsetFetch v9 group (a classic consumer leaves them unset)."""
        return {}

    def ownership_mark(self) -> object:
        """Changes whenever the member's partitions may have moved (the classic generation)."""
        return self.generation

    def next_heartbeat_in(self, interval_s: float, joined: bool = False) -> float:
        """Seconds until the next heartbeat; right after a join, spread over the interval as
        independent clients are."""
        return random.uniform(0, interval_s) if joined else interval_s

    async def commit(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Commits offsets (with the member's generation or member epoch); returns those the
        broker acknowledged."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, p), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                {"partition_index": p, "committed_offset": offset, "committed_metadata": ""}
            )
        response = await self.request(
            ApiKey.OFFSET_COMMIT,
            {
                "group_id": self.config.group,
                "generation_id_or_member_epoch": self.generation,
                "member_id": self.member_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        if response is None:
            return {}
        acknowledged = {}
        for topic in response["topics"]:
            for part in topic["partitions"]:
                key = (topic["name"], part["partition_index"])
                if part["error_code"] == NONE:
                    acknowledged[key] = offsets[key]
                else:
                    self.recorder.error("OFFSET_COMMIT", part["error_code"])
                    self._commit_failed(part["error_code"])
        return acknowledged

    async def fetch_offsets(
        self, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int] | None:
        """Committed offsets as the broker reports them (-1: none), or None on failure."""
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        multi_group = self.config.versions[ApiKey.OFFSET_FETCH] >= 8
        body = (
            {"groups": [{"group_id": self.config.group, "topics": topics, **self._fetch_member()}]}
            if multi_group
            else {"group_id": self.config.group, "topics": topics}
        )
        response = await self.request(ApiKey.OFFSET_FETCH, body)
        if response is None:
            return None
        if multi_group:
            group = response["groups"][0]
            if group["error_code"] != NONE:
                self.recorder.error("OFFSET_FETCH", group["error_code"])
                return None
            result_topics = group["topics"]
        else:
            result_topics = response["topics"]
        out = {}
        for topic in result_topics:
            for part in topic["partitions"]:
                if part["error_code"] != NONE:
                    self.recorder.error("OFFSET_FETCH", part["error_code"])
                    return None
                out[(topic["name"], part["partition_index"])] = part["committed_offset"]
        return out

    @abc.abstractmethod
    async def leave(self) -> None:
        """Leaves the group and closes the connection."""


class ClassicMember(GroupMember):
    _heartbeat_key: tuple[str, int] | None = None
    _heartbeat = bytearray()

    async def _backoff(self, attempt: int) -> None:
        await trio.sleep(min(BACKOFF_MAX_S, BACKOFF_S * math.pow(2, min(attempt, 8))))

    async def join(self) -> None:
        c = self.config
        self.stable = False
        attempt = 0
        while True:
            attempt += 1
            owned = self.assignment
            self.assignment = {}
            response = await self.request(
                ApiKey.JOIN_GROUP,
                {
                    "group_id": c.group,
                    "session_timeout_ms": c.session_timeout_ms,
                    "rebalance_timeout_ms": c.rebalance_timeout_ms,
                    "member_id": self.member_id,
                    "protocol_type": cp.PROTOCOL_TYPE,
                    "protocols": [
                        {
                            "name": c.assignor,
                            "metadata": cp.encode_subscription(c.topics, owned, self.generation),
                        }
                    ],
                },
                timeout=c.rebalance_timeout_ms / 1000 + REQUEST_TIMEOUT_S,
                steps=(MEMBER_ID_REQUIRED,),
            )
            if response is None:
                await self._backoff(attempt)
                continue
            code = response["error_code"]
            if code == MEMBER_ID_REQUIRED:  # KIP-394: rejoin with the id handed out
                self.member_id = response["member_id"]
                continue
            if code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if code != NONE:
                await self._backoff(attempt)
                continue
            self.member_id = response["member_id"]
            self._saw_generation(response["generation_id"])
            assignments = []
            if response["leader"] == self.member_id:
                assignments = self._lead(response)
            code = await self._sync(response, assignments)
            if code == NONE:
                return
            if code != REBALANCE_IN_PROGRESS:  # e.g. the coordinator failed to store the group
                await self._backoff(attempt)

    def _lead(self, join: dict) -> list[dict]:
        c = self.config
        subscriptions = {
            m["member_id"]: cp.decode_subscription_topics(m["metadata"]) for m in join["members"]
        }
        self.events.leader(join["generation_id"], len(subscriptions))
        plan = cp.assign(join["protocol_name"] or c.assignor, subscriptions, c.partitions)
        return [
            {"member_id": m, "assignment": cp.encode_assignment(tps)} for m, tps in plan.items()
        ]

    async def _sync(self, join: dict, assignments: list[dict]) -> int | None:
        """SyncGroup; returns its error code (None if it got no answer)."""
        c = self.config
        response = await self.request(
            ApiKey.SYNC_GROUP,
            {
                "group_id": c.group,
                "generation_id": join["generation_id"],
                "member_id": self.member_id,
                "protocol_type": cp.PROTOCOL_TYPE,
                "protocol_name": join["protocol_name"],
                "assignments": assignments,
            },
            timeout=c.rebalance_timeout_ms / 1000 + REQUEST_TIMEOUT_S,
            urgent=bool(assignments),
            steps=REJOIN_STEPS,
        )
        if response is None:
            return None
        code = response["error_code"]
        if code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
        if code != NONE:
            return code
        self.assignment = cp.decode_assignment(response["assignment"])
        self.stable = True
        self.last_ok_at = time.monotonic()
        self.events.synced(join["generation_id"], self.member_id, self.assignment)
        return NONE

    def _heartbeat_frame(self) -> bytearray:
        """The Heartbeat request, encoded once per member id and generation (a heartbeat differs
        from the previous one only by its correlation id, which the connection sets)."""
        key = (self.member_id, self.generation)
        if self._heartbeat_key != key:
            self._heartbeat_key = key
            self._heartbeat = bytearray(
                _core.encode_request(
                    ApiKey.HEARTBEAT,
                    self.config.versions[ApiKey.HEARTBEAT],
                    0,
                    {
                        "group_id": self.config.group,
                        "generation_id": self.generation,
                        "member_id": self.member_id,
                    },
                    CLIENT_ID,
                )
            )
        return self._heartbeat

    async def heartbeat(self) -> bool:
        frame, version = self._heartbeat_frame(), self.config.versions[ApiKey.HEARTBEAT]
        code = await self._roundtrip(ApiKey.HEARTBEAT, lambda conn: conn.heartbeat(version, frame))
        if code is not None and code != NONE:
            self.recorder.answer(ApiKey.HEARTBEAT.name, code, REJOIN_STEPS)
        return self._heartbeat_answered(code)

    async def heartbeats(self, pump) -> bool:
        """Heartbeats through a HeartbeatPump until an answer is not NONE or the connection
        fails; False if the member must rejoin."""
        frame, version = self._heartbeat_frame(), self.config.versions[ApiKey.HEARTBEAT]

        def read(conn: Connection, response: bytes) -> int | None:
            code = conn.heartbeat_answer(version, response)
            return None if code == NONE else code  # None: the pump's UNCHANGED

        code = await self._pumped(pump, ApiKey.HEARTBEAT, frame, read)
        if code is not None:
            self.recorder.answer(ApiKey.HEARTBEAT.name, code, REJOIN_STEPS)
        return self._heartbeat_answered(code)

    def _heartbeat_answered(self, code: int | None) -> bool:
        """Reacts to a heartbeat's error code (None: no answer); False if the member must rejoin."""
        if code is None:
            return self.stable  # like Java: a lost coordinator is found again, no rejoin for it
        if code == NONE:
            self.last_ok_at = time.monotonic()
        if code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
        # A coordinator that is loading or moved is retried, as Java does; these need a rejoin.
        if code in (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            self.stable = False
        return self.stable

    async def leave(self) -> None:
        if self.member_id and ApiKey.LEAVE_GROUP in self.config.versions:
            version = self.config.versions[ApiKey.LEAVE_GROUP]
            body = (
                {
                    "group_id": self.config.group,
                    "members": [{"member_id": self.member_id, "reason": "corral load"}],
                }
                if version >= 3
                else {"group_id": self.config.group, "member_id": self.member_id}
            )
            await self.request(ApiKey.LEAVE_GROUP, body, timeout=5)
        self.member_id = ""
        self.stable = False
        self.assignment = {}
        await self.disconnect()
