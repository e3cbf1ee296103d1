"""A KIP-848 member's regex keeps only the topics its principal may DESCRIBE (Kafka's
TopicRegexResolver resolves with the heartbeat's context), in process with a real broker; without
an authorizer nothing changes."""

from __future__ import annotations

import trio
from aclkit import ALICE, GROUP, TOPIC, acl, call, secured, with_broker

from corral.errors import ErrorCode
from corral.network.apis import ApiKey
from corral.security.acls import AclOperation as Op
from corral.security.acls import PatternType

FAST = {"group.consumer.assignment.interval.ms": 0}


def heartbeat(epoch: int, regex: str | None = "t.*") -> dict:
    return {
        "group_id": "g",
        "member_id": "m1",
        "member_epoch": epoch,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": regex,
        "topic_partitions": [] if epoch == 0 else None,
    }


async def assigned_topics(broker, epoch: int) -> tuple[int, set[str]]:
    """Heartbeats until the member has caught up with the group epoch: (its epoch, its
    topics' names)."""
    for _ in range(50):
        answer = await call(broker, ALICE, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat(epoch))
        assert answer["error_code"] == ErrorCode.NONE, answer
        epoch = answer["member_epoch"]
        group = broker.groups.groups["g"]
        current = group.members["m1"].current
        if epoch == group.group_epoch and not current.pending_revocation:
            return epoch, {
                broker.groups.topics.name_of(t) for t, ps in current.assigned.items() if ps
            }
        await trio.sleep(0.01)
    raise AssertionError("the assignment did not settle")


async def create(broker, *names: str) -> None:
    for name in names:
        await broker.topics.create(name, 2)


def test_a_regex_resolves_to_the_topics_the_member_may_describe(tmp_path):
    async def scenario(broker):
        await create(broker, "tasks", "trades")
        epoch, names = await assigned_topics(broker, 0)
        group = broker.groups.groups["g"]
        assert group.regexes["t.*"].topics == ("tasks",)
        assert names == {"tasks"}
        # New topics: resolved by the next heartbeat, with its context (not at creation).
        await create(broker, "tables", "tolls")
        assert group.regexes["t.*"].topics == ("tasks",) and group.regexes_stale
        before = group.group_epoch
        epoch, names = await assigned_topics(broker, epoch)
        assert group.regexes["t.*"].topics == ("tables", "tasks") and not group.regexes_stale
        assert group.group_epoch == before + 1
        assert names == {"tables", "tasks"}
        # Nothing new: the next refresh changes nothing, no bump.
        await create(broker, "tombs")
        await assigned_topics(broker, epoch)
        assert group.regexes["t.*"].topics == ("tables", "tasks")
        assert group.group_epoch == before + 1

    secured(
        tmp_path,
        scenario,
        [acl(GROUP, "g", Op.READ), acl(TOPIC, "ta", Op.DESCRIBE, pattern=PatternType.PREFIXED)],
        **FAST,
    )


def test_without_an_authorizer_a_regex_gets_every_match_at_once(tmp_path):
    async def scenario(broker):
        await create(broker, "tasks", "trades")
        epoch, names = await assigned_topics(broker, 0)
        group = broker.groups.groups["g"]
        assert group.regexes["t.*"].topics == ("tasks", "trades")
        assert names == {"tasks", "trades"}
        await create(broker, "tables")
        # Resolved when the topic is created, no heartbeat needed.
        assert group.regexes["t.*"].topics == ("tables", "tasks", "trades")
        assert not group.regexes_stale
        _, names = await assigned_topics(broker, epoch)
        assert names == {"tables", "tasks", "trades"}

    with_broker(tmp_path, scenario, **FAST)


def test_a_periodic_refresh_brings_an_acl_change_to_the_regex(tmp_path, monkeypatch):
    """Kafka resolves regexes again every group.consumer.regex.refresh.interval.ms even without
    topic changes, so a DESCRIBE granted later reaches the subscription; a refresh that finds
    nothing new renews the resolutions' timestamps without a rebalance. The clock is moved
    forward (the interval is at least 10 s) and the periodic check runs every 50 ms."""
    from corral.groups import coordinator
    from corral.groups.consumer import protocol

    ahead = [0]
    real = coordinator.wall_ms
    for module in (coordinator, protocol):
        monkeypatch.setattr(module, "wall_ms", lambda: real() + ahead[0])
    monkeypatch.setattr(coordinator, "REGEX_REFRESH_CHECK_S", 0.05)
    interval = 10_000

    async def scenario(broker):
        await create(broker, "tasks", "trades")
        epoch, names = await assigned_topics(broker, 0)
        group = broker.groups.groups["g"]
        assert names == {"tasks"}
        await broker.authorizer.create([acl(TOPIC, "trades", Op.DESCRIBE)])
        before = group.group_epoch
        epoch, names = await assigned_topics(broker, epoch)
        assert names == {"tasks"} and group.group_epoch == before, "not due: nothing changes yet"
        assert not group.metadata_expired

        ahead[0] += interval
        for _ in range(100):  # the periodic check sends the group to the coordinator
            if group.metadata_expired:
                break
            await trio.sleep(0.02)
        assert group.metadata_expired
        epoch, names = await assigned_topics(broker, epoch)
        assert group.regexes["t.*"].topics == ("tasks", "trades")
        assert group.group_epoch == before + 1
        assert names == {"tasks", "trades"}

        ahead[0] += interval
        stamped = group.regexes["t.*"].timestamp_ms
        await assigned_topics(broker, epoch)
        assert group.regexes["t.*"].timestamp_ms >= stamped + interval, "renewed"
        assert group.group_epoch == before + 1, "the same topics: no rebalance"

    secured(
        tmp_path,
        scenario,
        [acl(GROUP, "g", Op.READ), acl(TOPIC, "ta", Op.DESCRIBE, pattern=PatternType.PREFIXED)],
        **FAST,
        **{"group.consumer.regex.refresh.interval.ms": interval},
    )
