"""A Python client of the faults API (http.py), on the standard library only:
`FaultsClient("http://127.0.0.1:9405").add(api="OffsetCommit", group="g",
error="COORDINATOR_LOAD_IN_PROGRESS", count=2)` returns the new fault's id; `list`, `get`,
`remove`, `clear` and `release` do what their names say (docs/faults.md).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any


class FaultsApiError(Exception):
    """The API refused (status and its JSON reason) or could not be reached (status 0)."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"{status}: {reason}" if status else reason)
        self.status = status
        self.reason = reason


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
            try:
                reason = json.loads(e.read()).get("error", e.reason)
            except (ValueError, AttributeError):
                reason = str(e.reason)
            raise FaultsApiError(e.code, reason) from None
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
