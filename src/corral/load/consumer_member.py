"""A KIP-848 member: ConsumerGroupHeartbeat as the Java consumer (`group.protocol=consumer`) sends
it.

- The member id is made by the client (a random Kafka Uuid string, v1 and KIP-1082), kept for the
  member's life, also across fencing and rejoining; on v0 the coordinator names it.
- Joining is epoch 0 with every field: RebalanceTimeoutMs, SubscribedTopicNames, ServerAssignor
  (when one is configured) and an empty TopicPartitions.
- Then incremental heartbeats every HeartbeatIntervalMs the broker returned, with only GroupId,
  MemberId and MemberEpoch, plus TopicPartitions (what the member owns) whenever its partitions
  changed since it last reported them: that is how revocations are acknowledged. Such an
  acknowledgement is sent at once, not at the next interval, as Java's ACKNOWLEDGING state does.
  The incremental heartbeat is encoded once per member id and epoch, and an answer byte for byte
  equal to the last one that changed nothing is not decoded (the heartbeat pump sends it so).
- A request without an answer makes the next one full (Java's HeartbeatState.reset()): the
  coordinator then answers with the whole assignment, and the lost-response rule (§1.3) accepts the
  old epoch.
- FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: every partition is dropped and the member rejoins at
  epoch 0 with the same id. Leaving is epoch -1.

The member has nothing to process, so it "reconciles" at once: partitions taken away are released
the moment the answer arrives, new ones are owned from then on. Each change of epoch or partitions
is reported to the run (`Events.owned`), whose ledger checks that no partition ever has two owners.
"""

from __future__ import annotations

import time
import uuid

import trio

from corral import _core
from corral.errors import ErrorCode
from corral.load import consumer_protocol as cp
from corral.load.member import BACKOFF_MAX_S, BACKOFF_S, NONE, UNKNOWN_MEMBER_ID, GroupMember
from corral.load.wire import CLIENT_ID, Connection
from corral.network.apis import ApiKey
from corral.uuids import random_uuid_text

API = ApiKey.CONSUMER_GROUP_HEARTBEAT
FENCED_MEMBER_EPOCH = ErrorCode.FENCED_MEMBER_EPOCH
STALE_MEMBER_EPOCH = ErrorCode.STALE_MEMBER_EPOCH
LEAVE_EPOCH = -1
OUT_OF_GROUP = -1  # the epoch reported to the run for a member that holds nothing and is not in


