# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The per-partition rules of corral.analyze.rules over flat arrays (registered as
`corral._core._lag`): the rows of `partition_lag` and `partition_status_timeline` (one pass: both
have a row at the same event times) for many keys at once, and `group_status_timeline` for many
groups at once. rules.py is the reference; these give exactly its rows
(tests/unit/analyze/test_fast.py).

Many keys per call: the Spark job hands over a whole sorted Arrow batch, and a Python call per
(group, topic, partition) would cost more than the rules themselves. Inputs are int64 arrays
(any buffer), outputs are arrays the caller allocates (corral.analyze.fast does, with numpy): the
module itself needs nothing but the limited API.
"""

from libc.math cimport NAN
from libc.stdint cimport int8_t, int64_t
from libc.stdlib cimport free, malloc

# rules.py's status codes (Burrow's order, best to worst).
cdef enum:
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6

# Below this, int64 -> double is exact, and so one IEEE division of two such numbers is the
# correctly rounded quotient Python's int / int gives.
cdef int64_t EXACT = 9007199254740992  # 2 ** 53


cdef double _quotient(int64_t a, int64_t b, int64_t dy) except? -1.0:
    """a * b / dy as Python's true division of exact ints (all three > 0)."""
    if a < EXACT // b and dy < EXACT:
        return <double>(a * b) / <double>dy
    return (<object>a * <object>b) / <object>dy  # beyond 2**53: Python's exact rounding


cdef double _predict(int64_t offset, int64_t lt, int64_t lo, int64_t rt, int64_t ro) except? -1.0:
    # rules._predict: right_t - (right_o - offset) * dx / dy
    return <double>rt - _quotient(ro - offset, rt - lt, ro - lo)


cdef double _lag_seconds(const int64_t* mt, const int64_t* mo, int64_t n, int64_t committed,
                         int64_t now) except? -1.0:
    """rules.lag_seconds over the first n (>= 1) monotone samples; NaN for None."""
    cdef int64_t lo, hi, mid, i
    cdef double t
    if committed >= mo[n - 1]:
        return 0.0
    if n < 2:
        return NAN
    # bisect_right on the offsets, minus one
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) // 2
        if committed < mo[mid]:
            hi = mid
        else:
            lo = mid + 1
    i = lo - 1
    if 0 <= i < n - 1:
        t = _predict(committed, mt[i], mo[i], mt[i + 1], mo[i + 1])
    elif mo[0] == mo[n - 1]:
        t = <double>(mt[0] if committed < mo[0] else mt[n - 1])
    else:
        t = _predict(committed, mt[0], mo[0], mt[n - 1], mo[n - 1])
    t = (<double>now - t) / 1000.0
    return t if t > 0.0 else 0.0


cdef int8_t _status(const int64_t* wt, const int64_t* wo, const int64_t* wl, const int8_t* wk,
                    int64_t n, const int64_t* log_ends, int64_t nle, int64_t current, int64_t now,
                    int64_t allowed, bint burrow_compatible) noexcept:
    """rules.partition_status: window (times, offsets, lags, lag known) of n commits."""
    cdef int64_t i, index
    cdef bint stopped, always
    if n == 0 or current <= allowed:
        return OK
    stopped = now - wt[n - 1] > wt[n - 1] - wt[0]
    if stopped:
        for i in range(nle):
            if log_ends[i] <= wo[n - 1]:
                stopped = False
                break
    if stopped and not burrow_compatible:
        stopped = not wk[n - 1] or current > wl[n - 1]
    if stopped:
        return STOP
    index = -1
    for i in range(1, n):
        if wo[i] < wo[i - 1]:
            index = i
            break
    if index > 0:
        for i in range(index, n):
            if wo[i] >= wo[index - 1]:
                break
        else:
            return REWIND
    always = True
    for i in range(n):
        if wk[i] and wl[i] <= allowed:
            always = False
            break
    if always:
        for i in range(1, n):
            if wo[i] != wo[i - 1]:
                break
        else:
            return STALL
        index = -1  # the last known lag
        for i in range(n):
            if wk[i]:
                if index >= 0 and wl[i] < wl[index]:
                    return OK
                index = i
        return WARN
    return OK


