"""Type stubs for `corral._core`, the compiled half of corral (rust/lib.rs registers it).

Written by hand from the #[pyfunction]/#[pymethods] definitions under rust/, one folder per
section below (codec/, groups/ for the embedded consumer protocol and the group coordinator
state, network/, short_paths/, log/, analyze/); tests/unit/test_core_stubs.py checks them against
the runtime module. Wide results come back as small frozen classes with read-only fields
(`AppendResult`, `ReadResult`, `FetchResult`, `RetentionResult`, `BatchSummary`); the narrow tuples
that cross the boundary (pairs, and the offset-commit inputs) are named below with plain aliases
(the Rust takes and returns bare tuples); the aliases exist for type checkers only, so import them
under `if typing.TYPE_CHECKING:`. Integer widths are Rust's: an out-of-range int raises
OverflowError. Parameters the Rust takes as `&[u8]` accept `bytes` only (not bytearray/memoryview);
those taken as `Vec<...>` accept any sequence but `str`.
"""

import os
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Self, TypeAlias, final

from typing_extensions import TypeVar

# The runtime module's exports (the aliases below are not among them).
__all__ = [
    "ApiTable",
    "CommitPath",
    "Connection",
    "Request",
    "OffsetCommitRequest",
    "HeartbeatRequest",
    "ConsumerGroupHeartbeatRequest",
    "OffsetCommitAnswer",
    "Frames",
    "ProtocolError",
    "encode_request",
    "decode_response",
    "codec_versions",
    "error_codes",
    "encode_consumer_subscription",
    "decode_consumer_subscription",
    "encode_consumer_assignment",
    "decode_consumer_assignment",
    "TimerWheel",
    "monotonic_ms",
    "HeartbeatView",
    "ConsumerHeartbeatView",
    "adaptive_interval_ms",
    "moved_assignment_record",
    "Reactor",
    "TlsServerConfig",
    "SslPrincipalMapper",
    "OffsetMap",
    "LogStore",
    "AppendResult",
    "ReadResult",
    "FetchResult",
    "RetentionResult",
    "CleanResult",
    "BatchSummary",
    "InvalidBatch",
    "StorageError",
    "validate_batches",
    "keyless_records",
    "build_batch",
    "decode_batches",
    "restamp_batch",
    "offset_commit_batch",
    "offset_keys",
    "record_key",
    "record_value",
    "decode_record_key",
    "decode_record_value",
    "share_state_key",
    "share_state_value",
    "decode_share_state_key",
    "decode_share_state_value",
    "ShareInFlight",
    "batch_bounds",
    "decode_offset_commits",
    "decode_analytics_records",
]

# --- Tuples that cross the boundary -------------------------------------------------------------

ApiRange: TypeAlias = tuple[int, int, int]
"""(api_key, min_version, max_version)"""

PartitionCommit: TypeAlias = tuple[int, int, int, str]
"""(partition, offset, leader_epoch, metadata)"""

TopicCommits: TypeAlias = tuple[str, list[PartitionCommit]]
"""(topic, [(partition, offset, leader_epoch, metadata)])"""

CommittedOffset: TypeAlias = tuple[int, int, str]
"""(offset, leader_epoch, metadata); (-1, -1, "") when nothing is committed."""

TopicPartition: TypeAlias = tuple[str, int]
"""(topic, partition)"""

FetchWanted: TypeAlias = tuple[int, int, int, int]
"""(partition index, error code already known or 0, fetch offset, partition max bytes)"""

LogOffsets: TypeAlias = tuple[int, int]
"""(log start offset, high watermark)"""

TimestampOffset: TypeAlias = tuple[int, int]
"""(timestamp, offset)"""

OpenFiles: TypeAlias = tuple[int, int]
"""(segment files open in the cache now, the cache's capacity)"""

KeyValue: TypeAlias = tuple[bytes | None, bytes | None]
"""(key, value) of a record; None is a null key or value."""

DecodedRecord: TypeAlias = tuple[int, int, bytes | None, bytes | None]
# A segment read from a data directory: the byte where reading stopped before the file's end (None
# when it did not) and why ("torn": a batch cut short; "invalid": a bad CRC or header; "").
SegmentStop: TypeAlias = tuple[int | None, str]
"""(offset, timestamp, key, value)"""

ConsumerMemberView: TypeAlias = tuple[int, bool, bool, str | None, str, str, int]
"""A consumer group member in the `ConsumerHeartbeatView`: (epoch, STABLE, consumer protocol,
instance id, client id, client host, session timer key: 0 until armed)"""

MessageBody: TypeAlias = dict[str, Any]
"""A request or response body: the schema's fields (snake_case names) to int/bool/float/str/
bytes (UUIDs: 16 bytes)/None, lists and nested dicts. Fields left out of a response take the
schema default."""

ResponseBody: TypeAlias = Mapping[str, Any]
"""A response body as handlers give it: a `MessageBody`, or one of the TypedDicts of a room's
messages.py (groups/messages.py...), which type checkers do not take as a plain dict."""

_Body = TypeVar("_Body", covariant=True, default=MessageBody)

# --- Exceptions ---------------------------------------------------------------------------------

class ProtocolError(Exception):
    """Malformed or unsupported input: close the connection."""

class InvalidBatch(Exception):
    """A record batch Kafka would refuse: args are (error_code, message)."""

class StorageError(OSError):
    """The log store's files failed (disk full, I/O error, out of descriptors): args are (errno,
    message). Nothing the failed call wrote counts; the store stays usable and later calls may
    succeed."""

# --- Codec and connections ----------------------------------------------------------------------

