"""The driver of the scripted scenario of tests/kits/analyze_scenario.py (its plan, its truth
and what is expected of it are described there): `run(bootstrap)` creates the topics and groups,
ticks through PHASES (producing, committing by role, changing the membership groups at each
phase's start, waiting for them to settle) and returns the `Truth` it recorded."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

from analyze_scenario import (
    BEHIND,
    BEHIND_EVERY,
    CLASSIC_SESSION_MS,
    IDLE_PARTITIONS,
    IDLE_TOPIC,
    KEEP,
    MEMBER_GROUPS,
    PHASES,
    RATES,
    REWIND,
    ROLES,
    ROTATION,
    STALL,
    STATIC_SESSION_MS,
    STATUS_GROUPS,
    STATUS_PARTITIONS,
    STATUS_TOPIC,
    STOP,
    TICK_MS,
    Commit,
    Key,
    Membership,
    Phase,
    PhasePlan,
    Rebalance,
    Tick,
    Truth,
)
from cgkit import MemberProcess, stop_processes
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from raw_groups import describe, describe_groups_raw

from corral.analyze import rules

SETUP_TIMEOUT_S = 60.0  # Kafka creates __consumer_offsets at the first FindCoordinator
ACTION_TIMEOUT_S = 30.0


def now_ms() -> int:
    return math.floor(time.time() * 1000)


def after_ms() -> int:
    return math.ceil(time.time() * 1000)


class ScenarioError(AssertionError):
    pass


# ------------------------------------------------------------------------- the status groups


class _Partition:
    """What one role does on one partition of one status group, tick by tick."""

    def __init__(self, role: str):
        self.role = role
        self.last: int | None = None  # last committed offset
        self.stall_at: int | None = None
        self.before_rewind: int | None = None

    def offset(self, act: str, log_end: int, tick: int, in_tail: bool) -> int | None:
        """The offset to commit at this tick, or None."""
        if act != STALL:
            self.stall_at = None
        if act != REWIND or not in_tail:
            self.before_rewind = None
        if act == KEEP or (act == REWIND and not in_tail) or self.last is None:
            return log_end
        if act == STOP:
            return None
        if act == STALL:
            if self.stall_at is None:
                self.stall_at = self.last
            return self.stall_at
        if act == BEHIND:
            return self.last + 1 if tick % BEHIND_EVERY == 0 else None
        if self.before_rewind is None:  # REWIND, first tick of the tail
            self.before_rewind = self.last
            return self.last // 2
        offset = self.last + 1  # reprocessing, still below where it was
        if offset >= self.before_rewind:
            raise ScenarioError(f"rewind caught up too soon: {offset} >= {self.before_rewind}")
        return offset


# --------------------------------------------------------------------------------- the driver


def _member(name: str, group: str, **extra) -> dict:
    protocol = MEMBER_GROUPS[group]
    spec = {"name": name, "group": group, "protocol": protocol, **extra}
    if protocol == "classic":
        spec.setdefault("session_timeout_ms", 6000)
        spec.setdefault("heartbeat_interval_ms", 500)
    else:
        spec.pop("session_timeout_ms", None)  # KIP-848: the broker's session timeout
    return spec


def _instance(protocol: str) -> str:
    return f"sc-static-{protocol}"


class _Driver:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.truth = Truth(bootstrap)
        self.processes: list[MemberProcess] = []
        self.consumers: dict[str, Consumer] = {}
        self.parts: dict[Key, _Partition] = {}
        self.log_end = [0] * STATUS_PARTITIONS
        self.delivered: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})

    # -- setup ----------------------------------------------------------------------------

    def setup(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(t, n, 1) for t, n in self.truth.topics.items()])
        for f in futures.values():
            f.result(timeout=20)
        groups = list(MEMBER_GROUPS)
        # base: a steady member and a static one of each membership group; victim: killed in
        # `settle`; spare: the static member's successor, held until `steady` starts it.
        self.base = self._process(
            [_member(f"a-{MEMBER_GROUPS[g]}", g) for g in groups]
            + [
                _member(
                    f"s-{MEMBER_GROUPS[g]}",
                    g,
                    instance_id=_instance(MEMBER_GROUPS[g]),
                    session_timeout_ms=STATIC_SESSION_MS,
                )
                for g in groups
            ]
        )
        self.victim = self._process(
            [
                _member(f"c-{MEMBER_GROUPS[g]}", g, session_timeout_ms=CLASSIC_SESSION_MS)
                for g in groups
            ]
        )
        # A restarted instance: same instance id and client id, a new member id.
        self.spare = self._process(
            [
                _member(
                    f"s2-{MEMBER_GROUPS[g]}",
                    g,
                    hold=True,
                    client_id=f"s-{MEMBER_GROUPS[g]}",
                    instance_id=_instance(MEMBER_GROUPS[g]),
                    session_timeout_ms=STATIC_SESSION_MS,
                )
                for g in groups
            ]
        )
        for group, protocol in STATUS_GROUPS.items():
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": group,
                    "group.protocol": protocol,
                    "enable.auto.commit": False,
                    "client.id": f"{group}-member",
                    "log_level": 4,
                    "error_cb": lambda err: self.errors.append(str(err)),
                }
            )
            consumer.subscribe([STATUS_TOPIC])
            self.consumers[group] = consumer
            for p in range(STATUS_PARTITIONS):
                key = (group, STATUS_TOPIC, p)
                role = ROLES[(p + ROTATION[group]) % len(ROLES)]
                self.truth.roles[key] = role
                self.truth.commits[key] = []
                self.parts[key] = _Partition(role)
        for p in range(STATUS_PARTITIONS):
            self.truth.ticks[(STATUS_TOPIC, p)] = []
        everything = set(range(STATUS_PARTITIONS))

        def ready() -> bool:
            self._poll()
            return all(
                {tp.partition for tp in c.assignment()} == everything
                for c in self.consumers.values()
            ) and all(self._settled(g, 3) for g in MEMBER_GROUPS)

        self._wait(ready, SETUP_TIMEOUT_S, "status groups assigned, membership groups of 3")
        for c in self.consumers.values():
            c.pause(c.assignment())  # nothing to fetch: commits are all they do

    def _process(self, specs: list[dict]) -> MemberProcess:
        p = MemberProcess(
            "confluent", self.bootstrap, specs[0]["group"], specs, topics=[IDLE_TOPIC]
        )
        self.processes.append(p)
        return p

    def _poll(self) -> None:
        for c in self.consumers.values():
            c.poll(0)

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise ScenarioError(
                    f"timed out after {timeout}s waiting for {what}: {self._state()}"
                )
            time.sleep(0.1)

    def _state(self) -> str:
        groups = {g: self._describe(g) for g in MEMBER_GROUPS}
        logs = "".join(
            f"\n--- member process {i}\n{p.log_tail()}" for i, p in enumerate(self.processes)
        )
        return f"groups: {groups}; client errors: {self.errors[-10:]}{logs}"

    # -- membership groups -----------------------------------------------------------------

    def _describe(self, group: str) -> tuple[str, list[tuple[str, str | None, frozenset]]] | None:
        """(state, [(member id, instance id, assigned)]); None on an error. A consumer group
        shows "Reconciling" until every member is at the group epoch with its target."""
        if MEMBER_GROUPS[group] == "classic":
            g = describe_groups_raw(self.bootstrap, group)
            if g["error_code"]:
                return None
            return g["group_state"], [
                (m["member_id"], m["group_instance_id"], m["assigned"]) for m in g["members"]
            ]
        g = describe(self.bootstrap, group)
        if g["error_code"]:
            return None
        if any(
            m["member_epoch"] != g["group_epoch"] or m["assignment"] != m["target_assignment"]
            for m in g["members"]
        ):
            return "Reconciling", []
        return g["group_state"], [
            (m["member_id"], m["instance_id"], m["assignment"]) for m in g["members"]
        ]

    def _settled(
        self, group: str, members: int, check: Callable[[list], bool] = lambda _: True
    ) -> bool:
        d = self._describe(group)
        if d is None or d[0] != "Stable" or len(d[1]) != members:
            return False
        owned = [tp for _, _, assigned in d[1] for tp in assigned or ()]
        idle = {(IDLE_TOPIC, p) for p in range(IDLE_PARTITIONS)}
        return len(owned) == len(set(owned)) and set(owned) == idle and check(d[1])

    def _static_id(self, group: str) -> str | None:
        d = self._describe(group)
        instance = _instance(MEMBER_GROUPS[group])
        return next((mid for mid, inst, _ in (d[1] if d else []) if inst == instance), None)

    def _until(
        self, group: str, members: int, phase: str, check: Callable[[list], bool] = lambda _: True
    ) -> Iterator[None]:
        deadline = time.monotonic() + ACTION_TIMEOUT_S
        while not self._settled(group, members, check):
            if time.monotonic() > deadline:
                raise ScenarioError(
                    f"{phase}: {group} not settled with {members} members within "
                    f"{ACTION_TIMEOUT_S}s: {self._state()}"
                )
            yield

    def _actions(self, plan: PhasePlan) -> list[Iterator[None]]:
        """One generator per membership group, advanced once per tick until it is settled."""
        requested = now_ms()
        if plan.action == "join":
            self.joiner = self._process([_member(f"b-{p}", g) for g, p in MEMBER_GROUPS.items()])
        elif plan.action == "expire":
            self.victim.kill()
        return [
            getattr(self, f"_{plan.action}")(group, protocol, plan.name, requested)
            for group, protocol in MEMBER_GROUPS.items()
        ]

    def _replace_static(self, group, protocol, phase, requested):
        old = self._static_id(group)
        self.base.close(f"s-{protocol}")
        deadline = time.monotonic() + ACTION_TIMEOUT_S
        while not self.base[f"s-{protocol}"].closed:  # its leave (or no leave, classic) is done
            if time.monotonic() > deadline:
                raise ScenarioError(f"{phase}: s-{protocol} did not close: {self._state()}")
            yield
        self.spare.start(f"s2-{protocol}")
        yield from self._until(
            group,
            3,
            phase,
            lambda ms: any(inst == _instance(protocol) and mid != old for mid, inst, _ in ms),
        )
        settled = after_ms()
        for event in ("member_fenced", "member_joined"):
            self.truth.memberships.append(
                Membership(
                    group,
                    protocol,
                    phase,
                    event,
                    f"s-{protocol}",
                    _instance(protocol),
                    requested,
                    settled,
                )
            )

    def _change(self, group, protocol, phase, requested, event, name, before, after):
        yield from self._until(group, after, phase)
        settled = after_ms()
        self.truth.memberships.append(
            Membership(
                group, protocol, phase, event, f"{name}-{protocol}", None, requested, settled
            )
        )
        self.truth.rebalances.append(
            Rebalance(group, protocol, phase, event, before, after, requested, settled)
        )

    def _join(self, group, protocol, phase, requested):
        return self._change(group, protocol, phase, requested, "member_joined", "b", 3, 4)

    def _leave(self, group, protocol, phase, requested):
        self.joiner.close(f"b-{protocol}")
        return self._change(group, protocol, phase, requested, "member_left", "b", 4, 3)

    def _expire(self, group, protocol, phase, requested):
        return self._change(group, protocol, phase, requested, "member_expired", "c", 3, 2)

    # -- ticks -----------------------------------------------------------------------------

    def _produce(self, start: int) -> None:
        def done(err, msg):
            if err is not None:
                self.errors.append(f"produce: {err}")
            else:
                self.delivered.append((msg.partition(), msg.offset()))

        self.delivered.clear()
        for p, rate in enumerate(RATES):
            for _ in range(rate):
                self.producer.produce(STATUS_TOPIC, b"x", partition=p, on_delivery=done)
        if self.producer.flush(30) or len(self.delivered) != sum(RATES):
            raise ScenarioError(f"produce failed: {self.errors[-5:]}")
        for p, offset in self.delivered:
            self.log_end[p] = max(self.log_end[p], offset + 1)
        finished = after_ms()
        for p in range(STATUS_PARTITIONS):
            self.truth.ticks[(STATUS_TOPIC, p)].append(Tick(start, finished, self.log_end[p]))

    def _commit(self, plan: PhasePlan, tick: int, in_tail: bool) -> None:
        for group, consumer in self.consumers.items():
            chosen = []
            for p in range(STATUS_PARTITIONS):
                part = self.parts[(group, STATUS_TOPIC, p)]
                offset = part.offset(plan.acts[part.role], self.log_end[p], tick, in_tail)
                if offset is not None:
                    chosen.append((p, offset))
            if not chosen:
                continue
            sent = now_ms()
            answer = consumer.commit(
                offsets=[TopicPartition(STATUS_TOPIC, p, off) for p, off in chosen],
                asynchronous=False,
            )
            acked = after_ms()
            failed = [tp for tp in answer if tp.error is not None]
            if failed:
                raise ScenarioError(f"{group}: commit failed: {failed}")
            for p, offset in chosen:
                key = (group, STATUS_TOPIC, p)
                self.parts[key].last = offset
                self.truth.commits[key].append(Commit(sent, acked, offset, self.log_end[p]))

    def run(self) -> Truth:
        """Ticks until the last phase ended; a phase ends at the start of the tick after its
        last one, which is the next phase's start."""
        tick = 0  # all ticks so far: the laggard's clock
        phases = iter(PHASES)
        plan = next(phases)
        start = tail_from = None
        n = 0
        actions: list[Iterator[None]] = []
        next_start = time.monotonic()
        while True:
            time.sleep(max(0.0, next_start - time.monotonic()))
            tick_start = now_ms()
            next_start = time.monotonic() + TICK_MS / 1000
            if tail_from is not None and n >= max(plan.min_ticks, tail_from + plan.tail):
                self.truth.phases.append(self._phase(plan, start, tick_start, n))
                plan = next(phases, None)
                if plan is None:
                    break
                start = tail_from = None
                n = 0
            if start is None:
                start = tick_start
            self._produce(tick_start)
            self._commit(plan, tick, tail_from is not None)
            self._poll()
            if n == 0:
                actions = self._actions(plan)
            actions = [a for a in actions if next(a, StopIteration) is not StopIteration]
            n += 1
            tick += 1
            if tail_from is None and not actions and n >= plan.min_ticks - plan.tail:
                tail_from = n
        self.truth.start_ms = self.truth.phases[0].start_ms
        self.truth.end_ms = tick_start
        while now_ms() <= tick_start:  # whatever comes next (the teardown) is after the end
            time.sleep(0.001)
        return self.truth

    def _phase(self, plan: PhasePlan, start: int, end: int, ticks: int) -> Phase:
        expected = {key: plan.expect[role] for key, role in self.truth.roles.items()}
        codes = {name: code for code, name in rules.STATUS_NAMES.items()}
        group = {
            g: rules.STATUS_NAMES[
                rules.group_status(codes[s] for k, s in expected.items() if k[0] == g)
            ]
            for g in STATUS_GROUPS
        }
        return Phase(plan.name, start, end, ticks, expected, group)

    def close(self, failed: bool) -> None:
        for c in self.consumers.values():
            c.close()
        if failed:
            stop_processes(self.processes)
        for p in self.processes:
            p.close_all()


def run(bootstrap: str) -> Truth:
    """Runs the whole scenario on a fresh cluster (its topics and groups must not exist) and
    returns the truth; member processes are gone when it returns, even on failure."""
    driver = _Driver(bootstrap)
    failed = True
    try:
        driver.setup()
        truth = driver.run()
        failed = False
        return truth
    finally:
        driver.close(failed)
