"""The group coordinator's event counters (Kafka's GroupCoordinatorMetrics sensors), counted where
the events happen and read when /metrics is scraped (corral/observability/metrics.py). Gauges
(groups by state, members, offsets) are not kept here: they are computed from the groups at
scrape time."""

from __future__ import annotations

from corral.clock import wall_ms
from corral.observability.durations import Durations


class GroupMetrics:
    def __init__(self) -> None:
        # Kafka's sensors: OffsetCommits (offsets committed), OffsetExpired, OffsetDeletions,
        # CompletedRebalances (classic groups: a new generation) and ConsumerGroupRebalances
        # (consumer groups: a group epoch bump).
        self.offset_commits = 0
        self.offset_expirations = 0
        self.offset_deletions = 0
        self.classic_rebalances = 0
        self.consumer_rebalances = 0
        # ShareGroupRebalances: a share group's epoch bump.
        self.share_rebalances = 0
        # corral only: a classic group's join phase (PreparingRebalance to its new generation),
        # and the assignors' time computing consumer groups' target assignments.
        self.rebalance_seconds = Durations()
        self.assignor_seconds = Durations()

    def classic_rebalanced(self, preparing_since_ms: int | None, members: bool) -> None:
        """A classic group completes its join phase, in PreparingRebalance since then; a
        rebalance when the new generation has members."""
        if members:
            self.classic_rebalances += 1
            if preparing_since_ms is not None:
                self.rebalance_seconds.observe(max(wall_ms() - preparing_since_ms, 0) / 1000)
