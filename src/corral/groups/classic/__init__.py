"""Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): `state` holds a group and its
members, `protocol` the state machine that runs them."""

from .protocol import ClassicProtocol, JoinRequest, join_error, sync_error
from .state import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicMember, ClassicState

__all__ = ["CONSUMER_PROTOCOL_TYPE", "ClassicGroup", "ClassicMember", "ClassicProtocol",
           "ClassicState", "JoinRequest", "join_error", "sync_error"]
