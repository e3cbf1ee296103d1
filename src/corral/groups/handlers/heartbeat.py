"""The Heartbeat API on the wire. The classic heartbeats the network thread's short path did not
answer (rust/short_paths/heartbeat.rs): the coordinator's error, encoded by the core."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.security.authorize import group_read

if TYPE_CHECKING:
    from corral import _core
    from corral._core import Request
    from corral.broker import Broker
    from corral.groups.messages import HeartbeatRequest


@handles(ApiKey.HEARTBEAT, 0, 4)
def heartbeat(broker: Broker, request: Request[HeartbeatRequest]) -> bytes:
    # A short path (rust/short_paths/mod.rs): decoded by the core, which answers the steady state
    # from the HeartbeatView itself; the rest comes here as a HeartbeatRequest (no dicts).
    # (Heartbeat's short path gives this type: no check on the path.)
    hb: _core.HeartbeatRequest = request.typed  # type: ignore[assignment]
    group_id = hb.group_id
    if not group_read(broker, request, group_id):
        return hb.respond(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return hb.respond(ErrorCode.INVALID_GROUP_ID)
    return hb.respond(
        broker.groups.heartbeat(group_id, hb.member_id, hb.group_instance_id, hb.generation_id)
    )
