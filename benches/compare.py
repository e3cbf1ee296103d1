"""Side by side: the same `corral load` scenarios against Apache Kafka and against corral.

Each scenario runs against a fresh broker of each kind, started here with the same group settings
(Kafka through kafka_ref.py, corral as `python -m corral.cli serve`), then `heartbeat` also against
the ceiling server (benches/heartbeat-ceiling). A broker that does not offer a scenario's APIs
(ApiVersions) is reported as such, not run. Prints a table with both figures and their ratio and
writes its section of docs/benchmarks.md (between markers; the rest of the file is kept).

    python benches/compare.py                  # the figures of record (several minutes)
    python benches/compare.py --quick          # small groups, short steps (about a minute)
    python benches/compare.py --scenarios heartbeat --heartbeat-members 5000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benches"))

from kafka_ref import DEFAULT_VERSION, KafkaBroker, free_port  # noqa: E402

from corral.load.cli import parse  # noqa: E402
from corral.load.probe import LoadError  # noqa: E402
from corral.load.runner import machine, run  # noqa: E402
from corral.load.scenarios import SCENARIOS  # noqa: E402

BEGIN = "<!-- corral-load-compare:begin -->"
END = "<!-- corral-load-compare:end -->"

# The same group settings for both brokers: Kafka's defaults, except no initial rebalance delay,
# so that join-storm measures the coordinator's work rather than a configured 3 s wait. --set adds
# more (settings corral does not have are left out of its command line).
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
}


@dataclass
class Case:
    """One row of the table: a scenario with its parameters and the figure it is judged by."""

    label: str
    scenario: str
    args: list[str]
    figure: Callable[[dict], float | None]
    unit: str
    higher_is_better: bool


def cases(opts) -> list[Case]:
    quick = opts.quick
    step = ["--step-seconds", "2" if quick else "5", "--ramp-factor", "1.5"]
    out = []
    if "join-storm" in opts.scenarios:
        for n in opts.join_members:
            out.append(
                Case(
                    f"join-storm {n:,} members",
                    "join-storm",
                    ["--members", str(n), "--duration", "120"],
                    lambda r: r["metrics"]["join_seconds"],
                    "s",
                    False,
                )
            )
    if "heartbeat" in opts.scenarios:
        n = opts.heartbeat_members
        out.append(
            Case(
                f"heartbeat capacity, {n:,} members (p99 <= 50 ms)",
                "heartbeat",
                [
                    "--members",
                    str(n),
                    "--duration",
                    "240",
                    "--start-rate",
                    str(max(100, n // 3)),
                    *step,
                ],
                lambda r: r["metrics"]["sustained_per_s"],
                "hb/s",
                True,
            )
        )
    if "commit" in opts.scenarios:
        n = opts.commit_members
        out.append(
            Case(
                f"commit rate, {n:,} members x 10 partitions (p99 <= 100 ms)",
                "commit",
                [
                    "--members",
                    str(n),
                    "--partitions-per-member",
                    "10",
                    "--duration",
                    "240",
                    "--start-rate",
                    str(max(50, n // 4)),
                    *step,
                ],
                lambda r: r["metrics"]["sustained_per_s"],
                "commits/s",
                True,
            )
        )
    return out


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (and its reaped children) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class CorralBroker:
    """corral as a subprocess with the same group settings, on a fresh data directory."""

    def __init__(self, settings: dict[str, object]):
        self.settings = settings
        self.dir = tempfile.TemporaryDirectory(prefix="corral-compare-")
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> str:
        from corral.config.settings import BROKER_SETTINGS

        known = (
            {s.name for s in BROKER_SETTINGS}
            if not isinstance(BROKER_SETTINGS, dict)
            else set(BROKER_SETTINGS)
        )
        cmd = [
            sys.executable,
            "-m",
            "corral.cli",
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--data-dir",
            self.dir.name,
            "--log-level",
            "WARNING",
        ]
        for name, value in self.settings.items():
            if name in known:  # settings corral does not have yet are left out, not fatal
                cmd += ["--set", f"{name}={value}"]
        log = open(Path(self.dir.name) / "corral.log", "ab")
        self.process = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        )
        from kafka_ref import _answers_api_versions

        deadline = time.monotonic() + 30
        while not _answers_api_versions(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "corral did not start: "
                    + (Path(self.dir.name) / "corral.log").read_text()[-2000:]
                )
            time.sleep(0.1)
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.dir.cleanup()


class CeilingServer:
    def __init__(self, settings):
        self.process = None

    def start(self) -> str:
        crate = ROOT / "benches" / "heartbeat-ceiling"
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=crate, check=True)
        self.process = subprocess.Popen(
            [str(crate / "target" / "release" / "heartbeat-ceiling")],
            stdout=subprocess.PIPE,
            text=True,
        )
        return self.process.stdout.readline().split()[-1]

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def run_case(case: Case, target: str, opts) -> dict[str, Any]:
    settings = dict(GROUP_SETTINGS)
    broker = {
        "kafka": lambda s: KafkaBroker(settings=s, version=opts.kafka_version),
        "corral": CorralBroker,
        "ceiling": CeilingServer,
    }[target](settings)
    bootstrap = broker.start()
    pid = broker.process.pid
    try:
        args = [
            "--bootstrap",
            bootstrap,
            "--scenario",
            case.scenario,
            "--quiet",
            "--workers",
            str(opts.workers),
            *case.args,
        ]
        if target == "ceiling":
            args.append("--skip-join")
        cpu0, t0 = proc_cpu_seconds(pid), time.monotonic()
        try:
            result = run(SCENARIOS[case.scenario], parse(args))
        except LoadError as e:
            key = "unsupported" if "does not offer" in str(e) else "error"
            return {key: str(e)}
        result["broker_cpu"] = round((proc_cpu_seconds(pid) - cpu0) / (time.monotonic() - t0), 3)
        result["figure"] = case.figure(result)
        return result
    finally:
        broker.stop()


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.2f} {unit}" if value < 100 else f"{value:,.0f} {unit}"


def cell(result: dict | None, unit: str) -> str:
    if result is None:
        return "not run"
    if "unsupported" in result:
        return "APIs not offered"
    if "error" in result:
        return f"failed: {result['error']}"
    text = fmt(result["figure"], unit)
    steps = result["metrics"].get("steps")
    if steps and not result["figure"]:
        # Not even the first step stayed within the bound: say how far off it was.
        first = steps[0]
        text = (
            f"< {fmt(first['target'], unit)} (first step: {fmt(first['achieved'], unit)}, "
            f"p99 {first['latency_ms'].get('p99', 0):.0f} ms)"
        )
    notes = [
        f"gen CPU {max(result['generator']['cpu_per_worker'].values(), default=0):.0%}",
        f"broker CPU {result['broker_cpu']:.0%}",
    ]
    if result["generator"]["saturated"]:
        notes.append("generator saturated")
    if result["violations"]:
        notes.append(f"**{result['violations']} violations**")
    return f"{text} ({', '.join(notes)})"


def ratio(case: Case, kafka: dict | None, corral: dict | None) -> str:
    """corral's advantage: > 1 means corral did better, whichever way the figure points."""
    a = kafka and kafka.get("figure")
    b = corral and corral.get("figure")
    if not a or not b:
        return "-"
    return f"{(b / a if case.higher_is_better else a / b):.2f}x"


