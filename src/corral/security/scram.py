"""SCRAM (RFC 5802, RFC 7677) as Kafka does it: SCRAM-SHA-256 and SCRAM-SHA-512, the server side.

What is stored per user and mechanism is Kafka's credential (ScramCredential): salt, stored key,
server key and iterations, never the password nor the salted password. The server exchange
follows Kafka's ScramSaslServer: gs2 header "n" only (no channel binding), usernames with =2C/=3D
escapes, an authorization id only if it is the username, extensions ignored except `tokenauth`
(delegation tokens, which corral does not have: refused), the proof checked against the stored
key in constant time, the server signature sent back.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Mechanism:
    name: str
    type: int  # Kafka's ScramMechanism type byte, as in Describe/AlterUserScramCredentials
    hash: str  # hashlib's name
    min_iterations: int = 4096
    max_iterations: int = 16384  # ScramControlManager.MAX_ITERATIONS


SCRAM_SHA_256 = Mechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = Mechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE = {m.type: m for m in MECHANISMS.values()}


@dataclass(frozen=True)
class Credential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mechanism: Mechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash).digest()


def salted_password(mechanism: Mechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802, which is PBKDF2 with HMAC; Kafka normalizes the
    password to its UTF-8 bytes only (no SASLprep)."""
    return hashlib.pbkdf2_hmac(mechanism.hash, password.encode(), salt, iterations)


def credential(mechanism: Mechanism, salt: bytes, salted: bytes, iterations: int) -> Credential:
    """What is stored, from the salted password AlterUserScramCredentials sends (Kafka's
    ScramFormatter.generateCredential)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return Credential(
        salt,
        hashlib.new(mechanism.hash, client_key).digest(),
        _hmac(mechanism, salted, b"Server Key"),
        iterations,
    )


def password_matches(mechanism: Mechanism, stored: Credential, password: str) -> bool:
    """Whether `password` is the one `stored` was made from (SASL/PLAIN checks this way)."""
    salted = salted_password(mechanism, password, stored.salt, stored.iterations)
    return hmac.compare_digest(
        credential(mechanism, stored.salt, salted, stored.iterations).stored_key, stored.stored_key
    )


class Failed(Exception):
    """The exchange failed. `public`: a message the client may see (Kafka's
    SaslAuthenticationException); None: only Kafka's generic one, so that nothing tells an
    unauthenticated client whether the user exists (Kafka's SaslException)."""

    def __init__(self, reason: str, public: str | None = None):
        super().__init__(reason)
        self.public = public


# ScramMessages' grammar, as Kafka's regular expressions have it (ASCII only).
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_B64})"
)


def username(sasl_name: str) -> str:
    """A SCRAM saslname with its =2C (",") and =3D ("=") escapes undone (ScramFormatter.username;
    the grammar has refused any other "=")."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


def _extensions(text: str) -> dict[str, str]:
    """ ",a=1,b=2" -> {"a": "1", "b": "2"} (Utils.parseMap)."""
    pairs = (item.partition("=") for item in text.split(",") if item)
    return {key: value for key, _, value in pairs}


def _shown(text: str) -> str:
    """A client's text as a log line may carry it: quoted (no line breaks) and short."""
    return repr(text[:64]) + ("..." if len(text) > 64 else "")


def _text(message: bytes) -> str:
    # Kafka decodes as UTF-8 with replacement; the grammar then refuses anything not ASCII.
    return message.decode("utf-8", errors="replace")


class ScramServer:
    """One SCRAM exchange: `step(client first)` -> server first, `step(client final)` -> server
    final; then `user` is who authenticated. Raises Failed."""

    def __init__(
        self,
        mechanism: Mechanism,
        lookup: Callable[[str], Credential | None],
        nonce: Callable[[], str] = lambda: secrets.token_urlsafe(18),
    ):
        self.mechanism = mechanism
        self._lookup = lookup
        self._nonce = nonce
        self.user: str | None = None
        self.complete = False
        self._step = self._client_first
        self._stored: Credential | None = None
        self._gs2 = self._first_bare = self._server_first = self._combined_nonce = ""

    def step(self, message: bytes) -> bytes:
        step = self._step
        self._step = self._done
        try:
            return step(message)
        except Failed:
            self._stored = None
            raise

    def _client_first(self, message: bytes) -> bytes:
        text = _text(message)
        first = _CLIENT_FIRST.fullmatch(text)
        if first is None:
            raise Failed(f"Invalid SCRAM client first message format: {_shown(text)}")
        if _extensions(first["extensions"]).get("tokenauth", "").lower() == "true":
            raise Failed("Token Authentication failed: corral has no delegation tokens")
        user = username(first["saslname"])
        stored = self._lookup(user)
        if stored is None:
            raise Failed("Authentication failed: Invalid user credentials")
        if first["authzid"] is not None and first["authzid"] != user:
            refusal = (
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
            raise Failed(refusal, public=refusal)
        if stored.iterations < self.mechanism.min_iterations:
            raise Failed(
                f"Iterations {stored.iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism.name}"
            )
        self.user, self._stored = user, stored
        self._gs2, self._first_bare = first["gs2"], first["bare"]
        self._combined_nonce = first["nonce"] + self._nonce()
        self._server_first = (
            f"r={self._combined_nonce},s={base64.b64encode(stored.salt).decode()},"
            f"i={stored.iterations}"
        )
        self._step = self._client_final
        return self._server_first.encode()

    def _client_final(self, message: bytes) -> bytes:
        text = _text(message)
        final = _CLIENT_FINAL.fullmatch(text)
        if final is None:
            raise Failed(f"Invalid SCRAM client final message format: {_shown(text)}")
        if final["nonce"] != self._combined_nonce:
            raise Failed("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(final["channel"], validate=True)
            proof = base64.b64decode(final["proof"], validate=True)
        except binascii.Error:
            raise Failed("Invalid SCRAM client final message: bad base64") from None
        # RFC 5802: without channel binding, c= repeats the gs2 header.
        if channel != self._gs2.encode():
            raise Failed("Invalid channel binding in the final client message.")
        stored = self._stored
        assert stored is not None
        auth_message = f"{self._first_bare},{self._server_first},{final['without_proof']}".encode()
        signature = _hmac(self.mechanism, stored.stored_key, auth_message)
        if len(proof) != len(signature):
            raise Failed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(signature, proof))
        if not hmac.compare_digest(
            hashlib.new(self.mechanism.hash, client_key).digest(), stored.stored_key
        ):
            raise Failed("Invalid client credentials")
        server_signature = _hmac(self.mechanism, stored.server_key, auth_message)
        self._stored = None
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)

    def _done(self, message: bytes) -> bytes:
        raise Failed("Unexpected challenge in Sasl server state COMPLETE")
