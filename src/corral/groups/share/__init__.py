"""Share groups (KIP-932): the group side. Members, epochs and the `simple` assignor's targets
(protocol.py, assignor.py), the group in memory (state.py) and the replay of its records
(replay.py). The delivery of records to members (ShareFetch, ShareAcknowledge, in-flight state)
is src/corral/shares/."""

from corral.groups.share.protocol import ShareGroups, ShareHeartbeat
from corral.groups.share.state import ShareGroup, ShareMember

__all__ = ["ShareGroup", "ShareGroups", "ShareHeartbeat", "ShareMember"]
