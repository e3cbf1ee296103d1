"""SaslHandshake and SaslAuthenticate: SASL/PLAIN and SCRAM-SHA-256/512 on SASL listeners, as
Kafka's SaslServerAuthenticator answers them.

The network thread lets only ApiVersions and these two through before a connection is
authenticated (and after its session ended); they land here. A connection's state between its
requests lives in `broker.sessions` (dropped when it closes): an `Exchange` from the handshake
until the exchange ends, then an `Authenticated` session, which a later handshake re-authenticates
(Kafka's KIP-368: only when sessions end, `connections.max.reauth.ms` > 0, same principal and
mechanism). Every failure is answered, then the connection is closed, as Kafka closes it.

After a SaslHandshake v0 (Kafka before KIP-152; sarama's SASLHandshakeV0) the client sends bare
SASL tokens: the network thread hands each over as a SaslAuthenticate v0 request and sends the
answer's token back bare; a refusal closes the connection unanswered, as Kafka does.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.observability.summarised_warnings import SummarisedWarnings
from corral.security import scram

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.security.credentials import Credentials
    from corral.security.messages import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

log = logging.getLogger("corral.security.sasl")
# Failed authentications, at INFO as Kafka logs them: a client retrying a bad password (or a
# thousand of them) gets the first line in full and then counts per address (each at DEBUG).
failures = SummarisedWarnings(log, level=logging.INFO)

PLAIN = "PLAIN"
# Kafka re-authenticates a connection at most once a second (KafkaChannel).
MIN_REAUTH_INTERVAL_S = 1.0
# The longest session handed to the network thread (a deadline it can represent): 100 years.
MAX_SESSION_MS = 100 * 365 * 24 * 3600 * 1000


class PlainServer:
    """SASL/PLAIN (RFC 4616: authzid NUL authcid NUL password), the password checked against the
    user's SCRAM credentials (Kafka's PlainSaslServer checks JAAS user_<name> entries)."""

    mechanism = PLAIN

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.user: str | None = None
        self.complete = False

    async def step(self, message: bytes) -> bytes:
        tokens = message.decode("utf-8", errors="replace").split("\0", 3)
        if len(tokens) != 3:
            text = f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            raise scram.Failed(text, public=text)
        authzid, user, password = tokens
        for what, value in (("username", user), ("password", password)):
            if not value:
                text = f"Authentication failed: {what} not specified"
                raise scram.Failed(text, public=text)
        if not await self.credentials.check_password(user, password):
            text = "Authentication failed: Invalid username or password"
            raise scram.Failed(text, public=text)
        if authzid and authzid != user:
            text = (
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
            raise scram.Failed(text, public=text)
        self.user, self.complete = user, True
        return b""


class ScramExchange:
    """A SCRAM server behind PlainServer's interface."""

    def __init__(self, mechanism: scram.Mechanism, credentials: Credentials) -> None:
        self.mechanism = mechanism.name
        self.server = scram.ScramServer(mechanism, lambda user: credentials.get(user, mechanism))

    @property
    def user(self) -> str | None:
        return self.server.user

    @property
    def complete(self) -> bool:
        return self.server.complete

    async def step(self, message: bytes) -> bytes:
        return self.server.step(message)


@dataclass
class Authenticated:
    """A connection's SASL session."""

    mechanism: str
    principal: str
    # Whether the session ends (connections.max.reauth.ms > 0): only then may it re-authenticate.
    ends: bool
    # When its last re-authentication began (monotonic seconds; 0: none yet).
    reauthenticated: float = 0.0


@dataclass
class Exchange:
    """A handshake done, its SaslAuthenticate requests under way."""

    server: PlainServer | ScramExchange
    # The session being re-authenticated, if any.
    previous: Authenticated | None = None
    # A re-authentication that asked for another mechanism: refused at its SaslAuthenticate.
    refusal: str | None = None
    began: float = field(default_factory=time.monotonic)

    @property
    def what(self) -> str:
        return "re-authentication" if self.previous is not None else "authentication"


def enabled_mechanisms(broker: Broker, listener: str) -> list[str]:
    return broker.settings.for_listener(listener, "sasl.enabled.mechanisms").split(",")


def _server(broker: Broker, mechanism: str) -> PlainServer | ScramExchange:
    if mechanism == PLAIN:
        return PlainServer(broker.credentials)
    return ScramExchange(scram.MECHANISMS[mechanism], broker.credentials)


def _is_sasl(broker: Broker, request: Request[object]) -> bool:
    return broker.listener_protocol(request.listener).startswith("SASL_")


