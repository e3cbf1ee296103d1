"""SASL in process: the SCRAM server (RFC 7677's example, an independent client, hypothesis),
PLAIN, and SaslHandshake / SaslAuthenticate as Kafka answers them on SASL and other listeners."""

from __future__ import annotations

import base64

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from scramkit import ScramClient, hi, nodes, upsertion

from corral.config.settings import ConfigError, Settings
from corral.security import sasl, scram

NONE, UNSUPPORTED, ILLEGAL, FAILED = 0, 33, 34, 58
GENERIC = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)
AUTHZID = (
    "Authentication failed: Client requested an authorization id that is different from username"
)


@pytest.fixture
def node(tmp_path):
    yield from nodes(tmp_path)


# The SCRAM server alone


def rfc7677_credential() -> scram.Credential:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    mechanism = scram.SCRAM_SHA_256
    return scram.credential(
        mechanism, salt, scram.salted_password(mechanism, "pencil", salt, 4096), 4096
    )


def test_rfc7677_example_known_answer():
    server = scram.ScramServer(
        scram.SCRAM_SHA_256,
        {"user": rfc7677_credential()}.get,
        nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    assert server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert server.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    ) == (b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    assert server.complete and server.user == "user"


def test_the_stored_credential_is_kafkas_and_independent_of_pbkdf2():
    """Hi by the RFC's loop equals hashlib's PBKDF2, and the stored key is H(HMAC(salted,
    "Client Key")) (ScramFormatter)."""
    salt = b"salt-bytes"
    salted = hi("sha512", "pässword".encode(), salt, 4096)
    assert salted == scram.salted_password(scram.SCRAM_SHA_512, "pässword", salt, 4096)
    stored = scram.credential(scram.SCRAM_SHA_512, salt, salted, 4096)
    assert len(stored.stored_key) == len(stored.server_key) == 64
    assert scram.password_matches(scram.SCRAM_SHA_512, stored, "pässword")
    assert not scram.password_matches(scram.SCRAM_SHA_512, stored, "password")


def exchange(mechanism: str, users: dict[str, str], user: str, password: str, **final_kw):
    """Runs the server against the test client; returns (server, client, server final)."""
    m = scram.MECHANISMS[mechanism]
    stored = {}
    for name, pw in users.items():
        up = upsertion(name, mechanism, pw)
        stored[name] = scram.credential(m, up["salt"], up["salted_password"], up["iterations"])
    server = scram.ScramServer(m, stored.get)
    client = ScramClient(mechanism, user, password)
    server_first = server.step(client.first())
    return server, client, server.step(client.final(server_first, **final_kw))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(
    "user,password",
    [
        ("alice", "alice-secret"),
        ("a,b=c", "x"),
        ("=2C", "pw"),
        ("bob", "pässwörd ✓"),
    ],
)
def test_scram_exchanges_with_an_independent_client(mechanism, user, password):
    server, client, final = exchange(mechanism, {user: password}, user, password)
    assert server.complete and server.user == user and client.verify(final)


@hsettings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mechanism=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
    user=st.text(st.characters(min_codepoint=1, max_codepoint=127), min_size=1, max_size=20),
    password=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30),
    wrong=st.booleans(),
)
def test_scram_property_right_password_in_wrong_out(mechanism, user, password, wrong):
    given_password = password + "x" if wrong else password
    try:
        server, client, final = exchange(mechanism, {user: password}, user, given_password)
    except scram.Failed as e:
        assert wrong and str(e) == "Invalid client credentials" and e.public is None
        return
    assert not wrong and server.complete and server.user == user and client.verify(final)


