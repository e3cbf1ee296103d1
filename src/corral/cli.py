"""The `corral` command."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys

import trio

from corral import __version__
from corral.config.settings import ConfigError, Settings
from corral.observability.log_lines import formatter

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corral", description=__doc__)
    parser.add_argument("--version", action="version", version=f"corral {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="address to listen on (default 127.0.0.1:9092; port 0 picks one): "
        "short for --set listeners=PLAINTEXT://HOST:PORT, refused when "
        "listeners is also set (--set, CORRAL_LISTENERS or --config)",
    )
    serve.add_argument("--data-dir", metavar="DIR", help="data directory (default ./corral-data)")
    serve.add_argument("--config", metavar="FILE", help="TOML file of settings, by Kafka's names")
    serve.add_argument(
        "--set",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="set any setting, e.g. --set num.partitions=8 (repeatable)",
    )
    serve.add_argument(
        "--faults",
        metavar="FILE",
        help="a seeded scenario of injected faults (TOML, docs/faults.md), added at start",
    )
    serve.add_argument(
        "--cluster",
        metavar="URL",
        help="run as a node of a cluster on an engine: postgresql://... or etcd://HOST:PORT "
        "(docs/cluster.md); short for --set corral.cluster.url=URL. Give each node its own "
        "node.id and data dir",
    )
    serve.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO (default), WARNING, ERROR or CRITICAL"
    )
    serve.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text (default) or json: one object per line (docs/operations.md)",
    )

    from corral.load.cli import add_parser as add_load_parser

    add_load_parser(sub)
    from corral.ops.groups import add_parser as add_groups_parser

    add_groups_parser(sub)
    from corral.analyze.cli import add_parser as add_analyze_parser

    add_analyze_parser(sub)
    from corral.faults.cli import add_parser as add_faults_parser

    add_faults_parser(sub)

    args = parser.parse_args(argv)
    level = args.log_level.upper()
    if level not in LOG_LEVELS:
        print(
            f"corral: --log-level {args.log_level} is not one of {', '.join(LOG_LEVELS)}",
            file=sys.stderr,
        )
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(getattr(args, "log_format", "text")))
    logging.basicConfig(level=level, handlers=[handler])
    logging.captureWarnings(True)  # through the handler: json lines stay json
    if args.command == "serve":
        return _serve(args)
    if args.command == "load":
        from corral.load.cli import main as load_main

        return load_main(args)
    if args.command == "groups":
        from corral.ops.groups import main as groups_main

        return groups_main(args)
    if args.command == "analyze":
        from corral.analyze.cli import main as analyze_main

        return analyze_main(args)
    if args.command == "faults":
        from corral.faults.cli import main as faults_main

        return faults_main(args)
    return 2


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("corral")
    except PackageNotFoundError:
        return __version__


def _listeners_source(overrides: dict[str, str], config: str | None) -> str:
    """Where `listeners` came from, by Settings.load's precedence."""
    if "listeners" in overrides:
        return "--set"
    if "CORRAL_LISTENERS" in os.environ:
        return "CORRAL_LISTENERS"
    return str(config)


def _listen(settings: Settings, address: str, source: str) -> None:
    """`--listen HOST:PORT` is `listeners=PLAINTEXT://HOST:PORT`. When `listeners` is set as
    well, one of them would be dropped without a word: refused, naming the value that would
    keep both (unless they already say the same)."""
    from corral.network.listeners import parse_endpoints

    wanted = f"PLAINTEXT://{address}"
    if "listeners" not in settings.explicit:
        settings.set("listeners", wanted)
        return
    given = settings["listeners"]
    if parse_endpoints(given) == parse_endpoints(wanted):
        return
    items = [item.strip() for item in given.split(",") if item.strip()]
    plaintext = [i for i, item in enumerate(items) if parse_endpoints(item)[0][0] == "PLAINTEXT"]
    if plaintext:
        items[plaintext[0]] = wanted
    else:
        items.insert(0, wanted)
    raise ConfigError(
        f"--listen {address} would replace listeners={given} (from {source}); "
        f"name every listener in listeners instead, e.g. "
        f"--set listeners={','.join(items)}"
    )


def _serve(args: argparse.Namespace) -> int:
    from corral.broker import BrokerFailed, StartupError
    from corral.network import descriptors as descriptors
    from corral.server import Server

    overrides: dict[str, str] = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            print(f"corral: --set wants NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[name.strip()] = value.strip()
    if args.data_dir:
        overrides["log.dirs"] = args.data_dir
    if args.cluster:
        overrides["corral.cluster.url"] = args.cluster
    try:
        settings = Settings.load(args.config, overrides)
        if args.listen:
            _listen(settings, args.listen, _listeners_source(overrides, args.config))
    except (ConfigError, OSError) as e:
        print(f"corral: {e}", file=sys.stderr)
        return 2
    descriptors.raise_limit()
    try:
        server = Server(settings, faults_file=args.faults)
    except StartupError as e:
        print(f"corral: {e}", file=sys.stderr)
        return 1
    # What was loaded (topics, groups, offsets) lives as long as the broker: keep the cyclic
    # collector off it, and run young collections less often: every request allocates a few
    # dozen short-lived containers, and with 10,000s of members each full pass is long.
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    try:
        trio.run(server.serve)
    except (StartupError, BrokerFailed) as e:
        print(f"corral: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
