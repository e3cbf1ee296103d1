"""KIP-848 join storm, corral against Apache Kafka: N consumer-protocol members join one new group,
with the same driver (`corral load --scenario join-storm --group-protocol consumer`) in the same run.

Each run gets a fresh broker of each kind, started with the same settings (Kafka through
kafka_ref.py, corral as `python -m corral.cli serve`), the brokers taking turns, never running at
once. Before its members start, the driver waits until a one-member group of its own is assigned
the new topic's partitions (consumer_member.wait_assignable: Kafka's group coordinator learns of a
topic only once its logs exist, 10-20 s after Metadata lists 1,000 partitions here), so that the
storm measures convergence, not topic creation. Measured per run:
- join_seconds: from the first ConsumerGroupHeartbeat to the last change of any member's epoch or
  partitions before the group converged (every member at one epoch, every partition owned by
  exactly one member; the generator sees that from the members' own answers, checks.ConsumerLedger);
- broker CPU seconds over that same window (the broker's /proc/<pid>/stat, sampled every 50 ms),
  and over the whole run (joining, the quiet heartbeat round that confirms convergence, leaving);
- violations (a partition owned by two members at once, or a quiet group missing partitions).

Writes its section of docs/benchmarks.md (between markers; the rest of the file is kept).

    python benches/consumer_join.py                          # 1,000 members, Kafka's defaults
    python benches/consumer_join.py --members 1000 --repeat 3 --set group.consumer.heartbeat.interval.ms=1000
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benches"))

from compare import CorralBroker, proc_cpu_seconds, write_section  # noqa: E402
from kafka_ref import DEFAULT_VERSION, KafkaBroker  # noqa: E402

from corral.load.cli import parse  # noqa: E402
from corral.load.runner import machine, run  # noqa: E402
from corral.load.scenarios import SCENARIOS  # noqa: E402

# Kafka's defaults for the consumer protocol, written out so that both brokers surely run with them.
SETTINGS: dict[str, object] = {
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.assignment.interval.ms": 1000,
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.assignors": "uniform,range",
}
# Kafka only: its listen backlog (default 50) drops most of 500 SYNs sent at once, and a dropped
# SYN is retried 1-3 s later; corral listens with a backlog of 4,096.
KAFKA_ONLY = {"socket.listen.backlog.size": 4096}


class CpuSampler:
    """The broker's CPU seconds every 50 ms, to read them at any moment of the run afterwards."""

    def __init__(self, pid: int):
        self.pid, self.samples = pid, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append((time.monotonic(), proc_cpu_seconds(self.pid)))
            except OSError:
                return
            self.stop.wait(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def at(self, moment: float) -> float:
        """CPU seconds at `moment` (the sample at or just after it)."""
        for t, cpu in self.samples:
            if t >= moment:
                return cpu
        return self.samples[-1][1]


def run_once(kind: str, opts) -> dict:
    settings = {**SETTINGS, **opts.settings}
    broker = (
        KafkaBroker(settings={**settings, **KAFKA_ONLY}, version=opts.kafka_version)
        if kind == "kafka"
        else CorralBroker(settings)
    )
    bootstrap = broker.start()
    group = f"consumer-join-{uuid.uuid4().hex[:8]}"
    try:
        common = [
            "--bootstrap",
            bootstrap,
            "--scenario",
            "join-storm",
            "--group-protocol",
            "consumer",
            "--topic",
            f"corral-load-{group}",
            "--quiet",
            "--partitions",
            str(opts.partitions or opts.members),
            "--duration",
            str(opts.timeout),
        ]
        if opts.server_assignor:
            common += ["--server-assignor", opts.server_assignor]
        args = [
            *common,
            "--group",
            group,
            "--members",
            str(opts.members),
            "--workers",
            str(opts.workers),
        ]
        with CpuSampler(broker.process.pid) as cpu:  # the members' run: from forking them on
            result = run(SCENARIOS["join-storm"], parse(args))
        m = result["metrics"]
        out = {
            "broker": kind,
            "at": time.strftime("%Y-%m-%d %H:%M"),
            "members": opts.members,
            "stable": m["stable"],
            "join_seconds": m["join_seconds"],
            "from_start_seconds": m["from_start_seconds"],
            "epoch": m.get("stable_generation"),
            "violations": result["violations"],
            "violation_examples": result["violation_examples"],
            "errors": result["errors"],
            "wall_seconds": result["wall_seconds"],
            "topic_assignable_s": m["topic_assignable_seconds"],
            "broker_cpu_run_s": round(cpu.samples[-1][1] - cpu.at(result["_started"]), 2),
            "generator_cpu_s": result["generator"]["cpu_seconds"],
            "heartbeats": result["latency_ms"].get("CONSUMER_GROUP_HEARTBEAT", {}),
            "settings": settings,
        }
        if m["stable"]:
            started = result["_started"]
            out["broker_cpu_join_s"] = round(
                cpu.at(started + m["converged_at_s"]) - cpu.at(started + m["first_request_at_s"]), 2
            )
        return out
    finally:
        broker.stop()


def median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def markers(label: str) -> tuple[str, str]:
    slug = "-".join("".join(c if c.isalnum() else " " for c in label.lower()).split())
    name = "consumer-join" + (f"-{slug}" if slug else "")
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def timing_note(settings: dict) -> str:
    interval = int(settings["group.consumer.heartbeat.interval.ms"])
    if interval >= 5000:
        return (
            f"Kafka's defaults: what a client gets unless the operator changes them. At a "
            f"{interval / 1000:g} s heartbeat interval the figure is about two intervals on "
            "both brokers, the protocol's own timing: every member joins at once and gets the "
            "first target (the first member owns everything); the next target is computed at "
            "the first heartbeat after group.consumer.assignment.interval.ms, one interval "
            "later, where the first member is told to revoke; the members that heartbeated "
            "before its acknowledgement get their partitions at their next heartbeat, another "
            "interval later."
        )
    return (
        f"A {interval} ms heartbeat interval (the minimum lowered to it on both brokers) "
        "shrinks the protocol's waiting, so that the coordinators' own speed (1,000 members "
        f"heartbeating {1000 / interval:g} times a second each) shows in the time."
    )


def markdown(results: dict[str, list[dict]], opts) -> str:
    m = machine()
    settings = {**SETTINGS, **opts.settings}
    k, c = results.get("kafka", []), results.get("corral", [])

    def cell(runs: list[dict], key: str) -> str:
        if not runs:
            return "not run"
        values = [r.get(key) for r in runs]
        form = "{:.0f}" if all(isinstance(v, int) for v in values) else "{:.2f}"
        shown = ", ".join("-" if v is None else form.format(v) for v in values)
        mid = median(runs, key)
        if mid is None:
            return shown
        return f"**{form.format(mid)}**" + (f" ({shown})" if len(runs) > 1 else "")

    def ratio(key: str) -> str:
        a, b = median(k, key), median(c, key)
        return f"{a / b:.2f}x" if a and b else "-"

    unstable = sum(not r["stable"] for r in k + c)
    violations = sum(r["violations"] for r in k + c)
    begin, end = markers(opts.label)
    title = "KIP-848 consumer groups: join storm against Apache Kafka (benches/consumer_join.py)"
    lines = [
        begin,
        ("## " + title) if not opts.label else f"### The same, {opts.label}",
        "",
        f"Run {(k + c)[0].get('at', '?') if k + c else '?'} on the shared development machine "
        f"({m.get('cpu_model', '?')}, {m['cpus']} cores, {m.get('memory_gb', '?')} GiB, "
        f"{m['platform']}), which other agents used at the same time (builds, test runs): the "
        "figures are noisy, and a ratio within about 1.5x is a tie. Apache Kafka "
        f"{opts.kafka_version} (single-node KRaft, 1 GiB heap, G1) and corral took turns, each "
        "fresh per run, on loopback, with the generator on the same machine "
        f"({opts.workers} worker process). {opts.members:,} members (`corral load --scenario "
        "join-storm --group-protocol consumer`: ConsumerGroupHeartbeat v1 as the Java consumer "
        "sends it, one TCP connection each, server assignor left to the broker: `uniform`) on "
        f"{opts.partitions or opts.members:,} partitions. Settings for both: "
        + ", ".join(f"`{k}={v}`" for k, v in settings.items())
        + "; Kafka also `socket.listen.backlog.size=4096` (corral's backlog). Median of "
        f"{opts.repeat} run(s) in bold, each run in brackets; ratio > 1 means corral did better.",
        "",
        "| figure | Apache Kafka | corral | corral vs Kafka |",
        "| --- | ---: | ---: | ---: |",
        f"| join to converged (s) | {cell(k, 'join_seconds')} | {cell(c, 'join_seconds')} | "
        f"{ratio('join_seconds')} |",
        f"| broker CPU, join to converged (s) | {cell(k, 'broker_cpu_join_s')} | "
        f"{cell(c, 'broker_cpu_join_s')} | {ratio('broker_cpu_join_s')} |",
        f"| broker CPU, whole run (s) | {cell(k, 'broker_cpu_run_s')} | "
        f"{cell(c, 'broker_cpu_run_s')} | {ratio('broker_cpu_run_s')} |",
        f"| epoch converged at | {cell(k, 'epoch')} | {cell(c, 'epoch')} | |",
        f"| before: one member's first assignment of the new topic (s) | "
        f"{cell(k, 'topic_assignable_s')} | {cell(c, 'topic_assignable_s')} | |",
        "",
        f"Runs that did not converge: {unstable}; invariant violations: {violations}. "
        "Join to converged: from the first ConsumerGroupHeartbeat sent to the last change of any "
        "member's epoch or partitions, once every member sits at one epoch with every partition "
        "owned by exactly one of them (confirmed by a further heartbeat round without change). "
        f"{timing_note(settings)} The CPU rows are the brokers' own work; whole run adds "
        "connecting, the confirming round and leaving. The last row is waited for before the "
        "storm (see benches/consumer_join.py) and is not in the others.",
        end,
    ]
    return "\n".join(lines) + "\n"


# The command line's tail that consumer_scale.py shares: broker settings and the section's output.
def add_settings_option(parser: argparse.ArgumentParser, over: str) -> None:
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"a setting for both brokers, over {over} (repeatable)",
    )


