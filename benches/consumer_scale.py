"""KIP-848 consumer groups at scale, corral against Apache Kafka: N consumer-protocol members of one
group played by benches/heartbeat-driver's `consumer-driver` (Rust, epoll, a few us per heartbeat;
built with cargo on first use), the same driver in the same run for both brokers, which take turns.

The driver plays each member as the Java consumer does (own connection, or with
--members-per-connection K one shared by K members, past a process's open-file limit; full
request at join, incremental heartbeats at the broker's HeartbeatIntervalMs, revocations acknowledged at once,
rejoin at epoch 0 when fenced) and checks every answer with the ownership ledger: a partition
owned by two members at once, or nobody's while the group is quiet, is a violation. Per broker,
on a fresh broker with Kafka's consumer-protocol defaults (SETTINGS):

1. the topic is created, then a one-member group waits until it is assigned every partition
   (Kafka's coordinator learns of a topic only once its logs exist);
2. join storm: N members connect, then join at once; time from the first heartbeat to the last
   change before the group converged (one epoch, every partition owned exactly once, confirmed by
   a quiet heartbeat round), heartbeat p50/p99 during it, broker CPU, broker RSS per member;
3. steady heartbeats at the broker's interval, then forced rates (x1.5 per step) up to the highest
   one answered at p99 < --p99-ms: the heartbeat capacity;
4. churn: --churn-percent of the members restart per second (leave, new connection, new member
   id) for --churn-seconds; partition-seconds without an owner, time to settle;
5. rolling restart of every member (--roll-concurrency at once): dynamic (new member id), and in a
   second group of static members (same group.instance.id: leave with epoch -2, rejoin);
6. partitions P -> --grow-to (CreatePartitions here): time until every partition is owned;
7. the whole group leaving: time until the broker has answered every leave.

Writes its section of docs/benchmarks.md between markers (the rest of the file is kept).

    python benches/consumer_scale.py --members 2000 --partitions 1000 --kafka
    python benches/consumer_scale.py --members 50000 --partitions 1000 --kafka --json scale.json \
        --members-per-connection 5    # 10,000 connections: under a 20,000 open-file limit
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benches"))

from compare import CorralBroker, proc_cpu_seconds, write_section  # noqa: E402
from consumer_join import (  # noqa: E402
    KAFKA_ONLY,
    SETTINGS,
    CpuSampler,
    add_section_options,
    add_settings_option,
    parse_with_settings,
)
from groups_scale import rss_kb  # noqa: E402
from heartbeat_capacity import wait_for_coordinator  # noqa: E402
from kafka_ref import DEFAULT_VERSION, KafkaBroker  # noqa: E402

DRIVER_DIR = ROOT / "benches" / "heartbeat-driver"
DRIVER_BIN = DRIVER_DIR / "target" / "release" / "consumer-driver"
BEGIN, END = "<!-- consumer-scale:begin -->", "<!-- consumer-scale:end -->"
# The options a run's table is labelled with: kept in its JSON for --from-json.
RUN_OPTIONS = (
    "members",
    "partitions",
    "churn_percent",
    "churn_seconds",
    "p99_ms",
    "capacity_step_seconds",
    "roll_concurrency",
    "grow_to",
    "kafka_version",
    "kafka_heap",
    "members_per_connection",
)


def build_driver() -> Path:
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "--bin", "consumer-driver"],
        cwd=DRIVER_DIR,
        check=True,
    )
    return DRIVER_BIN


class Driver:
    """One consumer-driver process: a command in, its phase's JSON line out, broker CPU around it."""

    def __init__(
        self,
        port: int,
        broker_pid: int,
        members: int,
        group: str,
        topic: str,
        partitions: int,
        static: bool = False,
        server_assignor: str | None = None,
        first_source: int = 0,
        session_timeout_ms: int = 45000,
        members_per_connection: int = 1,
    ):
        cmd = [
            str(DRIVER_BIN),
            "--port",
            str(port),
            "--members",
            str(members),
            "--group",
            group,
            "--topics",
            topic,
            "--partitions",
            str(partitions),
            "--static",
            str(int(static)),
            "--first-source",
            str(first_source),
            "--session-timeout-ms",
            str(session_timeout_ms),
            "--members-per-connection",
            str(members_per_connection),
        ]
        if server_assignor:
            cmd += ["--server-assignor", server_assignor]
        # The driver sends no FindCoordinator (one broker): this creates Kafka's offsets topic.
        wait_for_coordinator(port, group)
        self.pid = broker_pid
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def phase(self, command: str, cpu: CpuSampler | None = None) -> dict:
        started, cpu0 = time.monotonic(), proc_cpu_seconds(self.pid)
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"consumer-driver exited ({self.proc.wait()}) during {command!r}")
        result = json.loads(line)
        result["command"] = command
        result["broker_cpu_s"] = round(proc_cpu_seconds(self.pid) - cpu0, 2)
        wall = time.monotonic() - started
        result["broker_cpu_share"] = round(result["broker_cpu_s"] / wall, 3) if wall else None
        if cpu is not None and result.get("converged_at_s") is not None:
            # Broker CPU from the first heartbeat to convergence (not the quiet round after it).
            result["broker_cpu_converge_s"] = round(
                cpu.at(started + result["converged_at_s"])
                - cpu.at(started + result["first_request_at_s"]),
                2,
            )
        brief = {
            k: result.get(k)
            for k in (
                "phase",
                "ok",
                "seconds",
                "achieved_per_s",
                "violations",
                "unowned_partition_seconds",
                "errors",
            )
        }
        print(
            f"   {command}: {json.dumps(brief)} hb {result['heartbeat_ms']}",
            file=sys.stderr,
            flush=True,
        )
        return result

    def close(self, wait: float = 30) -> None:
        """End of input: the driver quits after the phase it runs (killed after `wait` s)."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=wait)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait()


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)  # kept until the answer: a dropped client fails its futures
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(120)


def grow_topic(bootstrap: str, topic: str, partitions: int) -> float:
    from confluent_kafka.admin import NewPartitions

    start = time.monotonic()
    client = admin(bootstrap)
    client.create_partitions([NewPartitions(topic, partitions)])[topic].result(120)
    return time.monotonic() - start


def capacity(driver: Driver, opts, interval_s: float) -> dict:
    """Forced heartbeat rates, x1.5 per step from the natural rate N / interval, until a step falls
    10% short of its target or two steps in a row pass the p99 bound (one may be a broker's pause:
    a GC, a snapshot); the capacity is the highest rate achieved by a step within the bound."""
    rate = max(100.0, opts.members / interval_s)
    steps, best, over = [], None, 0
    while rate <= opts.capacity_max_rate:
        r = driver.phase(f"steady {opts.capacity_step_seconds} {rate:.0f}")
        p99 = r["heartbeat_ms"].get("p99")
        steps.append(
            {
                "target": round(rate),
                "achieved": r["achieved_per_s"],
                "p99_ms": p99,
                "p50_ms": r["heartbeat_ms"].get("p50"),
                "broker_cpu_share": r["broker_cpu_share"],
                "driver_us_per_request": r["driver_us_per_request"],
                "violations": r["violations"],
            }
        )
        if r["achieved_per_s"] < 0.9 * rate:
            break
        if p99 is None or p99 > opts.p99_ms:
            over += 1
            if over == 2:
                break
        else:
            over = 0
            best = max(best or 0, r["achieved_per_s"])
        rate *= 1.5
    return {"capacity_per_s": best, "steps": steps}


def run_broker(kind: str, opts) -> dict:
    settings = {**SETTINGS, **opts.settings}
    broker = (
        KafkaBroker(
            settings={**settings, **KAFKA_ONLY}, version=opts.kafka_version, heap=opts.kafka_heap
        )
        if kind == "kafka"
        else CorralBroker(settings)
    )
    bootstrap = broker.start()
    port, pid = int(bootstrap.rsplit(":", 1)[1]), broker.process.pid
    tag = uuid.uuid4().hex[:8]
    topic, group = f"consumer-scale-{tag}", f"consumer-scale-{tag}"
    out: dict = {
        "broker": kind,
        "at": time.strftime("%Y-%m-%d %H:%M"),
        "members": opts.members,
        "partitions": opts.partitions,
        "settings": settings,
        "phases": {},
        "options": {k: getattr(opts, k) for k in RUN_OPTIONS},
    }
    phases = out["phases"]
    drivers: list[Driver] = []
    session = int(settings["group.consumer.session.timeout.ms"])
    try:
        create_topic(bootstrap, topic, opts.partitions)
        probe = Driver(port, pid, 1, f"{group}-probe", topic, opts.partitions)
        drivers.append(probe)
        phases["topic_assignable"] = probe.phase(f"join {opts.timeout}")
        probe.phase("leave 30")
        probe.close()

        driver = Driver(
            port,
            pid,
            opts.members,
            group,
            topic,
            opts.partitions,
            server_assignor=opts.server_assignor,
            session_timeout_ms=session,
            members_per_connection=opts.members_per_connection,
        )
        drivers.append(driver)
        rss_before = rss_kb(pid)
        # Connected first, so that what a member costs beyond its connection shows apart.
        phases["connect"] = driver.phase(f"connect {opts.timeout}")
        rss_connected = rss_kb(pid)
        with CpuSampler(pid) as cpu:
            phases["join"] = driver.phase(f"join {opts.timeout}", cpu)
        out["rss_kib_per_member"] = round((rss_kb(pid) - rss_before) / opts.members, 2)
        out["rss_bytes_per_member_beyond_connection"] = round(
            (rss_kb(pid) - rss_connected) * 1024 / opts.members
        )
        out["rss_mib_after_join"] = round(rss_kb(pid) / 1024)
        interval_s = int(settings["group.consumer.heartbeat.interval.ms"]) / 1000
        if "steady" in opts.scenarios:
            phases["steady"] = driver.phase(f"steady {opts.steady_seconds}")
        if "capacity" in opts.scenarios:
            out["capacity"] = capacity(driver, opts, interval_s)
            phases["after_capacity"] = driver.phase(f"steady {max(2 * interval_s, 2)}")
        if "churn" in opts.scenarios:
            phases["churn"] = driver.phase(
                f"churn {opts.churn_seconds} {opts.churn_percent} 0 {opts.timeout}"
            )
        if "roll" in opts.scenarios:
            phases["roll_dynamic"] = driver.phase(f"roll {opts.roll_concurrency} {opts.timeout}")
        if "grow" in opts.scenarios:
            out["create_partitions_s"] = round(grow_topic(bootstrap, topic, opts.grow_to), 3)
            phases["grow"] = driver.phase(f"wait-owned {opts.grow_to} {opts.timeout}")
        phases["leave"] = driver.phase("leave 120")
        driver.close()
        partitions = opts.grow_to if "grow" in opts.scenarios else opts.partitions
        if "static" in opts.scenarios:
            # Other source addresses than the first group's, whose closed connections wait in TIME_WAIT.
            static = Driver(
                port,
                pid,
                opts.members,
                f"{group}-static",
                topic,
                partitions,
                static=True,
                server_assignor=opts.server_assignor,
                first_source=100,
                session_timeout_ms=session,
                members_per_connection=opts.members_per_connection,
            )
            drivers.append(static)
            phases["static_join"] = static.phase(f"join {opts.timeout}")
            phases["roll_static"] = static.phase(f"roll {opts.roll_concurrency} {opts.timeout}")
            phases["static_leave"] = static.phase("leave 120")
            static.close()
        return out
    finally:
        for d in drivers:  # after a failure: no phase is waited for
            d.close(wait=0)
        broker.stop()


# ------------------------------------------------------------------ the table


def figures(run: dict) -> dict[str, str]:
    p = run["phases"]

    def get(phase: str, *keys, form="{:.2f}"):
        value = p.get(phase)
        for k in keys:
            value = value.get(k) if isinstance(value, dict) else None
        return "-" if value is None else form.format(value)

    def ok(phase: str, text: str) -> str:
        return text if p.get(phase, {}).get("ok", True) else f"{text} (did not finish)"

    cap = run.get("capacity", {})
    return {
        "join": ok("join", get("join", "seconds")),
        "join_hb": f"{get('join', 'heartbeat_ms', 'p50')} / {get('join', 'heartbeat_ms', 'p99')}",
        "join_cpu": get("join", "broker_cpu_converge_s"),
        "rss": "-" if run.get("rss_kib_per_member") is None else f"{run['rss_kib_per_member']:.1f}",
        "rss_beyond": "-"
        if run.get("rss_bytes_per_member_beyond_connection") is None
        else f"{run['rss_bytes_per_member_beyond_connection']:,}",
        "steady": f"{get('steady', 'achieved_per_s', form='{:,.0f}')} "
        f"({get('steady', 'heartbeat_ms', 'p50')} / {get('steady', 'heartbeat_ms', 'p99')} ms)",
        "capacity": "-"
        if not cap
        else (
            f"{cap['capacity_per_s']:,.0f}"
            if cap.get("capacity_per_s")
            else f"< {cap['steps'][0]['target']:,} (p99 {cap['steps'][0]['p99_ms']} ms)"
        ),
        "capacity_p99": "-"
        if not cap or not cap["steps"]
        else f"{cap['steps'][-1]['achieved']:,.0f} at p99 {cap['steps'][-1]['p99_ms']} ms",
        "churn": ok(
            "churn",
            f"{get('churn', 'unowned_partition_seconds', form='{:,.1f}')} "
            f"(settled in {get('churn', 'settle_seconds')} s)",
        ),
        "roll_dynamic": ok(
            "roll_dynamic",
            f"{get('roll_dynamic', 'seconds')} s, "
            f"{get('roll_dynamic', 'unowned_partition_seconds', form='{:,.1f}')}",
        ),
        "roll_static": ok(
            "roll_static",
            f"{get('roll_static', 'seconds')} s, "
            f"{get('roll_static', 'unowned_partition_seconds', form='{:,.1f}')}",
        ),
        "leave": ok("leave", get("leave", "seconds")),
        "grow": ok("grow", get("grow", "seconds")),
        "violations": str(sum(ph.get("violations", 0) for ph in p.values()))
        + (
            f" ({expired} overlaps after a session timeout)"
            if (expired := sum(ph.get("overlaps_after_session_timeout", 0) for ph in p.values()))
            else ""
        ),
        "driver_us": f"{get('join', 'driver_us_per_request')} ({get('join', 'driver_user_us_per_request')} user)",
    }


ROWS = [
    ("join storm: first heartbeat to converged (s)", "join"),
    ("heartbeat p50 / p99 during the join storm (ms)", "join_hb"),
    ("broker CPU, first heartbeat to converged (s)", "join_cpu"),
    ("broker RSS per member after the join, its connection's share included (KiB)", "rss"),
    ("broker RSS per member beyond its connection (bytes)", "rss_beyond"),
    ("steady heartbeats at the broker's interval: answers/s (p50 / p99)", "steady"),
    ("heartbeat capacity at p99 < {p99} ms (answers/s)", "capacity"),
    ("last capacity step (answers/s, p99)", "capacity_p99"),
    ("churn {churn}%/s for {churn_s} s: partition-seconds unowned", "churn"),
    ("rolling restart, dynamic: s to stable, partition-seconds unowned", "roll_dynamic"),
    ("rolling restart, static: s to stable, partition-seconds unowned", "roll_static"),
    ("partitions {p} -> {grow}: s until all owned", "grow"),
    ("whole group leaving: s until every leave answered", "leave"),
    ("invariant violations (all phases)", "violations"),
    ("driver CPU per request in the join, user + system (us)", "driver_us"),
]


def connections_text(opts) -> str:
    k = opts.members_per_connection
    if k == 1:
        return "one connection each"
    return f"{k} to a connection ({math.ceil(opts.members / k):,} connections, `--members-per-connection {k}`)"


def mux_note(opts) -> str:
    """Why members share connections and what changes with it."""
    if opts.members_per_connection == 1:
        return ""
    return (
        f" Members share connections, {opts.members_per_connection} to each (one process may "
        "hold only so many sockets: the open-file limit): each member keeps its own member id, "
        "epoch, heartbeat timer, at most one request in flight and its latency timing (its "
        "request's send to its answer's receive), the answers matched to members by correlation "
        "id; a restarting member (churn, rolling restarts) leaves and rejoins on the shared "
        "connection rather than opening a new one, so connection setup is not measured there."
    )


def markdown(results: dict[str, dict], opts) -> str:
    from corral.load.runner import machine

    m = machine()
    runs = {k: figures(v) for k, v in results.items()}
    any_run = next(iter(results.values()))
    settings = any_run["settings"]
    lines = [
        BEGIN,
        "## KIP-848 consumer groups at scale against Apache Kafka (benches/consumer_scale.py)",
        "",
        f"Run {any_run['at']} on {m.get('cpu_model', '?')}, {m['cpus']} cores, "
        f"{m.get('memory_gb', '?')} GiB, {m['platform']}; brokers fresh per run and taking turns "
        f"(Apache Kafka {opts.kafka_version}: single-node KRaft, {opts.kafka_heap} heap, G1), the driver on the "
        f"same machine. {opts.members:,} members, {connections_text(opts)} "
        "(benches/heartbeat-driver `consumer-driver`: ConsumerGroupHeartbeat v1 as the Java "
        "consumer sends it, every answer checked by the ownership ledger) on "
        f"{opts.partitions:,} partitions of one topic; roll concurrency {opts.roll_concurrency}. "
        "Settings for both: "
        + ", ".join(f"`{k}={v}`" for k, v in settings.items())
        + "; Kafka also `socket.listen.backlog.size=4096`.",
        "",
        "| figure | Apache Kafka | corral |",
        "| --- | ---: | ---: |",
    ]
    fmt = {
        "p99": opts.p99_ms,
        "churn": opts.churn_percent,
        "churn_s": opts.churn_seconds,
        "p": f"{opts.partitions:,}",
        "grow": f"{opts.grow_to:,}",
    }
    for label, key in ROWS:
        cells = [runs[k][key] if k in runs else "not run" for k in ("kafka", "corral")]
        lines.append(f"| {label.format(**fmt)} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        "Converged: every member at one epoch, every partition owned by exactly one member, and "
        "every member answered again at least one heartbeat interval after the last change. A "
        "partition is owned from the answer that assigns it until the member's next request after "
        "it was taken away (the acknowledgement); unowned partition-seconds add up the time each "
        "partition had no owner during the phase. Capacity: forced rates x1.5 per step "
        f"({opts.capacity_step_seconds} s each) until one falls 10% short of its target or two in a "
        f"row pass the bound; the figure is the highest achieved rate whose p99 stayed under "
        f"{opts.p99_ms} ms." + mux_note(opts),
        END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--kafka", action="store_true", help="also Apache Kafka (first)")
    parser.add_argument(
        "--brokers",
        default=None,
        type=lambda s: s.split(","),
        help="explicit list, e.g. kafka,corral (default: corral, with --kafka both)",
    )
    parser.add_argument(
        "--scenarios", default="steady,capacity,churn,roll,grow,static", type=lambda s: s.split(",")
    )
    parser.add_argument("--steady-seconds", type=float, default=20)
    parser.add_argument("--capacity-step-seconds", type=float, default=5)
    parser.add_argument("--capacity-max-rate", type=float, default=200_000)
    parser.add_argument("--p99-ms", type=float, default=10)
    parser.add_argument("--churn-percent", type=float, default=1)
    parser.add_argument("--churn-seconds", type=float, default=20)
    parser.add_argument(
        "--roll-concurrency", type=int, default=None, help="default: 1%% of members"
    )
    parser.add_argument("--grow-to", type=int, default=None, help="default: twice --partitions")
    parser.add_argument("--server-assignor", default=None)
    parser.add_argument(
        "--members-per-connection",
        type=int,
        default=1,
        help="K members share one connection (past an open-file limit): N/K connections",
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds a phase may take")
    parser.add_argument("--kafka-version", default=DEFAULT_VERSION)
    parser.add_argument("--kafka-heap", default="1g", help="Kafka's -Xms/-Xmx")
    add_settings_option(parser, over="Kafka's defaults")
    add_section_options(parser, kept="phase", earlier="an earlier")
    opts = parse_with_settings(parser)
    opts.roll_concurrency = opts.roll_concurrency or max(1, math.ceil(opts.members / 100))
    opts.grow_to = opts.grow_to or 2 * opts.partitions
    brokers = opts.brokers or (["kafka", "corral"] if opts.kafka else ["corral"])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # One descriptor per connection, in the driver and in the broker (inherited).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    connections = math.ceil(opts.members / opts.members_per_connection)
    if hard < connections + 1024:
        print(
            f"warning: RLIMIT_NOFILE hard limit {hard} is below {connections:,} connections "
            "plus the broker's own descriptors (see --members-per-connection)",
            file=sys.stderr,
        )
    if opts.from_json:
        results = json.loads(opts.from_json.read_text())
        opts.members_per_connection = 1  # runs from before the option had one connection each
        for k, v in next(iter(results.values())).get("options", {}).items():
            setattr(opts, k, v)
    else:
        build_driver()
        results = {}
        for kind in brokers:
            print(
                f"== {opts.members:,} consumer members, {opts.partitions:,} partitions, {kind}",
                file=sys.stderr,
                flush=True,
            )
            results[kind] = run_broker(kind, opts)
            if opts.json:  # after each broker: a later failure keeps what was measured
                opts.json.write_text(json.dumps(results, indent=2))
    section = markdown(results, opts)
    print(section)
    if not opts.no_write:
        write_section(opts.out, section, BEGIN, END, after="<!-- consumer-join:end -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
