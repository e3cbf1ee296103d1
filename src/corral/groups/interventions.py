"""What an operator or a fault scenario does to a group by hand (docs/faults.md): fence a member
(a consumer-group member, or a classic member whose session is made to expire), force a
rebalance, set a consumer group's target assignment (as librdkafka's mock cluster can). Each is
what the coordinator itself does when the matching event happens, so clients see exactly what
they would see then: a fenced member gets UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH and rejoins; a
forced rebalance answers REBALANCE_IN_PROGRESS (classic) or moves every member to a new epoch
(consumer); a target set by hand is reconciled toward as a computed one is, until the next epoch
bump computes one again.

Each returns (error, message): NONE and "" when done."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.classic.state import ClassicGroup, ClassicState
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.storage import consumer_records as cr

if TYPE_CHECKING:
    from corral.groups.coordinator import GroupCoordinator
    from corral.groups.group import Group
    from corral.groups.shard import CoordinatorShard
    from corral.groups.storage.records import Record

Outcome = tuple[ErrorCode, str]
DONE: Outcome = (ErrorCode.NONE, "")


def fence_member(coordinator: GroupCoordinator, group_id: str, member_id: str) -> Outcome:
    """Removes the member as its session timeout would: a consumer-group member (or a classic
    member of a consumer group) is fenced; a classic group's member expires, which rebalances
    the group."""
    shard, group, error = _group(coordinator, group_id)
    if group is None:
        return error
    if isinstance(group, ConsumerGroup):
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, f"no member {member_id} in group {group_id}"
        shard.consumer.fence(group, member, "fenced by hand")
        return DONE
    if isinstance(group, ClassicGroup):
        classic = group.members.get(member_id)
        if classic is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, f"no member {member_id} in group {group_id}"
        shard.rebalance.events.classic_member_gone(group, classic, left=False)
        shard.rebalance.remove_member_and_update_group(group, classic)
        return DONE
    return _unsupported(group)


def force_rebalance(coordinator: GroupCoordinator, group_id: str) -> Outcome:
    """A classic group with members prepares a rebalance (its members are answered
    REBALANCE_IN_PROGRESS and rejoin); a consumer group's epoch is bumped (a new target, every
    member reconciles to the new epoch)."""
    shard, group, error = _group(coordinator, group_id)
    if group is None:
        return error
    if isinstance(group, ConsumerGroup):
        if group.deleting:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {group_id} is being deleted"
        epoch = cr.GroupEpoch(group_id, group.group_epoch + 1, group.metadata_hash)
        shard.consumer.writes.write(group_id, [epoch])
        shard.consumer.targets.maybe_offload(group)
        return DONE
    if isinstance(group, ClassicGroup):
        if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            shard.rebalance.prepare_rebalance(group, "forced by hand")
        elif group.state is not ClassicState.PREPARING_REBALANCE:
            return ErrorCode.NONE, f"group {group_id} is {group.state.value}: nothing to rebalance"
        return DONE
    return _unsupported(group)


def set_target(
    coordinator: GroupCoordinator,
    group_id: str,
    target: Mapping[str, Mapping[str, Iterable[int]]],
) -> Outcome:
    """Makes `target` (member id -> topic name -> partitions) the consumer group's target
    assignment at a new group epoch; members left out get nothing. Refused when a member is
    unknown, a topic or partition does not exist, or a partition is given twice."""
    shard, group, error = _group(coordinator, group_id)
    if group is None:
        return error
    if not isinstance(group, ConsumerGroup):
        return ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} is not a consumer group"
    topics = shard.consumer.topics
    seen: set[tuple[bytes, int]] = set()
    by_member: dict[str, dict[bytes, tuple[int, ...]]] = {m: {} for m in group.members}
    for member_id, assigned in target.items():
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID, f"no member {member_id} in group {group_id}"
        for name, partitions in assigned.items():
            topic = topics.topic(name)
            topic_id = topics.id_of(name)
            if topic is None or topic_id is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name}"
            ps = tuple(sorted(set(partitions)))
            for p in ps:
                if not 0 <= p < topic.partitions:
                    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}-{p}"
                if (topic_id, p) in seen:
                    return ErrorCode.INVALID_REQUEST, f"{name}-{p} is given to two members"
                seen.add((topic_id, p))
            if ps:
                by_member[member_id][topic_id] = ps
    epoch = group.group_epoch + 1
    records: list[Record] = [cr.GroupEpoch(group_id, epoch, group.metadata_hash)]
    records += [cr.TargetMember(group_id, m, ps) for m, ps in by_member.items()]
    records.append(cr.TargetEpoch(group_id, epoch, wall_ms()))
    shard.consumer.writes.write(group_id, records)
    return DONE


def _group(
    coordinator: GroupCoordinator, group_id: str
) -> tuple[CoordinatorShard, Group | None, Outcome]:
    shard = coordinator.shard_of(group_id)
    error = shard.availability()
    if error:
        return shard, None, (error, f"the coordinator of group {group_id} is not loaded")
    group = shard.groups.get(group_id)
    if group is None:
        return shard, None, (ErrorCode.GROUP_ID_NOT_FOUND, f"no group {group_id}")
    return shard, group, DONE


def _unsupported(group: Group) -> Outcome:
    return ErrorCode.GROUP_ID_NOT_FOUND, f"group {group.group_id} is a {group.type} group"
