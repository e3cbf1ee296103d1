"""A fault: which requests it matches, what it does to them, and for how long.

A fault is written as one flat JSON object (the HTTP API's and the CLI's form, docs/faults.md):

    {"api": "OffsetCommit", "versions": [2, 9], "group": "g", "topic": "t", "partition": 0,
     "member": "m-1", "client_id": "app", "listener": "PLAINTEXT",
     "error": "COORDINATOR_LOAD_IN_PROGRESS",          # or one of the other actions below
     "count": 2, "duration_ms": 10000, "probability": 0.5, "seed": 42}

Match (every field given must hold; none given matches every request Python sees): `api` (Kafka's
name "OffsetCommit", the enum's "OFFSET_COMMIT" or the key 8), `versions` ([lo, hi], "lo-hi" or
one version), `group`, `topic`, `partition` (with or without `topic`), `member`, `client_id`,
`listener`.

Action, exactly one: `error` (a name of corral.errors.ErrorCode or its number: the request is
answered with it instead of being handled, faults/answers.py), `delay_ms` (ms, or [lo, hi] drawn
uniformly: the request is handled that much later), `hold` (true: handled once released), or
`close_after` (N: a connection's N-th matching request closes it unanswered).

Limits: `count` (the next N times it fires, then it is done), `duration_ms` (done that long after
it started), `probability` (each match fires with it, drawn from the fault's own
`random.Random(seed)`; the seed is drawn and reported when not given, so a run can be replayed),
`after_ms` (it starts that long after it was added; until then it is listed as pending and
matches nothing: a scenario file, faults/scenario.py, schedules its faults with it).

A coordinator move on requests: `coordinator` (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
COORDINATOR_NOT_AVAILABLE) with a `group`: every request naming the group is answered it, except
FindCoordinator, which still answers this broker (so the client comes back); limits as above.

Faults on the broker rather than on requests (BROKER_KINDS: they match no request; inject.py acts
on them when they start and end). Group faults act once, when added, and are done at once:
`fence` (true, with `group` and `member`: the member is fenced, or a classic member's session
expires), `rebalance` (true, with `group`), `target` ({member: {topic: [partitions]}}, with
`group`: a consumer group's target assignment). Lasting ones, until removed or `duration_ms` is
over: `unload` (true, with `group`: the group's coordinator shard unloaded, reloaded at the end),
`disk_full` (true), `failing_fsyncs` (N: the next N flush passes fail), `fsync_delay_ms` (ms per
flush pass; the three storage ones may be given together), `refuse_connections` (true, with an
optional `listener`: new connections are closed at once). These take no `count` or
`probability`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

MAX_VERSION = 32767
# Faults on the broker, not on requests: group faults done once when added (ONE_SHOT_KINDS),
# then an unloaded coordinator shard, storage faults, refused connections.
ONE_SHOT_KINDS = ("fence", "rebalance", "target")
BROKER_KINDS = (*ONE_SHOT_KINDS, "unload", "storage", "refuse")
KINDS = ("error", "delay", "hold", "close", "coordinator", *BROKER_KINDS)
# The errors a coordinator answers while its group moves or loads.
COORDINATOR_ERRORS = (
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
)
_STORAGE = ("disk_full", "failing_fsyncs", "fsync_delay_ms")
# Each action's field, in the order `_action` looks for them.
_ACTIONS = (
    "error",
    "delay_ms",
    "hold",
    "close_after",
    "coordinator",
    "fence",
    "rebalance",
    "target",
    "unload",
    "refuse_connections",
)
_MATCH_STRINGS = ("group", "topic", "member", "client_id", "listener")
_FIELDS = {
    "api",
    "versions",
    "partition",
    *_MATCH_STRINGS,
    *_ACTIONS,
    *_STORAGE,
    "count",
    "duration_ms",
    "probability",
    "seed",
    "after_ms",
}
# How many of the match ordinals a fault fired on it keeps (`fired_on`, for replays).
FIRED_ON_KEPT = 100


class FaultError(ValueError):
    """A fault description that cannot be used (the HTTP API answers 400 with it)."""


class FaultRefused(FaultError):
    """A broker fault the broker refused when it was to act: the HTTP API answers `status` with
    Kafka's error name (`kafka_error`) and the message."""

    def __init__(self, status: int, kafka_error: str, message: str):
        super().__init__(f"{kafka_error}: {message}")
        self.status = status
        self.kafka_error = kafka_error
        self.message = message


