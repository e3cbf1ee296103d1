"""What a ConsumerGroupHeartbeat answer carries besides the member's state: its error form, its
assignment, and its heartbeat interval, which corral adapts (corral only).

Kafka always answers the group's `consumer.heartbeat.interval.ms` (5 s by default), so a member
with work to do (partitions to revoke or to take, a target it has not reached) comes back one
whole interval later for each step of a rebalance. corral answers such a member
`corral.consumer.reconciling.heartbeat.interval.ms` instead (unmodified clients follow the
interval they are given), bounded so that a storm of reconciling members cannot make more than
`corral.consumer.reconciling.heartbeat.max.rate` heartbeats a second per group, and never more
than the group's own interval. A member STABLE at the group epoch gets the group's interval, as
in Kafka, unless this very heartbeat moved it there (joined, revoked, took partitions) and the
group's target was computed less than one group interval ago: a group that just changed tends
to go on changing (a deployment's members join over seconds), and a member that looks done,
above all the first member of a new group, which holds every partition, is the one the next
target takes partitions from. Its next heartbeat, if nothing changed meanwhile, gets the group's
interval (from the network thread once the group is settled: the coordinator answers a steady
heartbeat exactly as the network thread does).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.groups.consumer.reconcile import MemberState, Partitions
from corral.groups.messages import (
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseAssignment,
)

if TYPE_CHECKING:
    from corral.config.settings import Settings
    from corral.groups.consumer.member_state import ConsumerMember
    from corral.groups.consumer.state import ConsumerGroup


def error_answer(code: ErrorCode, message: str = "") -> ConsumerGroupHeartbeatResponse:
    return {
        "error_code": code,
        "error_message": message or None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def assignment_answer(assigned: Partitions) -> ConsumerGroupHeartbeatResponseAssignment:
    return {
        "topic_partitions": [
            {"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assigned.items())
        ]
    }


def adaptive_interval_ms(
    group_ms: int,
    short_ms: int,
    max_rate: int,
    *,
    stable: bool,
    behind: bool,
    reconciling: int,
    due_in_ms: int | None,
    jitter: float,
    settling: bool = False,
    members: int = 0,
) -> int:
    """The interval to answer, the rule as a pure function. `group_ms`: the group's interval;
    `short_ms`, `max_rate`: the two settings (`short_ms` 0, or not below `group_ms`, turns the
    rule off); `stable`: the member is STABLE after this heartbeat; `behind`: its epoch is below
    the group epoch; `reconciling`: how many of the group's members have work; `due_in_ms`: when
    the member is behind because the next target waits for KIP-1263 batching, how long until it
    may be computed (else None); `jitter` in [0, 1); `settling`: this heartbeat moved the member
    and the group's target was computed less than `group_ms` ago; `members`: how many members
    the group has."""
    if short_ms <= 0 or short_ms >= group_ms:
        return group_ms
    if stable and not behind:
        if not settling:
            return group_ms
        reconciling = max(reconciling, members)  # any member may come back this soon
    # The bound: `reconciling` members coming back every `interval` make reconciling / interval
    # heartbeats a second, at most max_rate.
    interval = max(short_ms, -(-reconciling * 1000 // max_rate))
    if due_in_ms is not None and due_in_ms > interval:
        # Nothing changes for it before the batch is due: back just after, spread over one
        # bounded interval so that a batch of members does not come back all at once.
        interval = due_in_ms + int(jitter * interval)
    return min(interval, group_ms)


def heartbeat_interval_ms(
    group: ConsumerGroup,
    member: ConsumerMember,
    moved: bool,
    settings: Settings,
    group_setting: Callable[[str, str], int],
    now: int,
) -> int:
    """The interval of `member`'s answer, from the group as this heartbeat left it (its
    records applied, any offloaded computation started); `moved`: the heartbeat changed the
    member's assignment or epoch. O(1): the group counts the members STABLE at each epoch;
    every other member has work."""
    gid = group.group_id
    group_ms = group_setting(gid, "consumer.heartbeat.interval.ms")
    short_ms = settings["corral.consumer.reconciling.heartbeat.interval.ms"]
    if short_ms <= 0 or short_ms >= group_ms:
        return group_ms
    current = member.current
    behind = current.epoch < group.group_epoch
    settling = moved and now < group.assignment_timestamp_ms + group_ms
    due_in_ms = None
    if behind and group.assignment_epoch < group.group_epoch and group.computing_epoch is None:
        interval = group_setting(gid, "consumer.assignment.interval.ms")
        last = max(group.assignment_timestamp_ms, group.assignment_failed_ms)
        due_in_ms = last + interval - now
    reconciling = len(group.members) - group.stable_counts.get(group.group_epoch, 0)
    return adaptive_interval_ms(
        group_ms,
        short_ms,
        settings["corral.consumer.reconciling.heartbeat.max.rate"],
        stable=current.state is MemberState.STABLE,
        behind=behind,
        reconciling=reconciling,
        due_in_ms=due_in_ms,
        jitter=random.random(),
        settling=settling,
        members=len(group.members),
    )
