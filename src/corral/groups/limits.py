"""The group coordinator's bounds, read once from the broker's settings (Kafka's names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class GroupLimits:
    min_session_ms: int  # group.min.session.timeout.ms
    max_session_ms: int  # group.max.session.timeout.ms
    max_rebalance_ms: int  # corral.group.max.rebalance.timeout.ms
    initial_delay_ms: int  # group.initial.rebalance.delay.ms
    max_size: int  # group.max.size (classic groups; consumer groups read theirs at each use)

    @classmethod
    def of(cls, settings: Any) -> GroupLimits:
        return cls(
            settings["group.min.session.timeout.ms"],
            settings["group.max.session.timeout.ms"],
            settings["corral.group.max.rebalance.timeout.ms"],
            settings["group.initial.rebalance.delay.ms"],
            settings["group.max.size"],
        )

    def rebalance_wait_ms(self, timeout_ms: int) -> int:
        """How long a rebalance waits on a member that asked for `timeout_ms` (its rebalance
        timeout): at most corral.group.max.rebalance.timeout.ms."""
        return min(max(timeout_ms, 0), self.max_rebalance_ms)
