"""The API table: which Kafka APIs corral implements, in which versions, and who answers them.

Handlers register with `@handles(ApiKey.X, min, max)` in the module of their concern; the table
advertised in ApiVersions is built from these registrations plus the APIs the compiled core
answers by itself. Nothing is advertised that has no handler.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from corral import _core
from corral.later import Later

if TYPE_CHECKING:
    from corral.broker import Broker


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# A handler gets the broker and the decoded request; it returns the response body as a dict, or
# None when no response is sent (Produce with acks=0), or a whole response frame the compiled core
# encoded itself (Fetch: record bytes never become Python objects), or a `Later` for one of those.
# Plain functions run inline as their request is read (no task); a handler that must wait (a
# parked JoinGroup, a long-polling Fetch) is `async` and gets a task of its own.
Response = Mapping[str, Any] | bytes | None
Handler = Callable[["Broker", "_core.Request[Any]"], Response | Later | Awaitable[Response]]

# APIs answered inside the compiled core (rust/codec/requests.rs).
RUST_OWNED: dict[ApiKey, tuple[int, int]] = {ApiKey.API_VERSIONS: (0, 4)}

# Modules whose import registers handlers: each concern adds its module here.
HANDLER_MODULES = [
    "corral.topics.metadata",
    "corral.topics.create_topics",
    "corral.topics.create_partitions",
    "corral.topics.delete_topics",
    "corral.config.describe_configs",
    "corral.config.alter_configs",
    "corral.config.client_quotas",
    "corral.groups.handlers.find_coordinator",
    "corral.groups.handlers.join_group",
    "corral.groups.handlers.sync_group",
    "corral.groups.handlers.heartbeat",
    "corral.groups.handlers.leave_group",
    "corral.groups.handlers.offset_commit",
    "corral.groups.handlers.offset_fetch",
    "corral.groups.handlers.offset_delete",
    "corral.groups.handlers.list_groups",
    "corral.groups.handlers.describe_groups",
    "corral.groups.handlers.delete_groups",
    "corral.groups.handlers.consumer_group_heartbeat",
    "corral.groups.handlers.consumer_group_describe",
    "corral.groups.handlers.txn_offset_commit",
    "corral.groups.handlers.write_txn_markers",
    "corral.groups.share.handlers.heartbeat",
    "corral.groups.share.handlers.describe",
    "corral.groups.share.handlers.offsets",
    "corral.partitions.produce",
    "corral.partitions.fetch",
    "corral.partitions.list_offsets",
    "corral.partitions.describe_log_dirs",
    "corral.partitions.delete_records",
    "corral.partitions.producer_ids",
    "corral.partitions.describe_producers",
    "corral.shares.share_fetch",
    "corral.shares.share_acknowledge",
    "corral.transactions.handlers",
    "corral.security.sasl",
    "corral.security.scram_admin",
    "corral.security.acl_apis",
]

HANDLERS: dict[int, Handler] = {}
ASYNC_HANDLERS: set[int] = set()
VERSIONS: dict[int, tuple[int, int]] = dict(RUST_OWNED)


def handles(key: ApiKey, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        if key in VERSIONS:
            raise RuntimeError(f"{key.name} is registered twice")
        HANDLERS[key] = fn
        if inspect.iscoroutinefunction(fn):
            ASYNC_HANDLERS.add(key)
        VERSIONS[key] = (min_version, max_version)
        return fn

    return register


def api_table() -> _core.ApiTable:
    for name in HANDLER_MODULES:
        importlib.import_module(name)
    return _core.ApiTable(sorted((int(k), lo, hi) for k, (lo, hi) in VERSIONS.items()))