@handles(ApiKey.SASL_HANDSHAKE, 0, 1)
def sasl_handshake(broker: Broker, request: Request[SaslHandshakeRequest]) -> SaslHandshakeResponse:
    if not _is_sasl(broker, request):
        # Kafka: the request reaches KafkaApis, which answers it so.
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    sessions, connection = broker.sessions, request.connection
    enabled = enabled_mechanisms(broker, request.listener)
    mechanism = request.body["mechanism"]
    state: Exchange | Authenticated | None = sessions.exchange(connection)
    previous = None
    if isinstance(state, Authenticated):
        if not state.ends or time.monotonic() - state.reauthenticated < MIN_REAUTH_INTERVAL_S:
            # Not a re-authentication for Kafka either: KafkaApis answers the handshake.
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
        previous = state
    elif isinstance(state, Exchange):
        # Kafka: "Unexpected Kafka request of type SASL_HANDSHAKE during SASL authentication."
        failures(
            "failed authentication",
            "connection from %s: a second SaslHandshake during SASL authentication; closing",
            request.client_host,
            address=request.client_host,
        )
        sessions.failed(connection)
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled}
    if mechanism not in enabled:
        failures(
            "failed authentication",
            "connection from %s: SASL mechanism %r is not enabled; closing",
            request.client_host,
            mechanism[:64],
            address=request.client_host,
        )
        sessions.failed(connection)
        return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
    exchange = Exchange(_server(broker, mechanism), previous)
    if previous is not None and previous.mechanism != mechanism:
        exchange.refusal = (
            f"SASL mechanism '{mechanism}' requested by client is not supported "
            f"for re-authentication of mechanism '{previous.mechanism}'"
        )
    sessions.begin_exchange(connection, exchange)
    if request.api_version == 0 and previous is None:
        sessions.raw_tokens(connection)
    return {"error_code": ErrorCode.NONE, "mechanisms": enabled}


@handles(ApiKey.SASL_AUTHENTICATE, 0, 2)
async def sasl_authenticate(
    broker: Broker, request: Request[SaslAuthenticateRequest]
) -> SaslAuthenticateResponse:
    sessions, connection = broker.sessions, request.connection
    state: Exchange | Authenticated | None = (
        sessions.exchange(connection) if _is_sasl(broker, request) else None
    )
    if not _is_sasl(broker, request) or isinstance(state, Authenticated):
        # Kafka's KafkaApis answer (no close): the connection is authenticated already.
        return _answer(
            ErrorCode.ILLEGAL_SASL_STATE,
            "SaslAuthenticate request received after successful authentication",
        )
    if state is None:
        sessions.failed(connection)
        return _answer(
            ErrorCode.ILLEGAL_SASL_STATE,
            "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake.",
        )
    if state.refusal is not None:
        return _refuse(broker, request, state, state.refusal)
    server = state.server
    try:
        token = await server.step(request.body["auth_bytes"])
    except scram.Failed as e:
        message = e.public or (
            f"Authentication failed during {state.what} due to invalid "
            f"credentials with SASL mechanism {server.mechanism}"
        )
        return _refuse(broker, request, state, message, reason=str(e))
    if sessions.exchange(connection) is not state:
        # The connection closed while the password was checked: nothing to keep.
        return _answer(ErrorCode.NONE)
    if not server.complete:
        return _answer(ErrorCode.NONE, token=token)
    principal = f"User:{server.user}"
    if state.previous is not None and state.previous.principal != principal:
        old, new = (p.replace(":", ".", 1) for p in (state.previous.principal, principal))
        return _refuse(
            broker,
            request,
            state,
            f"Cannot change principals during re-authentication from {old}: {new}",
        )
    reauth_ms = broker.settings.for_listener(request.listener, "connections.max.reauth.ms")
    lifetime_ms = min(max(reauth_ms, 0), MAX_SESSION_MS)
    sessions.authenticated(connection, principal, lifetime_ms)
    sessions.begin_exchange(
        connection,
        Authenticated(
            server.mechanism,
            principal,
            lifetime_ms > 0,
            reauthenticated=state.began if state.previous is not None else 0.0,
        ),
    )
    # DEBUG, as Kafka's: one line per connection (and per renewal) would flood a big fleet's log.
    log.debug(
        "connection from %s %s as %s with %s",
        request.client_host,
        "re-authenticated" if state.previous else "authenticated",
        principal,
        server.mechanism,
    )
    return _answer(ErrorCode.NONE, token=token, lifetime_ms=lifetime_ms)


def _refuse(
    broker: Broker,
    request: Request[SaslAuthenticateRequest],
    state: Exchange,
    message: str,
    reason: str | None = None,
) -> SaslAuthenticateResponse:
    failures(
        "failed authentication",
        "connection from %s: SASL %s failed: %s%s; closing",
        request.client_host,
        state.what,
        message,
        f" ({reason})" if reason and reason != message else "",
        address=request.client_host,
    )
    broker.sessions.failed(request.connection)
    return _answer(ErrorCode.SASL_AUTHENTICATION_FAILED, message)


def _answer(
    code: ErrorCode, message: str | None = None, token: bytes = b"", lifetime_ms: int = 0
) -> SaslAuthenticateResponse:
    return {
        "error_code": code,
        "error_message": message,
        "auth_bytes": token,
        "session_lifetime_ms": lifetime_ms,
    }
