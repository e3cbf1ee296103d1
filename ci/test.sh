#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs, then Rust tests and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/setup.sh

echo "== style and types: ruff, mypy (the groups layer strictly; topics, partitions, config, security with every def typed; pyproject.toml), rustfmt, clippy (warnings are errors)"
python -m ruff check src tests benches
python -m ruff format --check src tests benches
python -m mypy
cargo fmt --check
for crate in benches/echo-server benches/heartbeat-ceiling benches/heartbeat-driver; do
    (cd "$crate" && cargo fmt --check)
done
CARGO_TARGET_DIR=~/.cache/corral/target cargo clippy --locked --all-targets -- -D warnings

echo "== the stub of the compiled core against the runtime (mypy's stubtest)"
python -m mypy.stubtest corral._core --allowlist ci/stubtest-allowlist.txt

echo "== cargo test"
# The machine's one target directory (as ci/setup.sh's build): dependencies stay compiled.
CARGO_TARGET_DIR=~/.cache/corral/target cargo test --locked

echo "== benches, smoke run (each benchmark once, untimed; timing runs are by hand, docs/benchmarks.md)"
python -m pytest -q benches/test_codec_bench.py --benchmark-disable
# A share group of 20 consumers against corral and Kafka 4.4 (its jars come from ci/setup.sh).
python benches/share_groups.py --smoke

echo "== pytest"
# Two workers, each taking whole files (a module's broker fixtures are started once): most tests
# wait on a clock (session timeouts, rebalances, JVM and Kafka starts) with a core idle, so two
# workers on two cores take a little over half the time of one. The slowest tests are listed at
# the end: the whole run must stay under 30 minutes.
python -m pytest -q -n 2 --dist loadfile --durations=25 tests "$@"
