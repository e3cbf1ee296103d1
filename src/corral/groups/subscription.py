"""The topics in a classic "consumer" member's subscription (ConsumerProtocolSubscription).

Only the topic list is used: the coordinator needs it for OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC)
and for offset expiry. The compiled core decodes it with the kafka-protocol crate's schema.
"""

from __future__ import annotations

from corral import _core


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of one subscription, or None when the bytes are not a consumer subscription."""
    try:
        return set(_core.decode_consumer_subscription(metadata)[1])
    except ValueError:
        return None
