"""The `corral` command."""

from __future__ import annotations

import argparse
import gc
import logging
import sys

import trio

from .config import ConfigError, Settings

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Control characters (and Unicode line breaks) a client could put in a group, member or client id.
_UNPRINTABLE = {c: f"\\x{c:02x}" for c in range(32)} | {0x7F: "\\x7f", 0x85: "\\x85",
                                                          0x2028: "\\u2028", 0x2029: "\\u2029"}


class OneLineFormatter(logging.Formatter):
    """Escapes control characters in messages, so that an id sent by a client cannot forge log
    lines (tracebacks, which are corral's own, stay multi-line)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        if not record.message.isprintable():
            record.message = record.message.translate(_UNPRINTABLE)
        return super().formatMessage(record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corral", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--listen", metavar="HOST:PORT",
                       help="address to listen on (default 127.0.0.1:9092; port 0 picks one)")
    serve.add_argument("--data-dir", metavar="DIR", help="data directory (default ./corral-data)")
    serve.add_argument("--config", metavar="FILE", help="TOML file of settings, by Kafka's names")
    serve.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                       help="set any setting, e.g. --set num.partitions=8 (repeatable)")
    serve.add_argument("--log-level", default="INFO",
                       help="DEBUG, INFO (default), WARNING, ERROR or CRITICAL")

    from .load.cli import add_parser as add_load_parser
    add_load_parser(sub)
    from .ops.groups import add_parser as add_groups_parser
    add_groups_parser(sub)

    args = parser.parse_args(argv)
    level = args.log_level.upper()
    if level not in LOG_LEVELS:
        print(f"corral: --log-level {args.log_level} is not one of {', '.join(LOG_LEVELS)}",
              file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    if args.command == "serve":
        return _serve(args)
    if args.command == "load":
        from .load.cli import main as load_main
        return load_main(args)
    if args.command == "groups":
        from .ops.groups import main as groups_main
        return groups_main(args)
    return 2


def _serve(args: argparse.Namespace) -> int:
    from . import descriptors
    from .broker import BrokerFailed, StartupError
    from .server import Server

    overrides: dict[str, str] = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            print(f"corral: --set wants NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[name.strip()] = value.strip()
    if args.listen:
        overrides["listeners"] = f"PLAINTEXT://{args.listen}"
    if args.data_dir:
        overrides["log.dirs"] = args.data_dir
    try:
        settings = Settings.load(args.config, overrides)
    except (ConfigError, OSError) as e:
        print(f"corral: {e}", file=sys.stderr)
        return 2
    descriptors.raise_limit()
    try:
        server = Server(settings)
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
