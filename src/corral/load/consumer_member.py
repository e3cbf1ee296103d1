"""A KIP-848 member: ConsumerGroupHeartbeat as the Java consumer (`group.protocol=consumer`) sends it.

- The member id is made by the client (a random Kafka Uuid string, v1 and KIP-1082), kept for the
  member's life, also across fencing and rejoining; on v0 the coordinator names it.
- Joining is epoch 0 with every field: RebalanceTimeoutMs, SubscribedTopicNames, ServerAssignor
  (when one is configured) and an empty TopicPartitions.
- Then incremental heartbeats every HeartbeatIntervalMs the broker returned, with only GroupId,
  MemberId and MemberEpoch, plus TopicPartitions (what the member owns) whenever its partitions
  changed since it last reported them: that is how revocations are acknowledged. Such an
  acknowledgement is sent at once, not at the next interval, as Java's ACKNOWLEDGING state does.
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

from . import consumer_protocol as cp
from .member import BACKOFF_MAX_S, BACKOFF_S, NONE, UNKNOWN_MEMBER_ID, GroupMember
from ..apis import ApiKey
from ..errors import ErrorCode
from ..uuids import random_uuid_text

FENCED_MEMBER_EPOCH = ErrorCode.FENCED_MEMBER_EPOCH
STALE_MEMBER_EPOCH = ErrorCode.STALE_MEMBER_EPOCH
LEAVE_EPOCH = -1
OUT_OF_GROUP = -1   # the epoch reported to the run for a member that holds nothing and is not in


class ConsumerMember(GroupMember):
    """`generation` is the member epoch; `stable` means "in the group" (joined, not fenced): a
    KIP-848 client cannot tell whether its group is stable, only the run can (checks.py)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.version = self.config.versions[ApiKey.CONSUMER_GROUP_HEARTBEAT]
        self.member_id = random_uuid_text() if self.version >= 1 else ""
        self.generation = 0
        self.topic_names = {tid: name for name, tid in self.config.topic_ids.items()}
        self.interval_s: float | None = None    # the broker's HeartbeatIntervalMs
        self.changes = 0                         # times the partitions changed (ownership_mark)
        self._full = True                        # the next request carries every field
        self._reported: cp.TopicPartitions | None = None   # owned partitions last sent
        self._sent_at = 0.0
        self._retry_at = 0.0                     # after a failed request, no retry before this

    # ------------------------------------------------------------------ requests

    def _body(self, epoch: int, full: bool) -> tuple[dict, cp.TopicPartitions | None]:
        c = self.config
        owned = self.assignment
        report = full or owned != self._reported
        body = {
            "group_id": c.group, "member_id": self.member_id, "member_epoch": epoch,
            "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": c.rebalance_timeout_ms if full else -1,
            "subscribed_topic_names": list(c.topics) if full else None,
            "subscribed_topic_regex": None,
            "server_assignor": c.server_assignor if full else None,
            "topic_partitions": [{"topic_id": c.topic_ids[t], "partitions": ps}
                                 for t, ps in sorted(owned.items())] if report else None,
        }
        return body, (dict(owned) if report else None)

    async def _heartbeat_request(self, epoch: int, full: bool) -> dict | None:
        body, reported = self._body(epoch, full)
        self._sent_at = time.monotonic()
        response = await self.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body)
        if response is None or response["error_code"] != NONE:
            self._full = True   # the answer may have been lost: say everything next time
            self._retry_at = time.monotonic() + BACKOFF_MAX_S
        elif reported is not None:
            self._reported = reported
        return response

    def _assignment(self, answer: dict) -> cp.TopicPartitions:
        out: cp.TopicPartitions = {}
        for entry in answer["topic_partitions"]:
            name = self.topic_names.get(entry["topic_id"])
            if name is None:   # not a topic this run created: keep it under its id
                name = uuid.UUID(bytes=bytes(entry["topic_id"])).hex
            if entry["partitions"]:
                out.setdefault(name, []).extend(entry["partitions"])
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    def _answered(self, response: dict) -> bool:
        """Takes in a heartbeat's answer; False if the member must rejoin."""
        code = response["error_code"]
        now = time.monotonic()
        if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            self._drop(now)
            return False
        if code != NONE:    # retriable (coordinator moving or loading) or not: try again later
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
            self.violations.add(f"member {self.member_id}: epoch went from {self.generation} "
                                f"to {epoch}")
        if epoch != self.generation or assignment != self.assignment or not self.stable:
            if assignment != self.assignment:
                self.changes += 1
            self.generation, self.assignment = epoch, assignment
            self.events.owned(self.member_id, epoch, assignment, now)
        self.stable = True
        return True

    def _drop(self, now: float) -> None:
        """Fenced or leaving: nothing owned, out of the group, back to epoch 0."""
        if self.stable or self.assignment:
            self.changes += 1
            self.events.owned(self.member_id, OUT_OF_GROUP, {}, now)
        self.assignment, self.generation, self.stable = {}, 0, False
        self._full, self._reported = True, None

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
        response = await self._heartbeat_request(self.generation, full=self._full)
        if response is None:
            return self.stable   # like Java: a lost coordinator is found again, no rejoin for it
        return self._answered(response)

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
            await self.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, timeout=5)
        await self.disconnect()


def probe_group(group: str) -> str:
    """The group of wait_assignable's member."""
    return f"{group}-probe"


async def wait_assignable(config, timeout_s: float = 120.0) -> float | None:
    """Seconds until one KIP-848 member of a group of its own (`<group>-probe`) is assigned every
    partition of the run's topics, or None if not within `timeout_s`.

    A run that has just created its topic waits for this before its members start: Kafka's group
    coordinator learns of a new topic only once the broker has created its partitions' logs (about
    1 s for 50 partitions here, 15 s for 1,000), later than Metadata lists them, and until then
    computes targets without it (the run would measure topic creation, and see a group stable
    with its partitions unowned).
    """
    from dataclasses import replace
    from .checks import Violations
    from .member import Events
    from .stats import Recorder
    member = ConsumerMember(replace(config, group=probe_group(config.group)), Recorder(),
                            Violations(), Events())
    total = sum(config.partitions.values())
    start = time.monotonic()
    try:
        with trio.move_on_after(timeout_s):
            await member.join()
            while sum(len(ps) for ps in member.assignment.values()) < total:
                await trio.sleep(0.1)
                if not await member.heartbeat():
                    await member.join()
            return time.monotonic() - start
        return None
    finally:
        with trio.move_on_after(5):
            await member.leave()
