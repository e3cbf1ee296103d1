"""What the network thread keeps for security, in process: with an authorizer on it answers a
connection's steady heartbeats only for groups a handler authorized on that connection (checked
once per connection and group, then no Python), and an ACL change sends them back to Python; the
SASL state Python keeps for a connection is dropped when it closes, however early."""

from __future__ import annotations

from shortpath import (
    Member,
    create_topic,
    settle,
    with_broker,
)

from corral.network.apis import ApiKey

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
GROUP, LITERAL, READ, DENY = 3, 3, 3, 2
GROUP_AUTHORIZATION_FAILED = 30


def test_heartbeats_are_authorized_once_per_connection_until_the_acls_change(
    tmp_path,
    python_calls,
):
    def scenario(broker) -> None:
        a, b = Member(broker.port, "wire", "member-a"), Member(broker.port, "wire", "member-b")
        with a.client, b.client:
            create_topic(a.client, "t", 4)
            assert a.join(["t"])["error_code"] == 0 and b.join(["t"])["error_code"] == 0
            settle(broker, a, b)
            through_python = len(python_calls)
            for _ in range(50):
                for m in (a, b):
                    assert m.steady()["error_code"] == 0
            assert len(python_calls) == through_python, (
                "an authorized steady heartbeat reached Python"
            )

            # No ACL names the cluster, so (allow.everyone.if.no.acl.found) anyone may add one.
            created = a.client.call(
                ApiKey.CREATE_ACLS,
                3,
                {
                    "creations": [
                        {
                            "resource_type": GROUP,
                            "resource_name": "wire",
                            "resource_pattern_type": LITERAL,
                            "principal": "User:ANONYMOUS",
                            "host": "*",
                            "operation": READ,
                            "permission_type": DENY,
                        }
                    ]
                },
            )
            assert created["results"][0]["error_code"] == 0
            for m in (a, b):
                assert m.steady()["error_code"] == GROUP_AUTHORIZATION_FAILED
            assert len(python_calls) == through_python + 2

    with_broker(
        tmp_path,
        scenario,
        **{"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"},
    )


def test_sasl_state_of_connections_that_close_at_once_is_forgotten(tmp_path):
    """A client that sends SaslHandshake and closes before Python asked the network thread to
    watch its connection: the close is still reported, and no exchange is kept."""
    import socket
    import time

    from corral import _core

    def scenario(broker) -> None:
        sessions = broker.server.broker.sessions
        for i in range(50):
            with socket.create_connection(("127.0.0.1", broker.port)) as sock:
                sock.sendall(_core.encode_request(17, 1, i, {"mechanism": "SCRAM-SHA-256"}, "c"))
        deadline = time.monotonic() + 10
        while broker.run(lambda: len(sessions.exchanges) + len(sessions.watched)):
            assert time.monotonic() < deadline, "SASL state of closed connections is kept"
            time.sleep(0.05)

    with_broker(tmp_path, scenario, listeners="SASL_PLAINTEXT://127.0.0.1:0")
