"""`kafka-share-groups` (ShareGroupCommand, from kafka-tools) against a real corral: a share group
with a member that acquired and acknowledged records is listed, described (offsets with lag,
members with their assignments, state); once empty its offsets are reset and deleted and the
group is deleted, as Kafka's tool prints it."""

from __future__ import annotations

from kafka_java import run_tool
from rawwire import RawClient
from sharekit import (
    ACCEPT,
    acquired,
    heartbeat,
    join,
    new_member_id,
    set_group_configs,
    share_fetch,
    topic_id,
)
from wire_data import batch, create, produce

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def _lines(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


def test_kafka_share_groups_lists_describes_resets_and_deletes(corral):
    boot = f"--bootstrap-server {corral.bootstrap}"
    with RawClient(corral.port) as c:
        create(c, "tool-share", partitions=2)
        set_group_configs(c, "sg", **{"share.auto.offset.reset": "earliest"})
        assert produce(c, "tool-share", 0, batch(10))["error_code"] == 0
        tid = topic_id(c, "tool-share")
        member = new_member_id()
        join(c, "sg", member, ["tool-share"])
        got = acquired(share_fetch(c, "sg", member, 0, {tid: [0, 1]}))
        assert got == {(tid, 0): [(0, 9, 1)]}
        done = share_fetch(c, "sg", member, 1, {}, {(tid, 0): [(0, 3, [ACCEPT])]}, max_wait_ms=0)
        assert done["responses"][0]["partitions"][0]["acknowledge_error_code"] == 0

        out = run_tool(
            SHARE_GROUP_COMMAND,
            [
                f"{boot} --list",
                f"{boot} --describe --group sg",
                f"{boot} --describe --group sg --members",
                f"{boot} --describe --group sg --state",
                f"{boot} --reset-offsets --to-earliest --group sg --topic tool-share --execute",
            ],
        )
        code, listed = out[f"{boot} --list"]
        assert code == 0 and "sg" in listed.split(), listed
        code, offsets = out[f"{boot} --describe --group sg"]
        assert code == 0, offsets
        rows = {(r[1], r[2]): r for r in _lines(offsets) if r[0] == "sg"}
        # GROUP TOPIC PARTITION START-OFFSET LAG
        # Kafka reports the start written before the acknowledgement moved it, and the lag after.
        assert rows[("tool-share", "0")][3:5] == ["0", "6"], offsets
        code, members = out[f"{boot} --describe --group sg --members"]
        assert code == 0 and member in members and "tool-share:0,1" in members, members
        code, state = out[f"{boot} --describe --group sg --state"]
        assert code == 0 and "Stable" in state.split(), state
        code, refused = out[
            f"{boot} --reset-offsets --to-earliest --group sg --topic tool-share --execute"
        ]
        assert code != 0 or "not empty" in refused.lower() or "inactive" in refused.lower(), refused

        assert heartbeat(c, "sg", member, -1)["error_code"] == 0
        reset = f"{boot} --reset-offsets --to-latest --group sg --topic tool-share:0 --execute"
        out = run_tool(
            SHARE_GROUP_COMMAND,
            [
                reset,
                f"{boot} --describe --group sg",
                f"{boot} --delete-offsets --group sg --topic tool-share",
                f"{boot} --delete --group sg",
                f"{boot} --list",
            ],
        )
        code, text = out[reset]
        assert code == 0, text
        code, offsets = out[f"{boot} --describe --group sg"]
        rows = {(r[1], r[2]): r for r in _lines(offsets) if r[0] == "sg"}
        assert rows[("tool-share", "0")][3:5] == ["10", "0"], offsets
        code, text = out[f"{boot} --delete-offsets --group sg --topic tool-share"]
        assert code == 0, text
        code, text = out[f"{boot} --delete --group sg"]
        assert code == 0 and "was successful" in text, text
        code, listed = out[f"{boot} --list"]
        assert "sg" not in listed.split(), listed
