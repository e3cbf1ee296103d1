"""The fault injection settings (corral only; off by default). config/broker.py lists them with
the broker's others."""

from __future__ import annotations

from corral.config.types import ConfigType, Setting, optional_listener, parse_bool

FAULT_SETTINGS: list[Setting] = [
    Setting(
        "corral.faults.enable",
        ConfigType.BOOLEAN,
        False,
        parse_bool,
        "corral only, for resilience tests: whether the faults API on corral.faults.listen "
        "may inject faults (answer requests with errors, delay or hold them, close "
        "connections; docs/faults.md); false (the default): it answers 403 to everything.",
    ),
    Setting(
        "corral.faults.listen",
        ConfigType.STRING,
        "",
        optional_listener,
        "corral only: HOST:PORT of the faults API (JSON over plain HTTP, docs/faults.md; "
        "port 0 picks one, logged at startup); empty (the default): no faults port.",
    ),
]
