"""`group.consumer.assignors`: which assignors a broker offers, by name.

Kafka's rules (GroupCoordinatorConfig.consumerGroupAssignors): a non-empty list without
duplicates; each entry is a built-in's name or a class to instantiate; the first entry is the
default, used when no member names one; names are unique and a custom assignor may not take a
built-in's name. corral's custom entries are `package.module:ClassName` (a Python class built
without arguments, see spec.Assignor); Kafka's own class names of the built-ins are accepted too,
so a setting copied from a Kafka broker works.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Sequence

from corral.assignors.builtin import RangeAssignor, UniformAssignor
from corral.assignors.spec import Assignor

DEFAULT_SETTING = "uniform,range"

BUILTIN_ASSIGNORS: dict[str, type] = {"uniform": UniformAssignor, "range": RangeAssignor}
KAFKA_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


class AssignorConfigError(ValueError):
    """A bad `group.consumer.assignors` entry; the message names it."""


def setting_entries(value: str | Iterable[str]) -> list[str]:
    """The setting's entries: comma-separated (or a TOML list), trimmed."""
    items = value.split(",") if isinstance(value, str) else list(value)
    entries = [str(item).strip() for item in items]
    if not entries or any(not entry for entry in entries):
        raise AssignorConfigError(f"expected a comma-separated list of assignors, got {value!r}")
    duplicates = sorted({entry for entry in entries if entries.count(entry) > 1})
    if duplicates:
        raise AssignorConfigError(f"{', '.join(duplicates)} listed twice")
    return entries


def load_assignor(entry: str) -> Assignor:
    """A built-in by name (or by Kafka's class name), or `module:Class` instantiated."""
    builtin = BUILTIN_ASSIGNORS.get(KAFKA_CLASS_NAMES.get(entry, entry))
    if builtin is not None:
        return builtin()
    module_name, sep, class_name = entry.partition(":")
    if not sep or not module_name or not class_name:
        raise AssignorConfigError(
            f"{entry!r} is neither a built-in assignor ({', '.join(BUILTIN_ASSIGNORS)}) "
            "nor a `module:Class` path"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any failure while importing user code is a configuration error
        raise AssignorConfigError(f"{entry}: cannot import {module_name}: {e!r}") from None
    cls = module
    for attribute in class_name.split("."):
        cls = getattr(cls, attribute, None)
        if cls is None:
            raise AssignorConfigError(f"{entry}: {module_name} has no {class_name}")
    try:
        assignor = cls()
    except Exception as e:
        raise AssignorConfigError(f"{entry}: cannot create {class_name}(): {e!r}") from None
    name = getattr(assignor, "name", None)
    if not isinstance(name, str) or not name or not callable(getattr(assignor, "assign", None)):
        raise AssignorConfigError(
            f"{entry}: not an assignor (needs a non-empty str `name` and an `assign` method)"
        )
    return assignor


class AssignorRegistry:
    """The configured assignors by name; the first is the default."""

    def __init__(self, assignors: Sequence[Assignor]):
        if not assignors:
            raise AssignorConfigError("at least one assignor is needed")
        self._by_name: dict[str, Assignor] = {}
        for assignor in assignors:
            builtin = BUILTIN_ASSIGNORS.get(assignor.name)
            if builtin is not None and type(assignor) is not builtin:
                raise AssignorConfigError(
                    f"assignor name {assignor.name!r} is reserved by a built-in assignor"
                )
            if assignor.name in self._by_name:
                raise AssignorConfigError(f"two assignors are named {assignor.name!r}")
            self._by_name[assignor.name] = assignor
        self.default: Assignor = assignors[0]

    @classmethod
    def from_setting(cls, value: str | Iterable[str] = DEFAULT_SETTING) -> AssignorRegistry:
        return cls([load_assignor(entry) for entry in setting_entries(value)])

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def get(self, name: str | None) -> Assignor | None:
        """The assignor a member asked for (None or "": the default); None if there is none by
        that name (Kafka answers UNSUPPORTED_ASSIGNOR)."""
        if not name:
            return self.default
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Assignor]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)


def is_builtin(assignor: object) -> bool:
    return type(assignor) in (UniformAssignor, RangeAssignor)
