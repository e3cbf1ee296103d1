"""Describe/AlterUserScramCredentials in process: Kafka's validation and codes, what is stored
(never a salted password), and credentials surviving a restart of the store."""

from __future__ import annotations

import base64
import json
import os
import stat

import pytest
from scramkit import NONE, Node, nodes, upsertion

from corral.broker import Broker, StartupError
from corral.config.settings import Settings
from corral.security.credentials import FILE, Credentials
from corral.security.scram import SCRAM_SHA_256, SCRAM_SHA_512

DESCRIBE, ALTER = 50, 51
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM = (
    91,
    92,
    93,
    33,
)


@pytest.fixture
def node(tmp_path):
    yield from nodes(tmp_path)


def alter(n: Node, deletions=(), upsertions=()) -> dict[str, tuple[int, str | None]]:
    answer = n.call(
        ALTER,
        0,
        {"deletions": list(deletions), "upsertions": list(upsertions)},
        listener="PLAINTEXT",
    )
    results = {r["user"]: (r["error_code"], r["error_message"]) for r in answer["results"]}
    assert len(results) == len(answer["results"])
    return results


def describe(n: Node, users=None) -> list[dict]:
    body = {"users": None if users is None else [{"name": u} for u in users]}
    answer = n.call(DESCRIBE, 0, body, listener="PLAINTEXT")
    assert answer["error_code"] == NONE
    return answer["results"]


def delete(user: str, mechanism: int = 1) -> dict:
    return {"name": user, "mechanism": mechanism}


def test_alter_and_describe_round_trip(node):
    n = node()
    assert describe(n) == []
    assert alter(
        n,
        upsertions=[
            upsertion("alice", "SCRAM-SHA-256", "a", 4096),
            upsertion("bob", "SCRAM-SHA-512", "b", 8192),
        ],
    ) == {"alice": (NONE, None), "bob": (NONE, None)}
    assert alter(n, upsertions=[upsertion("alice", "SCRAM-SHA-512", "a", 16384)]) == {
        "alice": (NONE, None)
    }
    everyone = describe(n)
    assert [(r["user"], r["error_code"], r["credential_infos"]) for r in everyone] == [
        (
            "alice",
            NONE,
            [{"mechanism": 1, "iterations": 4096}, {"mechanism": 2, "iterations": 16384}],
        ),
        ("bob", NONE, [{"mechanism": 2, "iterations": 8192}]),
    ]
    assert describe(n, []) == everyone
    named = describe(n, ["bob", "carol", "alice", "alice"])
    assert [(r["user"], r["error_code"], r["error_message"]) for r in named] == [
        ("bob", NONE, None),
        (
            "carol",
            RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: carol",
        ),
        (
            "alice",
            DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
        ),
    ]
    # Deleting a user's last credential removes the user.
    assert alter(n, deletions=[delete("bob", 2), delete("alice", 1)]) == {
        "bob": (NONE, None),
        "alice": (NONE, None),
    }
    assert [(r["user"], r["credential_infos"]) for r in describe(n)] == [
        ("alice", [{"mechanism": 2, "iterations": 16384}])
    ]


def test_alter_refusals_are_kafkas(node):
    n = node()
    alter(
        n,
        upsertions=[
            upsertion("alice", "SCRAM-SHA-256", "a"),
            upsertion("twice", "SCRAM-SHA-256", "t"),
        ],
    )
    results = alter(
        n,
        deletions=[
            delete("alice", 2),
            delete("ghost"),
            delete("", 1),
            delete("bob", 0),
            delete("twice"),
            delete("twice"),
        ],
        upsertions=[
            upsertion("carol", "SCRAM-SHA-256", "c", 4095),
            upsertion("dave", "SCRAM-SHA-256", "d", 16385),
            {**upsertion("erin", "SCRAM-SHA-256", "e"), "mechanism": 3},
            upsertion("", "SCRAM-SHA-256", "x"),
            upsertion("frank", "SCRAM-SHA-256", "f"),
            upsertion("frank", "SCRAM-SHA-512", "f"),
            upsertion("ghost", "SCRAM-SHA-256", "g"),
            upsertion("alice", "SCRAM-SHA-512", "a2"),
            upsertion("grace", "SCRAM-SHA-512", "ok"),
        ],
    )
    missing = (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    twice = (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    assert results == {
        "alice": missing,  # its SCRAM-SHA-512 credential does not exist; its upsertion is not tried
        "ghost": missing,
        "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "bob": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": twice,
        "carol": (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "dave": (UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "erin": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "frank": twice,
        "grace": (NONE, None),
    }
    assert [r["user"] for r in describe(n)] == ["alice", "grace", "twice"]
    assert n.broker.credentials.has("alice", SCRAM_SHA_256)
    assert not n.broker.credentials.has("alice", SCRAM_SHA_512)


def test_credentials_survive_a_restart_and_hold_no_password(node, tmp_path):
    n = node()
    up = upsertion("alice", "SCRAM-SHA-512", "alice-secret", 4096)
    alter(n, upsertions=[up, upsertion("bob", "SCRAM-SHA-256", "b")])
    path = n.broker.data_dir / FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    assert "alice-secret" not in text and up["salted_password"].hex() not in text
    assert base64.b64encode(up["salted_password"]).decode() not in text
    reloaded = Credentials(n.broker.data_dir)
    assert reloaded.users == n.broker.credentials.users
    assert reloaded.password_matches("alice", "alice-secret")
    assert not reloaded.password_matches("alice", "alice-secre")
    assert set(json.loads(text)["users"]["alice"]["SCRAM-SHA-512"]) == {
        "salt",
        "stored_key",
        "server_key",
        "iterations",
    }


def test_an_unreadable_store_stops_the_broker_at_startup(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    (data / FILE).write_text('{"users": {"alice": {"SCRAM-SHA-256": {"salt": "AA=="}}}}')
    with pytest.raises(StartupError, match="unreadable SCRAM credentials: malformed entry"):
        Broker(Settings({"log.dirs": str(data)}))
