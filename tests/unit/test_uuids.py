"""corral.uuids: Kafka's Uuid text (URL-safe base64, no padding) and its random ids."""

from __future__ import annotations

import base64
import uuid

from hypothesis import given
from hypothesis import strategies as st

from corral.uuids import random_uuid, random_uuid_text, uuid_text


@given(st.binary(min_size=16, max_size=16))
def test_text_is_kafkas(raw):
    text = uuid_text(uuid.UUID(bytes=raw))
    assert len(text) == 22 and "=" not in text
    assert base64.urlsafe_b64decode(text + "==") == raw


def test_known_text():
    # Kafka's UuidTest: new Uuid(0L, 1L).toString() is "AAAAAAAAAAAAAAAAAAAAAQ".
    assert uuid_text(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_random_ids_never_start_with_a_dash():
    texts = [random_uuid_text() for _ in range(5000)]  # ~1 in 64 would without the redraw
    assert not [t for t in texts if t.startswith("-")]
    assert len(set(texts)) == len(texts)
    assert random_uuid().version == 4
