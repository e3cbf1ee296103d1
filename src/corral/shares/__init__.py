"""Share groups (KIP-932): the delivery side. Each group's share partitions (manager.py,
partition.py, the in-flight window in the compiled core), their durable state in
`__share_group_state` (state_log.py), share sessions (sessions.py), and the ShareFetch and
ShareAcknowledge APIs. The group side (members, assignment) is groups/share/."""

from corral.shares.manager import SharePartitions

__all__ = ["SharePartitions"]
