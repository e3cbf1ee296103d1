"""The topics in a classic "consumer" member's subscription (ConsumerProtocolSubscription).

Only the topic list is read: the coordinator needs it for OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC)
and for offset expiry. Every version (0-3) starts with int16 version, then an int32-counted array
of int16-length strings; later fields are the client's business.
"""

from __future__ import annotations

import struct


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of one subscription, or None when the bytes are not a consumer subscription."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        if count < 0 or count > len(metadata):
            return None
        pos, topics = 6, set()
        for _ in range(count):
            (size,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if size < 0 or pos + size > len(metadata):
                return None
            topics.add(metadata[pos:pos + size].decode())
            pos += size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
