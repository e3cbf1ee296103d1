"""Kafka's Uuid: random ids (topic ids, the cluster id, member ids the coordinator names) and
their text, URL-safe base64 without padding ("y1Z4a3NbQ2qJ0c5m7lJ0yA")."""

from __future__ import annotations

import base64
import uuid


def uuid_text(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def random_uuid() -> uuid.UUID:
    """As Kafka's Uuid.randomUuid(): never one whose text starts with "-" (it would read as an
    option on a command line). A version-4 uuid is never Kafka's reserved zero or one."""
    while True:
        value = uuid.uuid4()
        if not uuid_text(value).startswith("-"):
            return value


def random_uuid_text() -> str:
    return uuid_text(random_uuid())
