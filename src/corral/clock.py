"""Wall-clock time as Kafka records it: milliseconds since the epoch (commit and expiry times,
group state timestamps, LogAppendTime, retention). Deadlines use the monotonic timer wheel."""

from __future__ import annotations

import time


def wall_ms() -> int:
    return int(time.time() * 1000)
