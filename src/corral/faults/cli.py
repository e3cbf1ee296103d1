"""`corral faults list|add|remove|clear|release --url URL`: the faults API from a shell.

    corral faults add --url 127.0.0.1:9405 --api OffsetCommit --group g \
        --error COORDINATOR_LOAD_IN_PROGRESS --count 2
    corral faults list --url 127.0.0.1:9405

and one verb per broker fault (each adds it): `fence --group G --member M`, `rebalance --group
G`, `target --group G '{"m": {"t": [0]}}'`, `move --group G [--error E] [--duration-ms T]`,
`unload --group G [--duration-ms T]`, `storage [--disk-full] [--failing-fsyncs N]
[--fsync-delay-ms MS] [--duration-ms T]`, `refuse [--listener L] [--duration-ms T]`.

Prints the API's JSON answer; exits 1 when it refuses or cannot be reached (the reason on
stderr), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from corral.faults.client import FaultsApiError, FaultsClient

# `add` flags -> the fault's JSON field (docs/faults.md), as given (the broker checks them).
_MATCH = ("api", "versions", "group", "topic", "partition", "member", "client_id", "listener")
_ACTION_AND_LIMITS = ("error", "delay_ms", "close_after", "count", "duration_ms", "probability")
_BROKER_VALUES = ("coordinator", "failing_fsyncs", "fsync_delay_ms")
_BROKER_FLAGS = ("fence", "rebalance", "unload", "disk_full", "refuse_connections")
# The broker faults' verbs: (help, flags taken as given, flags that are switches).
_VERBS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "fence": (
        "fence a group member (or expire a classic member's session)",
        ("group", "member"),
        (),
    ),
    "rebalance": ("force a group to rebalance", ("group",), ()),
    "target": ("set a consumer group's target assignment", ("group",), ()),
    "move": (
        "answer NOT_COORDINATOR (or --error) to a group's requests for a while",
        ("group", "error", "duration_ms"),
        (),
    ),
    "unload": ("unload a group's coordinator shard for a while", ("group", "duration_ms"), ()),
    "storage": (
        "disk full, failing or slow fsyncs",
        ("failing_fsyncs", "fsync_delay_ms", "duration_ms"),
        ("disk_full",),
    ),
    "refuse": ("refuse new connections for a while", ("listener", "duration_ms"), ()),
}


def add_parser(sub: Any) -> None:
    faults = sub.add_parser(
        "faults",
        help="inject faults into a running corral (docs/faults.md)",
        description="List, add, remove and release the faults of a corral whose faults API "
        "is on (corral.faults.enable=true, corral.faults.listen=HOST:PORT).",
    )
    faults.add_argument("--log-level", default="WARNING")
    verbs = faults.add_subparsers(dest="verb", required=True)
    parsers = {
        "list": verbs.add_parser("list", help="the faults in force and the last ones done"),
        "add": verbs.add_parser("add", help="add a fault; prints its id"),
        "remove": verbs.add_parser("remove", help="remove a fault"),
        "clear": verbs.add_parser("clear", help="remove every fault"),
        "release": verbs.add_parser("release", help="let a hold fault's requests go on"),
    }
    for name, (what, values, switches) in _VERBS.items():
        verb = parsers[name] = verbs.add_parser(name, help=what)
        for value in values:
            verb.add_argument("--" + value.replace("_", "-"), dest=value, metavar="VALUE")
        for switch in switches:
            verb.add_argument("--" + switch.replace("_", "-"), dest=switch, action="store_true")
        if name == "target":
            verb.add_argument("target", help='JSON: {"member id": {"topic": [partitions]}}')
    for verb in parsers.values():
        verb.add_argument("--url", required=True, help="the faults API: [http://]HOST:PORT")
        verb.add_argument("--user", help="HTTP Basic user (a SASL user; with an authorizer)")
        verb.add_argument("--password", help="HTTP Basic password")
    for name in ("remove", "release"):
        parsers[name].add_argument("id", type=int, help="the fault's id")
    add = parsers["add"]
    add.add_argument("--json", metavar="OBJECT", help="the whole fault as JSON (flags add to it)")
    for name in _MATCH + _ACTION_AND_LIMITS + _BROKER_VALUES + ("seed",):
        add.add_argument("--" + name.replace("_", "-"), dest=name, metavar="VALUE")
    add.add_argument("--hold", action="store_true", help="hold matching requests until released")
    for name in _BROKER_FLAGS:
        add.add_argument("--" + name.replace("_", "-"), dest=name, action="store_true")
    add.add_argument("--target", metavar="JSON", help='{"member id": {"topic": [partitions]}}')


def main(args: argparse.Namespace) -> int:
    client = FaultsClient(args.url, user=args.user, password=args.password)
    try:
        if args.verb == "list":
            out: Any = client.list()
        elif args.verb == "add" or args.verb in _VERBS:
            spec = _spec(args) if args.verb == "add" else _verb_spec(args)
            if spec is None:
                return 2
            out = client.call("POST", "/faults", spec)
        elif args.verb == "remove":
            client.remove(args.id)
            out = {"removed": args.id}
        elif args.verb == "clear":
            out = {"removed": client.clear()}
        else:
            out = {"released": client.release(args.id)}
    except FaultsApiError as e:
        kafka = f" ({e.kafka_error})" if e.kafka_error and e.kafka_error not in str(e) else ""
        print(f"corral faults: {e}{kafka}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=1))
    return 0


def _spec(args: argparse.Namespace) -> dict[str, Any] | None:
    spec: dict[str, Any] = {}
    if args.json:
        try:
            spec = json.loads(args.json)
        except ValueError as e:
            print(f"corral faults: --json: {e}", file=sys.stderr)
            return None
    for name in _MATCH + _ACTION_AND_LIMITS + _BROKER_VALUES + ("seed",):
        value = getattr(args, name)
        if value is not None:
            spec[name] = value
    if args.hold:
        spec["hold"] = True
    for name in _BROKER_FLAGS:
        if getattr(args, name):
            spec[name] = True
    if args.target is not None:
        target = _json("--target", args.target)
        if target is None:
            return None
        spec["target"] = target
    return spec


def _verb_spec(args: argparse.Namespace) -> dict[str, Any] | None:
    """A broker fault's verb -> the fault."""
    _, values, switches = _VERBS[args.verb]
    spec: dict[str, Any] = {name: getattr(args, name) for name in values}
    spec.update({name: True for name in switches if getattr(args, name)})
    if args.verb in ("fence", "rebalance", "unload"):
        spec[args.verb] = True
    elif args.verb == "target":
        spec["target"] = _json("target", args.target)
        if spec["target"] is None:
            return None
    elif args.verb == "move":
        spec["coordinator"] = spec.pop("error") or "NOT_COORDINATOR"
    elif args.verb == "refuse":
        spec["refuse_connections"] = True
    return {name: value for name, value in spec.items() if value is not None}


def _json(what: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        print(f"corral faults: {what}: {e}", file=sys.stderr)
        return None
