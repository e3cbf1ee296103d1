#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs, then Rust tests and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/setup.sh

echo "== cargo test"
cargo test --locked

echo "== pytest"
python -m pytest -q tests "$@"