def add_section_options(parser: argparse.ArgumentParser, kept: str, earlier: str) -> None:
    """--json (every `kept` written there), --from-json (the section redone from `earlier`
    --json), --out (the docs page the section goes into) and --no-write."""
    parser.add_argument("--json", type=Path, default=None, help=f"write every {kept} here")
    parser.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help=f"redo the section from {earlier} --json (runs nothing)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true", help="print only")


def parse_with_settings(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The options, with the --set NAME=VALUE pairs as a dict in `opts.settings`."""
    opts = parser.parse_args()
    opts.settings = dict(item.split("=", 1) for item in opts.set)
    return opts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=None, help="default: one per member")
    parser.add_argument("--brokers", default="kafka,corral", type=lambda s: s.split(","))
    parser.add_argument("--repeat", type=int, default=1, help="runs per broker, alternating")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a run may take")
    parser.add_argument("--server-assignor", default=None)
    parser.add_argument("--kafka-version", default=DEFAULT_VERSION)
    add_settings_option(parser, over="the defaults above")
    parser.add_argument(
        "--label",
        default="",
        help="a section of its own, after the main one (e.g. another setting)",
    )
    add_section_options(parser, kept="run", earlier="an earlier run's")
    opts = parse_with_settings(parser)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: dict[str, list[dict]] = (
        json.loads(opts.from_json.read_text()) if opts.from_json else {}
    )
    if results:
        opts.repeat = max(len(runs) for runs in results.values())
        opts.settings = {
            k: v
            for k, v in next(iter(results.values()))[0]["settings"].items()
            if SETTINGS.get(k) != v
        }
    for _ in range(0 if opts.from_json else opts.repeat):
        for kind in opts.brokers:
            print(f"== {opts.members} consumer members against {kind}", file=sys.stderr, flush=True)
            outcome = run_once(kind, opts)
            print(json.dumps({k: v for k, v in outcome.items() if k != "settings"}), flush=True)
            results.setdefault(kind, []).append(outcome)
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2))
    section = markdown(results, opts)
    print(section)
    if not opts.no_write:
        # The main section after the classic comparison of compare.py, labelled ones after it.
        after = markers("")[1] if opts.label else "<!-- corral-load-compare:end -->"
        write_section(opts.out, section, *markers(opts.label), after=after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
