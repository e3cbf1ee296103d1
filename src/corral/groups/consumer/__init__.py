"""KIP-848 consumer groups: state (state.py), reconciliation (reconcile.py), target assignment
(targets/), the write path (writes.py), ConsumerGroupHeartbeat
(protocol.py) and classic members of consumer groups (classic_members.py)."""

from corral.groups.consumer.member_state import ConsumerMember
from corral.groups.consumer.members import GroupError, HeartbeatRequest
from corral.groups.consumer.reconcile import MemberState, Reconciled, reconcile
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.consumer.targets.inputs import TopicImage

__all__ = [
    "ConsumerGroup",
    "ConsumerMember",
    "GroupError",
    "HeartbeatRequest",
    "MemberState",
    "Reconciled",
    "TopicImage",
    "reconcile",
]
