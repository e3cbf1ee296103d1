"""Runs a scenario: checks the broker, forks the worker processes, gathers what they measure.

The parent process owns no member. It negotiates versions, creates the topic, forks `--workers`
processes (each a trio loop running its share of the members), merges what they ship every
SHIP_INTERVAL_S (latency samples, error codes, assignment events, violations, their own CPU time),
checks assignments across all of them, steers the scenario's phases and renders the display.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import platform
import resource
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import trio

from corral.load.checks import AssignmentLedger, ConsumerLedger, ShareLedger, Violations
from corral.load.cleanup import existing_groups, run_cleanup
from corral.load.consumer_member import ConsumerMember, probe_group, wait_assignable
from corral.load.member import ClassicMember, Events, GroupMember, MemberConfig
from corral.load.probe import BrokerInfo, LoadError, probe
from corral.load.share.member import ShareMember
from corral.load.stats import Recorder, percentiles
from corral.network.apis import ApiKey
from corral.ops.admin import AdminError

SHIP_INTERVAL_S = 0.5
LEAVE_TIMEOUT_S = 10.0
SATURATED_CPU = 0.85  # a worker busier than this (of one core) cannot be trusted to keep pace
# What the classic protocol needs that a KIP-848 member does with ConsumerGroupHeartbeat.
CLASSIC_APIS = {ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP}
# What share consumers report about records (checks.ShareLedger reads them).
SHARE_EVENTS = {"acquired", "acknowledged", "unconfirmed", "released", "produced"}


# ---------------------------------------------------------------- worker processes


@dataclass
class WorkerPlan:
    scenario: str
    params: dict[str, Any]
    member_config: MemberConfig
    first_member: int
    member_count: int
    total_members: int
    worker: int


class WorkerContext:
    """What a scenario's member loop sees inside a worker."""

    def __init__(self, plan: WorkerPlan):
        self.plan = plan
        self.params = plan.params
        self.recorder = Recorder()
        self.violations = Violations()
        self.events = Events()
        self.phase: dict[str, Any] = {}
        self.phase_changed = trio.Event()
        self.stopping = trio.Event()
        self.members: list[GroupMember] = []
        self.scratch: dict[str, Any] = {}  # the scenario's own per-worker bookkeeping
        self.connect_slots = trio.Semaphore(max(1, self.params.get("connects_in_flight", 500)))

    def new_member(self) -> GroupMember:
        kind: type[GroupMember] = ClassicMember
        if is_share(self.params):
            kind = ShareMember
        elif self.params.get("group_protocol") == "consumer":
            kind = ConsumerMember
        member = kind(
            self.plan.member_config, self.recorder, self.violations, self.events, self.connect_slots
        )
        self.members.append(member)
        return member

    def set_phase(self, phase: dict[str, Any]) -> None:
        self.phase = phase
        self.phase_changed.set()
        self.phase_changed = trio.Event()

    async def sleep_or_phase(self, seconds: float) -> None:
        """Sleeps, but wakes early when the parent moves to another phase."""
        with trio.move_on_after(seconds):
            await self.phase_changed.wait()


def _worker_main(plan: WorkerPlan, commands, results) -> None:
    from corral.load.scenarios import SCENARIOS

    scenario = SCENARIOS[plan.scenario]
    try:
        # Each member holds a socket: lift the descriptor limit as far as allowed.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        trio.run(_worker, scenario, plan, commands, results)
    except KeyboardInterrupt:
        pass
    except BaseException as e:  # reported to the parent rather than lost in a child's stderr
        results.send(("failed", f"{type(e).__name__}: {e}"))
        raise


