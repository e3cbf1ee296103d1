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
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

MAX_VERSION = 32767
KINDS = ("error", "delay", "hold", "close")
_MATCH_STRINGS = ("group", "topic", "member", "client_id", "listener")
_FIELDS = {
    "api",
    "versions",
    "partition",
    *_MATCH_STRINGS,
    "error",
    "delay_ms",
    "hold",
    "close_after",
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
    error: int = 0
    delay_ms: tuple[int, int] = (0, 0)
    close_after: int = 1


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
        if a.kind == "error":
            out["error"] = _error_name(a.error)
        elif a.kind == "delay":
            out["delay_ms"] = a.delay_ms[0] if a.delay_ms[0] == a.delay_ms[1] else list(a.delay_ms)
        elif a.kind == "hold":
            out["hold"] = True
        else:
            out["close_after"] = a.close_after
        if self.count is not None:
            out["count"] = self.count
        if self.duration_ms is not None:
            out["duration_ms"] = self.duration_ms
        if self.after_ms is not None:
            out["after_ms"] = self.after_ms
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
    return Fault(
        id=fault_id,
        match=match,
        action=_action(spec),
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
    given = [
        name
        for name in ("error", "delay_ms", "hold", "close_after")
        if spec.get(name) not in (None, False)
    ]
    if len(given) != 1:
        raise FaultError(
            "give exactly one action: error, delay_ms, hold or close_after"
            + (f" (got {', '.join(given)})" if given else "")
        )
    name = given[0]
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
