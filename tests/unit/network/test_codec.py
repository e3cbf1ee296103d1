"""Codec round trips for every version of every advertised API.

Sample bodies are generated from the message schemas as kafka-protocol states them in its
sources (rust/vendor/kafka-protocol/src/messages): each struct's fields, their types and the
versions that carry them. A request goes client encoder -> `_core.Connection` (the server's
decoder) and must come back as sent; a response goes `Request.respond` (the server's encoder) ->
client decoder. Fields a version does not carry come back as their defaults.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from checkout import ROOT

from corral import _core
from corral.network.apis import ApiKey, api_table

MESSAGES = ROOT / "rust/vendor/kafka-protocol/src/messages"
APIS_RS = ROOT / "rust/codec/apis.rs"

SCALARS = {"bool", "i8", "i16", "i32", "i64", "u16", "u32", "f64", "StrBytes", "Bytes", "Uuid"}
NEWTYPES = {
    "BrokerId": "i32",
    "GroupId": "StrBytes",
    "ProducerId": "i64",
    "TopicName": "StrBytes",
    "TransactionalId": "StrBytes",
}
INT_RANGES = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}


@dataclass(frozen=True)
class Field:
    key: str  # the Python dict key
    type: str  # Rust type, `super::` stripped
    versions: tuple[int, int] | None  # None: in no version

    def in_version(self, version: int) -> bool:
        return self.versions is not None and self.versions[0] <= version <= self.versions[1]


STRUCT = re.compile(r"^pub struct (\w+) \{$")
FIELD = re.compile(r"^    pub (\w+): (.+),$")
VERSIONS = re.compile(r"Supported API versions: (none|(\d+)(?:-(\d+))?)")


@cache
def schema(module: str) -> dict[str, list[Field]]:
    """Struct name -> fields, read from one kafka-protocol message module."""
    structs: dict[str, list[Field]] = {}
    name, versions = None, None
    for line in (MESSAGES / f"{module}.rs").read_text().splitlines():
        if m := STRUCT.match(line):
            name, structs[m.group(1)], versions = m.group(1), [], None
        elif name and line == "}":
            name = None
        elif name and (m := VERSIONS.search(line)):
            versions = (
                None if m.group(1) == "none" else (int(m.group(2)), int(m.group(3) or m.group(2)))
            )
        elif name and (m := FIELD.match(line)):
            if m.group(1) != "unknown_tagged_fields":
                structs[name].append(
                    Field(m.group(1).lstrip("_"), m.group(2).replace("super::", ""), versions)
                )
            versions = None
    return structs


@cache
def message_types() -> dict[int, tuple[str, str]]:
    """API key -> (request type, response type), as rust/codec/apis.rs pairs them."""
    found = re.findall(r"^\s*(\d+) => (\w+), (\w+);", APIS_RS.read_text(), re.M)
    return {int(key): (req, resp) for key, req, resp in found}


def module_of(type_name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", type_name).lower()


def unwrap(rust_type: str) -> tuple[str, str]:
    """('vec' | 'struct' | 'scalar', inner type), looking through Option<> and newtypes."""
    t = rust_type
    while m := re.fullmatch(r"Option<(.+)>", t):
        t = m.group(1)
    if m := re.fullmatch(r"Vec<(.+)>", t):
        return "vec", m.group(1)
    t = NEWTYPES.get(t, t)
    return ("scalar" if t in SCALARS else "struct"), t


class Bodies:
    """Builds bodies of one message type at one version."""

    def __init__(self, type_name: str, version: int):
        self.structs = schema(module_of(type_name))
        self.top = type_name
        self.version = version
        self.counter = 0

    def fields(self, struct: str) -> list[Field]:
        return [f for f in self.structs[struct] if f.in_version(self.version)]

    def skeleton(self, struct: str | None = None) -> dict[str, Any]:
        """All defaults, except that struct-valued fields hold one all-default element, so that
        decoding it shows the default of every nested field."""
        body = {}
        for f in self.fields(struct or self.top):
            kind, inner = unwrap(f.type)
            if kind == "struct":
                body[f.key] = self.skeleton(inner)
            elif kind == "vec" and unwrap(inner)[0] == "struct":
                body[f.key] = [self.skeleton(unwrap(inner)[1])]
        return body

    def sample(self, defaults: dict[str, Any], struct: str | None = None) -> dict[str, Any]:
        """Every field of this version set to a value other than its default."""
        body = {}
        for f in self.fields(struct or self.top):
            kind, inner = unwrap(f.type)
            if kind == "struct":
                body[f.key] = self.sample(defaults[f.key], inner)
            elif kind == "vec":
                item_kind, item = unwrap(inner)
                if item_kind == "struct":
                    body[f.key] = [self.sample(defaults[f.key][0], item) for _ in range(2)]
                else:
                    body[f.key] = [self.scalar(item, None, f.key) for _ in range(3)]
            else:
                body[f.key] = self.scalar(inner, defaults.get(f.key), f.key)
        return body

    def scalar(self, t: str, default: Any, key: str) -> Any:
        self.counter += 1
        n = self.counter
        if t == "bool":
            return not default
        if t in INT_RANGES:
            bits = INT_RANGES[t]
            value = (default or 0) + n
            return value if value < 2 ** (bits - 1) else -(2 ** (bits - 1)) + n
        if t in ("u16", "u32"):
            return ((default or 0) + n) % (2 ** int(t[1:]))
        if t == "f64":
            return (default or 0.0) + n + 0.25
        if t == "StrBytes":
            return f"{key}-{n}-é"
        if t == "Bytes":
            return bytes([n % 256, 0, 255, 7]) * 3
        if t == "Uuid":
            return uuid.UUID(int=(n << 64) | 0xC0DEC).bytes
        raise AssertionError(f"no sample for type {t}")


def overlay(defaults: Any, sent: Any) -> Any:
    """What a decoder must return: the sent values, and defaults for everything not sent."""
    if isinstance(sent, dict):
        return {k: overlay(defaults[k], sent[k]) if k in sent else v for k, v in defaults.items()}
    if isinstance(sent, list) and sent and isinstance(sent[0], dict):
        return [overlay(defaults[0], item) for item in sent]
    return sent


def advertised_versions() -> list[tuple[ApiKey, int]]:
    cases = []
    for key, lo, hi in api_table().advertised():
        codec_lo, codec_hi = _core.codec_versions(key)
        # Versions below the codec's range are advertised only to be refused (old Produce).
        cases += [(ApiKey(key), v) for v in range(max(lo, codec_lo), hi + 1)]
    return cases


CASES = advertised_versions()
PYTHON_OWNED = [(k, v) for k, v in CASES if k != ApiKey.API_VERSIONS]
IDS = [f"{k.name}-v{v}" for k, v in PYTHON_OWNED]


class ServerSide:
    """The server's codec, as `corral.server` drives it."""

    table = api_table()

    def __init__(self):
        self.connection = _core.Connection(self.table, 1 << 24)

    def receive(self, frame: bytes) -> Any:
        # Fed in two pieces, as TCP may deliver it.
        self.connection.feed(frame[:5])
        assert self.connection.next() is None
        self.connection.feed(frame[5:])
        item = self.connection.next()
        assert self.connection.next() is None and self.connection.buffered() == 0
        return item


