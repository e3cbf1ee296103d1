"""SASL test kit: a SCRAM client written from RFC 5802 section 3 independently of corral's server
(Hi as the RFC's loop of HMACs, not PBKDF2), the salted password AlterUserScramCredentials
carries, and an in-process broker whose SASL and credential handlers tests call."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

import trio

from corral import _core
from corral.broker import Broker
from corral.config.settings import Settings
from corral.network.apis import HANDLERS, api_table

HANDSHAKE, AUTHENTICATE, ALTER = 17, 36, 51
NONE = 0

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


def hi(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(str, salt, i) := U1 XOR U2 XOR ... XOR Ui, U1 := HMAC(str, salt + INT(1))."""
    u = hmac.new(password, salt + b"\0\0\0\1", hash_name).digest()
    out = int.from_bytes(u, "big")
    for _ in range(iterations - 1):
        u = hmac.new(password, u, hash_name).digest()
        out ^= int.from_bytes(u, "big")
    return out.to_bytes(len(u), "big")


def upsertion(
    user: str, mechanism: str, password: str, iterations: int = 4096, salt: bytes | None = None
) -> dict:
    """An AlterUserScramCredentials upsertion, as Kafka's admin clients build it."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    return {
        "name": user,
        "mechanism": TYPES[mechanism],
        "iterations": iterations,
        "salt": salt,
        "salted_password": hi(HASHES[mechanism], password.encode(), salt, iterations),
    }


def sasl_name(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(
        self, mechanism: str, user: str, password: str, nonce: str | None = None, authzid: str = ""
    ):
        self.hash = HASHES[mechanism]
        self.user, self.password = user, password
        self.nonce = nonce or secrets.token_urlsafe(16)
        self.gs2 = f"n,{'a=' + sasl_name(authzid) if authzid else ''},"
        self.first_bare = f"n={sasl_name(user)},r={self.nonce}"
        self.server_signature = b""

    def first(self, extensions: str = "") -> bytes:
        return (self.gs2 + self.first_bare + extensions).encode()

    def final(
        self,
        server_first: bytes,
        nonce: str | None = None,
        proof_flip: bool = False,
        channel: bytes | None = None,
    ) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        assert fields["r"].startswith(self.nonce)
        salted = hi(
            self.hash, self.password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
        )
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        cbind = base64.b64encode(channel if channel is not None else self.gs2.encode()).decode()
        without_proof = f"c={cbind},r={nonce or fields['r']}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytearray(a ^ b for a, b in zip(client_key, signature))
        if proof_flip:
            proof[0] ^= 1
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(bytes(proof)).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        return server_final == b"v=" + base64.b64encode(self.server_signature)


class Network:
    """Records what the handlers tell the network thread."""

    def __init__(self):
        self.calls: list[tuple] = []

    def authenticated(self, connection, principal, lifetime_ms):
        self.calls.append(("authenticated", principal, lifetime_ms))

    def close_after_answer(self, connection):
        self.calls.append(("close",))

    def raw_sasl_tokens(self, connection):
        self.calls.append(("raw tokens",))

    def watch_close(self, connection):
        pass


class Node:
    """A Broker in process and one connection (id 0) to it."""

    table = None

    def __init__(self, data_dir, **settings):
        Node.table = Node.table or api_table()
        self.broker = Broker(
            Settings(
                {
                    "log.dirs": str(data_dir),
                    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
                    **settings,
                }
            )
        )
        self.network = Network()
        self.broker.sessions.attach(self.network)

    def close(self):
        self.broker.logs.close()
        os.close(self.broker._lock_fd)

    def call(self, key: int, version: int, body: dict, listener: str = "SASL_PLAINTEXT") -> dict:
        connection = _core.Connection(self.table, 1 << 20, listener=listener)
        connection.feed(_core.encode_request(key, version, 1, body, "test"))
        request = connection.next()
        answer = HANDLERS[key](self.broker, request)
        if hasattr(answer, "__await__"):

            async def wait(answer=answer):
                return await answer

            answer = trio.run(wait)
        frame = request.respond(answer)
        return _core.decode_response(key, version, frame[4:])[1]

    def add_user(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256", iterations=4096):
        answer = self.call(
            ALTER,
            0,
            {"deletions": [], "upsertions": [upsertion(user, mechanism, password, iterations)]},
            listener="PLAINTEXT",
        )
        assert answer["results"][0]["error_code"] == NONE, answer

    def handshake(self, mechanism: str, version: int = 1, **kw) -> dict:
        return self.call(HANDSHAKE, version, {"mechanism": mechanism}, **kw)

    def authenticate(self, token: bytes, version: int = 2, **kw) -> dict:
        return self.call(AUTHENTICATE, version, {"auth_bytes": token}, **kw)

    def scram(self, mechanism: str, user: str, password: str, version: int = 2) -> dict:
        """A whole SCRAM exchange with the test client; the last answer."""
        assert self.handshake(mechanism)["error_code"] == NONE
        client = ScramClient(mechanism, user, password)
        first = self.authenticate(client.first(), version)
        if first["error_code"] != NONE:
            return first
        assert first["session_lifetime_ms"] == 0
        final = self.authenticate(client.final(first["auth_bytes"]), version)
        if final["error_code"] == NONE:
            assert client.verify(final["auth_bytes"])
        return final


def nodes(tmp_path):
    """The body of a fixture making Nodes: `node(**settings)`; closes them after the test."""
    made = []

    def make(**settings) -> Node:
        made.append(Node(tmp_path / f"n{len(made)}", **settings))
        return made[-1]

    yield make
    for n in made:
        n.close()
