"""`--cleanup`: after a run, delete the topics and groups the run created (never ones that existed
before it), through corral's admin client (DeleteGroups once the members left, then
DeleteTopics)."""

from __future__ import annotations

import trio

from corral.errors import ErrorCode
from corral.network.apis import ApiKey
from corral.ops.admin import Admin, AdminError, error_name

# Members leave at the end of a run; a member whose LeaveGroup was lost stays until its session
# times out, and DeleteGroups answers NON_EMPTY_GROUP until then.
NON_EMPTY_RETRY_S = 10.0


async def existing_groups(bootstrap: str, groups: list[str]) -> set[str] | None:
    """Which of `groups` exist now; None when the broker offers no DeleteGroups (nothing to
    clean up with)."""
    async with Admin(bootstrap) as admin:
        if ApiKey.DELETE_GROUPS not in (await admin.bootstrap_connection()).versions:
            return None
        found = set()
        for group in groups:
            if (
                await admin.consumer_group_describe(group) is not None
                or await admin.share_group_describe(group) is not None
                or await admin.describe_groups(group) is not None
            ):
                found.add(group)
        return found


async def clean_up(bootstrap: str, groups: list[str], topics: list[str]) -> dict:
    """Deletes `groups` then `topics`: {"deleted_groups", "deleted_topics", "not_deleted":
    {name: why}}."""
    out: dict = {"deleted_groups": [], "deleted_topics": [], "not_deleted": {}}
    async with Admin(bootstrap) as admin:
        versions = (await admin.bootstrap_connection()).versions
        for group in groups:
            if ApiKey.DELETE_GROUPS not in versions:
                out["not_deleted"][group] = "the broker offers no DeleteGroups"
                continue
            deadline = trio.current_time() + NON_EMPTY_RETRY_S
            while True:
                code = (await admin.delete_groups([group]))[group]
                if code != ErrorCode.NON_EMPTY_GROUP or trio.current_time() > deadline:
                    break
                await trio.sleep(0.2)
            if code in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
                out["deleted_groups"].append(group)
            else:
                out["not_deleted"][group] = error_name(code)
        if topics and ApiKey.DELETE_TOPICS not in versions:
            out["not_deleted"].update({t: "the broker offers no DeleteTopics" for t in topics})
        elif topics:
            for topic, code in sorted((await admin.delete_topics(topics)).items()):
                if code == ErrorCode.NONE:
                    out["deleted_topics"].append(topic)
                else:
                    out["not_deleted"][topic] = error_name(code)
    return out


def run_cleanup(bootstrap: str, groups: list[str], topics: list[str]) -> dict:
    try:
        return trio.run(clean_up, bootstrap, groups, topics)
    except AdminError as e:
        return {
            "deleted_groups": [],
            "deleted_topics": [],
            "not_deleted": {name: str(e) for name in [*groups, *topics]},
        }
