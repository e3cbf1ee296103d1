"""Where things are in this checkout, for the tests and kits in whatever folder they sit.

tests/conftest.py puts tests/kits, benches and ci on sys.path, so tests import kits by name
(`from rawwire import RawClient`); a kit run as a script (`python tests/kits/cgkit.py compile`)
has its own folder on sys.path already.
"""

from __future__ import annotations

from pathlib import Path

KITS = Path(__file__).resolve().parent
TESTS = KITS.parent
ROOT = TESTS.parent
BENCHES = ROOT / "benches"
CI = ROOT / "ci"
# The client programs of the tests, by family (the Python clients are libraries, not programs).
JAVA = TESTS / "clients" / "java"
GO = TESTS / "clients" / "go"
NODE = TESTS / "clients" / "node"
