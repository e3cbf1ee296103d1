"""What a consumer group tells the network thread's view (rust/groups/consumer_heartbeat_view.rs):
enough to answer its members' steady heartbeats, to judge their commits and to move a member
to a new target epoch (rust/groups/consumer_epoch_moves.rs). `ConsumerGroup` calls these as its
records are applied and its flags change; `apply_moves` takes back the moves the network
thread made."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from corral.groups.consumer.assignment_records import EMPTY_ASSIGNMENT
from corral.groups.consumer.reconcile import MemberState, Reconciled
from corral.groups.storage import consumer_records as cr

if TYPE_CHECKING:
    from corral.groups.consumer.member_state import ConsumerMember
    from corral.groups.consumer.state import ConsumerGroup


def mirror_group(group: ConsumerGroup) -> None:
    """The epochs; whether heartbeats must reach the coordinator whatever they say (a
    subscribed topic changed so the next heartbeat may bump the epoch, or the group is being
    deleted; not while a target is computed in a worker thread: meanwhile members reconcile
    toward the current target, as the network thread answers them) and whether commits must
    (being deleted); when the next target may be computed (targets/computation.py's
    `_may_compute`); the lowest target epoch members may be moved to."""
    view = group.view
    if view is None:
        return
    last = max(group.assignment_timestamp_ms, group.assignment_failed_ms)
    interval = group.assignment_interval_ms()
    due = None if last == 0 or interval == 0 else last + interval
    busy = group.metadata_expired or group.deleting
    view.set_group(
        group.group_id,
        group.group_epoch,
        group.assignment_epoch,
        busy,
        group.deleting,
        due,
        group.assignment_timestamp_ms,
        group.moves_from,
    )


def mirror_metadata(group: ConsumerGroup, member: ConsumerMember) -> None:
    if group.view is not None:
        # A classic member's Heartbeat moves its session by its own timeout (none: Python's).
        timeout = member.session_timeout_ms
        group.view.set_member(
            group.group_id,
            member.member_id,
            member.instance_id,
            member.client_id,
            member.client_host,
            member.classic is None,
            timeout if timeout is not None and timeout > 0 else None,
        )


def mirror_epoch(
    group: ConsumerGroup, member: ConsumerMember, record: cr.CurrentAssignment | None = None
) -> None:
    """The member's epoch and state, and its record's value when the network thread may move
    it to a new target epoch: STABLE, nothing pending, exactly its target, every assignment
    epoch written (then a move rewrites only the record's two epochs)."""
    if group.view is None:
        return
    current = member.current
    stable = current.state is MemberState.STABLE
    movable = None
    # No target yet is an empty one (ConsumerGroup.target_of): most members of a group bigger
    # than its partition count have none, and move as often as the others.
    target = group.target.get(member.member_id, EMPTY_ASSIGNMENT)
    if (
        record is not None
        and stable
        and not current.pending_revocation
        and current.assigned is target
        and all(
            len(record.assigned_epochs.get(t, ())) == len(ps) for t, ps in record.assigned.items()
        )
    ):
        movable = cr.value_of(record)
    group.view.set_member_epoch(group.group_id, member.member_id, current.epoch, stable, movable)


def apply_moves(
    group: ConsumerGroup, moves: list[tuple[str, int, int]]
) -> list[tuple[str, int, int]]:
    """The network thread moved these members (member id, epoch, previous epoch), their
    records written and the view up to date: memory follows, the counts once for all (a
    target moves most of a big group's members). Returns the moves applied (a member no
    longer as its move found it, gone since, is left out)."""
    applied = []
    members, stable = group.members, MemberState.STABLE
    for move in moves:
        member_id, epoch, previous = move
        member = members.get(member_id)
        if member is None:
            continue
        c = member.current
        if c.epoch != previous or c.state is not stable:
            continue
        member.current = Reconciled(
            epoch, previous, stable, c.assigned, c.pending_revocation, c.epochs
        )
        if c.assigned:  # the epochs of the partitions it owns
            group._own(member)
        applied.append(move)
    for counts in (group.epoch_counts, group.stable_counts):
        for epoch, n in Counter(e for _, e, _ in applied).items():
            counts[epoch] += n
        for previous, n in Counter(p for _, _, p in applied).items():
            left = counts[previous] - n
            if left:
                counts[previous] = left
            else:
                del counts[previous]  # no count is kept at zero
    return applied
