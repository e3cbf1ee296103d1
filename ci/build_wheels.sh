#!/usr/bin/env bash
# Builds corral's abi3 manylinux wheels for x86-64 and aarch64 (docs/build.md, "Release wheels").
#
# maturin cross-compiles with zig (pinned below), which links against glibc 2.17's symbols, so the
# wheels are tagged manylinux_2_17 (= manylinux2014): pip on any glibc >= 2.17 takes them.
# Wheels are cached under ~/.cache/corral/wheels/<key>, the key being a hash of every input of the
# build (sources, lock file, this script's pins, rustc's version); a second run with the same
# sources builds nothing. Progress goes to stderr; stdout is just the directory holding the wheels.
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN=maturin==1.16.0
ZIGLANG=ziglang==0.15.2
CYTHON=cython==3.3.1
TARGETS=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
COMPATIBILITY=manylinux_2_17

cache=~/.cache/corral/wheels
tools=~/.cache/corral/wheel-tools
mkdir -p "$cache"

# Only files git tracks or would track, so build outputs (*.so, target/) do not change the key.
inputs=$(git ls-files -co --exclude-standard -- Cargo.toml Cargo.lock build.rs pyproject.toml \
    README.md rust src ci/build_wheels.sh | sort)
key=$({ tr '\n' '\0' <<<"$inputs" | xargs -0 sha256sum; rustc -V; } | sha256sum | cut -c1-16)
out="$cache/$key"
if [ -d "$out" ]; then
    touch "$out"
    echo "== wheels: cached in $out" >&2
    echo "$out"
    exit 0
fi

pins="$MATURIN $ZIGLANG $CYTHON"
if [ "$(cat "$tools/pins" 2>/dev/null)" != "$pins" ]; then
    echo "== wheels: build tools ($pins) into $tools" >&2
    rm -rf "$tools"
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check $pins >&2
    echo "$pins" >"$tools/pins"
fi
rustup target add "${TARGETS[@]}" >&2

# The wheels are built from a mirror of the inputs at one fixed path: cargo keys a path crate's
# artifacts (corral's and the vendored kafka-protocol's) by its path and its files' times, so a
# build in each fresh clone recompiled both for both targets (~2 min). A file is copied into the
# mirror only when its content differs, so the crates a change does not touch stay built.
exec 9>"$cache/.lock"
flock 9  # one build at a time uses the mirror and the target dir
src=~/.cache/corral/wheel-src
mkdir -p "$src"
while IFS= read -r file; do
    if ! cmp -s "$file" "$src/$file"; then
        mkdir -p "$src/$(dirname "$file")"
        cp "$file" "$src/$file"
    fi
done <<<"$inputs"
(cd "$src" && find . -type f -printf '%P\n' | sort | comm -23 - <(sort <<<"$inputs") \
    | xargs -r -d '\n' rm -f)

# maturin finds zig as `python3 -m ziglang`, and build.rs runs Cython with $PYO3_PYTHON: both the
# tools' venv. The target dir is kept between builds, so a source change recompiles only corral.
export PATH="$tools/bin:$PATH" PYO3_PYTHON="$tools/bin/python" CARGO_TARGET_DIR="$cache/target"
tmp="$cache/tmp.$$"
trap 'rm -rf "$tmp"' EXIT
for target in "${TARGETS[@]}"; do
    echo "== wheels: maturin build --target $target" >&2
    (cd "$src" && maturin build --release --locked --zig --target "$target" \
        --compatibility "$COMPATIBILITY" --out "$tmp" >&2)
done
# A concurrent build of the same sources may have finished first: keep its wheels then.
mv -T "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
# The wheels of the 8 most recently used sources are kept (worktrees of one machine share them).
ls -dt "$cache"/???????????????? | tail -n +9 | xargs -r rm -rf
echo "== wheels: built into $out" >&2
ls -l "$out" >&2
echo "$out"