def test_scram_refusals_are_generic_but_for_the_authorization_id():
    m = scram.SCRAM_SHA_256
    stored = {
        "alice": scram.credential(
            m, b"s" * 16, scram.salted_password(m, "pw", b"s" * 16, 4096), 4096
        ),
        "weak": scram.credential(m, b"s", scram.salted_password(m, "pw", b"s", 1000), 1000),
    }

    def first_fails(message: bytes) -> scram.Failed:
        with pytest.raises(scram.Failed) as e:
            scram.ScramServer(m, stored.get).step(message)
        return e.value

    assert (
        str(first_fails(b"n,,n=nobody,r=abc")) == "Authentication failed: Invalid user credentials"
    )
    assert str(first_fails(b"y,,n=alice,r=abc")).startswith(
        "Invalid SCRAM client first message format"
    )
    assert str(first_fails(b"p=tls-unique,,n=alice,r=abc")).startswith("Invalid SCRAM client first")
    assert str(first_fails(b"n,,n=alice,r=a,b")).startswith("Invalid SCRAM client first")
    assert str(first_fails(b"n,,n=al=ice,r=abc")).startswith("Invalid SCRAM client first")
    assert str(first_fails(b"n,,n=al=3Fice,r=abc")).startswith("Invalid SCRAM client first")
    assert str(first_fails(b"n,,n=alice,r=abc,tokenauth=true")).startswith(
        "Token Authentication failed"
    )
    assert str(first_fails(b"n,,n=weak,r=abc")).startswith(
        "Iterations 1000 is less than the minimum 4096"
    )
    assert all(
        first_fails(m).public is None
        for m in (b"n,,n=nobody,r=abc", b"n,,n=alice,r=abc,tokenauth=true")
    )
    refused = first_fails(b"n,a=bob,n=alice,r=abc")
    assert refused.public == AUTHZID
    # Other extensions are ignored, an authorization id equal to the user is accepted.
    assert (
        scram.ScramServer(m, stored.get).step(b"n,a=alice,n=alice,r=abc,ext=1").startswith(b"r=abc")
    )


@pytest.mark.parametrize(
    "final_kw,reason",
    [
        ({"password_override": "wrong"}, "Invalid client credentials"),
        ({"nonce": "someone-elses-nonce"}, "Invalid client nonce in the final client message."),
        ({"proof_flip": True}, "Invalid client credentials"),
        ({"channel": b"y,,"}, "Invalid channel binding in the final client message."),
    ],
)
def test_scram_final_message_refusals(final_kw, reason):
    password = final_kw.pop("password_override", "right")
    with pytest.raises(scram.Failed) as e:
        exchange("SCRAM-SHA-512", {"alice": "right"}, "alice", password, **final_kw)
    assert str(e.value) == reason and e.value.public is None


def test_scram_server_refuses_a_malformed_final_and_anything_after_the_end():
    m = scram.SCRAM_SHA_256
    up = upsertion("u", "SCRAM-SHA-256", "pw")
    stored = scram.credential(m, up["salt"], up["salted_password"], 4096)
    server = scram.ScramServer(m, {"u": stored}.get)
    server.step(b"n,,n=u,r=abc")
    with pytest.raises(scram.Failed, match="Invalid SCRAM client final message format"):
        server.step(b"c=biws,r=abc,p=%%%")
    server, client, _ = exchange("SCRAM-SHA-256", {"u": "pw"}, "u", "pw")
    with pytest.raises(scram.Failed, match="Unexpected challenge"):
        server.step(b"more")


# Through the handlers


def test_sasl_requests_on_a_listener_without_sasl_answer_illegal_state(node):
    n = node()
    assert n.handshake("PLAIN", listener="PLAINTEXT") == {"error_code": ILLEGAL, "mechanisms": []}
    answer = n.authenticate(b"\0u\0p", listener="PLAINTEXT")
    assert answer["error_code"] == ILLEGAL
    assert (
        answer["error_message"]
        == "SaslAuthenticate request received after successful authentication"
    )
    assert n.network.calls == []


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_scram_through_the_handlers(node, mechanism, version):
    n = node()
    n.add_user("alice", "alice-secret", mechanism)
    answer = n.scram(mechanism, "alice", "alice-secret", version)
    assert answer["error_code"] == NONE and answer["error_message"] is None
    assert n.network.calls == [("authenticated", "User:alice", 0)]
    # Once authenticated, SaslAuthenticate is Kafka's KafkaApis answer, and nothing closes.
    again = n.authenticate(b"x")
    assert again["error_code"] == ILLEGAL and n.network.calls[-1][0] == "authenticated"


