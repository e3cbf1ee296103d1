"""The `corral` command."""

from __future__ import annotations

import argparse
import gc
import logging
import sys

import trio

from .config import ConfigError, Settings


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
    serve.add_argument("--log-level", default="INFO")

    from .load.cli import add_parser as add_load_parser
    add_load_parser(sub)

    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.command == "serve":
        return _serve(args)
    if args.command == "load":
        from .load.cli import main as load_main
        return load_main(args)
    return 2


def _serve(args: argparse.Namespace) -> int:
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
    raise_open_files_limit()
    server = Server(settings)
    # What was loaded (topics, groups, offsets) lives as long as the broker: keep the cyclic
    # collector off it, and run young collections less often: every request allocates a few
    # dozen short-lived containers, and with 10,000s of members each full pass is long.
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    trio.run(server.serve)
    return 0


def raise_open_files_limit() -> None:
    """Raises the soft RLIMIT_NOFILE to the hard limit (every client socket and cached segment
    file is a descriptor) and logs both."""
    import resource

    log = logging.getLogger("corral.cli")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY:
        # Linux refuses an infinite RLIMIT_NOFILE; fs.nr_open is the most it allows.
        try:
            target = int(open("/proc/sys/fs/nr_open").read())
        except (OSError, ValueError):
            target = soft
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as e:
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, e)
    new_soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    log.info("open-files limit (RLIMIT_NOFILE): soft %s (was %s), hard %s",
             _limit(new_soft), _limit(soft), _limit(hard))


def _limit(value: int) -> str:
    import resource

    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


if __name__ == "__main__":
    sys.exit(main())