def markdown(rows, opts) -> str:
    m = machine()
    lines = [
        BEGIN,
        "## Consumer groups: `corral load` against Apache Kafka (benches/compare.py)",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M')} on {m.get('cpu_model', '?')}, {m['cpus']} CPUs, "
        f"{m.get('memory_gb', '?')} GiB, {m['platform']}; Apache Kafka {opts.kafka_version} "
        "(single-node KRaft from Maven Central jars, 1 GiB heap, G1) and corral, each fresh per "
        "scenario, on loopback, with the generator on the same machine "
        f"({opts.workers} worker process(es)). Settings for both: "
        + ", ".join(f"`{k}={v}`" for k, v in GROUP_SETTINGS.items())
        + ". Members are classic-protocol consumers, one TCP connection each, range assignor. "
        "CPU figures are shares of one core over the run. Ratio: > 1 means corral did better. "
        "On a shared 2-core machine repeated runs of one case differ by up to 2x (the heartbeat "
        "and commit ramps most): read ratios within that as ties, and keep every run's JSON "
        "(--json-dir) to look at the steps.",
        "",
        "| scenario | Apache Kafka | corral | corral vs Kafka | ceiling server |",
        "| --- | --- | --- | ---: | --- |",
    ]
    for case, results in rows:
        lines.append(
            f"| {case.label} | {cell(results.get('kafka'), case.unit)} | "
            f"{cell(results.get('corral'), case.unit)} | "
            f"{ratio(case, results.get('kafka'), results.get('corral'))} | "
            f"{cell(results.get('ceiling'), case.unit) if 'ceiling' in results else ''} |"
        )
    if "message.max.bytes" in GROUP_SETTINGS:
        lines += [
            "",
            "`message.max.bytes` is raised because, with Kafka's default (1 MiB), a "
            "5,000-member classic group on 5,000 partitions does not reliably stabilize: its "
            "group metadata record (every member's subscription and assignment) passes "
            "1 MiB, the coordinator fails to store it (RecordTooLargeException in the "
            "broker log) and answers SyncGroup with UNKNOWN_SERVER_ERROR, round after round.",
        ]
    lines += [
        "",
        "join-storm: from the first JoinGroup until every member holds its SyncGroup "
        "answer of one generation with all members. heartbeat and commit: the rate ramps "
        "x1.5 per step, then narrows between the last good and the first saturated rate; "
        "the figure is the highest rate achieved in a step whose p99 stayed within the "
        "bound. The ceiling server answers Heartbeat with a fixed frame "
        "(members do not join): what this machine and this generator can do at most.",
        END,
    ]
    return "\n".join(lines) + "\n"


