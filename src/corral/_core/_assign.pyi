"""Type stubs for `corral._core._assign`, the built-in assignors in Cython
(src/corral/assignors/_assign.pyx, linked into `_core` by build.rs and registered by rust/lib.rs).

Use them through `corral.assignors` (UniformAssignor, RangeAssignor). `members` maps member id to
an object with `subscribed_topic_ids`, `assignment` (the previous target: topic id -> partitions)
and `instance_id`, like `corral.assignors.MemberSpec`; `homogeneous` trusts that every member has
the first member's subscription. A subscribed topic missing from `partition_counts` (or with a
negative count) raises LookupError(topic id).
"""

from collections.abc import Hashable, Mapping
from typing import Any

def uniform(members: Mapping[str, Any], homogeneous: bool,
            partition_counts: Mapping[Hashable, int]) -> dict[str, dict[Hashable, tuple[int, ...]]]: ...
def range_(members: Mapping[str, Any], homogeneous: bool,
           partition_counts: Mapping[Hashable, int]) -> dict[str, dict[Hashable, tuple[int, ...]]]: ...
def fallback_count() -> int: ...
