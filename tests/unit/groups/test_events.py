"""`commit_rejected` group events aggregated per interval in process (corral.groups.events): the
aggregation is bounded. (Refused commits over TCP, read back from `__corral_analytics`:
tests/wire/test_commit_rejected.py.)"""

from __future__ import annotations

from corral.errors import ErrorCode
from corral.groups.events import MAX_REJECTED_KEYS, AnalyticsEvents


def test_aggregation_is_bounded(caplog):
    events = AnalyticsEvents(None)
    written: list[tuple[dict, int]] = []
    events.sink = lambda event, time_ms=None: written.append((event, time_ms))
    for i in range(MAX_REJECTED_KEYS + 5):
        events.commit_rejected(f"g{i}", "classic", ErrorCode.ILLEGAL_GENERATION)
    for _ in range(3):
        events.commit_rejected("g0", "classic", ErrorCode.ILLEGAL_GENERATION)
    events.commit_rejected("nowhere", None, ErrorCode.GROUP_ID_NOT_FOUND)  # over the bound too
    events.flush_rejected()
    assert len(written) == MAX_REJECTED_KEYS
    first, time_ms = written[0]
    assert first["group_id"] == "g0" and first["count"] == 4 and first["protocol"] == "classic"
    assert time_ms <= first["last_ms"]
    assert "6 refused offset commits were not recorded" in caplog.text
    written.clear()
    events.flush_rejected()
    assert written == []
