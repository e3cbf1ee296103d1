"""The rules of `corral analyze` as pure functions (docs/analytics-rules.md).

Each function takes the rows of one key as plain lists sorted by time and returns plain rows
(NamedTuples), deterministically and without state, so the Spark job can apply them per
(group, topic, partition) with `applyInPandas` or plain Python, and be checked against them.

- samples: `[(time_ms, log_end_offset)]` of one partition.
- commits: `[(time_ms, committed_offset)]` of one group on that partition (equal times in log
  order: the last one is the committed offset at that time).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

# Burrow's StatusConstant (core/protocol/evaluator.go), ordered from best to worst.
OK, WARN, ERR, STOP, STALL, REWIND = 1, 2, 3, 4, 5, 6
STATUS_NAMES = {OK: "OK", WARN: "WARN", ERR: "ERR", STOP: "STOP", STALL: "STALL", REWIND: "REWIND"}

# Burrow's defaults: storage `intervals` (commits in the window and log-end samples kept) and the
# evaluator's `allowed-lag`.
BURROW_INTERVALS = 10
BURROW_ALLOWED_LAG = 0

Sample = tuple[int, int]
Commit = tuple[int, int]


def _time(row: Sample) -> int:
    return row[0]


def _offset(row: Sample) -> int:
    return row[1]


# -- Lag in seconds: Kafka Lag Exporter's lookup table ----------------------------------------
# Ported from seglo/kafka-lag-exporter
# src/main/scala/com/lightbend/kafkalagexporter/LookupTable.scala (MemoryTable.addPoint, lookup,
# predict; commit 3fcb3c79) and ConsumerGroupCollector.scala (lag in seconds = now - prediction).


def monotone_samples(samples: Iterable[Sample]) -> list[Sample]:
    """The samples Kafka Lag Exporter's table accepts: each strictly later than the last kept one
    and with an offset not below it (addPoint's OutOfOrder and NonMonotonic). A log end that went
    down (unclean truncation, topic re-created) is ignored until it passes its old high again;
    DeleteRecords moves the log start, never the log end."""
    kept: list[Sample] = []
    for t, off in samples:
        if kept and (t <= kept[-1][0] or off < kept[-1][1]):
            continue
        kept.append((t, off))
    return kept


def samples_known(samples: Sequence[Sample], time_ms: int) -> int:
    """How many samples were taken at or before `time_ms`."""
    return bisect_right(samples, time_ms, key=_time)


def _predict(offset: int, left: Sample, right: Sample) -> float:
    # LookupTable.predict: the line through left and right, solved for the time of `offset`.
    dx = right[0] - left[0]
    dy = right[1] - left[1]
    return right[0] - (right[1] - offset) * dx / dy


def offset_time(samples: Sequence[Sample], offset: int, known: int | None = None) -> float | None:
    """Time (ms) at which the log end reached `offset`, from the first `known` (default all)
    monotone samples; None with fewer than two (TooFewPoints).

    Between two samples: linear interpolation. On a flat stretch (no produce for a while) the
    offset maps to the LAST sample at that offset, as Kafka Lag Exporter (it takes the newest pair
    of points around the offset): the first record not yet consumed was produced after it, so a
    consumer caught up during a quiet period has no lag. Outside the samples: extrapolation along
    the line through the first and the last sample (Kafka Lag Exporter's `(points.head,
    points.last)`); where that line is flat, where Kafka Lag Exporter answers +-infinity, corral
    answers the first sample's time below it (a lower bound of the age) and the last one above.
    """
    n = len(samples) if known is None else known
    if n < 2:
        return None
    i = bisect_right(samples, offset, hi=n, key=_offset) - 1
    if 0 <= i < n - 1:  # samples[i].offset <= offset < samples[i + 1].offset
        return _predict(offset, samples[i], samples[i + 1])
    first, last = samples[0], samples[n - 1]
    if first[1] == last[1]:
        return float(first[0] if offset < first[1] else last[0])
    return _predict(offset, first, last)


def lag_seconds(
    samples: Sequence[Sample], committed: int, now_ms: int, known: int | None = None
) -> float | None:
    """Lag in seconds of a consumer at `committed` at time `now_ms`: now - time(committed), never
    negative. 0 when the committed offset is at (LagIsZero) or beyond (commits outran the
    sampling) the last known sample; None when it cannot be known (fewer than two samples)."""
    n = len(samples) if known is None else known
    if n == 0:
        return None
    if committed >= samples[n - 1][1]:
        return 0.0
    t = offset_time(samples, committed, n)
    if t is None:
        return None
    return max(0.0, (now_ms - t) / 1000)


# -- partition_lag ------------------------------------------------------------------------------


class LagRow(NamedTuple):
    time_ms: int
    committed_offset: int
    log_end_offset: int | None
    lag_records: int | None
    lag_seconds: float | None


def _event_times(
    commits: Sequence[Commit], samples: Sequence[Sample], at: Iterable[int]
) -> Iterator[tuple[int, int, int]]:
    """(time, commits known, samples known) at every distinct commit time, sample time and extra
    time in `at`, from the first commit on."""
    if not commits:
        return
    start = commits[0][0]
    times = {t for t, _ in commits}
    times.update(t for t, _ in samples if t >= start)
    times.update(t for t in at if t >= start)
    ci = si = 0
    for t in sorted(times):
        while ci < len(commits) and commits[ci][0] <= t:
            ci += 1
        while si < len(samples) and samples[si][0] <= t:
            si += 1
        yield t, ci, si


def partition_lag(
    commits: Sequence[Commit], samples: Iterable[Sample], at: Iterable[int] = ()
) -> list[LagRow]:
    """One row at each commit time and each sample time (and each time in `at`) from the first
    commit on, so lag refreshes when the log end moves, not only when a commit arrives.

    The log end at a time is the last sample at or before it (as Burrow and Kafka Lag Exporter:
    never interpolated), raised to the committed offset when the commit is ahead of it: a commit
    proves the log end reached it, so commits faster than the sampling give lag 0, never below.
    Before the first sample: log end and lags unknown (None)."""
    samples = monotone_samples(samples)
    rows = []
    for t, ci, si in _event_times(commits, samples, at):
        committed = commits[ci - 1][1]
        if si == 0:
            rows.append(LagRow(t, committed, None, None, None))
            continue
        log_end = max(samples[si - 1][1], committed)
        seconds = lag_seconds(samples, committed, t, si)
        rows.append(LagRow(t, committed, log_end, log_end - committed, seconds))
    return rows


# -- Burrow's evaluator -------------------------------------------------------------------------
# Ported from linkedin/Burrow core/internal/evaluator/caching.go (calculatePartitionStatus and its
# rules; commit ced55ba9), checked against the tables of caching_test.go.


class WindowCommit(NamedTuple):
    time_ms: int
    offset: int
    lag: int | None  # lag in records when committed; None: no log-end sample yet


def lag_always_not_zero(window: Sequence[WindowCommit], allowed_lag: int) -> bool:
    """isLagAlwaysNotZero: no commit in the window had lag <= allowed lag."""
    return not any(c.lag is not None and c.lag <= allowed_lag for c in window)


def rewind_index(window: Sequence[WindowCommit]) -> int:
    """checkIfOffsetsRewind: index of the first commit below its predecessor, or -1."""
    for i in range(1, len(window)):
        if window[i].offset < window[i - 1].offset:
            return i
    return -1


def rewind_recovered(window: Sequence[WindowCommit], index: int) -> bool:
    """checkIfRewindRecovered: a commit from `index` on reached the offset before the rewind."""
    before = window[index - 1].offset
    return any(c.offset >= before for c in window[index:])


def offsets_stopped(window: Sequence[WindowCommit], now_ms: int) -> bool:
    """checkIfOffsetsStopped: time since the last commit is longer than the window's span."""
    first, last = window[0].time_ms, window[-1].time_ms
    return now_ms - last > last - first


def offsets_stalled(window: Sequence[WindowCommit]) -> bool:
    """checkIfOffsetsStalled: the committed offset never changed over the window."""
    return all(window[i].offset == window[i - 1].offset for i in range(1, len(window)))


def lag_not_decreasing(window: Sequence[WindowCommit]) -> bool:
    """checkIfLagNotDecreasing: no commit's lag is below the previous known lag."""
    last = None
    for c in window:
        if c.lag is not None:
            if last is not None and c.lag < last:
                return False
            last = c.lag
    return True


def recent_lag_zero(window: Sequence[WindowCommit], log_ends: Sequence[int]) -> bool:
    """checkIfRecentLagZero: some recent log-end sample is at or below the last committed
    offset (the consumer had caught up recently)."""
    last = window[-1].offset
    return any(off <= last for off in log_ends)


def partition_status(
    window: Sequence[WindowCommit],
    log_ends: Sequence[int],
    current_lag: int,
    now_ms: int,
    allowed_lag: int = BURROW_ALLOWED_LAG,
    burrow_compatible: bool = True,
) -> int:
    """Burrow's status of a partition at `now_ms`, in Burrow's order: STOP, REWIND, then (when no
    commit in the window had lag <= allowed lag) STALL and WARN, else OK. `window`: the last
    commits, oldest first; `log_ends`: the recent log-end samples, oldest first; `current_lag`:
    last log-end sample minus last committed offset, at least 0.

    burrow_compatible=False (corral): no STOP while the log end has not moved since the last
    commit (current lag not above the lag at the last commit): a consumer on a quiet topic has
    nothing new to commit, e.g. an exactly-once consumer sitting one transaction marker behind.
    """
    if not window or current_lag <= allowed_lag:
        return OK
    stopped = offsets_stopped(window, now_ms) and not recent_lag_zero(window, log_ends)
    if stopped and not burrow_compatible:
        last_lag = window[-1].lag
        stopped = last_lag is None or current_lag > last_lag
    if stopped:
        return STOP
    index = rewind_index(window)
    if index > 0 and not rewind_recovered(window, index):
        return REWIND
    if lag_always_not_zero(window, allowed_lag):
        if offsets_stalled(window):
            return STALL
        if lag_not_decreasing(window):
            return WARN
    return OK


def group_status(statuses: Iterable[int]) -> int:
    """Burrow's group status: the worst partition status, STOP, STALL and REWIND showing as ERR;
    OK for no partitions."""
    worst = OK
    for s in statuses:
        worst = max(worst, min(s, ERR))
    return worst


class StatusRow(NamedTuple):
    time_ms: int
    status: int


def partition_status_timeline(
    commits: Sequence[Commit],
    samples: Iterable[Sample],
    window: int = BURROW_INTERVALS,
    intervals: int = BURROW_INTERVALS,
    allowed_lag: int = BURROW_ALLOWED_LAG,
    burrow_compatible: bool = True,
    at: Iterable[int] = (),
) -> list[StatusRow]:
    """The partition's status over the whole history: Burrow's evaluation at each commit time,
    each sample time and each time in `at` (the same times as partition_lag), with the last
    `window` commits (each with its lag against the last sample at or before it, as Burrow stores
    it) and the last `intervals` log-end samples known at that time."""
    samples = monotone_samples(samples)
    lags: list[int | None] = []
    for t, off in commits:
        si = samples_known(samples, t)
        lags.append(None if si == 0 else max(0, samples[si - 1][1] - off))
    rows = []
    for t, ci, si in _event_times(commits, samples, at):
        lo = max(0, ci - window)
        win = [WindowCommit(*commits[i], lags[i]) for i in range(lo, ci)]
        log_ends = [off for _, off in samples[max(0, si - intervals) : si]]
        current = max(0, samples[si - 1][1] - commits[ci - 1][1]) if si else 0
        status = partition_status(win, log_ends, current, t, allowed_lag, burrow_compatible)
        rows.append(StatusRow(t, status))
    return rows


def group_status_timeline(timelines: Sequence[Sequence[StatusRow]]) -> list[StatusRow]:
    """The group's status at every time any of its partitions' statuses was evaluated: the
    group_status of each partition's latest status at or before that time (partitions not yet
    evaluated do not count)."""
    events = sorted((t, p, s) for p, rows in enumerate(timelines) for t, s in rows)
    current: dict[int, int] = {}
    counts: Counter[int] = Counter()
    out: list[StatusRow] = []
    for t, p, s in events:
        if p in current:
            counts[min(current[p], ERR)] -= 1
        current[p] = s
        counts[min(s, ERR)] += 1
        status = max(k for k, n in counts.items() if n > 0)
        if out and out[-1].time_ms == t:
            out[-1] = StatusRow(t, status)
        else:
            out.append(StatusRow(t, status))
    return out


# -- commit_activity ----------------------------------------------------------------------------


class ActivityRow(NamedTuple):
    bucket_start_ms: int
    commits: int
    noop_commits: int  # same offset as the previous commit of that partition
    rewinds: int  # below the previous commit of that partition
    commit_rate: float  # commits per second over the bucket


def commit_activity(
    commits: Iterable[tuple[int, str, int, int]], bucket_ms: int
) -> list[ActivityRow]:
    """Per time bucket of one group's commits `[(time_ms, topic, partition, offset)]` sorted by
    time: commits, no-op commits and rewinds (each against the previous commit of the same
    partition, even in an earlier bucket). Buckets without commits have no row."""
    previous: dict[tuple[str, int], int] = {}
    buckets: dict[int, list[int]] = {}
    for t, topic, partition, offset in commits:
        counts = buckets.setdefault(t - t % bucket_ms, [0, 0, 0])
        counts[0] += 1
        before = previous.get((topic, partition))
        if before is not None and offset == before:
            counts[1] += 1
        elif before is not None and offset < before:
            counts[2] += 1
        previous[(topic, partition)] = offset
    return [
        ActivityRow(b, c, noop, rw, c * 1000 / bucket_ms)
        for b, (c, noop, rw) in sorted(buckets.items())
    ]