def request_through_server(key: int, version: int, body: dict, correlation_id: int = 5) -> Any:
    frame = _core.encode_request(key, version, correlation_id, body, "codec-test")
    return ServerSide().receive(frame)


@pytest.mark.parametrize("key, version", PYTHON_OWNED, ids=IDS)
def test_request_round_trip(key, version):
    request_type = message_types()[key][0]
    bodies = Bodies(request_type, version)
    defaults = request_through_server(key, version, bodies.skeleton()).body
    sent = bodies.sample(defaults)
    request = request_through_server(key, version, sent, correlation_id=2**31 - 1)
    assert isinstance(request, _core.Request)
    assert (request.api_key, request.api_version, request.correlation_id) == (
        key,
        version,
        2**31 - 1,
    )
    assert request.client_id == "codec-test"
    assert request.body == overlay(defaults, sent)
    # The sample really differs from the defaults, so the comparison above could fail (some
    # requests, like ListGroups v0-3, have no fields at all).
    assert request.body != defaults or not sent


@pytest.mark.parametrize("key, version", PYTHON_OWNED, ids=IDS)
def test_response_round_trip(key, version):
    request_type, response_type = message_types()[key]
    request = request_through_server(key, version, Bodies(request_type, version).skeleton(), 99)
    bodies = Bodies(response_type, version)

    def through_client(body: dict) -> dict:
        frame = request.respond(body)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        correlation_id, decoded = _core.decode_response(key, version, frame[4:])
        assert correlation_id == 99
        return decoded

    defaults = through_client(bodies.skeleton())
    sent = bodies.sample(defaults)
    assert through_client(sent) == overlay(defaults, sent)
    assert through_client(sent) != defaults or not sent


