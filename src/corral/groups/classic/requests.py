"""What classic requests ask and the error answers they get, independent of their versions (the
handlers in handlers/classic.py shape them per version)."""

from __future__ import annotations

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


class JoinRequest:
    """What JoinGroup asks, independent of its version."""

    __slots__ = (
        "group_id",
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "session_timeout_ms",
        "rebalance_timeout_ms",
        "protocol_type",
        "protocols",
        "require_known_member_id",
        "supports_skip_assignment",
        "reason",
    )

    def __init__(self, **fields: Any):
        for name in self.__slots__:
            setattr(self, name, fields[name])


def left(errors: list[ErrorCode], written: Later | None) -> Later:
    """A LeaveGroup's answer, (group error, member errors), once `written` (if any) is durable."""
    if written is None:
        return Later.of((ErrorCode.NONE, errors))
    return written.map(lambda error: (error, []) if error else (ErrorCode.NONE, errors))
