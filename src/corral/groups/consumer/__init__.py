"""KIP-848 consumer groups: state (state.py), reconciliation (reconcile.py), target assignment
(target.py) and the protocol the coordinator runs (protocol.py)."""

from .members import GroupError, HeartbeatRequest
from .protocol import ConsumerProtocol
from .reconcile import MemberState, Reconciled, reconcile
from .state import ConsumerGroup, ConsumerMember
from .target import TopicImage

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
