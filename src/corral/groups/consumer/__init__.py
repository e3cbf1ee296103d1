"""KIP-848 consumer groups: state (state.py), reconciliation (reconcile.py), target assignment
(target.py) and the protocol the coordinator runs (protocol.py)."""

from .protocol import ConsumerProtocol, GroupError, HeartbeatRequest
from .reconcile import MemberState, Reconciled, reconcile
from .state import ConsumerGroup, ConsumerMember
from .target import TopicImage

__all__ = ["ConsumerGroup", "ConsumerMember", "ConsumerProtocol", "GroupError", "HeartbeatRequest",
           "MemberState", "Reconciled", "TopicImage", "reconcile"]
