"""The settings changed while corral runs: dynamic broker settings (the cluster-wide default and
this broker's own) and group settings (kafka-configs --entity-type brokers / groups).

Kept in `dynamic-configs.json` in the data dir, replaced atomically and fsynced before a change is
answered, and read at startup before anything uses the settings. Changes are rare: one whole-file
write each, serialized by a lock, in a worker thread.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from corral.config.groups import GROUP_SETTINGS, broker_default, check_group_configs
from corral.config.settings import ConfigError, Settings
from corral.partitions.files import replace_durably

log = logging.getLogger("corral.dynamic_configs")

FILE = "dynamic-configs.json"


class DynamicConfigs:
    def __init__(self, data_dir: Path, settings: Settings):
        self.path = data_dir / FILE
        self.settings = settings
        # The layers as clients sent them (text), which is what is stored and described.
        self.broker_default: dict[str, str] = {}
        self.broker: dict[str, str] = {}
        self.groups: dict[str, dict[str, str]] = {}
        # Parsed group settings, read by the coordinator at each use.
        self.group_values: dict[str, dict[str, Any]] = {}
        # Called with a group id whose settings changed (the heartbeat short path's timings).
        self.on_group_change: list[Callable[[str], None]] = []
        self._lock = trio.Lock()
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        stored = json.loads(self.path.read_text())
        for per_broker, key in ((False, "broker_default"), (True, "broker")):
            layer = stored.get(key, {})
            try:
                self.settings.apply_dynamic(
                    per_broker, self.settings.check_dynamic(per_broker, layer)
                )
                setattr(self, key, layer)
            except ConfigError as e:
                # The static settings changed since (a bound moved): the stored layer stays on
                # disk, unused, until an operator changes it.
                log.warning("dynamic broker settings (%s) in %s not applied: %s", key, self.path, e)
        for group_id, layer in stored.get("groups", {}).items():
            try:
                self.group_values[group_id] = self._parse_group(layer)
                self.groups[group_id] = layer
            except ConfigError as e:
                log.warning("settings of group %r in %s not applied: %s", group_id, self.path, e)

    def _parse_group(self, layer: dict[str, str]) -> dict[str, Any]:
        return check_group_configs(layer, self.settings)

    def group_value(self, group_id: str, name: str, broker_setting: str) -> Any:
        """A group's setting: its own value, else the broker's."""
        own = self.group_values.get(group_id)
        if own is not None and name in own:
            return own[name]
        return self.settings[broker_setting]

    def group_setting(self, group_id: str, name: str) -> Any:
        """A group's setting (config/groups.py) by its name alone: its own value, else its
        broker synonym's, else (share.auto.offset.reset, share.isolation.level,
        share.renew.acknowledge.enable) the setting's own default."""
        own = self.group_values.get(group_id)
        if own is not None and name in own:
            return own[name]
        return broker_default(GROUP_SETTINGS[name], self.settings)

    # Changes: `layer` is the whole new layer ({name: text}); validate_only checks and stops.

    async def alter_broker(
        self, per_broker: bool, layer: dict[str, str], validate_only: bool
    ) -> None:
        """Raises ConfigError (DynamicConfigRefused for a static setting) or OSError."""
        async with self._lock:
            parsed = self.settings.check_dynamic(per_broker, layer)
            if validate_only:
                return
            key = "broker" if per_broker else "broker_default"
            await self._write({**self._stored(), key: layer})
            setattr(self, key, layer)
            self.settings.apply_dynamic(per_broker, parsed)
        log.info(
            "dynamic broker settings (%s) now %s",
            "this broker" if per_broker else "cluster default",
            layer,
        )

    async def alter_group(self, group_id: str, layer: dict[str, str], validate_only: bool) -> None:
        async with self._lock:
            parsed = self._parse_group(layer)
            if validate_only:
                return
            groups = {**self.groups, group_id: layer}
            if not layer:
                del groups[group_id]
            await self._write({**self._stored(), "groups": groups})
            self.groups = groups
            if parsed:
                self.group_values[group_id] = parsed
            else:
                self.group_values.pop(group_id, None)
        log.info("settings of group %s now %s", group_id, layer, extra={"group_id": group_id})
        for listener in self.on_group_change:
            listener(group_id)

    def _stored(self) -> dict[str, Any]:
        return {"broker_default": self.broker_default, "broker": self.broker, "groups": self.groups}

    async def _write(self, stored: dict[str, Any]) -> None:
        text = json.dumps(stored, indent=1, sort_keys=True)
        await trio.to_thread.run_sync(replace_durably, self.path, text)
