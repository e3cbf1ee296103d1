"""A share consumer's share session with one partition leader (KIP-932): ShareFetch with
acknowledgements piggy-backed, and ShareAcknowledge to close, as the Java KafkaShareConsumer's
ShareSessionHandler sends them.

- A session is keyed by (group, member id) on the leader. The first ShareFetch has epoch 0 and
  lists every partition the member wants from this leader, with no acknowledgements (Kafka answers
  INVALID_REQUEST to acknowledgements at epoch 0); each later one has the next epoch (wrapping from
  2**31-1 to 1) and lists only what changed: partitions added, partitions carrying
  acknowledgements (an acknowledgement of a partition no longer wanted goes in Topics and in
  ForgottenTopicsData), partitions removed in ForgottenTopicsData.
- Every acquired record is acknowledged ACCEPT (1) in the next request: the consumer processes
  nothing (or sleeps `process_ms`, as its application would). Acknowledgements that failed
  (AcknowledgeErrorCode) are dropped: the records are no longer the member's (its lock expired,
  or its session was released) and the broker delivers them again.
- The session errors (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
  SHARE_SESSION_LIMIT_REACHED) start a new session at epoch 0; any other top-level error still
  moves the epoch on, as the Java client does.
- A lost connection (closed, timed out) ends the session on the broker, which releases the
  records the member holds in it: they are reported released and their acknowledgements dropped.
- Closing is ShareAcknowledge at epoch -1 carrying the last acknowledgements; an ack-only
  ShareFetch (every limit 0) carries acknowledgements of a member with nothing left to fetch.

Every acquisition, acknowledgement and release is reported to the run (`Events`), whose ledger
(checks.ShareLedger) checks that no record is held by two members at once and that every produced
record is acknowledged exactly once; the session itself checks that every acquired offset came
with its record.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from corral.errors import ErrorCode
from corral.load.wire import BrokerError, Connection
from corral.network.apis import ApiKey

ACCEPT = 1
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
SESSION_ERRORS = {
    ErrorCode.SHARE_SESSION_NOT_FOUND,
    ErrorCode.INVALID_SHARE_SESSION_EPOCH,
    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
}
LEADER_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH}
REQUEST_TIMEOUT_S = 30.0
BACKOFF_S = 0.5

# A record batch: base offset (8), length (4), leader epoch (4), magic (1), crc (4),
# attributes (2), last offset delta (4), ...
BATCH_HEAD = struct.Struct(">qi")
LAST_OFFSET_DELTA = struct.Struct(">i")
LAST_OFFSET_DELTA_AT = 23
BATCH_OVERHEAD = 12  # base offset and length, not counted in the length

TP = tuple[str, int]
Range = tuple[int, int]


@dataclass
class ShareConfig:
    """What a share consumer needs beyond MemberConfig: where partitions lead, and its fetch
    settings (the Java client's defaults: fetch.max.wait.ms 500, fetch.min.bytes 1,
    fetch.max.bytes 50 MiB, max.poll.records 500 for MaxRecords and BatchSize)."""

    leaders: dict[str, dict[int, int]]  # topic -> partition -> leader node id
    brokers: dict[int, tuple[str, int]]  # node id -> (host, port)
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    max_records: int = 500
    batch_size: int = 500
    acquire_mode: int = 0  # 0 batch_optimized, 1 record_limit (ShareFetch v2)
    process_ms: float = 0.0  # the application's time with each fetch's records
    topic_ids: dict[str, bytes] = field(default_factory=dict)

    def leader_of(self, tp: TP) -> int:
        return self.leaders[tp[0]][tp[1]]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


def batch_ranges(records: bytes | None) -> list[Range]:
    """The offsets covered by the whole record batches in `records` (a trailing partial batch,
    which a fetch may return, is left out). Reads batch headers only."""
    out: list[Range] = []
    if not records:
        return out
    at, end = 0, len(records)
    while at + LAST_OFFSET_DELTA_AT + 4 <= end:
        base, length = BATCH_HEAD.unpack_from(records, at)
        size = BATCH_OVERHEAD + length
        if at + size > end:
            break
        (delta,) = LAST_OFFSET_DELTA.unpack_from(records, at + LAST_OFFSET_DELTA_AT)
        if out and out[-1][1] + 1 == base:
            out[-1] = (out[-1][0], base + delta)
        else:
            out.append((base, base + delta))
        at += size
    return out


def uncovered(acquired: Range, covered: list[Range]) -> int:
    """How many offsets of `acquired` no range of `covered` (sorted, disjoint) contains."""
    first, last = acquired
    missing = last - first + 1
    for a, b in covered:
        lo, hi = max(a, first), min(b, last)
        if lo <= hi:
            missing -= hi - lo + 1
    return missing


def merge(ranges: list[Range]) -> list[Range]:
    """Sorted, with adjacent and overlapping ranges joined."""
    out: list[Range] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def ack_batches(ranges: list[Range]) -> list[dict[str, Any]]:
    return [
        {"first_offset": first, "last_offset": last, "acknowledge_types": [ACCEPT]}
        for first, last in merge(ranges)
    ]


class ShareSession:
    """The member's session with one leader: its connection, epoch, partitions and the
    acknowledgements it owes. `want` is set by the member (the assigned partitions this node
    leads); `fetch()` is one round trip."""

    def __init__(self, member, node: int, share: ShareConfig, names: dict[bytes, str]):
        self.member = member
        self.node = node
        self.share = share
        self.names = names  # topic id -> name
        self.conn: Connection | None = None
        self.epoch = INITIAL_EPOCH
        self.in_session: set[TP] = set()  # the partitions the broker's session holds
        self.want: set[TP] = set()
        self.pending: dict[TP, list[Range]] = {}  # acquired, to be acknowledged
        self.acquired_at: dict[tuple[TP, Range], float] = {}  # when each pending range's
        # ShareFetch was sent: its lock began no earlier
        self.closed = False
        self.lock_ms = 0  # AcquisitionLockTimeoutMs of the last answer

    @property
    def busy(self) -> bool:
        """Something to fetch or to acknowledge."""
        return bool(self.want) or any(self.pending.values())

    # ------------------------------------------------------------------ the connection

    async def _connection(self) -> Connection:
        if self.conn is None:
            host, port = self.share.brokers[self.node]
            config = self.member.config
            slots = self.member.connect_slots
            if slots is None:
                self.conn = await Connection.open(host, port, config.versions, config.handshake)
            else:
                async with slots:
                    self.conn = await Connection.open(host, port, config.versions, config.handshake)
        return self.conn

    async def _call(self, api: ApiKey, body: dict, timeout: float) -> dict | None:
        """One request, its latency recorded; None (connection dropped, held records reported
        released) on failure."""
        recorder = self.member.recorder
        answered = False
        try:
            with trio.fail_after(timeout):
                conn = await self._connection()
                self.member.events.sent(api.name)
                start = time.perf_counter()
                response = await conn.call(api, body)
                recorder.latency(api.name, time.perf_counter() - start)
                answered = True
                return response
        except (BrokerError, trio.TooSlowError) as e:
            recorder.error(
                api.name, "TIMEOUT" if isinstance(e, trio.TooSlowError) else "CONNECTION"
            )
            return None
        finally:
            if not answered:
                await self.drop()

    async def drop(self) -> None:
        """The connection is gone (or must go: an answer may be in flight): the broker ends the
        session and releases what the member held in it."""
        if self.conn is not None:
            conn, self.conn = self.conn, None
            with trio.CancelScope(shield=True):
                await conn.aclose()
        released = sorted(self.in_session | {tp for tp, rs in self.pending.items() if rs})
        if released:
            self.member.events.released(self.member.member_id, released, time.monotonic())
        self.pending, self.acquired_at = {}, {}
        self.in_session = set()
        self.epoch = INITIAL_EPOCH

    # ------------------------------------------------------------------ requests

    def _topics(self, partitions: dict[TP, list[Range]], with_limits: bool) -> list[dict]:
        by_topic: dict[str, list[dict]] = {}
        for (topic, p), ranges in sorted(partitions.items()):
            entry: dict[str, Any] = {"partition_index": p, "acknowledgement_batches": []}
            if with_limits:
                entry["partition_max_bytes"] = 0
            if ranges:
                entry["acknowledgement_batches"] = ack_batches(ranges)
            by_topic.setdefault(topic, []).append(entry)
        return [
            {"topic_id": self.share.topic_ids[t], "partitions": ps} for t, ps in by_topic.items()
        ]

    def _fetch_body(self) -> tuple[dict, dict[TP, list[Range]], set[TP], set[TP]]:
        """The next ShareFetch: (body, acknowledgements sent, partitions listed, forgotten)."""
        c = self.member.config
        s = self.share
        acks: dict[TP, list[Range]] = {}
        if self.epoch == INITIAL_EPOCH:
            listed = {tp: [] for tp in self.want}  # no acknowledgements at epoch 0
            forgotten: set[TP] = set()
        else:
            acks = {tp: rs for tp, rs in self.pending.items() if rs}
            listed = {tp: [] for tp in self.want - self.in_session}
            listed.update(acks)
            forgotten = (self.in_session - self.want) | (set(acks) - self.want)
        fetching = bool(self.want)
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(forgotten):
            by_topic.setdefault(topic, []).append(p)
        body = {
            "group_id": c.group,
            "member_id": self.member.member_id,
            "share_session_epoch": self.epoch,
            # An ack-only request (nothing wanted from this leader) sends every limit as 0.
            "max_wait_ms": s.max_wait_ms if fetching else 0,
            "min_bytes": s.min_bytes if fetching else 0,
            "max_bytes": s.max_bytes if fetching else 0,
            "max_records": s.max_records if fetching else 0,
            "batch_size": s.batch_size if fetching else 0,
            "share_acquire_mode": s.acquire_mode,
            "is_renew_ack": False,
            "topics": self._topics(listed, with_limits=True),
            "forgotten_topics_data": [
                {"topic_id": s.topic_ids[t], "partitions": ps} for t, ps in by_topic.items()
            ],
        }
        return body, acks, set(listed), forgotten

    async def fetch(self) -> int:
        """One ShareFetch: acknowledges what the previous ones acquired, acquires more; returns
        the number of records acquired (-1 when the request failed)."""
        body, acks, listed, forgotten = self._fetch_body()
        sent_at = time.monotonic()
        timeout = body["max_wait_ms"] / 1000 + REQUEST_TIMEOUT_S
        response = await self._call(ApiKey.SHARE_FETCH, body, timeout)
        if response is None:
            self._unknown(acks, sent_at)
            return -1
        return self._fetched(response, acks, listed, forgotten, sent_at)

    def _fetched(
        self,
        response: dict,
        acks: dict[TP, list[Range]],
        listed: set[TP],
        forgotten: set[TP],
        sent_at: float,
    ) -> int:
        recorder = self.member.recorder
        code = response["error_code"]
        if code in SESSION_ERRORS:
            recorder.error("SHARE_FETCH", code)
            self.epoch, self.in_session = INITIAL_EPOCH, set()
            return -1  # the acknowledgements were not looked at: sent again in the next session
        self.epoch = next_epoch(self.epoch)
        if code != ErrorCode.NONE:
            recorder.error("SHARE_FETCH", code)
            return -1
        self.in_session = (self.in_session | listed) - forgotten
        if response.get("acquisition_lock_timeout_ms", 0) > 0:
            self.lock_ms = response["acquisition_lock_timeout_ms"]
        acquired = 0
        answered: set[TP] = set()
        for topic in response["responses"]:
            name = self.names.get(bytes(topic["topic_id"]))
            if name is None:
                recorder.error("SHARE_FETCH", "UNKNOWN_TOPIC_IN_ANSWER")
                continue
            for part in topic["partitions"]:
                tp = (name, part["partition_index"])
                answered.add(tp)
                if tp in acks:
                    self._acknowledged(tp, acks[tp], part["acknowledge_error_code"], sent_at)
                if part["error_code"] != ErrorCode.NONE:
                    recorder.error("SHARE_FETCH", part["error_code"])
                    if part["error_code"] in LEADER_MOVED:
                        self._leader_moved(tp, part, response)
                    continue
                acquired += self._acquired(tp, part, sent_at)
        for tp in set(acks) - answered:
            # Kafka answers every partition that carried acknowledgements: none is a failure.
            recorder.error("SHARE_FETCH", "ACK_UNANSWERED")
            self._drop_acks(tp, acks[tp])
        return acquired

    def _acknowledged(self, tp: TP, ranges: list[Range], code: int, sent_at: float) -> None:
        """An answer to acknowledgements. Kafka skips acknowledgements of offsets below the share
        partition's start without a word: a record whose lock expired on its last delivery is
        archived, the start moves past it, and its acknowledgement is answered NONE. So an
        acknowledgement answered after the lock could have expired is "late": taken or archived,
        nobody can tell."""
        now = time.monotonic()
        lock_s = self.lock_ms / 1000
        late = {
            r for r in ranges if lock_s > 0 and now > self.acquired_at.get((tp, r), now) + lock_s
        }
        self._drop_acks(tp, ranges)
        if code == ErrorCode.NONE:
            for is_late in (False, True):
                chosen = [r for r in ranges if (r in late) == is_late]
                for first, last in merge(chosen):
                    self.member.events.acknowledged(
                        self.member.member_id, tp, first, last, sent_at, is_late
                    )
            counted = "records_acknowledged"
            self.member.recorder.counts[counted] += sum(
                last - first + 1 for first, last in ranges if (first, last) not in late
            )
            if late:
                self.member.recorder.counts["records_acknowledged_late"] += sum(
                    last - first + 1 for first, last in late
                )
        else:
            # All or nothing per partition: none of them is the member's any more.
            self.member.recorder.error("SHARE_ACKNOWLEDGEMENT", code)

    def _unknown(self, acks: dict[TP, list[Range]], sent_at: float) -> None:
        """Acknowledgements whose answer never came: the broker may or may not have taken them
        (the session is gone, so they are not sent again)."""
        for tp, ranges in acks.items():
            for first, last in merge(ranges):
                self.member.events.unconfirmed(self.member.member_id, tp, first, last, sent_at)

    def _drop_acks(self, tp: TP, ranges: list[Range]) -> None:
        """`ranges` were sent (acknowledged or refused): no longer owed."""
        sent = set(ranges)
        for r in sent:
            self.acquired_at.pop((tp, r), None)
        left = [r for r in self.pending.get(tp, []) if r not in sent]
        if left:
            self.pending[tp] = left
        else:
            self.pending.pop(tp, None)

    def _acquired(self, tp: TP, part: dict, sent_at: float) -> int:
        ranges = [(a["first_offset"], a["last_offset"]) for a in part["acquired_records"]]
        if not ranges:
            return 0
        now = time.monotonic()
        covered = batch_ranges(part["records"])
        held = self.pending.setdefault(tp, [])
        count = 0
        for (first, last), a in zip(ranges, part["acquired_records"]):
            missing = uncovered((first, last), covered)
            if missing:
                self.member.violations.add(
                    f"{self.member.member_id}: {tp[0]}-{tp[1]} offsets {first}-{last} acquired, "
                    f"{missing} of them without their record in the answer"
                )
            self.member.events.acquired(
                self.member.member_id,
                tp,
                first,
                last,
                a["delivery_count"],
                sent_at,
                now,
                self.lock_ms,
            )
            # A record this member already holds (delivered to it again after its lock expired)
            # is acknowledged once.
            fresh = [(first, last)]
            for h_first, h_last in held:
                fresh = [
                    piece
                    for f, lst in fresh
                    for piece in ((f, min(lst, h_first - 1)), (max(f, h_last + 1), lst))
                    if piece[0] <= piece[1]
                ]
            held.extend(fresh)
            for piece in fresh:
                self.acquired_at[(tp, piece)] = sent_at
            count += last - first + 1
        self.member.recorder.counts["records_acquired"] += count
        return count

    def _leader_moved(self, tp: TP, part: dict, response: dict) -> None:
        leader = part.get("current_leader") or {}
        node = leader.get("leader_id", -1)
        for endpoint in response.get("node_endpoints") or []:
            self.share.brokers.setdefault(endpoint["node_id"], (endpoint["host"], endpoint["port"]))
        if node >= 0 and node != self.node and node in self.share.brokers:
            self.share.leaders[tp[0]][tp[1]] = node  # the member moves it to that session

    async def close(self) -> None:
        """ShareAcknowledge at epoch -1 with what is still owed: the broker acknowledges, then
        releases whatever else the member holds, and forgets the session."""
        if self.closed:
            return
        self.closed = True
        if self.epoch == INITIAL_EPOCH and self.conn is None:
            return  # no session on the broker
        acks = {tp: rs for tp, rs in self.pending.items() if rs}
        if self.epoch == INITIAL_EPOCH:
            await self.drop()  # a session never opened: nothing to close but the connection
            return
        body = {
            "group_id": self.member.config.group,
            "member_id": self.member.member_id,
            "share_session_epoch": FINAL_EPOCH,
            "is_renew_ack": False,
            "topics": [
                {
                    "topic_id": t["topic_id"],
                    "partitions": [
                        {
                            "partition_index": p["partition_index"],
                            "acknowledgement_batches": p["acknowledgement_batches"],
                        }
                        for p in t["partitions"]
                    ],
                }
                for t in self._topics(acks, with_limits=False)
            ],
        }
        sent_at = time.monotonic()
        response = await self._call(ApiKey.SHARE_ACKNOWLEDGE, body, REQUEST_TIMEOUT_S)
        if response is None:
            self._unknown(acks, sent_at)
            return  # dropped: reported released
        if response["error_code"] != ErrorCode.NONE:
            self.member.recorder.error("SHARE_ACKNOWLEDGE", response["error_code"])
        else:
            answered: set[TP] = set()
            for topic in response["responses"]:
                name = self.names.get(bytes(topic["topic_id"]))
                for part in topic["partitions"]:
                    tp = (name or "?", part["partition_index"])
                    answered.add(tp)
                    if tp in acks:
                        self._acknowledged(tp, acks[tp], part["error_code"], sent_at)
            for tp in set(acks) - answered:
                self.member.recorder.error("SHARE_ACKNOWLEDGE", "ACK_UNANSWERED")
                self._drop_acks(tp, acks[tp])
        await self.drop()  # the session is over: anything else held was released


def partitions_by_leader(
    assignment: dict[str, list[int]], leader_of: Callable[[TP], int]
) -> dict[int, set[TP]]:
    out: dict[int, set[TP]] = {}
    for topic, parts in assignment.items():
        for p in parts:
            out.setdefault(leader_of((topic, p)), set()).add((topic, p))
    return out
