"""Type stubs for `corral._core._lag`, the per-partition rules of corral.analyze.rules over flat
arrays in Cython (src/corral/analyze/_lag.pyx, linked into `_core` by build.rs and registered by
rust/cython.rs). Use them through `corral.analyze.fast`, which allocates the outputs.

Array parameters take any C-contiguous buffer of the element type named (int64, int8, float64,
e.g. numpy arrays); inputs may be read-only, outputs must be writable.
"""

from typing_extensions import Buffer

def partition_status(
    times: Buffer,
    offsets: Buffer,
    lags: Buffer,
    lag_known: Buffer,
    log_ends: Buffer,
    current_lag: int,
    now_ms: int,
    allowed_lag: int,
    burrow_compatible: bool,
) -> int: ...
def partition_rows(
    times: Buffer,
    values: Buffer,
    commit_start: Buffer,
    commit_end: Buffer,
    sample_start: Buffer,
    sample_end: Buffer,
    burrow_compatible: bool,
    window: int,
    intervals: int,
    allowed_lag: int,
    time_ms: Buffer,
    committed_offset: Buffer,
    log_end_offset: Buffer,
    lag_records: Buffer,
    lag_seconds: Buffer,
    log_end_known: Buffer,
    status: Buffer,
    rows: Buffer,
) -> int: ...
def group_rows(
    times: Buffer,
    partitions: Buffer,
    statuses: Buffer,
    group_start: Buffer,
    group_end: Buffer,
    partition_count: int,
    time_ms: Buffer,
    status: Buffer,
    rows: Buffer,
) -> int: ...
