"""`corral faults list|add|remove|clear|release --url URL`: the faults API from a shell.

    corral faults add --url 127.0.0.1:9405 --api OffsetCommit --group g \
        --error COORDINATOR_LOAD_IN_PROGRESS --count 2
    corral faults list --url 127.0.0.1:9405

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
    for verb in parsers.values():
        verb.add_argument("--url", required=True, help="the faults API: [http://]HOST:PORT")
        verb.add_argument("--user", help="HTTP Basic user (a SASL user; with an authorizer)")
        verb.add_argument("--password", help="HTTP Basic password")
    for name in ("remove", "release"):
        parsers[name].add_argument("id", type=int, help="the fault's id")
    add = parsers["add"]
    add.add_argument("--json", metavar="OBJECT", help="the whole fault as JSON (flags add to it)")
    for name in _MATCH + _ACTION_AND_LIMITS + ("seed",):
        add.add_argument("--" + name.replace("_", "-"), dest=name, metavar="VALUE")
    add.add_argument("--hold", action="store_true", help="hold matching requests until released")


def main(args: argparse.Namespace) -> int:
    client = FaultsClient(args.url, user=args.user, password=args.password)
    try:
        if args.verb == "list":
            out: Any = client.list()
        elif args.verb == "add":
            spec = _spec(args)
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
        print(f"corral faults: {e}", file=sys.stderr)
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
    for name in _MATCH + _ACTION_AND_LIMITS + ("seed",):
        value = getattr(args, name)
        if value is not None:
            spec[name] = value
    if args.hold:
        spec["hold"] = True
    return spec
