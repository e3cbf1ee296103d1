"""What classic requests ask and the error answers they get, independent of their versions (the
handlers in handlers/join_group.py and its siblings shape them per version)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corral.errors import ErrorCode
from corral.later import Later


def join_error(code: ErrorCode, member_id: str = "") -> dict[str, Any]:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def sync_error(code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}


# Identity equality and hashing, as a plain class.
@dataclass(slots=True, kw_only=True, eq=False)
class JoinRequest:
    """What JoinGroup asks, independent of its version."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference.
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    supports_skip_assignment: bool
    reason: str | None


def left(errors: list[ErrorCode], written: Later | None) -> Later:
    """A LeaveGroup's answer, (group error, member errors), once `written` (if any) is durable."""
    if written is None:
        return Later.of((ErrorCode.NONE, errors))
    return written.map(lambda error: (error, []) if error else (ErrorCode.NONE, errors))
