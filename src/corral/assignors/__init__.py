"""Server-side partition assignors (KIP-848): the `Assignor` protocol, the built-ins `uniform`
and `range` (Cython, `corral._core._assign`), the registry behind `group.consumer.assignors`,
and a safe way to run an assignor a user wrote in Python.

    registry = AssignorRegistry.from_setting(settings["group.consumer.assignors"])
    group = GroupSpec.of({"m1": MemberSpec(frozenset({topic_id}))})
    target = run_assignor(registry.default, "my-group", group, {topic_id: 6})
    # None: the computation failed (logged); keep the previous target assignment

The built-ins return a TargetAssignment, a compact read-only mapping (member id ->
MemberAssignment, topic id -> ascending tuple) that makes Python objects only when read; pass its
members back as the next computation's previous assignments (MemberSpec.assignment) and they are
read from its arrays. The built-ins hold the GIL only while they read the group and make the
result, so a large group can be assigned in a worker thread
(`trio.to_thread.run_sync(run_assignor, ...)`).
"""

from corral._core._assign import MemberAssignment, TargetAssignment
from corral.assignors.builtin import RangeAssignor, UniformAssignor
from corral.assignors.registry import (
    BUILTIN_ASSIGNORS,
    DEFAULT_SETTING,
    AssignorConfigError,
    AssignorRegistry,
    is_builtin,
    load_assignor,
    setting_entries,
)
from corral.assignors.spec import (
    Assignor,
    AssignorError,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    Partitions,
    SubscriptionType,
    TopicId,
    subscription_type_of,
)
from corral.assignors.validate import InvalidAssignment, run_assignor, validate_assignment

__all__ = [
    "Assignor",
    "AssignorConfigError",
    "AssignorError",
    "AssignorRegistry",
    "BUILTIN_ASSIGNORS",
    "DEFAULT_SETTING",
    "GroupAssignment",
    "GroupSpec",
    "InvalidAssignment",
    "MemberAssignment",
    "MemberSpec",
    "Partitions",
    "RangeAssignor",
    "SubscriptionType",
    "TargetAssignment",
    "TopicId",
    "UniformAssignor",
    "is_builtin",
    "load_assignor",
    "run_assignor",
    "setting_entries",
    "subscription_type_of",
    "validate_assignment",
]
