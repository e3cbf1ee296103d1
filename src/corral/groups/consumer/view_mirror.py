"""What a consumer group tells the network thread's view (rust/consumer_heartbeat_view.rs):
enough to answer its members' steady heartbeats, to judge their commits and to move a member
to a new target epoch (rust/consumer_epoch_moves.rs). `ConsumerGroup` calls these as its
records are applied and its flags change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..storage import consumer_records as cr
from .assignment_records import EMPTY_ASSIGNMENT
from .reconcile import MemberState

if TYPE_CHECKING:
    from .state import ConsumerGroup, ConsumerMember


def mirror_group(group: "ConsumerGroup") -> None:
    """The epochs; whether heartbeats must reach the coordinator whatever they say (a target
    computation is running, a subscribed topic changed so the next heartbeat may bump the
    epoch, or the group is being deleted) and whether commits must (being deleted); when the
    next target may be computed (target_computation.py's `_may_compute`); the lowest target
    epoch members may be moved to."""
    view = group.view
    if view is None:
        return
    last = max(group.assignment_timestamp_ms, group.assignment_failed_ms)
    interval = group.assignment_interval_ms()
    due = None if last == 0 or interval == 0 else last + interval
    busy = group.computing_epoch is not None or group.metadata_expired or group.deleting
    view.set_group(group.group_id, group.group_epoch, group.assignment_epoch, busy,
                   group.deleting, due, group.assignment_timestamp_ms, group.moves_from)


def mirror_metadata(group: "ConsumerGroup", member: "ConsumerMember") -> None:
    if group.view is not None:
        # A classic member's Heartbeat moves its session by its own timeout (none: Python's).
        timeout = member.session_timeout_ms
        group.view.set_member(group.group_id, member.member_id, member.instance_id,
                              member.client_id, member.client_host, member.classic is None,
                              timeout if timeout is not None and timeout > 0 else None)


def mirror_epoch(group: "ConsumerGroup", member: "ConsumerMember",
                 record: cr.CurrentAssignment | None = None) -> None:
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
    if record is not None and stable and not current.pending_revocation and \
            current.assigned is target and \
            all(len(record.assigned_epochs.get(t, ())) == len(ps) for t, ps in record.assigned.items()):
        movable = cr.value_of(record)
    group.view.set_member_epoch(group.group_id, member.member_id, current.epoch, stable, movable)