def partition_status(const int64_t[::1] times, const int64_t[::1] offsets,
                     const int64_t[::1] lags, const int8_t[::1] lag_known,
                     const int64_t[::1] log_ends, int64_t current_lag, int64_t now_ms,
                     int64_t allowed_lag, bint burrow_compatible):
    """rules.partition_status on one window (for checking the evaluator on its own)."""
    cdef Py_ssize_t n = times.shape[0]
    cdef const int64_t* le = &log_ends[0] if log_ends.shape[0] else NULL
    if offsets.shape[0] != n or lags.shape[0] != n or lag_known.shape[0] != n:
        raise ValueError("window arrays differ in length")
    if n == 0:
        return OK
    return _status(&times[0], &offsets[0], &lags[0], &lag_known[0], n, le, log_ends.shape[0],
                   current_lag, now_ms, allowed_lag, burrow_compatible)


def partition_rows(const int64_t[::1] times, const int64_t[::1] values,
                   const int64_t[::1] commit_start, const int64_t[::1] commit_end,
                   const int64_t[::1] sample_start, const int64_t[::1] sample_end,
                   bint burrow_compatible, int64_t window, int64_t intervals, int64_t allowed_lag,
                   int64_t[::1] time_ms, int64_t[::1] committed_offset,
                   int64_t[::1] log_end_offset, int64_t[::1] lag_records,
                   double[::1] lag_seconds, int8_t[::1] log_end_known, int8_t[::1] status,
                   int64_t[::1] rows):
    """partition_lag and partition_status_timeline of each key k: its commits are
    times/values[commit_start[k]:commit_end[k]], its partition's samples
    times/values[sample_start[k]:sample_end[k]] (keys may share them), each sorted by time (equal
    times in log order). Writes key k's rows after key k-1's; rows[k] is their count; returns
    the total. Null log end and lag in records where log_end_known is 0; lag_seconds NaN for
    None. Output capacity needed: at most the keys' commits plus their samples."""
    cdef Py_ssize_t nkeys = commit_start.shape[0]
    cdef Py_ssize_t cap = time_ms.shape[0]
    cdef int64_t k, j, m, nc, ci, si, a, b, t, c0, committed, le, lo, out = 0, most = 0
    cdef int64_t* mt
    cdef int64_t* mo
    cdef int64_t* lag
    cdef int8_t* known
    if window < 1 or intervals < 1:
        raise ValueError("window and intervals must be >= 1")
    for k in range(nkeys):
        most = max(most, sample_end[k] - sample_start[k], commit_end[k] - commit_start[k])
    if min(committed_offset.shape[0], log_end_offset.shape[0], lag_records.shape[0],
           lag_seconds.shape[0], log_end_known.shape[0], status.shape[0]) < cap \
            or rows.shape[0] < nkeys or commit_end.shape[0] < nkeys \
            or sample_start.shape[0] < nkeys or sample_end.shape[0] < nkeys:
        raise ValueError("output arrays differ in length")
    mt = <int64_t*>malloc(sizeof(int64_t) * (most + 1))
    mo = <int64_t*>malloc(sizeof(int64_t) * (most + 1))
    lag = <int64_t*>malloc(sizeof(int64_t) * (most + 1))
    known = <int8_t*>malloc(most + 1)
    if not mt or not mo or not lag or not known:
        free(mt); free(mo); free(lag); free(known)
        raise MemoryError()
    try:
        for k in range(nkeys):
            c0 = commit_start[k]
            nc = commit_end[k] - c0
            rows[k] = 0
            if nc <= 0:
                continue
            if out + nc + (sample_end[k] - sample_start[k]) > cap:
                raise ValueError("output arrays too short")
            # rules.monotone_samples
            m = 0
            for j in range(sample_start[k], sample_end[k]):
                if m and (times[j] <= mt[m - 1] or values[j] < mo[m - 1]):
                    continue
                mt[m] = times[j]
                mo[m] = values[j]
                m += 1
            # Each commit's lag against the last sample at or before it, as Burrow stores it.
            si = 0
            for j in range(nc):
                while si < m and mt[si] <= times[c0 + j]:
                    si += 1
                known[j] = si > 0
                lag[j] = max(0, mo[si - 1] - values[c0 + j]) if si else 0
            # rules._event_times: every distinct commit time and sample time from the first commit
            ci = si = a = b = 0
            while b < m and mt[b] < times[c0]:
                b += 1
            while a < nc or b < m:
                if b >= m or (a < nc and times[c0 + a] <= mt[b]):
                    t = times[c0 + a]
                else:
                    t = mt[b]
                while ci < nc and times[c0 + ci] <= t:
                    ci += 1
                while si < m and mt[si] <= t:
                    si += 1
                a = ci
                b = si
                committed = values[c0 + ci - 1]
                time_ms[out] = t
                committed_offset[out] = committed
                if si == 0:
                    log_end_known[out] = 0
                    log_end_offset[out] = 0
                    lag_records[out] = 0
                    lag_seconds[out] = NAN
                else:
                    le = max(mo[si - 1], committed)
                    log_end_known[out] = 1
                    log_end_offset[out] = le
                    lag_records[out] = le - committed
                    lag_seconds[out] = _lag_seconds(mt, mo, si, committed, t)
                lo = max(0, ci - window)
                status[out] = _status(
                    &times[c0 + lo], &values[c0 + lo], &lag[lo], &known[lo], ci - lo,
                    &mo[max(0, si - intervals)], si - max(0, si - intervals),
                    max(0, mo[si - 1] - committed) if si else 0, t, allowed_lag,
                    burrow_compatible)
                out += 1
                rows[k] += 1
    finally:
        free(mt); free(mo); free(lag); free(known)
    return out


