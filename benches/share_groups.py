"""Share groups through a broker: corral, and Apache Kafka 4.4 as the reference, in one run.

A share group (KIP-932) of 1,000 consumers on a 10-partition topic reads and acknowledges N records
of 100 bytes produced beforehand: `corral load --group-type share` (src/corral/load/share/), whose
members heartbeat, fetch in share sessions from their partitions' leader (MaxRecords 500) and
acknowledge every record ACCEPT in their next fetch; every record is checked acknowledged exactly
once. Measured per broker:

- acknowledged records/s, between 10 % and 90 % of the records acknowledged (the steady state),
  and from the first acquisition to the last acknowledgement;
- broker CPU per 1,000 records acknowledged: utime + stime of the broker's processes
  (/proc/<pid>/stat), sampled every 0.25 s and read at both ends of the consumption;
- corral only: bytes per in-flight record, from its /metrics (corral_share_in_flight_bytes over
  kafka_server_share_partition_metrics_in_flight_message_count, sampled during the consumption;
  `in_flight_bytes_per_record` is the hook to change if that metric changes).

Generator and broker share this machine's cores, the same way for both brokers (the generator's
own CPU is reported). Each broker gets an unmeasured warm-up run first (a smaller group).

    python benches/share_groups.py                              # corral, then Kafka
    python benches/share_groups.py --broker kafka --records 2000000
    python benches/share_groups.py --smoke                      # tiny: that it runs (ci/test.sh)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from kafka_ref import KafkaBroker

from corral.load.cli import parse
from corral.load.runner import run
from corral.load.scenarios import SCENARIOS

# Kafka's bound of group.share.max.size is 1,000; both brokers get the same settings.
SETTINGS = {"group.share.max.size": 1000}
LISTENING = re.compile(r"listening on (\S+):(\d+)")
METRICS_AT = re.compile(r"metrics on http://(\S+):(\d+)/metrics")
SAMPLE_EVERY_S = 0.25
SCRAPE_EVERY_S = 1.0
IN_FLIGHT_BYTES = "corral_share_in_flight_bytes"
IN_FLIGHT_RECORDS = "kafka_server_share_partition_metrics_in_flight_message_count"
TICKS = os.sysconf("SC_CLK_TCK")

FULL = {"members": 1000, "partitions": 10, "records": 1_000_000}
WARMUP = {"members": 100, "partitions": 10, "records": 100_000}
SMOKE = {"members": 20, "partitions": 4, "records": 2_000}


@dataclass
class Broker:
    name: str
    bootstrap: str
    pid: int
    metrics_url: str | None = None


# ---------------------------------------------------------------- brokers


@contextlib.contextmanager
def corral_broker(settings: dict[str, object]) -> Iterator[Broker]:
    """`corral serve` on free ports (Kafka's port and /metrics), in a temporary data dir."""
    data = Path(tempfile.mkdtemp(prefix="corral-share-bench-"))
    cmd = [sys.executable, "-m", "corral.cli", "serve", "--listen", "127.0.0.1:0"]
    cmd += ["--data-dir", str(data / "data"), "--set", "corral.metrics.listen=127.0.0.1:0"]
    for name, value in settings.items():
        cmd += ["--set", f"{name}={value}"]
    log_path = data / "corral.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            text = log_path.read_text(errors="replace")
            listening, metrics = LISTENING.search(text), METRICS_AT.search(text)
            if listening and metrics:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"corral did not start:\n{text[-3000:]}")
            time.sleep(0.05)
        yield Broker(
            "corral",
            f"127.0.0.1:{listening.group(2)}",
            proc.pid,
            f"http://127.0.0.1:{metrics.group(2)}/metrics",
        )
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


@contextlib.contextmanager
def kafka_broker(settings: dict[str, object]) -> Iterator[Broker]:
    kafka = KafkaBroker(settings=settings)
    kafka.start()
    try:
        assert kafka.process is not None
        yield Broker("kafka", kafka.bootstrap, kafka.process.pid)
    finally:
        kafka.stop()


# ---------------------------------------------------------------- what the broker spends


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds: utime + stime) of a process, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after the command, which may hold spaces
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and every live descendant."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None:
                stats[int(entry)] = found
    total, family = 0.0, {pid}
    changed = True
    while changed:  # descendants: any process whose parent is in the family
        changed = False
        for p, (ppid, _) in stats.items():
            if ppid in family and p not in family:
                family.add(p)
                changed = True
    for p in family:
        if p in stats:
            total += stats[p][1]
    return total


