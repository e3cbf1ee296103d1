"""A Python client of the faults API (http.py), on the standard library only:
`FaultsClient("http://127.0.0.1:9405").add(api="OffsetCommit", group="g",
error="COORDINATOR_LOAD_IN_PROGRESS", count=2)` returns the new fault's id; `list`, `get`,
`remove`, `clear` and `release` do what their names say (docs/faults.md). The broker faults have
a method each: `fence`, `rebalance`, `set_target`, `move_coordinator`, `unload`, `storage`,
`refuse_connections` (each adds the fault and returns its id).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

# A target assignment: member id -> topic -> partitions.
Target = dict[str, dict[str, list[int]]]


class FaultsApiError(Exception):
    """The API refused (status and its JSON reason) or could not be reached (status 0).
    `kafka_error`: Kafka's error name when the broker refused to act (an unknown group...)."""

    def __init__(self, status: int, reason: str, kafka_error: str | None = None):
        super().__init__(f"{status}: {reason}" if status else reason)
        self.status = status
        self.reason = reason
        self.kafka_error = kafka_error


class FaultsClient:
    def __init__(
        self,
        url: str,
        *,
        user: str | None = None,
        password: str | None = None,
        timeout_s: float = 10.0,
    ):
        """`url`: the faults listener ("http://host:port", "host:port"); `user` and
        `password`: HTTP Basic credentials, needed when the broker has an authorizer."""
        if "://" not in url:
            url = f"http://{url}"
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._auth = None
        if user is not None:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            self._auth = f"Basic {token}"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request; the decoded JSON answer. Raises FaultsApiError."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self._auth:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            kafka_error = None
            try:
                answer = json.loads(e.read())
                reason = answer.get("error", e.reason)
                kafka_error = answer.get("kafka_error")
            except (ValueError, AttributeError):
                reason = str(e.reason)
            raise FaultsApiError(e.code, reason, kafka_error) from None
        except (urllib.error.URLError, OSError) as e:
            raise FaultsApiError(0, f"cannot reach {self.url}: {e}") from None

    def list(self) -> list[dict[str, Any]]:
        faults: list[dict[str, Any]] = self.call("GET", "/faults")["faults"]
        return faults

    def get(self, fault_id: int) -> dict[str, Any]:
        fault: dict[str, Any] = self.call("GET", f"/faults/{fault_id}")
        return fault

    def add(self, spec: dict[str, Any] | None = None, **fields: Any) -> int:
        """Adds a fault (docs/faults.md: a dict, or its fields as keywords); returns its id."""
        return int(self.call("POST", "/faults", {**(spec or {}), **fields})["id"])

    def remove(self, fault_id: int) -> None:
        self.call("DELETE", f"/faults/{fault_id}")

    def clear(self) -> int:
        return int(self.call("DELETE", "/faults")["removed"])

    def release(self, fault_id: int) -> int:
        return int(self.call("POST", f"/faults/{fault_id}/release")["released"])

    # Broker faults (docs/faults.md): each adds one and returns its id.

    def fence(self, group: str, member: str) -> int:
        """Fences a consumer group's member, or expires a classic member's session."""
        return self.add(group=group, member=member, fence=True)

    def rebalance(self, group: str) -> int:
        return self.add(group=group, rebalance=True)

    def set_target(self, group: str, target: Target) -> int:
        """Sets a consumer group's target assignment: {member id: {topic: [partitions]}}."""
        return self.add(group=group, target=target)

    def move_coordinator(
        self, group: str, error: str = "NOT_COORDINATOR", duration_ms: int | None = None
    ) -> int:
        """Every request naming `group` but FindCoordinator is answered `error` for a while."""
        return self.add(group=group, coordinator=error, duration_ms=duration_ms)

    def unload(self, group: str, duration_ms: int | None = None) -> int:
        """Unloads the group's coordinator shard; it loads again when the fault ends."""
        return self.add(group=group, unload=True, duration_ms=duration_ms)

    def storage(
        self,
        *,
        disk_full: bool = False,
        failing_fsyncs: int = 0,
        fsync_delay_ms: int = 0,
        duration_ms: int | None = None,
    ) -> int:
        return self.add(
            disk_full=disk_full or None,
            failing_fsyncs=failing_fsyncs or None,
            fsync_delay_ms=fsync_delay_ms or None,
            duration_ms=duration_ms,
        )

    def refuse_connections(
        self, duration_ms: int | None = None, listener: str | None = None
    ) -> int:
        return self.add(refuse_connections=True, duration_ms=duration_ms, listener=listener)