SHORT_PATHS = [
    (k, v)
    for k, v in PYTHON_OWNED
    if k in (ApiKey.HEARTBEAT, ApiKey.OFFSET_COMMIT, ApiKey.CONSUMER_GROUP_HEARTBEAT)
]


@pytest.mark.parametrize(
    "key, version", SHORT_PATHS, ids=[f"{k.name}-v{v}" for k, v in SHORT_PATHS]
)
def test_short_paths_come_as_their_named_type(key, version):
    # rust/short_paths/mod.rs: decoded once into the Rust struct, handed over with named fields; the
    # dict (`body`, checked above) is made from the same struct.
    bodies = Bodies(message_types()[key][0], version)
    request = request_through_server(key, version, bodies.sample(bodies.skeleton()), 77)
    typed, body = request.typed, request.body
    assert (typed.group_id, typed.member_id) == (body["group_id"], body["member_id"])
    if key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        # Its handler reads the dict; the named type carries what identifies the heartbeat.
        assert isinstance(typed, _core.ConsumerGroupHeartbeatRequest)
        assert typed.member_epoch == body["member_epoch"]
        assert repr(typed).startswith("ConsumerGroupHeartbeatRequest(")
        return
    assert typed.group_instance_id == body["group_instance_id"]
    if key == ApiKey.HEARTBEAT:
        assert isinstance(typed, _core.HeartbeatRequest)
        assert typed.generation_id == body["generation_id"]
        correlation_id, response = _core.decode_response(key, version, typed.respond(27)[4:])
        assert (correlation_id, response["error_code"]) == (77, 27)
    else:
        assert isinstance(typed, _core.OffsetCommitRequest)
        assert typed.generation_id_or_member_epoch == body["generation_id_or_member_epoch"]
        assert typed.retention_time_ms == body["retention_time_ms"]
        assert typed.topic_names == [t["name"] for t in body["topics"]]


def test_other_apis_come_as_a_dict_only():
    assert request_through_server(ApiKey.METADATA, 12, {"topics": None}).typed is None


@pytest.mark.parametrize("version", [v for k, v in CASES if k == ApiKey.API_VERSIONS])
def test_api_versions_answered_by_the_core_in_every_version(version):
    body = Bodies("ApiVersionsRequest", version)
    request = body.sample(body.skeleton())
    frame = ServerSide().receive(
        _core.encode_request(ApiKey.API_VERSIONS, version, 31, request, "c")
    )
    assert isinstance(frame, bytes)
    correlation_id, response = _core.decode_response(ApiKey.API_VERSIONS, version, frame[4:])
    assert correlation_id == 31
    assert response["error_code"] == 0
    advertised = [(k["api_key"], k["min_version"], k["max_version"]) for k in response["api_keys"]]
    assert advertised == list(ServerSide.table.advertised())


def test_schema_parser_reads_fields_types_and_versions():
    fields = {f.key: (f.type, f.versions) for f in schema("metadata_request")["MetadataRequest"]}
    assert fields == {
        "topics": ("Option<Vec<MetadataRequestTopic>>", (0, 13)),
        "allow_auto_topic_creation": ("bool", (4, 13)),
        "include_cluster_authorized_operations": ("bool", (8, 10)),
        "include_topic_authorized_operations": ("bool", (8, 13)),
    }
    assert {f.key for f in schema("metadata_response")["MetadataResponseTopic"]} >= {
        "topic_id",
        "partitions",
    }


def test_every_advertised_api_is_covered():
    keys = {k for k, _ in CASES}
    assert {
        ApiKey.API_VERSIONS,
        ApiKey.METADATA,
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.DESCRIBE_CLUSTER,
    } <= keys
    assert keys == {ApiKey(k) for k, _, _ in api_table().advertised()}


def test_unknown_response_key_is_refused_with_its_name():
    request = request_through_server(ApiKey.METADATA, 12, {"topics": None})
    with pytest.raises(ValueError, match="no_such_field"):
        request.respond({"no_such_field": 1})