async def _worker(scenario, plan: WorkerPlan, commands, results) -> None:
    ctx = WorkerContext(plan)

    def ship(kind: str) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        results.send(
            (
                kind,
                {
                    "recorder": ctx.recorder.take(),
                    "violations": ctx.violations.take(),
                    "events": ctx.events.drain(),
                    "stable": sum(m.stable for m in ctx.members),
                    "ok_since": sum(
                        m.last_ok_at >= ctx.phase.get("since", float("inf")) for m in ctx.members
                    ),
                    # Of the members in the group (not those away in churn, or not yet joined).
                    "oldest_ok": min(
                        (m.last_ok_at for m in ctx.members if m.stable), default=float("inf")
                    ),
                    "interval": max(
                        (getattr(m, "interval_s", None) or 0.0 for m in ctx.members), default=0.0
                    ),
                    "cpu": usage.ru_utime + usage.ru_stime,
                    "at": time.monotonic(),
                },
            )
        )

    async def shipper() -> None:
        while True:
            await trio.sleep(SHIP_INTERVAL_S)
            ship("progress")

    async def listen(cancel: trio.CancelScope) -> None:
        while True:
            await trio.lowlevel.wait_readable(commands.fileno())
            try:
                command = commands.recv()  # the parent writes whole messages: this does not block
            except EOFError:
                command = "stop"
            if command == "stop":
                ctx.stopping.set()
                cancel.cancel()
                return
            ctx.set_phase(command)

    async with trio.open_nursery() as outer:
        outer.start_soon(shipper)
        with trio.CancelScope() as members_scope:
            outer.start_soon(listen, members_scope)
            async with trio.open_nursery() as nursery:
                if hasattr(scenario, "run_worker"):  # the worker's own task (a producer)
                    nursery.start_soon(scenario.run_worker, ctx)
                for i in range(plan.member_count):
                    nursery.start_soon(
                        scenario.run_member, ctx, ctx.new_member(), plan.first_member + i
                    )
        # Leave politely, so that a long-lived broker does not keep thousands of dead members.
        with trio.move_on_after(LEAVE_TIMEOUT_S) as leave_scope:
            leave_scope.shield = True
            async with trio.open_nursery() as nursery:
                for member in ctx.members:
                    nursery.start_soon(member.leave)
        outer.cancel_scope.cancel()
    ship("done")


# ---------------------------------------------------------------- the run (parent)


@dataclass
class Run:
    """Everything the parent knows about a run in progress; scenarios read it to steer."""

    scenario: str
    params: dict[str, Any]
    broker: BrokerInfo
    members: int
    workers: int
    started: float = field(default_factory=time.monotonic)
    recorder: Recorder = field(default_factory=Recorder)
    violations: Violations = field(default_factory=Violations)
    ledger: AssignmentLedger | ConsumerLedger | ShareLedger | None = None
    stable: dict[int, int] = field(default_factory=dict)
    ok_since: dict[int, int] = field(default_factory=dict)  # members answered since phase["since"]
    cpu: dict[int, float] = field(default_factory=dict)
    timeline: list[dict[str, float]] = field(default_factory=list)
    phase: dict[str, Any] = field(default_factory=dict)
    phases: list[dict[str, Any]] = field(default_factory=list)
    last_synced_at: float = 0.0
    marks: dict[str, float] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)  # the scenario's own bookkeeping
    failures: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    oldest_ok: dict[int, float] = field(default_factory=dict)
    shipped_at: dict[int, float] = field(default_factory=dict)  # each worker's latest shipment
    display: Any = None  # the live display or progress lines (cli.py), if any

    def __post_init__(self):
        if is_share(self.params):
            self.ledger = ShareLedger(self.broker.partitions, self.violations, self.workers)
        elif self.params.get("group_protocol") == "consumer":
            self.ledger = ConsumerLedger(self.broker.partitions, self.violations, self.workers)
        else:
            self.ledger = AssignmentLedger(self.broker.partitions, self.violations)

    @property
    def stable_members(self) -> int:
        return sum(self.stable.values())

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def note(self, text: str) -> None:
        """A line of progress (a ramp's plan and steps), stamped with the run's elapsed time."""
        if self.display is not None:
            self.display.note(f"[{self.elapsed():6.1f} s] {text}")

    def absorb(self, worker: int, update: dict[str, Any], done: bool = False) -> None:
        self.recorder.merge(update["recorder"])
        self.violations.merge(update["violations"])
        owned, records = [], []
        for event in update["events"]:
            if event[0] in SHARE_EVENTS:
                records.append(event)
            elif event[0] == "mark":
                self.marks[event[1]] = min(event[2], self.marks.get(event[1], event[2]))
            elif event[0] == "synced":
                _, generation, member_id, assignment, at = event
                self.ledger.synced_member(generation, member_id, assignment, at)
                self.last_synced_at = max(self.last_synced_at, at)
            elif event[0] == "owned":
                owned.append(event)
            else:
                self.ledger.leader(event[1], event[2])
        self.stable[worker] = update["stable"]
        self.ok_since[worker] = update["ok_since"]
        self.cpu[worker] = update["cpu"]
        self.oldest_ok[worker] = update["oldest_ok"]
        self.shipped_at[worker] = update["at"]
        if isinstance(self.ledger, ShareLedger):
            self.ledger.shipped_by(worker, records, float("inf") if done else update["at"])
        if isinstance(self.ledger, ConsumerLedger):
            self.ledger.oldest_ok = min(self.oldest_ok.values())
            self.ledger.interval_s = max(self.ledger.interval_s, update["interval"])
            self.ledger.shipped_by(worker, owned, float("inf") if done else update["at"])


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_gb"] = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    return info


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    try:
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def required_apis(scenario, params: dict[str, Any]) -> set[ApiKey]:
    apis = (
        scenario.required_apis(params)
        if hasattr(scenario, "required_apis")
        else set(scenario.REQUIRED_APIS)
    )
    if params.get("group_protocol") == "consumer" and not is_share(params):
        apis = (apis - CLASSIC_APIS) | {ApiKey.CONSUMER_GROUP_HEARTBEAT}
    return apis