@final
class ApiTable:
    """The APIs this broker advertises, with ApiVersions answers pre-encoded for every version."""

    def __new__(cls, ranges: Sequence[ApiRange]) -> Self:
        """`ranges`: (api_key, min_version, max_version) for every API this broker implements.
        Raises ValueError when a range is outside the codec's or ApiVersions is missing."""

    def advertised(self) -> list[ApiRange]:
        """The advertised (api_key, min, max) triples."""

@final
class Request(Generic[_Body]):
    """A decoded request for a Python-owned API (made by `Reactor.drain` or `Connection.next`;
    not constructible from Python)."""

    @property
    def api_key(self) -> int: ...
    @property
    def api_version(self) -> int: ...
    @property
    def correlation_id(self) -> int: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def connection(self) -> int:
        """The network thread's id of the connection the request came on (0 outside a
        `Reactor`)."""

    @property
    def client_host(self) -> str:
        """The client's address as Kafka reports it ("/127.0.0.1"); "" when unknown."""

    @property
    def listener(self) -> str:
        """The name of the listener the connection came in on ("PLAINTEXT", "SASL_SSL", ...)."""

    @property
    def principal(self) -> str:
        """Who the connection is: "User:ANONYMOUS" until authenticated, "User:<name>" after SASL,
        "User:<subject DN>" for a TLS client certificate."""

    @property
    def body(self) -> _Body:
        """The request body as a dict of the schema's fields (a short path's is made from its
        decoded struct when asked for). Handlers name its type: `Request[JoinGroupRequest]`
        (groups/messages.py), for type checkers only (the runtime class is not generic)."""

    @property
    def typed(self) -> OffsetCommitRequest | HeartbeatRequest | None:
        """A short path's request (rust/short_paths/mod.rs), decoded once by the core, as its named
        type; None for the APIs decoded into a dict (`body`)."""

    def respond(self, body: ResponseBody) -> bytes:
        """Encodes `body` (a dict of the response schema's fields) as this request's response
        frame."""

@final
class OffsetCommitRequest:
    """An OffsetCommit, decoded by the core (`Request.typed`; not constructible from Python).
    Fields a version lacks have their schema default (no instance id, -1)."""

    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None:
        """None before v7 and for dynamic members."""

    @property
    def generation_id_or_member_epoch(self) -> int:
        """The generation (classic groups) or member epoch (consumer groups); -1 when not given."""

    @property
    def retention_time_ms(self) -> int:
        """v2-4 only; -1 (and every later version): the broker's offsets.retention.minutes."""

    @property
    def topic_names(self) -> list[str]:
        """The names of the topics committed to, in request order."""

    def split(
        self, partition_counts: dict[str, int], group_error: int, metadata_max_bytes: int
    ) -> tuple[list[TopicCommits], OffsetCommitAnswer]:
        """Kafka's per-partition checks: ([(topic, [(partition, offset, leader_epoch, metadata)])]
        to write, the answer). `partition_counts`: topic name -> its partition count (0 or
        absent: unknown topic)."""

@final
class HeartbeatRequest:
    """A Heartbeat the network thread could not answer from the `HeartbeatView`, decoded by the
    core (`Request.typed`; not constructible from Python)."""

    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None:
        """None before v3 and for dynamic members."""

    @property
    def generation_id(self) -> int: ...
    def respond(self, error_code: int) -> bytes:
        """This Heartbeat's response frame with `error_code` (throttle time 0)."""

@final
class ConsumerGroupHeartbeatRequest:
    """A ConsumerGroupHeartbeat the network thread could not answer from the
    `ConsumerHeartbeatView`, decoded by the core (`Request.typed`; not constructible from
    Python). Its handler reads `Request.body`, the dict made from it."""

    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...

@final
class OffsetCommitAnswer:
    """The per-partition codes of one OffsetCommit, ready to be encoded (made by
    `OffsetCommitRequest.split`; not constructible from Python)."""

    def frame(self, write_error: int = 0) -> bytes:
        """The response frame; `write_error` replaces NONE on the accepted partitions when their
        write failed."""

@final
class Connection:
    """The server side of one connection without the network thread (tests, benches): frames in,
    core answers or `Request`s out."""

    def __new__(
        cls,
        table: ApiTable,
        max_request_bytes: int,
        *,
        listener: str = "PLAINTEXT",
        principal: str = ...,  # User:ANONYMOUS
    ) -> Self:
        """`listener` and `principal`: what the `Request`s it yields carry."""
    def feed(self, chunk: bytes) -> None:
        """Buffers received bytes; drain them with `next()`."""

    def next(self) -> bytes | Request | None:
        """The next complete item: response `bytes` (answered by the core), a `Request`, or None
        when more input is needed. Raises ProtocolError on bad input."""

    def buffered(self) -> int:
        """Bytes received but not yet part of a returned item."""

@final
class Frames:
    """Splits a byte stream into frames (payloads without their size prefix)."""

    def __new__(cls, max_frame_bytes: int) -> Self: ...
    def feed(self, chunk: bytes) -> list[bytes]:
        """Buffers `chunk` and returns the frames completed by it. Raises ProtocolError on a frame
        size outside 0..=max_frame_bytes."""

def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: MessageBody,
    client_id: str | None = None,
) -> bytes:
    """Encodes a request frame (size prefix, header of the right version, body)."""

def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, MessageBody]:
    """Decodes a response frame (without its size prefix): returns (correlation_id, body dict).
    Raises ProtocolError."""

def codec_versions(api_key: int) -> tuple[int, int] | None:
    """(min, max) versions the codec supports for an API key, or None."""

def error_codes() -> list[tuple[str, int]]:
    """Every Kafka error code the kafka-protocol crate knows, as (Kafka's name, code), by code:
    the table corral.errors is generated from (ci/gen_error_codes.py)."""

