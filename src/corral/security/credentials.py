"""Users' SCRAM credentials, kept durably in the data dir (what Kafka keeps in its metadata log as
UserScramCredentialRecords), changed by AlterUserScramCredentials and read by SASL.

`scram-credentials.json` holds, per user and mechanism, Kafka's stored credential (salt, stored
key, server key, iterations; base64), never a password or salted password. It is replaced
atomically, with owner-only permissions, and fsynced before a change is answered; read at
startup. Changes are rare: one whole-file write each, serialized by a lock, in a worker thread.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import trio

from corral.partitions.files import replace_durably
from corral.security.scram import MECHANISMS, Credential, Mechanism, password_matches

log = logging.getLogger("corral.security.credentials")

FILE = "scram-credentials.json"


def _encode(stored: Credential) -> dict:
    return {
        "salt": base64.b64encode(stored.salt).decode(),
        "stored_key": base64.b64encode(stored.stored_key).decode(),
        "server_key": base64.b64encode(stored.server_key).decode(),
        "iterations": stored.iterations,
    }


def _decode(entry: dict) -> Credential:
    return Credential(
        base64.b64decode(entry["salt"]),
        base64.b64decode(entry["stored_key"]),
        base64.b64decode(entry["server_key"]),
        int(entry["iterations"]),
    )


# PLAIN checks waiting for the one thread that runs them; more fail at once.
PLAIN_BACKLOG = 32
# What an unknown user's PLAIN password is hashed against (see password_matches).
_UNKNOWN_USER = Credential(b"corral-unknown-user", b"", b"", 4096)


class Credentials:
    def __init__(self, data_dir: Path):
        self.path = data_dir / FILE
        # user -> mechanism name -> credential
        self.users: dict[str, dict[str, Credential]] = {}
        self._lock = trio.Lock()
        self._checks = trio.CapacityLimiter(1)
        if self.path.exists():
            stored = json.loads(self.path.read_text())
            try:
                self.users = {
                    user: {
                        name: _decode(entry)
                        for name, entry in mechanisms.items()
                        if name in MECHANISMS
                    }
                    for user, mechanisms in stored["users"].items()
                }
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise ValueError(f"malformed entry ({type(e).__name__}: {e})") from None

    def get(self, user: str, mechanism: Mechanism) -> Credential | None:
        return self.users.get(user, {}).get(mechanism.name)

    def has(self, user: str, mechanism: Mechanism) -> bool:
        return self.get(user, mechanism) is not None

    def password_matches(self, user: str, password: str) -> bool:
        """Whether `password` is the user's under any SCRAM mechanism it has (SASL/PLAIN).
        Costs a PBKDF2 of the credential's iterations each (milliseconds); an unknown user costs
        one too, so that the time taken does not tell which users exist."""
        stored = self.users.get(user)
        if not stored:
            password_matches(MECHANISMS["SCRAM-SHA-256"], _UNKNOWN_USER, password)
            return False
        return any(
            password_matches(MECHANISMS[name], credential, password)
            for name, credential in stored.items()
        )

    async def check_password(self, user: str, password: str) -> bool:
        """password_matches off the event loop (hashlib releases the GIL), one check at a time:
        unauthenticated clients retrying PLAIN cost at most one core. Past PLAIN_BACKLOG checks
        waiting, a check fails at once, so a flood cannot queue real logins behind it for ever."""
        if self._checks.statistics().tasks_waiting >= PLAIN_BACKLOG:
            return False
        return await trio.to_thread.run_sync(
            self.password_matches, user, password, limiter=self._checks
        )

    async def alter(
        self,
        deletions: list[tuple[str, Mechanism]],
        upsertions: list[tuple[str, Mechanism, Credential]],
    ) -> None:
        """Applies the changes once they are durable (raises OSError, leaving them unapplied)."""
        async with self._lock:
            users = {user: dict(mechanisms) for user, mechanisms in self.users.items()}
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism.name, None)
            for user, mechanism, stored in upsertions:
                users.setdefault(user, {})[mechanism.name] = stored
            users = {user: mechanisms for user, mechanisms in users.items() if mechanisms}
            text = json.dumps(
                {
                    "users": {
                        user: {name: _encode(stored) for name, stored in m.items()}
                        for user, m in users.items()
                    }
                },
                indent=1,
                sort_keys=True,
            )
            await trio.to_thread.run_sync(replace_durably, self.path, text, 0o600)
            self.users = users
        for user, mechanism in deletions:
            log.info("SCRAM credential of user %s for %s deleted", user, mechanism.name)
        for user, mechanism, stored in upsertions:
            log.info(
                "SCRAM credential of user %s for %s set (%d iterations)",
                user,
                mechanism.name,
                stored.iterations,
            )
