"""The group coordinator in process, without sockets: the kit of the classic and KIP-848 group
tests (tests/unit/groups/...) and of benches/groups_inprocess.py, consumer_target.py and
consumer_offload_latency.py. Every coordinator method is synchronous: a parked request's `Later`
has its `value` as soon as the coordinator answers, so drivers read answers without awaiting
anything; the fake log replays each write at once (unless held), through the coordinator's
`replay`, as the durable log does after its fsync.

- common.py: FakeLog (keep, fail_next, hold/release), FakeClock, JoinGroup requests;
- classic.py: the classic driver and the steps of scripted cases; classic_cases.py: the cases;
- consumer.py: the KIP-848 driver, its invariant and view checks, random changes;
- classic_members.py: classic members inside KIP-848 consumer groups.
"""

from harness.classic import ClassicDriver, S, run_case, stable
from harness.classic_cases import TABLES
from harness.classic_members import (
    CLASSIC_FAST,
    ClassicClient,
    classic_group,
    classic_round,
    converge,
    restart_under_other_protocol,
    setup,
    stable_group,
)
from harness.common import (
    FakeClock,
    FakeLog,
    InvariantError,
    join_request,
    patched_clock,
    subscription,
)
from harness.consumer import (
    ConsumerDriver,
    Group,
    Topics,
    answer,
    check_counts,
    check_view,
    coordinator,
    make_coordinator,
    opcodes,
    random_change,
    request,
)

__all__ = [
    "FakeClock",
    "FakeLog",
    "InvariantError",
    "join_request",
    "patched_clock",
    "subscription",
    "ClassicDriver",
    "S",
    "run_case",
    "stable",
    "TABLES",
    "ConsumerDriver",
    "Group",
    "Topics",
    "answer",
    "check_counts",
    "check_view",
    "coordinator",
    "make_coordinator",
    "opcodes",
    "random_change",
    "request",
    "CLASSIC_FAST",
    "ClassicClient",
    "classic_group",
    "classic_round",
    "converge",
    "restart_under_other_protocol",
    "setup",
    "stable_group",
]