def write_section(
    path: Path, section: str, begin: str = BEGIN, end: str = END, after: str | None = None
) -> None:
    """Replaces the text between `begin` and `end`; a new section goes after the line `after`
    (when given and found), else at the end."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        text = re.sub(
            re.escape(begin) + ".*?" + re.escape(end) + "\n?", lambda _: section, text, flags=re.S
        )
    elif after and after + "\n" in text:
        text = text.replace(after + "\n", after + "\n\n" + section, 1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenarios", default="join-storm,heartbeat,commit", type=lambda s: s.split(",")
    )
    parser.add_argument("--targets", default="kafka,corral,ceiling", type=lambda s: s.split(","))
    parser.add_argument(
        "--join-members", default=None, type=lambda s: [int(x) for x in s.split(",")]
    )
    parser.add_argument("--heartbeat-members", type=int, default=None)
    parser.add_argument("--commit-members", type=int, default=None)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="small groups, short ramp steps")
    parser.add_argument("--kafka-version", default=DEFAULT_VERSION)
    parser.add_argument("--json-dir", type=Path, default=None, help="keep every run's JSON here")
    parser.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="redo the table from a --json-dir of an earlier run (runs nothing)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker setting for both brokers (repeatable)",
    )
    opts = parser.parse_args()
    # Stopped by a signal, still stop the brokers this run started (the finally blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for item in opts.set:
        name, _, value = item.partition("=")
        GROUP_SETTINGS[name.strip()] = value.strip()
    opts.join_members = opts.join_members or ([100] if opts.quick else [1000, 5000])
    opts.heartbeat_members = opts.heartbeat_members or (200 if opts.quick else 5000)
    opts.commit_members = opts.commit_members or (50 if opts.quick else 1000)

    rows = []
    for case in cases(opts):
        results: dict[str, dict] = {}
        for target in opts.targets:
            if target == "ceiling" and case.scenario != "heartbeat":
                continue
            name = re.sub(r"\W+", "-", f"{case.label}-{target}").strip("-") + ".json"
            if opts.from_json:
                saved = opts.from_json / name
                if saved.exists():
                    results[target] = json.loads(saved.read_text())
                continue
            print(f"== {case.label} against {target}", file=sys.stderr, flush=True)
            results[target] = run_case(case, target, opts)
            if opts.json_dir:
                opts.json_dir.mkdir(parents=True, exist_ok=True)
                public = {k: v for k, v in results[target].items() if not k.startswith("_")}
                (opts.json_dir / name).write_text(json.dumps(public, indent=2))
            print(f"   {cell(results[target], case.unit)}", file=sys.stderr, flush=True)
        rows.append((case, results))
    section = markdown(rows, opts)
    print(section)
    if not opts.no_write:
        write_section(opts.out, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
