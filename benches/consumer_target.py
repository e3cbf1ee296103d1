"""Event-loop time of a KIP-848 join and leave that each compute and write a new target
(`group.consumer.assignment.interval.ms=0`), in groups of 1,000 to 50,000 members, in process
(issue 29 item 2: a target costs what moves; goal < 1 ms at 10,000 and 50,000 members).

Each group is settled (every member STABLE with two partitions of its topic, as a restart loads
it); a join then moves one partition to the new member, a leave gives its partitions back. The
time covers the whole heartbeat: the handler, the incremental target, the records encoded (as the
durable log does) and replayed, analytics events made. Best of 5 rounds of 20 operations each,
groups interleaved, cyclic GC off while timing (as the broker tunes it, cli.py).

    python benches/consumer_target.py                 # 1,000 10,000 50,000
    python benches/consumer_target.py --sizes 10000 50000 100000
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "kits"))

from harness import Group, coordinator  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    c = coordinator(args.sizes)
    groups = {size: Group(c, size) for size in args.sizes}
    for size, g in groups.items():
        g.load(size)
        g.leave(g.join())  # warm up
    joins = {size: float("inf") for size in args.sizes}
    leaves = dict(joins)
    gc.disable()
    try:
        for _ in range(args.rounds):
            for size, g in groups.items():
                joined, join_s, leave_s = [], 0.0, 0.0
                for _ in range(20):
                    started = time.perf_counter()
                    joined.append(g.join())
                    join_s += time.perf_counter() - started
                for member_id in joined:
                    started = time.perf_counter()
                    g.leave(member_id)
                    leave_s += time.perf_counter() - started
                joins[size] = min(joins[size], join_s / 20)
                leaves[size] = min(leaves[size], leave_s / 20)
    finally:
        gc.enable()
    print(f"{platform.node()} {platform.machine()}, Python {platform.python_version()}")
    print("| members | join + its target | leave + its target |")
    print("|---:|---:|---:|")
    for size in args.sizes:
        print(f"| {size:,} | {joins[size] * 1e6:,.0f} us | {leaves[size] * 1e6:,.0f} us |")


if __name__ == "__main__":
    main()