class ConsumerMember(GroupMember):
    """`generation` is the member epoch; `stable` means "in the group" (joined, not fenced): a
    KIP-848 client cannot tell whether its group is stable, only the run can (checks.py)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.version = self.config.versions[API]
        self.member_id = random_uuid_text() if self.version >= 1 else ""
        self.generation = 0
        self.topic_names = {tid: name for name, tid in self.config.topic_ids.items()}
        self.interval_s: float | None = None  # the broker's HeartbeatIntervalMs
        self.changes = 0  # times the partitions changed (ownership_mark)
        self._full = True  # the next request carries every field
        self._reported: cp.TopicPartitions | None = None  # owned partitions last sent
        self._sent_at = 0.0
        self._retry_at = 0.0  # after a failed request, no retry before this
        self._frame_key: tuple[str, int] | None = None
        self._frame = bytearray()  # the incremental heartbeat of _frame_key
        self._unchanged: bytes | None = None  # the last answer that changed nothing

    # ------------------------------------------------------------------ requests

    def _body(self, epoch: int, full: bool) -> tuple[dict, cp.TopicPartitions | None]:
        c = self.config
        owned = self.assignment
        report = full or owned != self._reported
        body = {
            "group_id": c.group,
            "member_id": self.member_id,
            "member_epoch": epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": c.rebalance_timeout_ms if full else -1,
            "subscribed_topic_names": list(c.topics) if full else None,
            "subscribed_topic_regex": None,
            "server_assignor": c.server_assignor if full else None,
            "topic_partitions": [
                {"topic_id": c.topic_ids[t], "partitions": ps} for t, ps in sorted(owned.items())
            ]
            if report
            else None,
        }
        return body, (dict(owned) if report else None)

    async def _heartbeat_request(self, epoch: int, full: bool) -> dict | None:
        body, reported = self._body(epoch, full)
        self._sent_at = time.monotonic()
        response = await self.request(API, body)
        if response is None or response["error_code"] != NONE:
            self._failed()
        elif reported is not None:
            self._reported = reported
        return response

    def _failed(self) -> None:
        self._full = True  # the answer may have been lost: say everything next time
        self._retry_at = time.monotonic() + BACKOFF_MAX_S

    # ------------------------------------------------------------------ steady heartbeats

    def _steady(self) -> bool:
        """Nothing to say but "still here": the incremental heartbeat will do."""
        return self.stable and not self._full and self.assignment == self._reported

    def _steady_frame(self) -> bytearray:
        key = (self.member_id, self.generation)
        if self._frame_key != key:
            self._frame_key = key
            body, _ = self._body(self.generation, full=False)
            self._frame = bytearray(_core.encode_request(API, self.version, 0, body, CLIENT_ID))
        return self._frame

    def _read(self, response: bytes) -> dict | None:
        """An answer to the incremental heartbeat (correlation id checked): None if it changes
        nothing, else decoded."""
        if response[4:] == self._unchanged:  # after the correlation id
            return None
        answer = Connection.decode(API, self.version, response)
        if (
            answer["error_code"] == NONE
            and answer["assignment"] is None
            and answer["member_epoch"] == self.generation
            and answer["member_id"] == self.member_id
            and answer["heartbeat_interval_ms"] / 1000 == self.interval_s
        ):
            self._unchanged = bytes(response[4:])
            return None
        return answer

    async def _exchange_steady(self, conn: Connection, frame: bytearray) -> tuple[dict | None]:
        return (self._read(await conn.exchange(frame)),)

    def _took(self, response: dict) -> bool:
        """A decoded answer to the incremental heartbeat; False if the member must rejoin."""
        if response["error_code"] != NONE:
            self.recorder.answer(API.name, response["error_code"])
            self._failed()
        return self._answered(response)

    async def heartbeats(self, pump) -> bool:
        """Incremental heartbeats through a HeartbeatPump until an answer changes something or
        the connection fails; False if the member must rejoin. Anything else to say first (an
        acknowledgement, a full request after a failure) goes as a heartbeat of its own."""
        if not self._steady():
            return await self.heartbeat()

        def read(conn: Connection, response: bytes) -> dict | None:
            conn.check_correlation_id(response)
            return self._read(response)

        response = await self._pumped(pump, API, self._steady_frame(), read)
        if response is None:
            self._failed()
            return self.stable  # like Java: a lost coordinator is found again, no rejoin for it
        return self._took(response)

    def _assignment(self, answer: dict) -> cp.TopicPartitions:
        out: cp.TopicPartitions = {}
        for entry in answer["topic_partitions"]:
            name = self.topic_names.get(entry["topic_id"])
            if name is None:  # not a topic this run created: keep it under its id
                name = uuid.UUID(bytes=bytes(entry["topic_id"])).hex
            if entry["partitions"]:
                out.setdefault(name, []).extend(entry["partitions"])
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    def _answered(self, response: dict) -> bool:
        """Takes in a heartbeat's answer; False if the member must rejoin."""
        code = response["error_code"]
        now = time.monotonic()
        self._unchanged = None
        if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            self._drop(now)
            return False
        if code != NONE:  # retriable (coordinator moving or loading) or not: try again later
            return self.stable
        self.last_ok_at = now
        self._full = False
        if response["member_id"]:
            self.member_id = response["member_id"]
        self.interval_s = response["heartbeat_interval_ms"] / 1000
        epoch, assignment = response["member_epoch"], self.assignment
        if response["assignment"] is not None:
            assignment = self._assignment(response["assignment"])
        if epoch < self.generation and self.stable:
            self.violations.add(
                f"member {self.member_id}: epoch went from {self.generation} to {epoch}"
            )
        if epoch != self.generation or assignment != self.assignment or not self.stable:
            if assignment != self.assignment:
                self.changes += 1
            self.generation, self.assignment = epoch, assignment
            self.events.owned(self.member_id, epoch, assignment, now)
        self.stable = True
        return True

    def give_up(self) -> None:
        """Owns nothing from now on and rejoins at epoch 0: a member the coordinator is about to
        fence by hand (churn through the faults API), which gives its partitions to others at
        once, as at a session timeout, where the member would have been gone for a while."""
        self._drop(time.monotonic())

    def _drop(self, now: float) -> None:
        """Fenced or leaving: nothing owned, out of the group, back to epoch 0."""
        if self.stable or self.assignment:
            self.changes += 1
            self.events.owned(self.member_id, OUT_OF_GROUP, {}, now)
        self.assignment, self.generation, self.stable = {}, 0, False
        self._full, self._reported, self._unchanged = True, None, None

    # ------------------------------------------------------------------ GroupMember

    async def join(self) -> None:
        """Epoch 0 until answered without error (the member is then in the group; its
        partitions come with this answer or with later heartbeats)."""
        self._drop(time.monotonic())
        attempt = 0
        while True:
            attempt += 1
            response = await self._heartbeat_request(0, full=True)
            if response is not None and self._answered(response):
                return
            await trio.sleep(min(BACKOFF_MAX_S, BACKOFF_S * 2 ** min(attempt, 8)))

    async def heartbeat(self) -> bool:
        if not self._steady():
            response = await self._heartbeat_request(self.generation, full=self._full)
            if response is None:
                return self.stable  # like Java: a lost coordinator is found again, no rejoin
            return self._answered(response)
        frame = self._steady_frame()
        self._sent_at = time.monotonic()
        got = await self._roundtrip(API, lambda conn: self._exchange_steady(conn, frame))
        if got is None:
            self._failed()
            return self.stable
        if got[0] is None:
            self.last_ok_at = time.monotonic()
            return True
        return self._took(got[0])

    def next_heartbeat_in(self, interval_s: float, joined: bool = False) -> float:
        """At once when owned partitions are to be acknowledged, else the broker's interval after
        the previous request was sent."""
        if self.stable and self.assignment != self._reported:
            return max(0.0, self._retry_at - time.monotonic())
        interval = self.interval_s if self.interval_s is not None else interval_s
        return max(0.0, self._sent_at + interval - time.monotonic())

    def ownership_mark(self) -> object:
        return self.changes

    def _commit_failed(self, code: int) -> None:
        # STALE_MEMBER_EPOCH: retried with a newer epoch later; these mean the member is out.
        if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            self._drop(time.monotonic())

    def _fetch_member(self) -> dict:
        return {"member_id": self.member_id, "member_epoch": self.generation}

    async def leave(self) -> None:
        epoch = self.generation
        self._drop(time.monotonic())
        if epoch > 0 and self.member_id:
            body, _ = self._body(LEAVE_EPOCH, full=False)
            await self.request(API, body, timeout=5)
        await self.disconnect()