def is_share(params: dict[str, Any]) -> bool:
    """A share-group run (KIP-932): --group-type share."""
    return params.get("group_type") == "share"


def run(scenario, params: dict[str, Any], display=None) -> dict[str, Any]:
    """Runs one scenario to its end; returns the JSON-ready result."""
    if params["members"] < 1:
        raise LoadError("--members must be at least 1")
    topic = params["topic"] or default_topic(params["group"])
    params = dict(params, topic=topic)
    protocol = params.setdefault("group_protocol", "classic")
    broker = trio.run(
        probe,
        params["bootstrap"],
        required_apis(scenario, params),
        params["group"],
        topic,
        scenario.topic_partitions(params),
        params.get("skip_join", False),
        protocol == "consumer" or is_share(params),
    )
    groups = [] if params.get("skip_join") else [params["group"]]
    if protocol == "consumer" and not is_share(params):
        groups.append(probe_group(params["group"]))
    existed: set[str] | None = set()
    if params.get("cleanup", True) and groups:
        try:
            existed = trio.run(existing_groups, params["bootstrap"], groups)
        except AdminError as e:
            raise LoadError(
                f"cannot tell whether group {params['group']} exists (--no-cleanup skips this): {e}"
            ) from e
    try:
        result = _drive(scenario, params, broker, display)
    finally:
        if params.get("cleanup", True):
            # Groups that existed before the run, and a broker without DeleteGroups: left alone.
            cleaned = run_cleanup(
                params["bootstrap"],
                [] if existed is None else [g for g in groups if g not in existed],
                broker.created_topics,
            )
    if params.get("cleanup", True):
        result["cleanup"] = cleaned
    return result


def default_topic(group: str) -> str:
    """The run's topic when --topic is not given: the group's name (default groups are named
    corral-load-...), else corral-load-<group>."""
    return group if group.startswith("corral-load-") else f"corral-load-{group}"


