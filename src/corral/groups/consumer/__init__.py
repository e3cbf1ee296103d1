"""KIP-848 consumer groups: state (state.py), reconciliation (reconcile.py), target assignment
(target.py) and the protocol the coordinator runs (protocol.py)."""

from corral.groups.consumer.members import GroupError, HeartbeatRequest
from corral.groups.consumer.protocol import ConsumerProtocol
from corral.groups.consumer.reconcile import MemberState, Reconciled, reconcile
from corral.groups.consumer.state import ConsumerGroup, ConsumerMember
from corral.groups.consumer.target import TopicImage

__all__ = [
    "ConsumerGroup",
    "ConsumerMember",
    "ConsumerProtocol",
    "GroupError",
    "HeartbeatRequest",
    "MemberState",
    "Reconciled",
    "TopicImage",
    "reconcile",
]