def probe_group(group: str) -> str:
    """The group of wait_assignable's member."""
    return f"{group}-probe"


async def wait_assignable(config, timeout_s: float = 120.0) -> tuple[float, float] | None:
    """Seconds until one KIP-848 member of a group of its own (`<group>-probe`) is assigned every
    partition of the run's topics, and the heartbeat interval (s) the broker gave it; None if not
    within `timeout_s`.

    A run that has just created its topic waits for this before its members start: Kafka's group
    coordinator learns of a new topic only once the broker has created its partitions' logs (about
    1 s for 50 partitions here, 15 s for 1,000), later than Metadata lists them, and until then
    computes targets without it (the run would measure topic creation, and see a group stable
    with its partitions unowned).
    """
    from dataclasses import replace

    from corral.load.checks import Violations
    from corral.load.member import Events
    from corral.load.stats import Recorder

    member = ConsumerMember(
        replace(config, group=probe_group(config.group)), Recorder(), Violations(), Events()
    )
    total = sum(config.partitions.values())
    start = time.monotonic()
    try:
        with trio.move_on_after(timeout_s):
            await member.join()
            while sum(len(ps) for ps in member.assignment.values()) < total:
                await trio.sleep(0.1)
                if not await member.heartbeat():
                    await member.join()
            elapsed, seen = time.monotonic() - start, member.interval_s
            # The group's interval: corral answers a member that has just settled a shorter one
            # (its adaptive interval, never longer than the group's); a steady answer has it.
            await member.heartbeat()
            return elapsed, max(seen, member.interval_s)
        return None
    finally:
        with trio.move_on_after(5):
            await member.leave()