def group_rows(const int64_t[::1] times, const int64_t[::1] partitions,
               const int8_t[::1] statuses, const int64_t[::1] group_start,
               const int64_t[::1] group_end, int64_t partition_count,
               int64_t[::1] time_ms, int8_t[::1] status, int64_t[::1] rows):
    """group_status_timeline of each group g: its partitions' status rows
    times/partitions/statuses[group_start[g]:group_end[g]] sorted by time (a partition has at
    most one row at a time; `partitions` numbers them, 0 <= p < partition_count). Writes group
    g's rows after group g-1's, rows[g] their count; returns the total. Output capacity needed:
    the groups' input rows."""
    cdef Py_ssize_t ngroups = group_start.shape[0]
    cdef int64_t g, j, p, out = 0, worst
    cdef int64_t counts[ERR + 1]
    cdef int8_t s
    cdef int8_t* current
    if time_ms.shape[0] < times.shape[0] or status.shape[0] < times.shape[0] \
            or rows.shape[0] < ngroups:
        raise ValueError("output arrays too short")
    for g in range(ngroups):
        for j in range(group_start[g], group_end[g]):
            if not 0 <= partitions[j] < partition_count:
                raise ValueError("partition number out of range")
    current = <int8_t*>malloc(partition_count + 1)
    if not current:
        raise MemoryError()
    for p in range(partition_count):
        current[p] = 0
    try:
        for g in range(ngroups):
            for s in range(ERR + 1):
                counts[s] = 0
            rows[g] = 0
            for j in range(group_start[g], group_end[g]):
                p = partitions[j]
                if current[p]:
                    counts[min(current[p], ERR)] -= 1
                current[p] = statuses[j]
                counts[min(statuses[j], ERR)] += 1
                worst = ERR
                while worst > OK and counts[worst] <= 0:
                    worst -= 1
                if rows[g] and time_ms[out - 1] == times[j]:
                    status[out - 1] = worst
                else:
                    time_ms[out] = times[j]
                    status[out] = worst
                    out += 1
                    rows[g] += 1
            for j in range(group_start[g], group_end[g]):
                current[partitions[j]] = 0
    finally:
        free(current)
    return out
