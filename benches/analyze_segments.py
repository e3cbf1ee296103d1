"""`corral analyze --data-dir`'s reader: decode throughput of `__consumer_offsets` segments, in
commit records per second, for the compiled decoder alone and wrapped as Arrow.

Writes a data directory with one `__consumer_offsets` partition of `--records` commits (batches
of one group's commits, as the broker writes them: `_core.offset_commit_batch`, offsets assigned
by patching each batch's base offset, which the CRC does not cover), in segments of
`--segment-mb`, then times `_core.decode_offset_commits` over the segments and
`segments.commits_table` (what a task of the job does first).

    python benches/analyze_segments.py --records 3000000
"""

from __future__ import annotations

import argparse
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from corral import _core  # noqa: E402
from corral.analyze.inputs import segments  # noqa: E402


def write_data_dir(directory: Path, records: int, per_batch: int, segment_bytes: int) -> None:
    part = directory / "__consumer_offsets-0"
    part.mkdir(parents=True)
    offset, now = 0, 1_700_000_000_000
    out, base = None, -1
    while offset < records:
        n = min(per_batch, records - offset)
        group = f"group-{offset // per_batch % 500}"
        commits = [(p, offset + p, 3, "") for p in range(n)]
        batch = bytearray(_core.offset_commit_batch(group, [("orders-topic", commits)], now, -1))
        batch[0:8] = struct.pack(">q", offset)
        if out is None or out.tell() >= segment_bytes:
            if out:
                out.close()
            base = offset
            out = open(part / f"{base:020d}.log", "wb")
        out.write(batch)
        offset += n
        now += 1
    out.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument(
        "--per-batch", type=int, default=8, help="commits per batch (partitions per OffsetCommit)"
    )
    ap.add_argument("--segment-mb", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        write_data_dir(data_dir, args.records, args.per_batch, args.segment_mb << 20)
        paths = [p for _, split in segments.commit_splits(str(data_dir), None) for p in split]
        size = sum(Path(p).stat().st_size for p in paths)
        print(f"{args.records} commits, {len(paths)} segments, {size / 2**20:.0f} MiB")
        for _ in range(args.repeat):
            t = time.perf_counter()
            rows = sum(_core.decode_offset_commits(p)[0] for p in paths)
            dt = time.perf_counter() - t
            print(f"core decoder:   {rows / dt / 1e6:6.2f} M records/s ({dt:.2f} s)")
            t = time.perf_counter()
            rows = segments.commits_table(paths).num_rows
            dt = time.perf_counter() - t
            print(f"+ Arrow table:  {rows / dt / 1e6:6.2f} M records/s ({dt:.2f} s)")


if __name__ == "__main__":
    main()
