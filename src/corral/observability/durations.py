"""A fixed-bucket histogram of durations, kept by whoever times something (the log store's
fsyncs, the group coordinator's rebalances and assignors) and read when /metrics is scraped."""

from __future__ import annotations

import bisect

# Upper bounds in seconds (a last bucket is over them).
DURATION_BOUNDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Durations:
    """Counts per bucket (not cumulative) and their sum."""

    __slots__ = ("buckets", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * (len(DURATION_BOUNDS) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect.bisect_left(DURATION_BOUNDS, seconds)] += 1
        self.sum += seconds
