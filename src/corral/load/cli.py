"""Arguments and entry point of `corral load`."""

from __future__ import annotations

import argparse
import json
import sys
import uuid

from corral.load.plot import plot, png_path
from corral.load.probe import LoadError
from corral.load.runner import run
from corral.load.scenarios import SCENARIOS

SHARE = "share"  # the scenario of share groups

# Exit codes of `corral load`.
EXIT_OK, EXIT_VIOLATIONS, EXIT_CANNOT_RUN, EXIT_UNFINISHED = 0, 1, 2, 3
EXIT_CODES = (
    f"exit codes: {EXIT_OK} done; {EXIT_VIOLATIONS} violations or a worker failed; "
    f"{EXIT_CANNOT_RUN} the run could not start (broker unreachable, APIs missing, bad "
    f"parameters); {EXIT_UNFINISHED} a ramp (heartbeat, commit) ran out of --duration "
    "before the broker reached saturation: its figure is only a lower bound"
)


def add_parser(sub) -> None:
    load = sub.add_parser(
        "load",
        help="generate consumer-group load against any Kafka-compatible broker",
        description="Simulates group members speaking raw Kafka frames; checks every answer. "
        "Scenarios: " + "; ".join(f"{n}: {m.HELP}" for n, m in SCENARIOS.items()),
        epilog=EXIT_CODES,
    )
    load.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    load.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default=None,
        help="required for consumer groups; share groups run `share`",
    )
    load.add_argument(
        "--group-type",
        choices=["consumer", "share"],
        default=None,
        help="consumer: consumer groups, with the protocol of --group-protocol (the default); "
        "share: a share group (KIP-932) consuming a topic (the `share` scenario)",
    )
    load.add_argument("--members", type=int, default=100)
    load.add_argument(
        "--duration",
        type=float,
        default=60.0,
        help="upper bound of the run in seconds (a ramp may stop earlier)",
    )
    load.add_argument("--workers", type=int, default=1, help="generator processes")
    load.add_argument(
        "--connects-in-flight",
        type=int,
        default=500,
        help="connections a worker opens at once (more overflow the broker's listen "
        "backlog: the dropped SYNs are retried only after 1-3 s)",
    )
    load.add_argument("--group", default=None, help="group id (default: a fresh one)")
    load.add_argument(
        "--topic",
        default=None,
        help="topic (default: the group's name if it starts with corral-load-, "
        "else corral-load-<group>)",
    )
    load.add_argument(
        "--cleanup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="at the end, delete the topic and groups the run created (DeleteGroups "
        "once members left, DeleteTopics); never ones that existed before "
        "(default: on; --no-cleanup keeps them)",
    )
    load.add_argument(
        "--group-protocol",
        default="classic",
        choices=["classic", "consumer"],
        help="as Kafka's group.protocol: classic (JoinGroup/SyncGroup, the leader "
        "assigns) or consumer (KIP-848 ConsumerGroupHeartbeat, the broker "
        "assigns); every scenario runs with either, with the same checks "
        "(heartbeat --skip-join: classic only)",
    )
    load.add_argument(
        "--assignor",
        default="range",
        choices=["range", "roundrobin"],
        help="classic: the leader's assignor",
    )
    load.add_argument(
        "--server-assignor",
        default=None,
        help="consumer: the ServerAssignor members ask for (uniform, range; "
        "default: none, the broker's first group.consumer.assignors)",
    )
    load.add_argument(
        "--session-timeout-ms",
        type=int,
        default=45000,
        help="classic members' (consumer members: the broker's group.consumer.session.timeout.ms)",
    )
    load.add_argument("--rebalance-timeout-ms", type=int, default=300000)
    load.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        default=3000,
        help="classic members' interval (consumer members use the broker's)",
    )
    load.add_argument("--json", metavar="PATH", help="write the result as JSON")
    load.add_argument(
        "--plot",
        metavar="PNG",
        type=png_path,
        help="plot latency and stable members over time (needs corral[load])",
    )
    load.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (the live display on a terminal, else the "
        "ramp's plan and steps as lines)",
    )
    load.add_argument("--log-level", default="WARNING")
    seen: set[str] = set()
    for scenario in SCENARIOS.values():
        group = load.add_argument_group(scenario.NAME)
        _add_once(scenario.add_arguments, group, seen)


def _add_once(add_arguments, group, seen: set[str]) -> None:
    """Scenarios may share an option (the ramp's): each is declared once."""

    class OnceGroup:
        def add_argument(self, *names, **kwargs):
            if names[0] in seen:
                return
            seen.add(names[0])
            group.add_argument(*names, **kwargs)

    add_arguments(OnceGroup())


class UsageError(ValueError):
    """Arguments that do not make a run."""


def parameters(args: argparse.Namespace) -> dict:
    params = {k: v for k, v in vars(args).items() if k not in ("command", "log_level")}
    params["group"] = params["group"] or f"corral-load-{uuid.uuid4().hex[:8]}"
    # A share group runs the share scenario, and the share scenario is a share group's.
    scenario, group_type = params.get("scenario"), params.get("group_type")
    if group_type == "share" or scenario == SHARE:
        if scenario not in (None, SHARE):
            raise UsageError(f"--group-type share runs the {SHARE} scenario, not {scenario}")
        params["scenario"], params["group_type"] = SHARE, "share"
    elif scenario is None:
        raise UsageError("--scenario is required (or --group-type share)")
    else:
        params["group_type"] = "consumer"
    return params


def parse(argv: list[str]) -> dict:
    """The parameters of a run from `corral load` arguments (for scripts and tests)."""
    parser = argparse.ArgumentParser(prog="corral")
    add_parser(parser.add_subparsers(dest="command", required=True))
    try:
        return parameters(parser.parse_args(["load", *argv]))
    except UsageError as e:
        parser.error(str(e))


def main(args: argparse.Namespace) -> int:
    try:
        params = parameters(args)
    except UsageError as e:
        print(f"corral load: {e}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    scenario = SCENARIOS[params["scenario"]]
    try:
        if args.quiet:
            result = run(scenario, params)
        else:
            from corral.load.display import LineDisplay, LiveDisplay

            with LiveDisplay() if sys.stderr.isatty() else LineDisplay() as display:
                result = run(scenario, params, display)
    except LoadError as e:
        print(f"corral load: {e}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.plot:
        plot(result, args.plot)
    public = {k: v for k, v in result.items() if not k.startswith("_")}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(public, f, indent=2)
    brief = {
        "scenario": public["scenario"],
        "metrics": _brief(public["metrics"]),
        "generator": public["generator"],
        "errors": public["errors"],
        "violations": public["violations"],
    }
    for key in ("unfinished", "cleanup"):
        if key in public:
            brief[key] = public[key]
    print(json.dumps(brief, indent=2))
    for warning in public.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    if public["violations"] or public["failures"]:
        return EXIT_VIOLATIONS
    if public.get("unfinished"):
        print(f"corral load: {public['unfinished']}", file=sys.stderr)
        return EXIT_UNFINISHED
    return EXIT_OK


def _brief(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k not in ("steps", "plan")}