@pytest.mark.parametrize(
    "user,password,message",
    [
        ("alice", "wrong", GENERIC.format("SCRAM-SHA-256")),
        ("nobody", "alice-secret", GENERIC.format("SCRAM-SHA-256")),
    ],
)
def test_scram_failures_answer_kafkas_message_and_close(node, user, password, message):
    n = node()
    n.add_user("alice", "alice-secret")
    answer = n.scram("SCRAM-SHA-256", user, password)
    assert (answer["error_code"], answer["error_message"]) == (FAILED, message)
    assert n.network.calls == [("close",)]
    assert n.broker.sessions.exchange(0) is None


def test_a_user_with_one_mechanism_cannot_use_the_other(node):
    n = node()
    n.add_user("alice", "pw", "SCRAM-SHA-256")
    answer = n.scram("SCRAM-SHA-512", "alice", "pw")
    assert (answer["error_code"], answer["error_message"]) == (
        FAILED,
        GENERIC.format("SCRAM-SHA-512"),
    )


@pytest.mark.parametrize(
    "token,code,message",
    [
        (b"\0alice\0alice-secret", NONE, None),
        (b"alice\0alice\0alice-secret", NONE, None),
        (b"\0alice\0wrong", FAILED, "Authentication failed: Invalid username or password"),
        (b"\0nobody\0alice-secret", FAILED, "Authentication failed: Invalid username or password"),
        (b"bob\0alice\0alice-secret", FAILED, AUTHZID),
        (b"\0\0alice-secret", FAILED, "Authentication failed: username not specified"),
        (b"\0alice\0", FAILED, "Authentication failed: password not specified"),
        (b"alice\0alice-secret", FAILED, "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (
            b"\0alice\0alice-secret\0x",
            FAILED,
            "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
        ),
    ],
)
def test_plain_checks_the_scram_credentials(node, token, code, message):
    n = node()
    n.add_user("alice", "alice-secret", "SCRAM-SHA-512", iterations=8192)
    assert n.handshake("PLAIN")["error_code"] == NONE
    answer = n.authenticate(token)
    assert (answer["error_code"], answer["error_message"], answer["auth_bytes"]) == (
        code,
        message,
        b"",
    )
    assert n.network.calls == (
        [("authenticated", "User:alice", 0)] if code == NONE else [("close",)]
    )