def api_key(value: Any) -> int:
    """8, "8", "OffsetCommit" or "OFFSET_COMMIT" -> 8."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(ApiKey(value)) if value in ApiKey._value2member_map_ else _bad_api(value)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return api_key(int(text))
        folded = text.replace("_", "").lower()
        for key in ApiKey:
            if key.name.replace("_", "").lower() == folded:
                return int(key)
    return _bad_api(value)


def _bad_api(value: Any) -> int:
    raise FaultError(f"api: {value!r} is not an API corral implements (a name or a key)")


def api_name(key: int) -> str:
    """Kafka's name of the API ("OffsetCommit")."""
    return "".join(part.capitalize() for part in ApiKey(key).name.split("_"))


def error_code(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return int(ErrorCode(value))
        except ValueError:
            pass
    elif isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return error_code(int(text))
        try:
            return int(ErrorCode[text.upper()])
        except KeyError:
            pass
    raise FaultError(f"error: {value!r} is not a Kafka error code (a name or a number)")


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise FaultError(f"{name}: {value!r} is not an integer in [{lo}, {hi}]")
    return value


def _range(name: str, value: Any, lo: int, hi: int) -> tuple[int, int]:
    """N, "N", "N-M", [N, M] -> (N, M)."""
    if isinstance(value, str) and "-" in value.strip()[1:]:
        first, _, second = value.strip().partition("-")
        value = [first, second]
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise FaultError(f"{name}: {value!r} is not [low, high]")
        low, high = _int(name, value[0], lo, hi), _int(name, value[1], lo, hi)
        if low > high:
            raise FaultError(f"{name}: {low} is above {high}")
        return low, high
    one = _int(name, value, lo, hi)
    return one, one


@dataclass(frozen=True)
class Match:
    api_key: int | None = None
    versions: tuple[int, int] = (0, MAX_VERSION)
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    member: str | None = None
    client_id: str | None = None
    listener: str | None = None

    @property
    def needs_body(self) -> bool:
        """Whether matching reads the request's body (groups, topics, members)."""
        return any(v is not None for v in (self.group, self.topic, self.partition, self.member))


@dataclass(frozen=True)
class Action:
    kind: str  # one of KINDS
    error: int = 0  # error, coordinator
    delay_ms: tuple[int, int] = (0, 0)
    close_after: int = 1
    # target: member id -> topic -> partitions.
    target: dict[str, dict[str, list[int]]] = field(default_factory=dict, compare=False)
    # storage: any of the three, given together or apart.
    disk_full: bool = False
    failing_fsyncs: int = 0
    fsync_delay_ms: int = 0


@dataclass
class Fault:
    id: int
    match: Match
    action: Action
    count: int | None
    duration_ms: int | None
    probability: float
    seed: int
    added_at: float  # the registry's clock, seconds
    rng: random.Random = field(repr=False)
    matched: int = 0
    fired: int = 0
    active: bool = True
    # Why it is no longer active ("count", "duration", "removed"); "" while active.
    ended: str = ""
    # close: a connection's matching requests so far, until it reaches close_after.
    per_connection: dict[int, int] = field(default_factory=dict, repr=False)
    # Starts this long after it was added (pending until then).
    after_ms: int | None = None
    # The ordinals (1-based, among the requests it matched) of the first FIRED_ON_KEPT matches it
    # fired on: with the same seed and the same requests, the same list (a replay's check).
    fired_on: list[int] = field(default_factory=list, repr=False)

    @property
    def starts_at(self) -> float:
        return self.added_at + (self.after_ms or 0) / 1000

    @property
    def expires_at(self) -> float | None:
        if self.duration_ms is None:
            return None
        return self.starts_at + self.duration_ms / 1000

    @property
    def pending(self) -> bool:
        """Added with after_ms, not started yet (and not removed)."""
        return not self.active and not self.ended

    def describe(self) -> dict[str, Any]:
        """The fault as the API lists it: its description plus id, state and counters."""
        out: dict[str, Any] = {"id": self.id}
        m = self.match
        if m.api_key is not None:
            out["api"] = api_name(m.api_key)
        if m.versions != (0, MAX_VERSION):
            out["versions"] = list(m.versions)
        for name in ("group", "topic", "partition", "member", "client_id", "listener"):
            value = getattr(m, name)
            if value is not None:
                out[name] = value
        a = self.action
        if a.kind in ("error", "coordinator"):
            out[a.kind] = _error_name(a.error)
        elif a.kind == "delay":
            out["delay_ms"] = a.delay_ms[0] if a.delay_ms[0] == a.delay_ms[1] else list(a.delay_ms)
        elif a.kind == "close":
            out["close_after"] = a.close_after
        elif a.kind == "target":
            out["target"] = a.target
        elif a.kind == "storage":
            if a.disk_full:
                out["disk_full"] = True
            if a.failing_fsyncs:
                out["failing_fsyncs"] = a.failing_fsyncs
            if a.fsync_delay_ms:
                out["fsync_delay_ms"] = a.fsync_delay_ms
        else:  # hold, fence, rebalance, unload, refuse
            out["refuse_connections" if a.kind == "refuse" else a.kind] = True
        if self.count is not None:
            out["count"] = self.count
        if self.duration_ms is not None:
            out["duration_ms"] = self.duration_ms
        if self.after_ms is not None:
            out["after_ms"] = self.after_ms
        if a.kind not in BROKER_KINDS:
            out["probability"] = self.probability
            out["seed"] = self.seed
        out.update(matched=self.matched, fired=self.fired, active=self.active)
        out["fired_on"] = list(self.fired_on)
        if self.pending:
            out["pending"] = True
        if self.ended:
            out["ended"] = self.ended
        return out


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def parse(spec: Any, fault_id: int, now: float) -> Fault:
    """A Fault from its JSON description (raises FaultError naming what is wrong)."""
    if not isinstance(spec, dict):
        raise FaultError("a fault is a JSON object")
    unknown = sorted(set(spec) - _FIELDS)
    if unknown:
        raise FaultError(f"unknown field(s): {', '.join(unknown)}")
    strings: dict[str, str | None] = {}
    for name in _MATCH_STRINGS:
        value = spec.get(name)
        if value is not None and not isinstance(value, str):
            raise FaultError(f"{name}: {value!r} is not a string")
        strings[name] = value
    match = Match(
        api_key=api_key(spec["api"]) if spec.get("api") is not None else None,
        versions=_range("versions", spec["versions"], 0, MAX_VERSION)
        if spec.get("versions") is not None
        else (0, MAX_VERSION),
        partition=_int("partition", spec["partition"], 0, 2**31 - 1)
        if spec.get("partition") is not None
        else None,
        **strings,
    )
    if match.api_key == ApiKey.API_VERSIONS:
        raise FaultError("api: ApiVersions is answered by the network thread; no fault reaches it")
    action = _action(spec)
    _check_broker_fault(action.kind, spec)
    return Fault(
        id=fault_id,
        match=match,
        action=action,
        count=_int("count", spec["count"], 1, 2**63 - 1) if spec.get("count") is not None else None,
        duration_ms=_int("duration_ms", spec["duration_ms"], 1, 2**63 - 1)
        if spec.get("duration_ms") is not None
        else None,
        probability=_probability(spec.get("probability", 1.0)),
        seed=(seed := _seed(spec.get("seed"))),
        added_at=now,
        rng=random.Random(seed),
        after_ms=_int("after_ms", spec["after_ms"], 0, 2**63 - 1)
        if spec.get("after_ms") is not None
        else None,
    )


def _action(spec: dict[str, Any]) -> Action:
    # `is not False`, not `not in (None, False)`: 0 == False, and delay_ms 0 is an action.
    given = [name for name in _ACTIONS if spec.get(name) is not None and spec[name] is not False]
    storage = [name for name in _STORAGE if spec.get(name) not in (None, False, 0)]
    if storage:
        given.append("/".join(storage))
    if len(given) != 1:
        raise FaultError(
            "give exactly one action: error, delay_ms, hold, close_after, coordinator, fence, "
            "rebalance, target, unload, refuse_connections, or storage faults (disk_full, "
            "failing_fsyncs, fsync_delay_ms)" + (f" (got {', '.join(given)})" if given else "")
        )
    if storage:
        if spec.get("disk_full") not in (None, False, True):
            raise FaultError(f"disk_full: {spec['disk_full']!r} is not true or false")
        return Action(
            "storage",
            disk_full=spec.get("disk_full") is True,
            failing_fsyncs=_int("failing_fsyncs", spec.get("failing_fsyncs") or 0, 0, 2**32 - 1),
            fsync_delay_ms=_int("fsync_delay_ms", spec.get("fsync_delay_ms") or 0, 0, 3_600_000),
        )
    name = given[0]
    if name in ("fence", "rebalance", "unload", "refuse_connections"):
        if spec[name] is not True:
            raise FaultError(f"{name}: {spec[name]!r} is not true")
        return Action("refuse" if name == "refuse_connections" else name)
    if name == "target":
        return Action("target", target=_target(spec["target"]))
    if name == "coordinator":
        code = error_code(spec["coordinator"])
        if ErrorCode(code).name not in COORDINATOR_ERRORS:
            raise FaultError(
                f"coordinator: {spec['coordinator']!r} is not one of {COORDINATOR_ERRORS}"
            )
        return Action("coordinator", error=code)
    if name == "error":
        code = error_code(spec["error"])
        if code == ErrorCode.NONE:
            raise FaultError("error: NONE is not an error")
        return Action("error", error=code)
    if name == "delay_ms":
        return Action("delay", delay_ms=_range("delay_ms", spec["delay_ms"], 0, 3_600_000))
    if name == "hold":
        if spec["hold"] is not True:
            raise FaultError(f"hold: {spec['hold']!r} is not true")
        return Action("hold")
    return Action("close", close_after=_int("close_after", spec["close_after"], 1, 2**31 - 1))


def _target(value: Any) -> dict[str, dict[str, list[int]]]:
    """{member id: {topic: [partitions]}}, checked for its shape (the coordinator checks the
    members, topics and partitions)."""
    if not isinstance(value, dict):
        raise FaultError("target: not an object {member id: {topic: [partitions]}}")
    out: dict[str, dict[str, list[int]]] = {}
    for member, topics in value.items():
        if not isinstance(topics, dict):
            raise FaultError(f"target: {member}: not an object {{topic: [partitions]}}")
        out[member] = {}
        for topic, partitions in topics.items():
            if not isinstance(partitions, list):
                raise FaultError(f"target: {member}: {topic}: not a list of partitions")
            out[member][topic] = [_int(f"target: {topic}", p, 0, 2**31 - 1) for p in partitions]
    return out


# What each broker fault needs (besides its action) and what it may have.
_NEEDS = {"fence": ("group", "member"), "rebalance": ("group",), "target": ("group",)}
_NEEDS.update(unload=("group",), coordinator=("group",))
_MAY = {"refuse": {"listener", "duration_ms"}, "unload": {"group", "duration_ms"}}
_MAY["storage"] = {"duration_ms"}


def _check_broker_fault(kind: str, spec: dict[str, Any]) -> None:
    for name in _NEEDS.get(kind, ()):
        if spec.get(name) is None:
            raise FaultError(f"{_field_of(kind)} needs a {name}")
    if kind not in BROKER_KINDS:
        return
    allowed = _MAY.get(kind, set(_NEEDS.get(kind, ())))
    given = {name for name in spec if spec[name] is not None and name != "seed"}
    extra = sorted(given - allowed - set(_ACTIONS) - set(_STORAGE))
    if extra:
        raise FaultError(f"{_field_of(kind)} takes no {', '.join(extra)}")


def _field_of(kind: str) -> str:
    return {"refuse": "refuse_connections", "storage": "a storage fault"}.get(kind, kind)


def _probability(value: Any) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise FaultError(f"probability: {value!r} is not a number in (0, 1]")
    return float(value)


def _seed(value: Any) -> int:
    if value is None:
        return random.SystemRandom().randrange(2**32)
    return _int("seed", value, 0, 2**63 - 1)
