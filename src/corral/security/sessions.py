"""What Python knows about connections' security, and the one way to tell the network thread.

The network thread (rust/network/reactor/) owns the connections: it knows each one's listener and
principal (`Request.listener`, `Request.principal`: "User:ANONYMOUS" until authenticated, the
certificate's subject on mTLS) and, on SASL listeners, refuses every request but ApiVersions,
SaslHandshake and SaslAuthenticate until Python says the connection is authenticated. Python
keeps only what a SASL exchange needs between its requests, dropped when the connection closes,
and tells the thread about authentications and group authorizations through this object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Network(Protocol):
    """The part of `_core.Reactor` the sessions use."""

    def authenticated(self, connection: int, principal: str, session_lifetime_ms: int) -> None: ...
    def close_after_answer(self, connection: int) -> None: ...
    def raw_sasl_tokens(self, connection: int) -> None: ...
    def watch_close(self, connection: int) -> None: ...
    def authorize_group(self, connection: int, group_id: str) -> None: ...
    def authorize_topics(self, connection: int, topics: list[str]) -> None: ...
    def forget_authorizations(self) -> None: ...


class Sessions:
    """Per-connection security state for the handlers. Outside a server (in-process tests) no
    network is attached and the calls only change this object."""

    def __init__(self) -> None:
        self.network: Network | None = None
        # connection -> the SASL exchange under way on it (the SASL handlers' own object).
        self.exchanges: dict[int, Any] = {}
        # Connections whose close the network thread reports (`watch_close` asked once each).
        self.watched: set[int] = set()
        # Called with each watched connection that closed (share sessions end with theirs).
        self.on_closed: list[Callable[[int], None]] = []

    def attach(self, network: Network) -> None:
        self.network = network

    def begin_exchange(self, connection: int, exchange: Any) -> None:
        """Keeps `exchange` for the connection's next SASL request; forgotten when it closes
        (the network thread reports the close, even one that came before it was asked to)."""
        self.watch(connection)
        self.exchanges[connection] = exchange

    def watch(self, connection: int) -> None:
        """Asks the network thread to report the connection's close (`closed`), once."""
        if connection not in self.watched:
            self.watched.add(connection)
            if self.network is not None:
                self.network.watch_close(connection)

    def exchange(self, connection: int) -> Any:
        return self.exchanges.get(connection)

    def end_exchange(self, connection: int) -> None:
        self.exchanges.pop(connection, None)

    def authenticated(self, connection: int, principal: str, session_lifetime_ms: int) -> None:
        """The connection is now `principal` ("User:alice"); its session ends after
        `session_lifetime_ms` (0: never), after which the thread closes it on its next request
        unless it re-authenticated. Call before answering the SaslAuthenticate that succeeded."""
        self.end_exchange(connection)
        if self.network is not None:
            self.network.authenticated(connection, principal, session_lifetime_ms)

    def raw_tokens(self, connection: int) -> None:
        """The connection sent SaslHandshake v0: after this answer it sends bare SASL tokens,
        which reach the SaslAuthenticate handler as v0 requests, their answers going back bare.
        Call before answering the handshake."""
        if self.network is not None:
            self.network.raw_sasl_tokens(connection)

    def failed(self, connection: int) -> None:
        """Authentication failed: the connection closes once the answer saying so is written
        (as Kafka closes it). Call before answering."""
        self.end_exchange(connection)
        if self.network is not None:
            self.network.close_after_answer(connection)

    def authorize_group(self, connection: int, group_id: str) -> None:
        """The connection's principal may READ the group: the thread's heartbeat short paths may
        answer its heartbeats for this group without asking Python again."""
        if self.network is not None:
            self.network.authorize_group(connection, group_id)

    def authorize_topics(self, connection: int, topics: list[str]) -> None:
        """The connection's principal may READ these topics: the network thread may write its
        OffsetCommits to them (for a group authorized too) without asking Python again."""
        if self.network is not None and topics:
            self.network.authorize_topics(connection, topics)

    def forget_authorizations(self) -> None:
        """ACLs changed: every group and topic authorization the thread cached is dropped."""
        if self.network is not None:
            self.network.forget_authorizations()

    def closed(self, connection: int) -> None:
        """The network thread reports that a watched connection closed."""
        self.exchanges.pop(connection, None)
        self.watched.discard(connection)
        for listener in self.on_closed:
            listener(connection)
