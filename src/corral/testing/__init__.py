"""corral for other people's tests (docs/testing.md): broker.py's `EmbeddedCorral`, a real
corral on a free port in a temporary directory with its faults API; plugin.py, the pytest
plugin the wheel registers (fixtures `corral`, `corral_session`, `corral_factory`).

Importing this package imports nothing else: pytest loads the plugin in every run of every
environment where corral is installed. `from corral.testing import EmbeddedCorral` loads
broker.py on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.testing.broker import CorralStartError, EmbeddedCorral

__all__ = ["CorralStartError", "EmbeddedCorral"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from corral.testing import broker

        return getattr(broker, name)
    raise AttributeError(f"module 'corral.testing' has no attribute {name!r}")
