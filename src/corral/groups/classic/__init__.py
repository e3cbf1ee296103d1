"""Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): `state` holds a group and its
members, `protocol` answers the requests (`ClassicGroups`), `rebalance` runs the machine over time
(rebalances, timers, the group's record), `requests` holds what requests ask and their errors."""

from corral.groups.classic.requests import JoinRequest, join_error, sync_error
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
    "ClassicState",
    "JoinRequest",
    "join_error",
    "sync_error",
]