def test_handshake_refusals(node):
    n = node(**{"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    # The listener's own list; an unknown or disabled mechanism is refused, the connection closed.
    for mechanism in ("PLAIN", "GSSAPI", "scram-sha-512"):
        for version in (0, 1):
            assert n.handshake(mechanism, version) == {
                "error_code": UNSUPPORTED,
                "mechanisms": ["SCRAM-SHA-512"],
            }
            assert n.network.calls.pop() == ("close",)
    assert n.handshake("SCRAM-SHA-512", 0) == {"error_code": NONE, "mechanisms": ["SCRAM-SHA-512"]}
    # A second handshake in the middle of an exchange.
    assert n.handshake("SCRAM-SHA-512")["error_code"] == ILLEGAL
    assert n.network.calls.pop() == ("close",)


def test_authenticate_without_a_handshake_is_illegal_and_closes(node):
    n = node()
    answer = n.authenticate(b"\0alice\0pw")
    assert answer["error_code"] == ILLEGAL
    assert (
        answer["error_message"]
        == "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake."
    )
    assert n.network.calls == [("close",)]


def test_session_lifetime_and_reauthentication(node, monkeypatch):
    n = node(
        **{
            "connections.max.reauth.ms": 60000,
            "listener.name.sasl_plaintext.connections.max.reauth.ms": 5000,
        }
    )
    n.add_user("alice", "pw")
    n.add_user("bob", "pw", "SCRAM-SHA-512")
    n.add_user("alice", "pw2", "SCRAM-SHA-512")
    answer = n.scram("SCRAM-SHA-256", "alice", "pw")
    assert answer["session_lifetime_ms"] == 5000
    assert n.network.calls == [("authenticated", "User:alice", 5000)]
    # Re-authentication: same user and mechanism.
    assert n.scram("SCRAM-SHA-256", "alice", "pw")["session_lifetime_ms"] == 5000
    assert n.network.calls[-1] == ("authenticated", "User:alice", 5000)
    # At most one re-authentication a second: within it, KafkaApis answers the handshake.
    assert n.handshake("SCRAM-SHA-256") == {"error_code": ILLEGAL, "mechanisms": []}
    clock = sasl.time.monotonic() + 2
    monkeypatch.setattr(sasl.time, "monotonic", lambda: clock)
    # Another mechanism: the handshake passes, its SaslAuthenticate is refused.
    assert n.handshake("SCRAM-SHA-512")["error_code"] == NONE
    answer = n.authenticate(ScramClient("SCRAM-SHA-512", "alice", "pw2").first())
    assert (answer["error_code"], answer["error_message"]) == (
        FAILED,
        (
            "SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for "
            "re-authentication of mechanism 'SCRAM-SHA-256'"
        ),
    )
    assert n.network.calls[-1] == ("close",)


def test_reauthentication_keeps_the_principal(node):
    n = node(**{"connections.max.reauth.ms": 1000})
    n.add_user("alice", "pw")
    n.add_user("bob", "pw")
    assert n.scram("SCRAM-SHA-256", "alice", "pw")["error_code"] == NONE
    answer = n.scram("SCRAM-SHA-256", "bob", "pw")
    assert (answer["error_code"], answer["error_message"]) == (
        FAILED,
        "Cannot change principals during re-authentication from User.alice: User.bob",
    )
    assert n.network.calls[-1] == ("close",)
    # A failed re-authentication says so (a new connection, as the last one was closed).
    n.broker.sessions.closed(0)
    assert n.scram("SCRAM-SHA-256", "alice", "pw")["error_code"] == NONE
    answer = n.scram("SCRAM-SHA-256", "alice", "wrong")
    assert answer["error_message"] == (
        "Authentication failed during re-authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-256"
    )


def test_without_session_end_a_handshake_after_authentication_is_illegal(node):
    n = node()
    n.add_user("alice", "pw")
    assert n.scram("SCRAM-SHA-256", "alice", "pw")["error_code"] == NONE
    assert n.handshake("SCRAM-SHA-256") == {"error_code": ILLEGAL, "mechanisms": []}
    assert n.network.calls == [("authenticated", "User:alice", 0)]


def test_closed_connections_forget_their_sessions(node):
    n = node()
    n.add_user("alice", "pw")
    assert n.handshake("PLAIN")["error_code"] == NONE
    n.broker.sessions.closed(0)
    assert n.authenticate(b"\0alice\0pw")["error_code"] == ILLEGAL


def test_a_connection_closed_during_the_password_check_keeps_no_session(node, monkeypatch):
    n = node()
    n.add_user("alice", "pw")
    assert n.handshake("PLAIN")["error_code"] == NONE
    sessions = n.broker.sessions

    async def check_password(user, password):
        sessions.closed(0)  # the network thread reports the close meanwhile
        return True

    monkeypatch.setattr(n.broker.credentials, "check_password", check_password)
    assert n.authenticate(b"\0alice\0pw")["error_code"] == NONE
    assert sessions.exchange(0) is None and n.network.calls == []


@pytest.mark.parametrize(
    "value,error",
    [
        ("GSSAPI", "GSSAPI is not supported: corral does not do Kerberos"),
        (
            "PLAIN,OAUTHBEARER",
            "OAUTHBEARER is not supported: corral does not do OAuth bearer tokens",
        ),
        ("SCRAM-SHA-1", "unknown SASL mechanism 'SCRAM-SHA-1'"),
        ("", "names no mechanism"),
    ],
)
def test_mechanisms_corral_cannot_do_are_refused_at_startup(value, error):
    with pytest.raises(ConfigError, match=error):
        Settings({"sasl.enabled.mechanisms": value})
    assert Settings()["sasl.enabled.mechanisms"] == "SCRAM-SHA-256,SCRAM-SHA-512"
    assert Settings()["connections.max.reauth.ms"] == 0
