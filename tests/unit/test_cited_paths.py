"""Every path the code and the docs cite exists in the repo: a comment or a page naming
`src/corral/groups/shard.py`, `rust/short_paths/commit_path.rs` or `tests/kits/harness/`
names a file (or folder) that is there, so a move cannot leave a reader at a dead end. Rooted
paths (from the repo's top) are checked as written; a bare file name (`commit_path.rs`) must be
the name of some file in the repo."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("src", "rust", "tests", "docs", "benches", "ci")
SUFFIXES = {".py", ".pyx", ".pyi", ".rs", ".md", ".java", ".go", ".js", ".toml", ".sh"}

ROOTED = re.compile(
    r"(?<![\w/.-])((?:src/corral|rust|tests|docs|benches|ci|\.ci)/[\w/.-]*\w)(?![\w/-]*\()"
)
# A bare file name of corral's own kinds, not a call (`m.py()` in Rust) nor part of a dotted name.
BARE = re.compile(r"(?<![\w/.:-])(\w[\w-]*\.(?:py|pyx|pyi|rs))\b(?![.(\w])")
# Files of other projects that corral's comments cite by name, and files a test writes.
ELSEWHERE = {"DESIGN.md", "Errors.java", "wait_port.py"}


def repo_files() -> list[Path]:
    """corral's own files (not the vendored crate, installed packages or caches)."""
    skip = {"vendor", "node_modules", "__pycache__", "target"}
    return [
        path
        for top in TOPS
        for path in (ROOT / top).rglob("*")
        if not skip.intersection(path.relative_to(ROOT).parts)
    ]


def cited_in() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "Cargo.toml"]
    for path in repo_files():
        # (not this file: its own examples of dead paths)
        if path.is_file() and path.suffix in SUFFIXES and path.name != Path(__file__).name:
            files.append(path)
    return files


def test_every_cited_path_exists():
    names = {p.name for p in repo_files()} | {p.name for p in ROOT.iterdir()}
    missing = []
    for path in cited_in():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{n}"
            for m in ROOTED.finditer(line):
                cited = m.group(1).rstrip(".")
                if not any(c in cited for c in "*<>{}") and not (ROOT / cited).exists():
                    missing.append(f"{where}: {cited}")
            for m in BARE.finditer(line):
                name = m.group(1)
                if name not in names and name not in ELSEWHERE:
                    missing.append(f"{where}: {name}")
    assert not missing, "cited but not in the repo:\n" + "\n".join(missing)


def test_the_check_sees_a_dead_path(tmp_path):
    line = "see src/corral/nowhere.py and rust/short_paths/commit_path.rs"
    found = [m.group(1) for m in ROOTED.finditer(line)]
    assert found == ["src/corral/nowhere.py", "rust/short_paths/commit_path.rs"]
    assert not (ROOT / found[0]).exists() and (ROOT / found[1]).exists()
    assert [m.group(1) for m in BARE.finditer("m.py() in commit_path.rs, not self.rs.x")] == [
        "commit_path.rs"
    ]
