"""The shape the code keeps (issue 30): rooms a reader finds by name, modules a reader can hold.
The top of src/corral/ keeps only the entry points, every module of corral (Python, Cython and
Rust, the vendored crate aside) and every Python module of its tests (tests, kits, conftest)
stays under 600 lines, no folder of corral grows past ~15 modules, and rust/'s top level is
lib.rs and folders."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "corral"
RUST = ROOT / "rust"
TESTS = ROOT / "tests"
MAX_LINES = 600
MAX_MODULES = 16
ENTRY_POINTS = {
    "__init__.py",
    "cli.py",
    "server.py",
    "broker.py",
    "errors.py",
    "later.py",
    "clock.py",
    "uuids.py",
}


def sources() -> list[Path]:
    found = [*SRC.rglob("*.py"), *SRC.rglob("*.pyx"), *SRC.rglob("*.pxi")]
    found += [p for p in RUST.rglob("*.rs") if "vendor" not in p.relative_to(RUST).parts]
    return found


def modules_of_the_tests() -> list[Path]:
    """The tests' own Python modules (not the packages their client programs install)."""
    skip = {"node_modules", "__pycache__"}
    return [p for p in TESTS.rglob("*.py") if not skip.intersection(p.relative_to(TESTS).parts)]


def test_the_top_of_the_package_holds_only_the_entry_points():
    assert {p.name for p in SRC.glob("*.py")} == ENTRY_POINTS


def test_no_module_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in [*sources(), *modules_of_the_tests()]
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these by concern: {long}"


def test_no_folder_with_more_than_16_modules():
    crowded = {}
    for folder in {p.parent for p in sources()}:
        modules = [p for p in folder.iterdir() if p.suffix in {".py", ".pyx", ".rs"}]
        if len(modules) > MAX_MODULES:
            crowded[str(folder.relative_to(ROOT))] = len(modules)
    assert not crowded, f"give these rooms of their own: {crowded}"


def test_rusts_top_level_is_lib_rs_and_folders():
    files = {p.name for p in RUST.iterdir() if p.is_file()}
    # lib.rs declares and registers; pyconv.rs (dicts <-> messages) and cython.rs (the linked
    # Cython modules) serve every folder.
    assert files <= {"lib.rs", "pyconv.rs", "cython.rs"}, files