# --- Embedded consumer protocol (ConsumerProtocolSubscription / ConsumerProtocolAssignment) ----

ConsumerTopicPartitions = list[tuple[str, list[int]]]  # (topic, partitions), in the order given
# (version, topics, owned partitions, generation id, rack id)
ConsumerSubscription = tuple[int, list[str], ConsumerTopicPartitions, int, str | None]

def encode_consumer_subscription(
    version: int,
    topics: Sequence[str],
    owned_partitions: Sequence[tuple[str, Sequence[int]]],
    generation_id: int = ...,  # -1
    rack_id: str | None = None,
) -> bytes:
    """A subscription's bytes (version 0-3, no user data). Raises ValueError on a bad version."""

def decode_consumer_subscription(data: bytes) -> ConsumerSubscription:
    """A subscription's fields; a version above 3 is read as 3. Raises ValueError when the bytes
    are not a subscription."""

def encode_consumer_assignment(
    version: int, assigned: Sequence[tuple[str, Sequence[int]]]
) -> bytes:
    """An assignment's bytes (version 0-3, no user data). Raises ValueError on a bad version."""

def decode_consumer_assignment(data: bytes) -> tuple[ConsumerTopicPartitions, bytes | None]:
    """An assignment's partitions and its user data (None when absent or empty). Raises
    ValueError when the bytes are not an assignment."""

# --- Network thread -----------------------------------------------------------------------------

@final
class TlsServerConfig:
    """A TLS listener's server configuration (rustls), checked when made."""

    def __new__(
        cls,
        certificate_chain: bytes,
        private_key: bytes,
        trusted: bytes | None,
        client_auth: str,
        protocols: Sequence[str],
        principal_mapping_rules: str = "DEFAULT",
    ) -> Self:
        """`certificate_chain` and `private_key`: PEM (the key unencrypted). `trusted`: PEM
        certificates that sign client certificates. `client_auth`: "none", "requested" or
        "required". `protocols`: "TLSv1.2" and/or "TLSv1.3". `principal_mapping_rules`:
        Kafka's ssl.principal.mapping.rules. Raises ValueError."""

@final
class SslPrincipalMapper:
    """Kafka's `ssl.principal.mapping.rules`: a client certificate's subject DN -> the
    principal's name (rust/network/principal_mapping.rs)."""

    def __new__(cls, rules: str) -> Self:
        """Kafka's rule text ("RULE:^CN=(.*?),OU=.*$/$1/L, DEFAULT"). Raises ValueError."""

    def name(self, dn: str) -> str:
        """The principal's name for `dn`. Raises ValueError when no rule applies."""

@final
class Reactor:
    """The network thread: sockets, framing and the answers given without Python."""

    def __new__(
        cls,
        table: ApiTable,
        listeners: Sequence[tuple[int, str, bool, TlsServerConfig | None]],
        max_request_bytes: int,
        heartbeat_view: HeartbeatView | None = None,
        *,
        consumer_heartbeat_view: ConsumerHeartbeatView | None = None,
        commit_path: CommitPath | None = None,
        authorize_short_paths: bool = False,
        sasl_max_receive_bytes: int = 524288,
        failed_authentication_delay_ms: int = 100,
        max_connections: int | None = None,
        max_connections_per_ip: int | None = None,
        idle_timeout_ms: int | None = None,
        partial_request_timeout_ms: int | None = None,
        queued_max_request_bytes: int | None = None,
    ) -> Self:
        """Starts the network thread on the listening sockets of `listeners`, each (descriptor,
        name, SASL or not, TLS configuration or None); the descriptors' ownership passes to the
        thread. On a SASL listener a connection may send only ApiVersions, SaslHandshake and
        SaslAuthenticate until `authenticated`. `heartbeat_view`: answer steady-state Heartbeats
        from it; `consumer_heartbeat_view`: steady-state ConsumerGroupHeartbeats; `commit_path`:
        write and answer the steady-state OffsetCommits it takes; `authorize_short_paths`: answer
        those only for groups `authorize_group` allowed on the connection (an authorizer is on).
        Before authentication a SASL connection's requests may be `sasl_max_receive_bytes` at
        most; a connection whose authentication failed closes `failed_authentication_delay_ms`
        after its answer is written.

        Limits (None: none): `max_connections` and `max_connections_per_ip` (over them a new
        connection is closed at once), `idle_timeout_ms` (a connection without a request with
        Python and no bytes in or out for this long is closed), `partial_request_timeout_ms` (a
        request not wholly received this long after its first bytes closes its connection) and
        `queued_max_request_bytes` (bytes of requests received and not yet answered)."""

    @property
    def notify_fd(self) -> int:
        """Readable when requests wait for `drain()`."""

    def drain(self) -> tuple[list[Request], list[tuple[str | None, str | None, str]], list[int]]:
        """The requests queued for Python, decoded, the problems to log, and the watched
        connections (`watch_close`) that closed, since the last call. A problem is (kind, client
        host, message): a connection closed for bad input ("malformed request",
        "unauthenticated request", "slow request") from that client, or (None, None, message), a
        report the network thread already rate-limited. Raises OSError when the network thread
        has stopped on its own."""

    def request_stats(self) -> list[tuple[int, int, int, list[int], float, list[tuple[int, int]]]]:
        """Per (API key, version): key, version, requests taken, the latency histogram's buckets
        (counts, not cumulative; bounds in `latency_bounds()`), its sum in seconds, and the error
        codes of the answers the core gave itself (code, count)."""

    @staticmethod
    def latency_bounds() -> list[float]:
        """The latency histogram's upper bounds in seconds (a last bucket is over them)."""

    def network_stats(self) -> tuple[int, int]:
        """(open connections, bytes of requests held against queued.max.request.bytes), as of
        the network thread's last loop turn."""

    def inject_failure(self, reason: str) -> None:
        """Fault injection for tests: the network thread stops as if its poll had failed."""

    def set_short_paths(self, enabled: bool) -> None:
        """Whether the short paths (steady-state Heartbeats, ConsumerGroupHeartbeats,
        OffsetCommits) may be answered by the network thread; False sends every request to Python
        (while a fault is injected, corral/faults/). On by default."""

    @property
    def short_paths(self) -> bool:
        """Whether the short paths may answer (`set_short_paths`)."""

    def refuse_connections(self, duration_ms: int | None, listener: str | None = None) -> int:
        """Fault injection: new connections on the listener named `listener` (every listener
        when None) are accepted and closed at once for `duration_ms` from now (None: until called
        again; 0: no longer), as by a broker that is down. Returns how many listening sockets
        that names (0: no listener of that name). Connections already open are not touched."""

    @property
    def refused_connections(self) -> int:
        """Connections refused by `refuse_connections` since the reactor started."""

    def respond(self, connection: int, response: bytes | bytearray | None) -> None:
        """Sends `response` (a whole frame) as the answer to the connection's request; None when
        the request has no answer. A connection that has gone away is skipped."""

    def close(self, connection: int) -> None:
        """Closes the connection (after a handler failed on its request)."""

    def close_after_answer(self, connection: int) -> None:
        """Closes the connection once the answer to its request is written (failed
        authentication)."""

    def authenticated(self, connection: int, principal: str, session_lifetime_ms: int) -> None:
        """The connection is `principal` from its next request on; after `session_lifetime_ms`
        (0: never) only a re-authentication may follow, anything else closes it. Sent before
        the answer to the SaslAuthenticate that succeeded."""

    def raw_sasl_tokens(self, connection: int) -> None:
        """After the answer to its SaslHandshake v0 the connection sends bare SASL tokens: each
        goes to Python as a SaslAuthenticate v0 request and the answer's token goes back bare,
        until the answer after `authenticated`; a refusal closes the connection unanswered."""

    def watch_close(self, connection: int) -> None:
        """When the connection closes, `drain()` reports it (Python keeps state for it)."""

    def authorize_group(self, connection: int, group_id: str) -> None:
        """The short paths may answer the connection's heartbeats for this group (authorizer
        on)."""

    def authorize_topics(self, connection: int, topics: Sequence[str]) -> None:
        """The commit path may take the connection's OffsetCommits to these topics (their group
        authorized too; authorizer on)."""

    def forget_authorizations(self) -> None:
        """Drops every group and topic authorization given by `authorize_group` and
        `authorize_topics` (the ACLs changed)."""

    def stop(self) -> None:
        """Stops the thread and closes every socket."""

