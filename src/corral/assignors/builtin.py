"""The built-in assignors, `uniform` and `range`: thin classes over the Cython in _assign.pyx
(compiled into `corral._core._assign`; its docstring describes both algorithms)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from corral._core import _assign
from corral.assignors.spec import (
    AssignorError,
    GroupAssignment,
    GroupSpec,
    SubscriptionType,
    TopicId,
)


class _Builtin:
    name: str
    _algorithm: Callable[[Mapping, bool, Mapping], GroupAssignment]

    def assign(self, group: GroupSpec, partition_counts: Mapping[TopicId, int]) -> GroupAssignment:
        homogeneous = group.subscription_type is SubscriptionType.HOMOGENEOUS
        try:
            return self._algorithm(group.members, homogeneous, partition_counts)
        except LookupError as e:
            topic = e.args[0] if e.args else "?"
            raise AssignorError(
                f"members subscribe to topic {topic!r}, which has no partition "
                "count (does it exist?)"
            ) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class UniformAssignor(_Builtin):
    """Kafka's `uniform`: balance first (per topic, and per member within each set of members
    with the same subscription), then stickiness."""

    name = "uniform"
    _algorithm = staticmethod(_assign.uniform)


class RangeAssignor(_Builtin):
    """Kafka's `range`: the same assignment as Kafka's RangeAssignor for the same input."""

    name = "range"
    _algorithm = staticmethod(_assign.range_)
