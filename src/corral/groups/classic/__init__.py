"""Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): `state` holds a group and its
members, `protocol` the state machine that runs them (joins, rebalances, syncs), `membership`
heartbeats and leaves."""

from corral.groups.classic.membership import ClassicMembership
from corral.groups.classic.protocol import ClassicProtocol, JoinRequest, join_error, sync_error
from corral.groups.classic.state import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    ClassicMember,
    ClassicState,
)

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ClassicGroup",
    "ClassicMember",
    "ClassicMembership",
    "ClassicProtocol",
    "ClassicState",
    "JoinRequest",
    "join_error",
    "sync_error",
]