# --- Group coordinator state --------------------------------------------------------------------

def adaptive_interval_ms(
    group_ms: int,
    short_ms: int,
    max_rate: int,
    *,
    stable: bool,
    behind: bool,
    reconciling: int,
    due_in_ms: int | None,
    jitter: float,
    settling: bool = False,
    members: int = 0,
) -> int:
    """The network thread's copy of answer.py's `adaptive_interval_ms` (for tests)."""

def moved_assignment_record(
    group_id: str, member_id: str, value: bytes, epoch: int, previous: int
) -> tuple[bytes, bytes] | None:
    """The (key, value) the network thread writes when it moves a member whose current
    assignment record's value is `value` to `epoch` (for tests)."""

def monotonic_ms() -> int:
    """CLOCK_MONOTONIC in milliseconds: the clock of `TimerWheel` deadlines."""

@final
class TimerWheel:
    """Timer keys with deadlines in `monotonic_ms()` time. Shared with the network thread, which
    moves session deadlines when it answers a Heartbeat itself."""

    def __new__(cls, now_ms: int, tick_ms: int = 10, slots: int = 4096) -> Self: ...
    def schedule(self, key: int, deadline_ms: int) -> None:
        """Schedules `key`, or moves its deadline if scheduled already."""

    def cancel(self, key: int) -> bool:
        """Whether `key` was scheduled."""

    def expired(self, now_ms: int) -> list[int]:
        """The keys due at `now_ms`, removed from the wheel, as one list."""

    def __len__(self) -> int: ...
    def __contains__(self, key: int, /) -> bool:
        """Whether `key` is scheduled (again: `expired` removes what it returns)."""