def scrape(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


class Sampler:
    """The broker's CPU every SAMPLE_EVERY_S, and corral's in-flight gauges every SCRAPE_EVERY_S,
    stamped with time.monotonic() (the clock of the load generator's events)."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self.cpu: list[tuple[float, float]] = []
        self.in_flight: list[tuple[float, float, float]] = []  # (at, records, bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        last_scrape = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            self.cpu.append((now, tree_cpu(self.broker.pid)))
            if self.broker.metrics_url and now - last_scrape >= SCRAPE_EVERY_S:
                last_scrape = now
                with contextlib.suppress(OSError, ValueError):
                    values = scrape(self.broker.metrics_url)
                    if IN_FLIGHT_RECORDS in values:
                        self.in_flight.append(
                            (now, values[IN_FLIGHT_RECORDS], values.get(IN_FLIGHT_BYTES, 0.0))
                        )
            self._stop.wait(SAMPLE_EVERY_S)

    def cpu_at(self, t: float) -> float:
        """CPU seconds at `t`, interpolated between the samples around it."""
        before = max((s for s in self.cpu if s[0] <= t), default=self.cpu[0])
        after = min((s for s in self.cpu if s[0] >= t), default=self.cpu[-1])
        if after[0] == before[0]:
            return before[1]
        return before[1] + (after[1] - before[1]) * (t - before[0]) / (after[0] - before[0])


def in_flight_bytes_per_record(samples: list[tuple[float, float, float]], start: float, end: float):
    """corral's bytes per in-flight record during the consumption: the median of the samples'
    bytes / records (None without samples that hold records). The hook for corral's metric."""
    ratios = sorted(b / n for at, n, b in samples if start <= at <= end and n > 0)
    return round(ratios[len(ratios) // 2], 1) if ratios else None


# ---------------------------------------------------------------- one measurement


def measure(broker: Broker, size: dict[str, int], workers: int, duration: float) -> dict:
    params = parse(
        [
            "--bootstrap",
            broker.bootstrap,
            "--group-type",
            "share",
            "--quiet",
            "--members",
            str(size["members"]),
            "--partitions",
            str(size["partitions"]),
            "--records",
            str(size["records"]),
            "--workers",
            str(workers),
            "--duration",
            str(duration),
        ]
    )
    with Sampler(broker) as sampler:
        cpu_before = tree_cpu(broker.pid)
        result = run(SCENARIOS["share"], params)
        cpu_after = tree_cpu(broker.pid)
    m = result["metrics"]
    if result["failures"] or result["violations"] or m["outcome"] != "complete":
        raise RuntimeError(
            f"{broker.name}: the run did not complete cleanly: outcome {m['outcome']}, "
            f"failures {result['failures']}, violations {result['violation_examples']}, "
            f"errors {result['errors']}"
        )
    started = result["_started"]
    start, end = started + m["first_acquired_at_s"], started + m["last_acknowledged_at_s"]
    consume_cpu = sampler.cpu_at(end) - sampler.cpu_at(start)
    records = m["produced"]  # every one acknowledged (late or unconfirmed ones counted apart)
    return {
        "members": m["members"],
        "partitions": m["partitions"],
        "records": records,
        # Acknowledged after their lock (AcquisitionLockTimeoutMs) could have expired, or with
        # the answer lost: a broker too slow for the group shows here.
        "acknowledged_late": m["acknowledged_late"],
        "acknowledgements_unconfirmed": m["acknowledgements_unconfirmed"],
        "acknowledged_per_s": m["acknowledged_per_s_10_90"] or m["acknowledged_per_s"],
        "acknowledged_per_s_whole": m["acknowledged_per_s"],
        "consume_seconds": m["consume_seconds"],
        "broker_cpu_ms_per_1000_records": round(consume_cpu / records * 1e6, 2),
        "broker_cpu_share_of_a_core": round(consume_cpu / max(end - start, 1e-9), 2),
        "broker_cpu_ms_per_1000_records_whole_run": round(
            (cpu_after - cpu_before) / records * 1e6, 2
        ),
        "in_flight_bytes_per_record": in_flight_bytes_per_record(sampler.in_flight, start, end),
        "all_in_group_s": m["all_in_group_s"],
        "redelivered": m["redelivered"],
        "generator_cpu_seconds": result["generator"]["cpu_seconds"],
        "generator_saturated": result["generator"]["saturated"],
        "share_fetch_p99_ms": result["latency_ms"].get("SHARE_FETCH", {}).get("p99"),
        "heartbeat_p99_ms": result["latency_ms"].get("SHARE_GROUP_HEARTBEAT", {}).get("p99"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=["corral", "kafka", "both"], default="both")
    parser.add_argument("--members", type=int, default=FULL["members"])
    parser.add_argument("--partitions", type=int, default=FULL["partitions"])
    parser.add_argument("--records", type=int, default=FULL["records"])
    parser.add_argument("--workers", type=int, default=1, help="load generator processes")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a run may take")
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help=f"one tiny run per broker ({SMOKE}), no warm-up"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of both brokers"
    )
    args = parser.parse_args(argv)
    settings: dict[str, object] = dict(SETTINGS)
    for item in args.set:
        name, _, value = item.partition("=")
        settings[name] = value
    size = (
        SMOKE
        if args.smoke
        else {"members": args.members, "partitions": args.partitions, "records": args.records}
    )
    brokers = ["corral", "kafka"] if args.broker == "both" else [args.broker]
    results = {}
    for name in brokers:
        starter = corral_broker if name == "corral" else kafka_broker
        with starter(settings) as broker:
            if not (args.smoke or args.no_warmup):
                measure(broker, WARMUP, args.workers, args.timeout)
            results[name] = measure(broker, size, args.workers, args.timeout)
        print(name, json.dumps(results[name]), flush=True)
    if len(results) == 2:
        corral, kafka = results["corral"], results["kafka"]
        print(
            "corral/kafka acknowledged records/s:",
            round(corral["acknowledged_per_s"] / kafka["acknowledged_per_s"], 2),
        )
        print(
            "corral/kafka broker CPU per record:",
            round(
                corral["broker_cpu_ms_per_1000_records"] / kafka["broker_cpu_ms_per_1000_records"],
                2,
            ),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
