"""`corral groups`: list consumer groups, or describe them with their lag (as `rpk group describe`
and `kafka-consumer-groups --describe` do), against any Kafka-compatible broker.

A KIP-848 group is described by ConsumerGroupDescribe; a classic group (or any group when the
broker has no ConsumerGroupDescribe) by DescribeGroups, its members' assignments decoded from the
consumer protocol bytes. Offsets come from OffsetFetch, log end offsets from ListOffsets (latest);
the partitions shown are those committed plus those assigned.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import trio

from corral.load import consumer_protocol as cp
from corral.ops.admin import TP, Admin, AdminError

EXIT_ERROR = 1


def add_parser(sub) -> None:
    groups = sub.add_parser(
        "groups",
        help="list consumer groups, or describe them with their lag",
        description="List the groups of a Kafka-compatible cluster, or describe groups: state, "
        "members and, per partition, committed offset, log end offset, lag and owner. "
        "Exits 1 when the broker cannot be reached or a group does not exist.",
    )
    groups.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    groups.add_argument("--json", action="store_true", help="print JSON rather than tables")
    groups.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds per request, and for a coordinator that is loading or moving (default 30)",
    )
    groups.add_argument("--log-level", default="WARNING")
    verbs = groups.add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser(
        "list", help="every group: id, type (classic/consumer), state, protocol type"
    )
    describe = verbs.add_parser("describe", help="state, members, offsets and lag of groups")
    describe.add_argument("group_ids", nargs="+", metavar="GROUP")
    for verb in (listing, describe):  # --json after the verb too (it keeps the one before)
        verb.add_argument(
            "--json",
            action="store_true",
            default=argparse.SUPPRESS,
            help="print JSON rather than tables",
        )


# ------------------------------------------------------------------ what the broker says


async def list_groups(bootstrap: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    async with Admin(bootstrap, timeout_s) as admin:
        return [
            {
                "group": g["group_id"],
                "type": g["group_type"],
                "state": g["group_state"],
                "protocol_type": g["protocol_type"],
            }
            for g in await admin.list_groups()
        ]


async def describe_groups(
    bootstrap: str, groups: list[str], timeout_s: float = 30.0
) -> list[dict[str, Any] | None]:
    """Per group, its description (see `_describe`), or None if it does not exist."""
    async with Admin(bootstrap, timeout_s) as admin:
        return [await _describe(admin, g) for g in groups]


async def _describe(admin: Admin, group: str) -> dict[str, Any] | None:
    coordinator = await admin.coordinator(group)
    described = await admin.consumer_group_describe(group)
    if described is not None:
        out = _consumer_group(described)
    else:
        described = await admin.describe_groups(group)
        if described is None:
            return None
        out = _classic_group(described)
    out["coordinator"] = {"node_id": coordinator[0], "host": coordinator[1], "port": coordinator[2]}
    committed = await admin.committed_offsets(group)
    owners = {tp: m for m in out["members"] for tp in _tps(m["partitions"])}
    partitions = sorted(set(committed) | set(owners))
    ends = await admin.log_end_offsets(partitions)
    rows = []
    for tp in partitions:
        offset, end, owner = committed.get(tp), ends.get(tp), owners.get(tp)
        rows.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "committed_offset": offset,
                "log_end_offset": end,
                "lag": None if offset is None or end is None else max(0, end - offset),
                "owner": owner and owner["member_id"],
                "client_id": owner and owner["client_id"],
                "host": owner and owner["host"],
            }
        )
    out["partitions"] = rows
    out["total_lag"] = sum(r["lag"] for r in rows if r["lag"] is not None)
    return out


def _tps(partitions: dict[str, list[int]]) -> list[TP]:
    return [(t, p) for t, ps in partitions.items() for p in ps]


def _consumer_group(g: dict) -> dict[str, Any]:
    return {
        "group": g["group_id"],
        "type": "consumer",
        "state": g["group_state"],
        "protocol_type": "consumer",
        "assignor": g["assignor_name"] or None,
        "epoch": g["group_epoch"],
        "assignment_epoch": g["assignment_epoch"],
        "members": [
            {
                "member_id": m["member_id"],
                "instance_id": m["instance_id"],
                "client_id": m["client_id"],
                "host": m["client_host"],
                "epoch": m["member_epoch"],
                # KIP-1099 (v1): 0 a classic member of a consumer group, 1 a consumer member.
                "member_type": {0: "classic", 1: "consumer"}.get(m.get("member_type", -1)),
                "subscribed_topics": sorted(m["subscribed_topic_names"] or []),
                "subscribed_topic_regex": m["subscribed_topic_regex"],
                "partitions": _sorted(
                    {
                        t["topic_name"]: t["partitions"]
                        for t in m["assignment"]["topic_partitions"]
                        if t["partitions"]
                    }
                ),
            }
            for m in sorted(g["members"], key=lambda m: m["member_id"])
        ],
    }


def _classic_group(g: dict) -> dict[str, Any]:
    consumer = g["protocol_type"] == cp.PROTOCOL_TYPE
    members = []
    for m in sorted(g["members"], key=lambda m: m["member_id"]):
        assigned: dict[str, list[int]] = {}
        if consumer:
            try:
                assigned = cp.decode_assignment(m["member_assignment"])
            except ValueError:
                pass  # not the consumer protocol's bytes: shown without partitions
        members.append(
            {
                "member_id": m["member_id"],
                "instance_id": m.get("group_instance_id"),
                "client_id": m["client_id"],
                "host": m["client_host"],
                "epoch": None,
                "member_type": "classic",
                "partitions": _sorted(assigned),
            }
        )
    return {
        "group": g["group_id"],
        "type": "classic",
        "state": g["group_state"],
        "protocol_type": g["protocol_type"] or None,
        "assignor": g["protocol_data"] or None,
        # DescribeGroups does not carry the generation.
        "epoch": None,
        "assignment_epoch": None,
        "members": members,
    }


def _sorted(partitions: dict[str, list[int]]) -> dict[str, list[int]]:
    return {t: sorted(ps) for t, ps in sorted(partitions.items()) if ps}


# ------------------------------------------------------------------ the command


def main(args: argparse.Namespace) -> int:
    try:
        if args.verb == "list":
            listed = trio.run(list_groups, args.bootstrap, args.timeout)
            if args.json:
                print(json.dumps({"groups": listed}, indent=2))
            else:
                _print_list(listed)
            return 0
        described = trio.run(describe_groups, args.bootstrap, args.group_ids, args.timeout)
    except AdminError as e:
        print(f"corral groups: {e}", file=sys.stderr)
        return EXIT_ERROR
    missing = [g for g, d in zip(args.group_ids, described) if d is None]
    found = [d for d in described if d is not None]
    if args.json:
        print(json.dumps({"groups": found, "missing": missing}, indent=2))
    else:
        for d in found:
            _print_group(d)
    for g in missing:
        print(f"Consumer group '{g}' does not exist.", file=sys.stderr)
    return EXIT_ERROR if missing else 0


def _console():
    from rich.console import Console

    console = Console()
    # Piped or redirected: whole ids and columns rather than the 80 columns rich assumes.
    return console if console.is_terminal else Console(width=1000)


def _dash(value) -> str:
    return "-" if value is None or value == "" else str(value)


def _print_list(groups: list[dict]) -> None:
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in ("GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"):
        table.add_column(column)
    for g in groups:
        table.add_row(g["group"], _dash(g["type"]), _dash(g["state"]), _dash(g["protocol_type"]))
    _console().print(table)


def _print_group(g: dict) -> None:
    from rich.table import Table

    console = _console()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    c = g["coordinator"]
    epoch = "-" if g["epoch"] is None else f"{g['epoch']} (assignment {g['assignment_epoch']})"
    for name, value in (
        ("GROUP", g["group"]),
        ("TYPE", g["type"]),
        ("STATE", g["state"]),
        ("COORDINATOR", f"{c['node_id']} ({c['host']}:{c['port']})"),
        ("ASSIGNOR", _dash(g["assignor"])),
        ("EPOCH", epoch),
        ("MEMBERS", str(len(g["members"]))),
        ("TOTAL-LAG", str(g["total_lag"])),
    ):
        head.add_row(name, value)
    console.print(head)
    if g["members"]:
        members = Table(box=None, header_style="bold", title_justify="left")
        for column in ("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "EPOCH", "PARTITIONS"):
            members.add_column(column)
        for m in g["members"]:
            members.add_row(
                m["member_id"],
                _dash(m["instance_id"]),
                m["client_id"],
                m["host"],
                _dash(m["epoch"]),
                ", ".join(f"{t}: {','.join(map(str, ps))}" for t, ps in m["partitions"].items())
                or "-",
            )
        console.print(members)
    if g["partitions"]:
        parts = Table(box=None, header_style="bold")
        for column in (
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "MEMBER-ID",
            "CLIENT-ID",
            "HOST",
        ):
            parts.add_column(
                column,
                justify="right"
                if column in ("PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
                else "left",
            )
        for r in g["partitions"]:
            parts.add_row(
                r["topic"],
                str(r["partition"]),
                _dash(r["committed_offset"]),
                _dash(r["log_end_offset"]),
                _dash(r["lag"]),
                _dash(r["owner"]),
                _dash(r["client_id"]),
                _dash(r["host"]),
            )
        console.print(parts)
    console.print()