@final
class HeartbeatView:
    """What the network thread needs to answer steady-state Heartbeats without Python."""

    def __new__(cls, wheel: TimerWheel) -> Self:
        """A view whose session deadlines live in `wheel`."""

    def set_group(
        self, group_id: str, generation_id: int, answer: int | None, commits: bool = False
    ) -> None:
        """The group's generation and its answer (an error code) to members of that generation
        (None: the coordinator answers every Heartbeat of the group); `commits`: they may commit
        offsets."""

    def commit_verdict(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> bool:
        """Whether the coordinator surely accepts an OffsetCommit from this member at this
        generation (False: it decides)."""

    @property
    def commits_takeable(self) -> int:
        """How many OffsetCommits the network thread judged it could take (it still hands
        them to Python)."""

    def remove_group(self, group_id: str) -> None: ...
    def set_member(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        timer_key: int,
        session_timeout_ms: int,
    ) -> None: ...
    def remove_member(self, group_id: str, member_id: str) -> None: ...

@final
class ConsumerHeartbeatView:
    """What the network thread needs to answer steady-state ConsumerGroupHeartbeats (KIP-848)
    without Python: per group its epochs and a busy flag, per member its epoch, STABLE or not,
    its instance id, client id and host and its session timer key
    (rust/groups/consumer_heartbeat_view.rs).
    `ConsumerGroup` keeps it in step."""

    def __new__(
        cls, wheel: TimerWheel, session_timeout_ms: int, heartbeat_interval_ms: int
    ) -> Self:
        """A view whose session deadlines live in `wheel`: a heartbeat it answers moves the
        member's deadline `session_timeout_ms` ahead and tells it to come back in
        `heartbeat_interval_ms`."""

    def set_group(
        self,
        group_id: str,
        group_epoch: int,
        assignment_epoch: int,
        busy: bool,
        deleting: bool | None = None,
        target_due_ms: int | None = None,
        assignment_ms: int = 0,
        moves_from: int | None = None,
    ) -> None:
        """The group's epochs; `busy`: its heartbeats go to the coordinator whatever the epochs
        say; `deleting`: so do its commits (None: taken to be `busy`); `target_due_ms`: when
        (wall ms) the next target may be computed (None: at once); `assignment_ms`: when the
        current one was; `moves_from`: the lowest target epoch members may be moved to by the
        network thread (None: none)."""

    def set_rule(self, short_ms: int, max_rate: int, moves: bool) -> None:
        """corral.consumer.reconciling.heartbeat.interval.ms and .max.rate (answer.py's rule),
        and whether the network thread moves members to a new target epoch."""

    def set_group_timing(
        self, group_id: str, session_timeout_ms: int, heartbeat_interval_ms: int
    ) -> None:
        """The group's own session timeout and heartbeat interval (its settings changed); the
        broker's values remove the entry."""

    def remove_group(self, group_id: str) -> None: ...
    def set_member(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        consumer: bool,
        session_timeout_ms: int | None = None,
    ) -> None:
        """A member's metadata (ConsumerGroupMemberMetadata): `consumer` is False for a classic
        member of the group, whose own session timeout is `session_timeout_ms`."""

    def set_member_epoch(
        self, group_id: str, member_id: str, epoch: int, stable: bool, movable: bytes | None = None
    ) -> None:
        """A member's epoch and whether it is STABLE (ConsumerGroupCurrentMemberAssignment), and
        the record's value when the network thread may move the member to a new target epoch
        (STABLE, nothing pending, exactly its target, every assignment epoch written)."""

    def target_changed(self, group_id: str, member_id: str) -> None:
        """The member's target changed and no longer is its assignment: its next move is the
        coordinator's."""

    def set_session_key(self, group_id: str, member_id: str, timer_key: int) -> None:
        """The member's session timer key, once registered (a member the view does not hold is
        left alone)."""

    def remove_member(self, group_id: str, member_id: str) -> None: ...
    def answer(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        client_id: str,
        client_host: str,
    ) -> int | None:
        """What the network thread does with a heartbeat that changes nothing: the heartbeat
        interval to answer with, the member's session deadline moved; None when the coordinator
        answers."""

    def classic_answer(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> int | None:
        """What the network thread does with a classic member's Heartbeat: NONE (0), its
        session deadline moved; None when the coordinator answers."""

    def commit_verdict(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> bool:
        """Whether the coordinator surely accepts an OffsetCommit of `api_version` from this
        member at this epoch (False: it decides)."""

    def judge(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        client_id: str,
        client_host: str,
    ) -> tuple[str, int] | tuple[str, int, int, int] | None:
        """What the network thread would do with an incremental heartbeat, for tests:
        ("steady", interval), ("move", epoch, previous epoch, interval) or None."""

    def movable(self, group_id: str, member_id: str) -> bytes | None:
        """The record value the view keeps for a member it may move (tests)."""

    @property
    def answered(self) -> int:
        """How many ConsumerGroupHeartbeats the view has answered."""

    @property
    def classic_answered(self) -> int:
        """How many classic members' Heartbeats the view has answered."""

    @property
    def moved(self) -> int:
        """How many members the network thread moved to a new target epoch."""

    @property
    def commits_takeable(self) -> int:
        """How many OffsetCommits the network thread judged it could take (it still hands
        them to Python)."""

    def contents(self) -> dict[str, tuple[int, int, bool, dict[str, ConsumerMemberView]]]:
        """Everything the view holds, for tests: group id -> (group epoch, assignment epoch,
        busy, {member id: the member's entry})."""

@final
class OffsetMap:
    """Committed offsets of every group, kept compactly in Rust."""

    def __new__(cls) -> Self: ...
    def commit(
        self,
        group: str,
        topic: str,
        partitions: Sequence[PartitionCommit],
        commit_timestamp_ms: int,
        expire_timestamp_ms: int = ...,  # -1: none
    ) -> None:
        """Commits `partitions` [(partition, offset, leader_epoch, metadata)] of one topic at
        once."""

    def fetch(self, group: str, topic: str, partitions: Sequence[int]) -> list[CommittedOffset]:
        """(offset, leader_epoch, metadata) for each asked partition, in order; (-1, -1, "") when
        none."""

    def fetch_all(self, group: str) -> list[TopicCommits]:
        """Every committed offset of a group: [(topic, [(partition, offset, leader_epoch,
        metadata)])]."""

    def delete(self, group: str, topic: str, partitions: Sequence[int]) -> list[int]:
        """Deletes the partitions' offsets; returns the partitions that had one."""

    def delete_group(self, group: str) -> list[TopicPartition]:
        """Deletes every offset of the group; returns the (topic, partition)s removed."""

    def has_offsets(self, group: str) -> bool: ...
    def count(self, group: str) -> int: ...
    def records(self, group: str) -> list[tuple[bytes, bytes]]:
        """The group's offsets as `__consumer_offsets` records [(key, value)], sorted
        (snapshots)."""

    def expired(
        self,
        group: str,
        now_ms: int,
        retention_ms: int,
        base_timestamp_ms: int | None = None,
        keep_topics: Sequence[str] = ...,  # none
    ) -> list[TopicPartition]:
        """Kafka's offset expiry: an offset with an explicit expire timestamp expires then;
        otherwise once `retention_ms` passed since `base_timestamp_ms` (when an Empty classic
        group became empty) or, without it, its commit time. `keep_topics` are left alone.
        Returns the expired (topic, partition)s, sorted; removes nothing."""

@final
class CommitPath:
    """OffsetCommits written by the network thread: it appends those it takes to
    `offsets_topic`, its own thread fsyncs, applies them to the offset map and answers
    (rust/short_paths/commit_path.rs, docs/offset-commit-short-path.md)."""

    def __new__(
        cls,
        store: LogStore,
        offsets_topic: str,
        offsets_partitions: int,
        offset_map: OffsetMap,
        flush_messages: int,
        metadata_max_bytes: int,
    ) -> Self: ...
    def close(self) -> None:
        """Ends the flusher thread once the commits waiting are answered (shutdown)."""

    def hold(self, held: bool) -> None:
        """Tests: while held, no fsync pass of the path starts."""

    def set_flush_messages(self, flush_messages: int) -> None:
        """log.flush.interval.messages changed."""

    def set_topic(self, name: str, partitions: int) -> None:
        """A topic as requests now see it; `partitions` 0: gone."""

    def python_writing(self, group_id: str, writing: bool) -> None:
        """Whether a Python write of the group touching offsets is pending (its commits are
        then Python's)."""

    def python_writing_group(self, group_id: str, writing: bool) -> None:
        """Whether Python is writing the group's consumer-group records (from before they are
        applied until they are appended): the network thread moves none of its members."""

    def drain_moves(self) -> tuple[list[tuple[str, str, int, int]], list[str]] | None:
        """The members the network thread moved since the last call, as (group, member, epoch,
        previous epoch) in append order, and the groups one of whose moves failed to become
        durable; None when there are none."""

    def in_flight(self, group_id: str) -> int:
        """Commits of the group appended by the path and not applied yet."""

    def oldest_in_flight(self) -> dict[int, int]:
        """Per `__consumer_offsets` partition, the offset of its oldest commit not applied."""

    def committed(self) -> tuple[int, int]:
        """(OffsetCommit requests, partitions) the path committed."""

# --- Log store ----------------------------------------------------------------------------------

@final
class LogStore:
    """Every partition's log (segments, indexes, producer state) under one data directory.
    Methods on a partition that is not open raise KeyError; I/O failures raise StorageError."""

    def __new__(cls, data_dir: str | os.PathLike[str], open_files_max: int = ...) -> Self:  # 1024
        """`open_files_max`: how many segment files the store keeps open at most (least recently
        used closed first); any number of partitions works within it."""

    def totals(self) -> tuple[int, int, int]:
        """(open partitions, segment files, bytes in them) over every partition, for /metrics."""

    @property
    def open_files(self) -> OpenFiles:
        """(segment files open in the cache now, the cache's capacity)."""

    @property
    def clean_start(self) -> bool:
        """Whether the previous run ended with `close()`."""

    def open_partition(
        self,
        topic: str,
        partition: int,
        segment_bytes: int,
        retention_ms: int,
        retention_bytes: int,
    ) -> list[str]:
        """Opens (creating, or recovering) a partition; if open already, updates its config.
        Returns notes on what recovery repaired, for the log."""

    def append(
        self, topic: str, partition: int, data: bytes, log_append_time: int | None = None
    ) -> AppendResult:
        """Appends whole, validated batches (offsets assigned here; with `log_append_time`, the
        LogAppendTime timestamp too), checking idempotent producers' sequences first. A retried
        batch gets error 0 and its original offsets; a refused one INVALID_PRODUCER_EPOCH or
        OUT_OF_ORDER_SEQUENCE_NUMBER and -1s."""

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, min_one: bool
    ) -> ReadResult:
        """Whole batches from the one holding `offset`, at most `max_bytes` unless the first
        batch alone is bigger and `min_one`; `data` is None when `offset` is out of range."""

    def fetch_response(
        self,
        correlation_id: int,
        version: int,
        topics: Sequence[tuple[str, Sequence[FetchWanted]]],
        max_bytes: int,
        isolation_level: int = 0,
    ) -> FetchResult:
        """Reads and encodes a whole Fetch response frame. `topics`: (name, [(partition, error
        code already known or 0, fetch offset, partition max bytes)]); partitions not open are
        UNKNOWN_TOPIC_OR_PARTITION. `isolation_level` 1 (read_committed): reads stop at the last
        stable offset and the aborted transactions are listed. Raises OSError (not
        StorageError) when encoding fails."""

    def write_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        timestamp: int,
    ) -> AppendResult:
        """Appends the COMMIT (`commit`) or ABORT marker of (producer id, epoch)."""

    def clean(
        self,
        topic: str,
        partition: int,
        now_ms: int,
        min_cleanable_ratio: float,
        delete_retention_ms: int,
        min_compaction_lag_ms: int,
        max_compaction_lag_ms: int,
        map_bytes: int,
        max_batch_bytes: int,
    ) -> CleanResult | None:
        """Compacts the partition if it is due (rust/log/compaction/); None when it is not.
        Blocks on I/O (releases the GIL): call it from a worker thread."""

    def stable_offset(self, topic: str, partition: int) -> int:
        """The last stable offset (the high watermark when no transaction is open)."""

    def aborted_transactions(
        self, topic: str, partition: int, fetch_offset: int, upper: int
    ) -> list[tuple[int, int]]:
        """The aborted transactions overlapping [fetch_offset, upper): (producer id, first
        offset)."""
    def producer(
        self, topic: str, partition: int, producer_id: int
    ) -> tuple[int, int, bool] | None:
        """One producer of the partition: (epoch, last sequence or -1, whether its transaction
        is open), or None when the partition does not know it."""

    def producers(self, topic: str, partition: int) -> list[tuple[int, int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp, coordinator epoch, open
        transaction's first offset or -1) per active producer."""

    def offsets(self, topic: str, partition: int) -> LogOffsets:
        """(log start offset, high watermark)."""

    def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int
    ) -> TimestampOffset | None:
        """(timestamp, offset) of the first record with a timestamp >= `timestamp`, or None."""

    def max_timestamp(self, topic: str, partition: int) -> TimestampOffset | None:
        """(timestamp, offset) of the record with the largest timestamp, or None when empty."""

    def flush(self) -> int:
        """fsyncs every partition with unflushed appends. Blocks (without the GIL): call it from
        a worker thread. Returns the number of records made durable."""

    def set_storage_faults(
        self, *, disk_full: bool = False, failing_fsyncs: int = 0, fsync_delay_ms: int = 0
    ) -> None:
        """Storage faults on purpose (the fault API, rust/log/faults.rs): with `disk_full` every
        append fails with ENOSPC before writing; the next `failing_fsyncs` flush passes fail
        before syncing anything; every pass first waits `fsync_delay_ms`. All off by default."""

    @property
    def storage_faults(self) -> tuple[bool, int, int, int]:
        """(disk full, flush passes still to fail, delay of each pass in ms, faults fired)."""

    def delete_records(self, topic: str, partition: int, offset: int) -> int | None:
        """DeleteRecords on one partition: moves its log start offset to `offset` (-1: the high
        watermark), durably, and deletes the segments wholly below it. Returns the low watermark,
        or None when `offset` is out of range. Blocks on fsyncs: call it from a worker thread."""

    def size(self, topic: str, partition: int) -> int:
        """Bytes of the partition's segment files (DescribeLogDirs' partition size)."""

    def apply_retention(self, now_ms: int) -> list[RetentionResult]:
        """Applies retention.ms / retention.bytes everywhere. Returns one RetentionResult for
        each partition that lost segments."""

    def delete_partition(self, topic: str, partition: int) -> None:
        """Closes the partition and removes its directory."""

    def close(self) -> None:
        """Clean shutdown: fsync everything, write the active indexes, leave the marker. When a
        partition fails, the others are still closed but no marker is left. Raises StorageError
        with the first failure."""

@final
class AppendResult:
    """What `LogStore.append` did (not constructible from Python)."""

    @property
    def error_code(self) -> int:
        """0, or why the batches were refused (then the offsets and time are -1)."""
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def log_append_time(self) -> int:
        """The LogAppendTime timestamp the batches got, or -1."""
    @property
    def unflushed(self) -> int:
        """Records of the partition waiting for an fsync, this append's included."""

@final
class ReadResult:
    """What `LogStore.read` found (not constructible from Python)."""

    @property
    def data(self) -> bytes | None:
        """Whole batches, or None when the offset is out of range."""
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...

@final
class FetchResult:
    """A Fetch response encoded by `LogStore.fetch_response` (not constructible from Python)."""

    @property
    def frame(self) -> bytes:
        """The whole response frame, size prefix included."""
    @property
    def record_bytes(self) -> int:
        """Record bytes in the frame (what the request's `min_bytes` is compared with)."""
    @property
    def any_error(self) -> bool:
        """Whether any partition was answered with an error."""

@final
class CleanResult:
    """What `LogStore.clean` did to a partition (not constructible from Python)."""

    @property
    def bytes_before(self) -> int: ...
    @property
    def bytes_after(self) -> int: ...
    @property
    def records_removed(self) -> int: ...
    @property
    def segments_before(self) -> int: ...
    @property
    def segments_after(self) -> int: ...
    @property
    def checkpoint(self) -> int:
        """The first dirty offset of the next pass."""
    @property
    def bytes_read(self) -> int: ...

@final
class RetentionResult:
    """A partition `LogStore.apply_retention` deleted segments of (not constructible from
    Python)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def segments_deleted(self) -> int: ...
    @property
    def log_start_offset(self) -> int:
        """The partition's new log start offset."""

@final
class BatchSummary:
    """What `validate_batches` found in a client's batches (not constructible from Python)."""

    @property
    def batch_count(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def offset_count(self) -> int:
        """Offsets the batches will take (the sum of each batch's last offset delta + 1)."""

def validate_batches(data: bytes, max_batch_bytes: int) -> BatchSummary:
    """Checks client batches as Kafka does before an append; raises InvalidBatch(code, message)."""

def keyless_records(data: bytes, max_batch_bytes: int) -> list[int]:
    """The indexes of the records without a key in the batch `data` (one batch validate_batches
    accepted), decompressing it if needed: the check of a compacted topic. Raises
    InvalidBatch(code, message): MESSAGE_TOO_LARGE when the batch takes more than
    `max_batch_bytes` uncompressed, INVALID_RECORD when its records cannot be read."""

def build_batch(
    records: Sequence[KeyValue],
    timestamp_ms: int,
    producer_id: int = ...,  # -1: none
    producer_epoch: int = ...,  # -1
    base_sequence: int = ...,  # -1
    transactional: bool = ...,  # False
) -> bytes:
    """An uncompressed RecordBatch v2 of (key, value) records stamped `timestamp_ms`, optionally
    from an idempotent producer, and `transactional` (a transactional producer's batch).
    ValueError when `records` is empty."""

def restamp_batch(
    data: bytes, producer_id: int, producer_epoch: int, base_sequence: int, attributes: int
) -> bytes:
    """One whole batch with its producer fields and attributes replaced and its CRC-32C
    recomputed. ValueError unless `data` is exactly one batch."""

def decode_batches(data: bytes) -> list[DecodedRecord]:
    """The records of consecutive uncompressed batches as (offset, timestamp, key, value).
    Raises ValueError on a compressed or malformed batch."""

def offset_keys(group_id: str, partitions: Sequence[TopicPartition]) -> list[bytes]:
    """The OffsetCommitKey of each (topic, partition) of the group: its tombstones' keys."""

def offset_commit_batch(
    group_id: str,
    topics: Sequence[tuple[str, Sequence[PartitionCommit]]],
    commit_ms: int,
    expire_ms: int,
) -> bytes:
    """The `__consumer_offsets` batch (stamped `commit_ms`) of one group's offset commits:
    `topics` is [(topic, [(partition, offset, leader epoch, metadata)])]; `expire_ms` -1: none.
    ValueError when there is nothing to write."""

def record_key(kind: int, fields: Sequence[Any]) -> bytes:
    """The `__consumer_offsets` key of a record of type `kind` (the key's leading int16): `fields`
    in its key schema's order (rust/groups/records/schema.rs). A record's fields are an int, a
    str (None: null), bytes (also a uuid's 16), a sequence for an array or a struct (None: null).
    ValueError for an unknown type or a value the format cannot hold; TypeError for a field of
    the wrong type."""

def record_value(kind: int, version: int, fields: Sequence[Any]) -> bytes:
    """The value of a record of type `kind` in `version`: one field per field of its value
    schema, those the version lacks included (they are not written)."""

def decode_record_key(key: bytes) -> tuple[int, tuple[Any, ...] | None]:
    """(type, key fields) of a key: the fields None for a type corral does not know. Decoded
    fields are ints, strs (None: null), bytes, and tuples for arrays and structs. ValueError for
    malformed bytes."""

def decode_record_value(kind: int, value: bytes) -> tuple[int, tuple[Any, ...]]:
    """(version, fields) of the value of a record of type `kind`: a field the version lacks or
    whose tag is absent holds its default. ValueError for malformed bytes, an unknown type or a
    version corral does not read."""

def share_state_key(kind: int, fields: Sequence[Any]) -> bytes:
    """`record_key` for `__share_group_state` (ShareSnapshot 0, ShareUpdate 1)."""

def share_state_value(kind: int, fields: Sequence[Any]) -> bytes:
    """`record_value` (version 0) for `__share_group_state`."""

def decode_share_state_key(key: bytes) -> tuple[int, tuple[Any, ...] | None]:
    """`decode_record_key` for `__share_group_state`."""

def decode_share_state_value(kind: int, value: bytes) -> tuple[int, tuple[Any, ...]]:
    """`decode_record_value` for `__share_group_state`."""

# --- Share groups (rust/shares/) ----------------------------------------------------------------

# (first offset, last offset, state, delivery count): a run of records alike. States: 0
# available, 1 acquired, 2 acknowledged, 4 archived.
StateBatch = tuple[int, int, int, int]

@final
class ShareInFlight:
    """One share partition's in-flight window (SPSO to SPEO): each record's state, delivery count,
    owner (a member number) and lock deadline, 16 bytes a record. Changes come back as coalesced
    state batches, what `__share_group_state` stores."""

    def __new__(cls, start: int, batches: Sequence[StateBatch] = ...) -> Self: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int:
        """One past the highest offset in the window."""
    @property
    def acquired(self) -> int: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def delivery_complete_count(self) -> int: ...
    @property
    def next_deadline_ms(self) -> int: ...
    @property
    def memory_bytes(self) -> int: ...
    def next_fetch_offset(self) -> int: ...
    def acquire(
        self,
        owner: int,
        first: int,
        last: int,
        max_records: int,
        max_locks: int,
        deadline_ms: int,
        isolate_from: int,
    ) -> list[tuple[int, int, int]]:
        """Acquired runs (first, last, delivery count) of the available records in [first, last]."""
    def acknowledge(
        self,
        owner: int,
        batches: Sequence[tuple[int, int, Sequence[int]]],
        delivery_limit: int,
        renew_deadline_ms: int,
    ) -> tuple[int, str | None, list[StateBatch]]:
        """(0, None, changes) or (Kafka's error code, its message, []): all or nothing."""
    def release_owner(self, owner: int, delivery_limit: int) -> list[StateBatch]: ...
    def expire(self, now_ms: int, delivery_limit: int) -> list[StateBatch]: ...
    def move_start(self, offset: int) -> None: ...
    def snapshot(self) -> list[StateBatch]: ...

def batch_bounds(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """(base offset, last offset, byte position after it, producer id, attributes) of each whole
    batch in `data`."""

def decode_offset_commits(
    path: str, from_ms: int | None = None, to_ms: int | None = None
) -> tuple[int, list[bytes], int | None, str]:
    """The offset commits (OffsetCommitKey v0/v1 with a value v0..v4) of one `__consumer_offsets`
    segment file whose commit time is in [from_ms, to_ms), as Arrow buffers: (rows, [group
    offsets, group data, topic offsets, topic data, partition, time_ms, offset, seq], then the
    SegmentStop fields). Reads the batches whole when the file was opened, stops at a torn or
    invalid one. ValueError (naming the file) on a compressed or undecodable batch; OSError when
    the file cannot be read."""

def decode_analytics_records(
    path: str,
) -> tuple[int, list[bytes], list[DecodedRecord], int | None, str]:
    """One `__corral_analytics` segment file: (log_end rows, [their values as lines of JSON,
    their offsets, their timestamps (int64 little endian)], every other record in log order,
    then the SegmentStop fields as `decode_offset_commits`)."""