def _drive(scenario, params: dict[str, Any], broker: BrokerInfo, display) -> dict[str, Any]:
    """Forks the workers, steers the scenario to its end, returns the result."""
    members, workers = params["members"], max(1, params["workers"])
    protocol = params["group_protocol"]
    config = MemberConfig(
        group=params["group"],
        host=broker.coordinator[0],
        port=broker.coordinator[1],
        versions=broker.versions,
        topics=sorted(broker.partitions),
        partitions=broker.partitions,
        session_timeout_ms=params["session_timeout_ms"],
        rebalance_timeout_ms=params["rebalance_timeout_ms"],
        assignor=params["assignor"],
        topic_ids=broker.topic_ids,
        server_assignor=params.get("server_assignor"),
    )
    setup = None
    if is_share(params):
        from corral.load.share.setup import prepare

        setup = trio.run(prepare, broker, params)
        config.share = setup.config
    state = Run(scenario.NAME, params, broker, members, workers, display=display)
    if setup is not None:
        for tp, base, count in setup.produced:
            state.ledger.produced_range(tp, base, count)
        state.metrics["group_configs"] = setup.group_configs
        if setup.produce_seconds is not None:
            state.metrics["produce_seconds"] = round(setup.produce_seconds, 3)
            state.metrics["produced_per_s"] = round(
                state.ledger.produced_total / max(setup.produce_seconds, 1e-9), 1
            )
    elif protocol == "consumer":
        waited = trio.run(wait_assignable, config)
        if waited is None:
            raise LoadError("no KIP-848 member was assigned the topic's partitions within 120 s")
        state.metrics["topic_assignable_seconds"] = round(waited[0], 3)
        state.metrics["heartbeat_interval_ms"] = round(waited[1] * 1000)  # the broker's
    ctx = multiprocessing.get_context("fork")
    procs, command_pipes, result_pipes = [], [], {}
    per, extra = divmod(members, workers)
    first = 0
    for w in range(workers):
        count = per + (1 if w < extra else 0)
        plan = WorkerPlan(scenario.NAME, params, config, first, count, members, w)
        first += count
        cmd_recv, cmd_send = ctx.Pipe(duplex=False)
        res_recv, res_send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker_main, args=(plan, cmd_recv, res_send), daemon=True)
        proc.start()
        cmd_recv.close()
        res_send.close()
        procs.append(proc)
        command_pipes.append(cmd_send)
        result_pipes[res_recv] = w
    busy0, total0 = _machine_busy()
    state.started = time.monotonic()
    deadline = state.started + params["duration"]
    stopping_since = None
    done: set[int] = set()

    def broadcast(message) -> None:
        for pipe in command_pipes:
            try:
                pipe.send(message)
            except (BrokenPipeError, OSError):
                pass

    last_tick = time.monotonic()
    try:
        while len(done) < workers:
            for pipe in multiprocessing.connection.wait(list(result_pipes), timeout=0.2):
                w = result_pipes[pipe]
                try:
                    kind, update = pipe.recv()
                except EOFError:
                    done.add(w)
                    del result_pipes[pipe]
                    continue
                if kind == "failed":
                    state.failures.append(f"worker {w}: {update}")
                    continue
                state.absorb(w, update, done=kind == "done")
                if kind == "done":
                    done.add(w)
            now = time.monotonic()
            if now - last_tick >= SHIP_INTERVAL_S:
                last_tick = now
                state.timeline.append(
                    {
                        "t": round(state.elapsed(), 3),
                        "stable": state.stable_members,
                        "cpu": round(sum(state.cpu.values()), 3),
                    }
                )
                if stopping_since is None:
                    decision = scenario.control(state) if not state.failures else "stop"
                    if now > deadline:
                        state.metrics.setdefault("timed_out", True)
                        decision = "stop"
                    if decision == "stop":
                        stopping_since = now
                        broadcast("stop")
                    elif decision is not None:
                        state.phase = decision
                        state.phases.append(dict(decision, at=round(state.elapsed(), 3)))
                        broadcast(decision)
                elif now - stopping_since > LEAVE_TIMEOUT_S + 20:
                    break  # workers that do not finish are terminated below
                if display is not None:
                    display.update(state)
    finally:
        broadcast("stop")
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join()
    wall = state.elapsed()
    busy1, total1 = _machine_busy()
    return _result(scenario, state, wall, (busy1 - busy0) / max(1.0, total1 - total0))


def _result(scenario, state: Run, wall: float, machine_busy: float) -> dict[str, Any]:
    cpu_per_worker = {w: round(s / wall, 3) for w, s in sorted(state.cpu.items())}
    saturated = any(share > SATURATED_CPU for share in cpu_per_worker.values())
    params = {k: v for k, v in state.params.items() if k not in ("json", "plot", "quiet")}
    result = {
        "scenario": state.scenario,
        "parameters": params,
        "machine": machine(),
        "broker": state.broker.describe(),
        "wall_seconds": round(wall, 3),
        "generator": {
            "workers": state.workers,
            "cpu_seconds": round(sum(state.cpu.values()), 3),
            "cpu_per_worker": cpu_per_worker,  # share of one core, over the whole run
            "saturated": saturated,
            "machine_cpu_busy": round(machine_busy, 3),  # all processes, all cores
        },
        "metrics": {**scenario.summary(state), **state.metrics},
        "latency_ms": {
            api: percentiles(s.latency) for api, s in sorted(state.recorder.samples.items())
        },
        "counts": dict(state.recorder.counts),
        "errors": dict(sorted(state.recorder.errors.items())),
        "violations": state.violations.count,
        "violation_examples": state.violations.examples,
        "phases": state.phases,
        "failures": state.failures,
    }
    if saturated or result["metrics"].get("generator_saturated_at_limit"):
        result["generator"]["saturated"] = True
        result["warnings"] = [
            f"the generator saturated a core (>{SATURATED_CPU:.0%}): its figures "
            "are a lower bound of what the broker can do; add --workers"
        ]
    if isinstance(result["metrics"].get("unfinished"), str):
        result["unfinished"] = result["metrics"].pop("unfinished")
    elif result["metrics"].get("stopped_by") == "duration":
        steps = len(result["metrics"]["steps"])
        result["unfinished"] = (
            f"the ramp ran out of time (--duration {state.params['duration']:g} s) after {steps} "
            f"step(s), before the broker reached saturation: {result['metrics']['sustained_per_s']:g}"
            "/s is a lower bound, not the broker's limit; give it a longer --duration"
        )
    result["_timeline"] = state.timeline
    result["_samples"] = state.recorder.samples
    result["_started"] = state.started
    return result
